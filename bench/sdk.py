"""Python SDK benchmark: the round trip of the cell `1+1` through the SDK (`await
Sandbox.execute()` and `SyncSandbox.execute()`) against the same cell sent by a raw MCP client
(one JSON line written to the supervisor's stdin, poll and read on its stdout until the
response, json.loads), in one run, on the same `ipybox mcp --embedded` and the same kernel:
the raw client writes to and reads from the SDK's own pipes while the SDK is idle (its event
loop runs only during its calls). Calls alternate, raw then SDK, so that load and frequency
changes fall on both alike, and the table gives the median of the pairwise differences too.
(Separate sandboxes differ by up to 0.4 ms from each other, more than what is measured here.)

Usage: bench/sdk.py [--out FILE] [--calls N]
"""
import argparse
import json
import os
import select
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
import ipybox_native as ib  # noqa: E402
from ipybox_test import IPYBOX  # noqa: E402

CELL = {"code": "1+1"}


class RawClient:
    """The least an MCP client can do, on the supervisor's pipes: write a line, read lines
    until the response."""

    def __init__(self, proc):
        self.wfd = proc.stdin.get_extra_info("pipe").fileno()
        self.rfd = proc.stdout._transport.get_extra_info("pipe").fileno()
        self.next = 0

    def one(self):
        self.next += 1
        rid = "raw-%d" % self.next
        line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                           "params": {"name": "execute_ipython_cell", "arguments": CELL}}).encode() + b"\n"
        os.write(self.wfd, line)
        buf = b""
        while True:
            select.select([self.rfd], [], [])
            buf += os.read(self.rfd, 1 << 16)
            while b"\n" in buf:
                msg, buf = buf.split(b"\n", 1)
                r = json.loads(msg)
                if r.get("id") == rid:
                    assert not buf, "more output after the response"
                    # IPython warns once when its output cache fills.
                    assert r["result"]["content"][0]["text"].endswith("2\n"), r
                    return


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


async def pairs_async(raw, sb, n):
    """n pairs: a raw call, then the same cell through await Sandbox.execute()."""
    out = []
    for _ in range(n):
        r = timed(raw.one)
        t0 = time.perf_counter()
        res = await sb.execute("1+1")
        out.append((r, (time.perf_counter() - t0) * 1000))
        assert res.text.endswith("2\n"), res
    return out


def pct(ms, p):
    ms = sorted(ms)
    return ms[min(len(ms) - 1, int(round(p / 100 * (len(ms) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--calls", type=int, default=1000)
    a = ap.parse_args()
    sync = ib.SyncSandbox(transport="embedded", ipybox=IPYBOX).start()
    sb, loop = sync._sandbox, sync._loop
    raw = RawClient(sb._proc)
    pa, ps = [], []
    try:
        for _ in range(3):  # warm-up
            raw.one()
            sync.execute("1+1")
        pa = loop.run_until_complete(pairs_async(raw, sb, a.calls))
        ps = [(timed(raw.one), timed(lambda: sync.execute("1+1"))) for _ in range(a.calls)]
    finally:
        sync.close()
    raw_ms = [r for r, _ in pa + ps]
    rows = [("raw MCP client (write, poll, read)", raw_ms, None),
            ("SDK, `await Sandbox.execute()`", [x for _, x in pa], [x - r for r, x in pa]),
            ("SDK, `SyncSandbox.execute()`", [x for _, x in ps], [x - r for r, x in ps])]
    load = os.getloadavg()[0]
    out = ["# Python SDK benchmark", "",
           "`make bench-sdk` (bench/sdk.py): the cell `1+1`, %d round trips through each SDK path, each after one "
           "by the raw client, on one `ipybox mcp --embedded` and kernel, /usr/bin/python3 %s, %d CPUs, load %.1f "
           "at the end, %s." % (a.calls, sys.version.split()[0], os.cpu_count(), load, time.strftime("%Y-%m-%d")),
           "", "| path | median | p90 | min | added: median of pairwise differences |", "|---|---|---|---|---|"]
    for name, ms, diff in rows:
        out.append("| %s | %.3f ms | %.3f ms | %.3f ms | %s |" % (
            name, statistics.median(ms), pct(ms, 90), min(ms), "" if diff is None else
            "%+.3f ms" % statistics.median(diff)))
    out.append("")
    text = "\n".join(out)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
