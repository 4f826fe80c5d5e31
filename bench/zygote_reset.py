#!/usr/bin/python3
"""Measures what the zygote changes (architecture.md, "Zygote kernels"): `reset` to the next
`1+1` result (median of N), the first `1+1` after a reset against the second, and the PSS of
a session idle after `1+1`, with the zygote on and off. Not a test: numbers only.

    BUILD=build /usr/bin/python3 bench/zygote_reset.py [N]
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from ipybox_test import McpClient, descendants, is_private_monitor, proc_comm as comm  # noqa: E402


def pss_kib(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0



def measure(zygote, n):
    with McpClient(*(() if zygote else ("--no-zygote",))) as c:
        c.execute("1+1")
        times, starts, ms, cells = [], [], [], ([], [])
        for _ in range(n):
            t = time.monotonic()
            r = c.call("reset")
            t1 = time.monotonic()
            text, _ = c.execute("1+1")
            t2 = time.monotonic()
            times.append((t2 - t) * 1000)
            cells[0].append((t2 - t1) * 1000)
            starts.append(r["_meta"]["ipybox/kernel"]["start"])
            ms.append(r["_meta"]["ipybox/kernel"]["ms"])
            assert text.strip() == "2", text
            t = time.monotonic()
            text, _ = c.execute("1+1")
            cells[1].append((time.monotonic() - t) * 1000)
            assert text.strip() == "2", text
        c.execute("1+1")
        time.sleep(1)
        procs = descendants(c.proc.pid)
        sandbox = [p for p in procs if not is_private_monitor(p)]
        py = {p: pss_kib(p) for p in sandbox if comm(p).startswith("python")}
        shims = sum(pss_kib(p) for p in sandbox if comm(p) == "ipybox-shim")
        return times, starts, ms, cells, py, shims


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    for zygote in (True, False):
        times, starts, ms, cells, py, shims = measure(zygote, n)
        print("zygote %s: reset -> next 1+1: median %.0f ms (min %.0f, max %.0f, n=%d; starts: %s); "
              "the reset alone (_meta ms): median %.0f ms" % (
                  "on " if zygote else "off", statistics.median(times), min(times), max(times), n,
                  ",".join(sorted(set(starts))), statistics.median(ms)))
        print("  1+1 after a reset: the first %.1f ms, the second %.1f ms (medians)" % (
            statistics.median(cells[0]), statistics.median(cells[1])))
        print("  PSS idle after 1+1: python processes %s MiB (each: %s), shims %.1f MiB" % (
            round(sum(py.values()) / 1024, 1), ", ".join("%.1f" % (v / 1024) for v in sorted(py.values())),
            shims / 1024))


if __name__ == "__main__":
    main()
