#!/usr/bin/python3
"""Measures the start of a session with the zygote on and off (architecture.md, "Zygote
kernels"): a new `ipybox mcp` to its first `1+1` result (cold start, median of N), and the
first `reset` right after it (the zygote still booting) to the next `1+1`. Sessions alternate
between the two ways, so that drift of the machine hits both alike. Not a test: numbers only.

    BUILD=build /usr/bin/python3 bench/zygote_cold.py [N]
    IPYBOX=/other/build/bin/ipybox /usr/bin/python3 bench/zygote_cold.py [N]   (another build)
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from ipybox_test import McpClient  # noqa: E402


def one(zygote):
    t = time.monotonic()
    with McpClient(*(() if zygote else ("--no-zygote",))) as c:
        text, _ = c.execute("1+1")
        cold = (time.monotonic() - t) * 1000
        assert text.strip() == "2", text
        t = time.monotonic()
        r = c.call("reset")
        text, _ = c.execute("1+1")
        reset = (time.monotonic() - t) * 1000
        assert text.strip() == "2", text
        meta = r["_meta"]["ipybox/kernel"]
        return cold, reset, meta["start"], meta["ms"]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    res = {True: [], False: []}
    for _ in range(n):
        for zygote in (True, False):
            res[zygote].append(one(zygote))
    for zygote in (True, False):
        rows = res[zygote]
        starts = sorted({r[2] for r in rows})
        print("%-11s cold start to the first 1+1: median %.0f ms (min %.0f, max %.0f); first reset to the next "
              "1+1: median %.0f ms (reset alone %.0f ms), started by %s; n=%d" % (
                  "zygote on" if zygote else "zygote off", statistics.median(r[0] for r in rows),
                  min(r[0] for r in rows), max(r[0] for r in rows), statistics.median(r[1] for r in rows),
                  statistics.median(r[3] for r in rows), "/".join(starts), n))


if __name__ == "__main__":
    main()
