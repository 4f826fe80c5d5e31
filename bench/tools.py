"""Tool-call benchmark: the round trip of one MCP tool call made from kernel code
(`mcptools.<server>.<tool>.run()`: the tool socket, the supervisor's checks, approval by
--approve-tools, the stdio client, the server, and back), against the same call made directly
by the MCP TypeScript SDK's client over stdio, in one run, against
@modelcontextprotocol/server-everything's `echo`.

  through ipybox   one cell times N calls with time.perf_counter() around each
  direct           a node script (bench/tools_direct.mjs) times N calls with the SDK's Client
  async, 8 at once one cell runs N calls as 8 concurrent run_async() tasks: N over the elapsed time
  20 at once       the fake server's `sleep` (tests/lib/mcp_servers.py --tools concurrent, SLEEP_S):
                   the wall time of one call, of 20 calls from 20 kernel threads to one server,
                   and of 20 calls to 20 servers, one each (the median of 3 rounds each)
  server start     register_mcp_server plus the first call from a cell (wall time at the MCP
                   client), a small Python stdio server (python3 -c) unsandboxed against the same
                   server with "sandbox": {} (`ipybox run` with a private home), alternating,
                   median of several rounds

Usage: bench/tools.py [--out FILE] [--calls N]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from ipybox_test import McpClient  # noqa: E402
import mcp_servers  # noqa: E402


def pct(ms, p):
    ms = sorted(ms)
    return ms[min(len(ms) - 1, int(round(p / 100 * (len(ms) - 1))))]


def through_ipybox(params, n, tmp):
    cfg = os.path.join(tmp, "mcp.json")
    with open(cfg, "w") as f:
        json.dump({"mcpServers": {"everything": params}}, f)
    c = McpClient("--mcp-config", cfg, "--approve-tools", "everything/echo")
    try:
        code = (
            "import time, json, asyncio\n"
            "from mcptools.everything import echo\n"
            "echo.run(message='warm-up')\n"
            "ms = []\n"
            "for i in range(%d):\n"
            "    t0 = time.perf_counter()\n"
            "    assert echo.run(message=f'call {i}') == f'Echo: call {i}'\n"
            "    ms.append((time.perf_counter() - t0) * 1000)\n"
            "t0 = time.perf_counter()\n"
            "async def worker(k):\n"
            "    for i in range(k, %d, 8):\n"
            "        await echo.run_async(message=str(i))\n"
            "await asyncio.gather(*(worker(k) for k in range(8)))\n"
            "print(json.dumps({'ms': ms, 'async_s': time.perf_counter() - t0}))\n" % (n, n))
        text, r = c.execute(code, timeout=600)
        if r.get("isError"):
            raise SystemExit("the benchmark cell failed:\n" + text)
        return json.loads(text.strip().splitlines()[-1])
    finally:
        c.close()


SLEEP_S = 0.5
ROUNDS = 3


def concurrent_calls(tmp):
    """Wall times (s) of one sleep call, 20 at once to one server, 20 at once to 20 servers."""
    cfg = os.path.join(tmp, "mcp-concurrent.json")
    with open(cfg, "w") as f:
        json.dump({"mcpServers": {"s%d" % i: mcp_servers.fake_stdio_params("--tools", "concurrent")
                                  for i in range(20)}}, f)
    c = McpClient("--mcp-config", cfg, "--approve-tools", "*")
    try:
        code = (
            "import time, json, statistics, importlib\n"
            "from concurrent.futures import ThreadPoolExecutor\n"
            "mods = [importlib.import_module('mcptools.s%%d.sleep' %% i) for i in range(20)]\n"
            "for m in mods: m.run(seconds=0)\n"
            "def wall(fns):\n"
            "    t0 = time.perf_counter()\n"
            "    with ThreadPoolExecutor(len(fns)) as ex:\n"
            "        for f in [ex.submit(fn, seconds=%g, tag='b') for fn in fns]: f.result()\n"
            "    return time.perf_counter() - t0\n"
            "r = {k: statistics.median(wall(fns) for _ in range(%d)) for k, fns in (\n"
            "     ('one', [mods[0].run]), ('one_server', [mods[0].run] * 20), ('servers', [m.run for m in mods]))}\n"
            "print(json.dumps(r))\n" % (SLEEP_S, ROUNDS))
        text, r = c.execute(code, timeout=600)
        if r.get("isError"):
            raise SystemExit("the concurrency cell failed:\n" + text)
        return json.loads(text.strip().splitlines()[-1])
    finally:
        c.close()


def direct(params, n):
    node = shutil.which("node")
    nd = mcp_servers.install_node_packages()
    shutil.copyfile(os.path.join(HERE, "tools_direct.mjs"), os.path.join(nd, "tools_direct.mjs"))
    r = subprocess.run([node, "tools_direct.mjs", str(n), json.dumps(params)], cwd=nd, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit("tools_direct.mjs failed:\n" + r.stdout + r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])["ms"]


# The smallest stdio MCP server: one tool, echo. Run as python3 -c, so that a sandbox needs
# nothing of this tree.
ECHO_SERVER = r'''
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m: continue
    p = m.get("params") or {}
    if m["method"] == "initialize":
        r = {"protocolVersion": p["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "e", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "echo", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}}]}
    else:
        r = {"content": [{"type": "text", "text": p["arguments"]["message"]}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n"); sys.stdout.flush()
'''


def start_cost(rounds):
    """{"plain": [ms], "sandboxed": [ms]}: register + first call, alternating."""
    c = McpClient("--approve-tools", "*")
    out = {"plain": [], "sandboxed": []}
    try:
        c.execute("import mcptools")
        for i in range(rounds):
            for kind in ("plain", "sandboxed"):
                params = {"command": "/usr/bin/python3", "args": ["-c", ECHO_SERVER]}
                if kind == "sandboxed":
                    params["sandbox"] = {}
                t0 = time.perf_counter()
                r = c.call("register_mcp_server", {"server_name": "s_" + kind, "server_params": params})
                if r.get("isError"):
                    raise SystemExit("registering failed: %s" % r)
                text, r = c.execute("from mcptools.s_%s import echo\nprint(echo.run(message='x%d'))" % (kind, i))
                if r.get("isError") or text.strip() != "x%d" % i:
                    raise SystemExit("the first call failed: %s" % text)
                out[kind].append((time.perf_counter() - t0) * 1000)
    finally:
        c.close()
    return out


def start_rows(sc, rounds):
    p, s = statistics.median(sc["plain"]), statistics.median(sc["sandboxed"])
    return ["## Starting a stdio server", "",
            "register_mcp_server plus the first call from a cell, a python3 -c stdio server, %d rounds "
            "alternating, %s:" % (rounds, "as root (sandboxes made by ipybox's private monitor)" if os.geteuid() == 0
                                  else "in user mode"), "",
            "| server | median | min | max |", "|---|---|---|---|",
            "| unsandboxed | %.0f ms | %.0f ms | %.0f ms |" % (p, min(sc["plain"]), max(sc["plain"])),
            "| sandboxed (`\"sandbox\": {}`) | %.0f ms | %.0f ms | %.0f ms |"
            % (s, min(sc["sandboxed"]), max(sc["sandboxed"])), "",
            "A sandbox of its own costs **%.0f ms** more per server start (median difference)." % (s - p), ""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--start-rounds", type=int, default=9)
    a = ap.parse_args()
    params = mcp_servers.everything_stdio_params()
    with tempfile.TemporaryDirectory(prefix="ipybox-bench-tools-") as tmp:
        d = direct(params, a.calls)
        t = through_ipybox(params, a.calls, tmp)
        conc = concurrent_calls(tmp)
    ms = t["ms"]
    rows = [
        ("direct, SDK client over stdio", statistics.median(d), pct(d, 90), min(d)),
        ("from kernel code through ipybox (auto-approved)", statistics.median(ms), pct(ms, 90), min(ms)),
    ]
    load = os.getloadavg()[0]
    out = ["# Tool-call benchmark", "",
           "`make bench-tools` (bench/tools.py): %d calls of server-everything's `echo` each way, one run, "
           "%d CPUs, load %.1f at the end, %s." % (a.calls, os.cpu_count(), load, time.strftime("%Y-%m-%d")), "",
           "| path | median | p90 | min |", "|---|---|---|---|"]
    for name, med, p90, mn in rows:
        out.append("| %s | %.2f ms | %.2f ms | %.2f ms |" % (name, med, p90, mn))
    out += ["", "Added by ipybox per call (median difference): **%.2f ms**." % (rows[1][1] - rows[0][1]),
            "8 concurrent `run_async()` tasks in one cell: %.0f calls/s." % (a.calls / t["async_s"]), "",
            "Concurrent calls of the fake server's `sleep` (%g s each, from kernel threads; median of %d rounds):"
            % (SLEEP_S, ROUNDS), "",
            "| calls | wall time | vs one call |", "|---|---|---|"]
    for name, key in (("one call", "one"), ("20 at once to one server", "one_server"),
                      ("20 at once to 20 servers, one each", "servers")):
        out.append("| %s | %.2f s | %.1fx |" % (name, conc[key], conc[key] / conc["one"]))
    out += [""]
    out += start_rows(start_cost(a.start_rounds), a.start_rounds)
    text = "\n".join(out)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
