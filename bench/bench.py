"""`make bench`: ipybox-native against a plain, unsandboxed ipykernel started the same way
(python3 -m ipykernel_launcher with the ipc transport), measured in one run.

Plain kernel: driven directly over ZMQ by a minimal client in this process (no MCP).
ipybox: driven over MCP stdio (`ipybox mcp`), so its numbers include the MCP layer, the
C supervisor and the sandbox. Writes a Markdown table (--out)."""
import argparse
import hashlib
import hmac
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "lib"))
from ipybox_test import McpClient, descendants  # noqa: E402

PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
# Started the same way as in the sandbox (supervisor/session.c): ipykernel_launcher's work
# with debugpy blocked.
KERNEL_LAUNCH = ("import sys\n"
                 "if sys.path and sys.path[0] in ('', '/'):\n"
                 "    del sys.path[0]\n"
                 "sys.modules['debugpy'] = None\n"
                 "from ipykernel import kernelapp\n"
                 "kernelapp.launch_new_instance()\n")
STREAM_CODE = "import sys\nline = 'x' * 999 + '\\n'\nfor _ in range(%d): sys.stdout.write(line)\nsys.stdout.flush()"


class PlainKernel:
    """ipykernel without a sandbox, with the ipc transport, driven over raw ZMQ."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ipybox-bench-")
        self.key = uuid.uuid4().hex.encode()
        self.ctx = zmq.Context()
        self.proc = None

    def start(self):
        conn = {"transport": "ipc", "ip": os.path.join(self.dir, "k"), "shell_port": 1, "iopub_port": 2,
                "stdin_port": 3, "control_port": 4, "hb_port": 5, "key": self.key.decode(),
                "signature_scheme": "hmac-sha256", "kernel_name": "python3"}
        path = os.path.join(self.dir, "conn.json")
        with open(path, "w") as f:
            json.dump(conn, f)
        env = {k: v for k, v in os.environ.items() if k != "JPY_PARENT_PID"}
        env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        self.proc = subprocess.Popen([PYTHON, "-c", KERNEL_LAUNCH, "-f", path], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.dir)
        while not all(os.path.exists(os.path.join(self.dir, "k-%d" % p)) for p in (1, 2)):
            time.sleep(0.002)
        self.shell = self.ctx.socket(zmq.DEALER)
        self.shell.connect("ipc://%s/k-1" % self.dir)
        self.iopub = self.ctx.socket(zmq.SUB)
        self.iopub.setsockopt(zmq.SUBSCRIBE, b"")
        self.iopub.connect("ipc://%s/k-2" % self.dir)
        # Ready when iopub carries traffic for our kernel_info_request.
        while True:
            mid = self.send("kernel_info_request", {})
            if self.iopub.poll(50):
                self.drain_until_idle(mid)
                break
        while self.shell.poll(0):
            self.shell.recv_multipart()

    def send(self, msg_type, content):
        mid = uuid.uuid4().hex
        header = json.dumps({"msg_id": mid, "session": "bench", "username": "bench", "msg_type": msg_type,
                             "version": "5.3", "date": ""}).encode()
        parts = [header, b"{}", b"{}", json.dumps(content).encode()]
        sig = hmac.new(self.key, b"".join(parts), hashlib.sha256).hexdigest().encode()
        self.shell.send_multipart([b"<IDS|MSG>", sig] + parts)
        return mid

    def recv(self, sock):
        frames = sock.recv_multipart()
        i = frames.index(b"<IDS|MSG>")
        header, parent, _, content = (json.loads(f) for f in frames[i + 2:i + 6])
        return header["msg_type"], parent.get("msg_id"), content

    def drain_until_idle(self, mid, on_stream=None):
        while True:
            t, parent, c = self.recv(self.iopub)
            if parent != mid:
                continue
            if t == "stream" and on_stream:
                on_stream(c["text"])
            if t == "status" and c["execution_state"] == "idle":
                return

    def execute(self, code, on_stream=None):
        mid = self.send("execute_request", {"code": code, "silent": False, "store_history": True,
                                            "user_expressions": {}, "allow_stdin": False, "stop_on_error": False})
        self.drain_until_idle(mid, on_stream)
        while True:
            t, parent, c = self.recv(self.shell)
            if parent == mid and t == "execute_reply":
                return c

    def stop(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.shell.close(0)
            self.iopub.close(0)
            for f in os.listdir(self.dir):
                if f.startswith("k-"):
                    os.unlink(os.path.join(self.dir, f))

    def pids(self):
        return [self.proc.pid]


def pss_mib(pids):
    total = 0
    for p in pids:
        try:
            with open("/proc/%d/smaps_rollup" % p) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024.0


def median_ms(xs):
    return statistics.median(xs) * 1000


def p90_ms(xs):
    return sorted(xs)[int(len(xs) * 0.9) - 1] * 1000


class PlainSide:
    name = "plain"

    def __init__(self):
        self.k = PlainKernel()

    def start(self):
        self.k.start()
        self.k.execute("1+1")

    def stop(self):
        self.k.stop()

    def rt(self):
        self.k.execute("1+1")

    def stream(self, lines):
        got = [0]
        t = time.perf_counter()
        self.k.execute(STREAM_CODE % lines, lambda s: got.__setitem__(0, got[0] + len(s)))
        return got[0] / (time.perf_counter() - t) / 1e6

    def mem(self):
        return pss_mib(self.k.pids())

    def reset(self):
        self.k.stop()
        self.k.start()


class IpyboxSide:
    name = "ipybox"

    def start(self):
        self.c = McpClient()
        self.c.execute("1+1")

    def stop(self):
        self.c.close()

    def rt(self):
        self.c.execute("1+1")

    def stream(self, lines):
        self.c.notifications.clear()
        t = time.perf_counter()
        self.c.execute(STREAM_CODE % lines, progress_token="bench", max_output_chars=1000, timeout=600)
        elapsed = time.perf_counter() - t
        got = sum(len(n["params"].get("message", "")) for n in self.c.notifications
                  if n.get("method") == "notifications/progress")
        self.c.notifications.clear()
        return got / elapsed / 1e6

    def mem(self):
        return pss_mib([self.c.proc.pid] + descendants(self.c.proc.pid))

    def reset(self):
        self.c.call("reset")


def run(args):
    """Both sides measured in alternation, so that drift of the machine hits both alike."""
    sides = [PlainSide(), IpyboxSide()]
    res = {s.name: {"cold": [], "rt": [], "stream": [], "reset": []} for s in sides}
    for _ in range(args.starts):
        for s in sides:
            t = time.perf_counter()
            s.start()
            res[s.name]["cold"].append(time.perf_counter() - t)
            s.stop()
    for s in sides:
        s.start()
    block = max(1, args.round_trips // 10)
    for _ in range(10):
        for s in sides:
            for _ in range(block):
                t = time.perf_counter()
                s.rt()
                res[s.name]["rt"].append(time.perf_counter() - t)
    for _ in range(args.streams):
        for s in sides:
            res[s.name]["stream"].append(s.stream(args.stream_lines))
    for s in sides:
        res[s.name]["mem"] = s.mem()
    for _ in range(args.resets):
        for s in sides:
            t = time.perf_counter()
            s.reset()
            res[s.name]["reset"].append(time.perf_counter() - t)
    for s in sides:
        s.stop()
    out = {}
    for name, r in res.items():
        out[name] = {"cold": median_ms(r["cold"]), "rt": median_ms(r["rt"]), "rt90": p90_ms(r["rt"]),
                     "reset": median_ms(r["reset"]), "stream": statistics.median(r["stream"]), "mem": r["mem"]}
    return out["plain"], out["ipybox"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--starts", type=int, default=15)
    ap.add_argument("--round-trips", type=int, default=300)
    ap.add_argument("--resets", type=int, default=5)
    ap.add_argument("--stream-lines", type=int, default=20000)
    ap.add_argument("--streams", type=int, default=7)
    args = ap.parse_args()
    plain, ours = run(args)
    rows = [
        ("cold start to first `1+1` result (median of %d)" % args.starts, "cold", "ms", "at most +10%"),
        ("`1+1` round trip (median of %d)" % args.round_trips, "rt", "ms", "at most +0.5 ms"),
        ("`1+1` round trip, 90th percentile", "rt90", "ms", ""),
        ("reset (median of %d)" % args.resets, "reset", "ms", ""),
        ("streaming throughput (%d MB of `print`, median of %d)" % (args.stream_lines // 1000, args.streams), "stream", "MB/s",
         "at least 90%"),
        ("memory of the process tree (PSS)", "mem", "MiB", ""),
    ]
    lines = ["# Benchmarks", "",
             "`make bench` on %s, %s, %d cores, Python %s; %s." % (
                 platform.node(), platform.release(), os.cpu_count(), platform.python_version(),
                 time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
             "", "Plain: ipykernel with the ipc transport, no sandbox, driven directly over ZMQ from Python,",
             "started with the same launcher as in the sandbox (ipykernel without its debugger).",
             "The two sides are measured in alternation (starts, blocks of round trips, streams, resets).",
             "ipybox: `ipybox mcp` driven over MCP stdio from Python (MCP + supervisor + sandbox).", "",
             "| measure | plain ipykernel | ipybox mcp | difference | target |", "|---|---|---|---|---|"]
    for label, key, unit, target in rows:
        a, b = plain[key], ours[key]
        if unit == "MB/s":
            diff = "%.0f%% of plain" % (100 * b / a)
        elif key == "rt" or key == "rt90":
            diff = "%+.2f ms" % (b - a)
        else:
            diff = "%+.0f%%" % (100 * (b - a) / a)
        lines.append("| %s | %.2f %s | %.2f %s | %s | %s |" % (label, a, unit, b, unit, diff, target))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
