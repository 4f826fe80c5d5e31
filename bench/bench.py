"""`make bench`: ipybox-native against a plain, unsandboxed ipykernel, side by side in one run:

  plain       python3 -m ipykernel_launcher's work (the sandbox's launcher, without debugpy),
              ipc transport, no sandbox, driven directly over ZMQ by a minimal client here
  no zygote   `ipybox mcp --embedded --no-zygote` over MCP stdio (MCP layer, C supervisor,
              sandbox); plain `ipybox mcp --embedded` when the binary has no --no-zygote
  zygote      `ipybox mcp --embedded` (its default), only when the binary knows --no-zygote
              (`ipybox mcp --help`); else the column says "not built"
  standby     `ipybox mcp --embedded --standby` (a standby kernel beside the running one, which
              a reset activates), only when the binary knows --standby; before each measure its
              standby is prepared (idle beside the kernel)
  warm pool   `ipyboxd --user --warm 1` on a socket of its own; each session is created over MCP
              on that socket (ipybox/createSession, private to the connection) once the warm
              worker is ready, and the daemon's refill is waited for before the next measure

The sides are measured in alternation (starts, blocks of round trips, streams, resets), and
before each measure every side is idle (the warm pool's refill done). Writes a Markdown
table (--out) with ratios against the plain kernel and, for cold start, reset and the round
trip, 95% intervals from resampling the alternation's pairs (paired_interval). Memory is
taken idle after the round trips, before the streams.

Usage: bench/bench.py [--out FILE] [--quick] [--starts N] [--round-trips N] [--resets N]
                      [--streams N] [--stream-lines N]"""
import argparse
import hashlib
import hmac
import json
import os
import platform
import random
import re
import signal
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "lib"))
from ipybox_test import IPYBOX, McpClient, descendants, is_private_monitor, proc_comm  # noqa: E402
from daemon_fixture import SocketClient  # noqa: E402

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
    return sorted(xs)[max(0, int(len(xs) * 0.9) - 1)] * 1000


def paired_interval(plain, side, groups, stat, rounds=2000):
    """A 95% interval of stat(plain's median, side's median), by resampling with replacement the
    groups the two sides were measured in alternation: group g is plain[g[0]:g[1]] beside
    side[g[0]:g[1]] (one start or reset; one block of round trips), so the machine's drift
    between groups, which both sides share, is kept together. Seeded: the same samples give
    the same interval."""
    rng = random.Random(0)
    vals = []
    for _ in range(rounds):
        xs, ys = [], []
        for _ in groups:
            a, b = groups[rng.randrange(len(groups))]
            xs += plain[a:b]
            ys += side[a:b]
        vals.append(stat(statistics.median(xs) * 1000, statistics.median(ys) * 1000))
    vals.sort()
    return vals[int(rounds * 0.025)], vals[int(rounds * 0.975) - 1]


def kernel_start(result):
    """How a reset started its kernel (`_meta["ipybox/kernel"]["start"]`), or None."""
    meta = (result or {}).get("_meta") or {}
    k = meta.get("ipybox/kernel") or {}
    return k.get("start") if isinstance(k, dict) else None


def children(pid):
    out = []
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return "?"


def start_time(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def knows(option):
    out = subprocess.run([IPYBOX, "mcp", "--help"], capture_output=True, text=True, timeout=30)
    return option in out.stdout + out.stderr


def knows_no_zygote():
    return knows("--no-zygote")


class PlainSide:
    name = "plain"

    def __init__(self):
        self.k = PlainKernel()

    def quiesce(self):
        pass

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
        """A fresh kernel to the next `1+1` result; None: no path to report."""
        self.k.stop()
        self.k.start()
        self.k.execute("1+1")
        return None

    def close(self):
        self.k.stop()
        shutil.rmtree(self.k.dir, ignore_errors=True)


class McpSide:
    """An MCP client of ipybox: `ipybox mcp` over stdio, or (the warm pool) a daemon's socket."""

    def quiesce(self):
        pass

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

    def reset(self):
        r = self.c.call("reset")
        if r.get("isError"):
            raise RuntimeError("%s: reset failed: %s" % (self.name, r))
        text, _ = self.c.execute("1+1")
        if text.strip() != "2":
            raise RuntimeError("%s: `1+1` after reset gave %r" % (self.name, text))
        return kernel_start(r)

    def close(self):
        pass


class EmbeddedSide(McpSide):
    def __init__(self, name, options):
        self.name, self.options = name, options

    def start(self):
        self.c = McpClient("--embedded", *self.options)
        self.c.execute("1+1")

    def mem(self):
        return pss_mib([self.c.proc.pid] + descendants(self.c.proc.pid))

    def close(self):
        c = getattr(self, "c", None)
        if c and c.proc.poll() is None:
            c.close()


class StandbySide(EmbeddedSide):
    """`ipybox mcp --embedded --standby`: idle once its standby (of the sandbox's PID 1's two Python
    children, the one with one thread: the kernel has several) sleeps and its CPU time stays the
    same for 50 ms."""

    def __init__(self):
        super().__init__("standby", ["--standby"])

    def quiesce(self):
        c = getattr(self, "c", None)
        if c is None or c.proc.poll() is not None:
            return
        end = time.monotonic() + 30
        last = None
        while time.monotonic() < end:
            cpu = self.standby_cpu()
            if cpu is not None and cpu == last:
                return
            last = cpu
            time.sleep(0.05)
        raise RuntimeError("standby: no standby became idle within 30 s")

    def standby_cpu(self):
        procs = descendants(self.c.proc.pid)
        kids = {}
        for p in procs:
            try:
                with open("/proc/%d/stat" % p) as f:
                    st = f.read().rsplit(")", 1)[1].split()
                kids.setdefault(int(st[1]), []).append((p, st))
            except (OSError, ValueError):
                pass
        for parent, children in kids.items():
            pys = [(p, st) for p, st in children if proc_comm(p).startswith("python")]
            if len(pys) == 2 and proc_comm(parent) == "ipybox-shim":
                idle = [st for p, st in pys if st[0] == "S" and st[17] == "1"]
                if len(idle) == 1:
                    return int(idle[0][11]) + int(idle[0][12])
        return None


class WarmSide(McpSide):
    """`ipyboxd --user --warm 1` on a socket of its own."""
    name = "warm"
    READY = re.compile(r"session \(warm (\d+)\): ready in")

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ipybox-bench-warm-")
        self.sock = os.path.join(self.dir, "d.sock")
        self.log_path = os.path.join(self.dir, "ipyboxd.log")
        self.taken = 0
        self.c = self.worker = self.spare = self.proc = None

    def open(self):
        """Starts the daemon (apart from __init__, so that close() also stops one interrupted
        while it starts)."""
        env = dict(os.environ, XDG_STATE_HOME=os.path.join(self.dir, "state"))
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen([os.path.join(os.path.dirname(IPYBOX), "ipyboxd"), "--user", "--socket",
                                          self.sock, "--warm", "1", "--max-sessions", "8"], env=env,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        end = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("the warm-pool daemon did not listen: " + self.log())
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.sock)
                break
            except OSError:
                time.sleep(0.02)

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def quiesce(self):
        """Until a warm worker is ready that no session took (the refill done)."""
        end = time.monotonic() + 60
        while True:
            ready = self.READY.findall(self.log())
            if len(ready) > self.taken:
                self.spare = int(ready[self.taken])
                return
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("no warm worker ready: " + self.log()[-2000:])
            time.sleep(0.01)

    def start(self):
        self.c = SocketClient(self.sock)
        self.c.request("ipybox/createSession", {})
        self.worker = self.spare  # the one warm worker, ready: the daemon hands it over
        self.taken += 1
        self.c.execute("1+1")

    def stop(self):
        """The session is private to the connection: it ends when the connection closes."""
        self.c.close()
        end = time.monotonic() + 30
        while os.path.exists("/proc/%d" % self.worker) and time.monotonic() < end:
            try:
                with open("/proc/%d/stat" % self.worker) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        break
            except OSError:
                break
            time.sleep(0.01)

    def mem(self):
        """The session's worker (`ipybox mcp --embedded`, the daemon's child) and all below it;
        as root, the sandbox is below the daemon's private monitor (`ipyboxd --private-monitor`,
        the daemon's other child): the older of its two sandboxes' trees is the session's, the
        newer the spare warm worker's (quiesce: the refill is ready)."""
        pids = [self.worker] + descendants(self.worker)
        for mon in [p for p in children(self.proc.pid) if is_private_monitor(p)]:
            shims = sorted((p for p in children(mon) if comm(p) == "ipybox-shim"), key=start_time)
            if len(shims) != 2:
                raise RuntimeError("warm pool: %d sandboxes below the private monitor, not 2" % len(shims))
            pids += [shims[0]] + descendants(shims[0])
        return pss_mib(pids)

    def close(self):
        if self.c:
            self.c.close()
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def run(args, sides):
    """All sides measured in alternation, so that drift of the machine hits them alike; every
    side idle (quiesce) before each measure."""
    res = {s.name: {"cold": [], "rt": [], "stream": [], "reset": [], "paths": {}} for s in sides}

    def quiet():
        for s in sides:
            s.quiesce()

    for _ in range(args.starts):
        for s in sides:
            quiet()
            t = time.perf_counter()
            s.start()
            res[s.name]["cold"].append(time.perf_counter() - t)
            s.stop()
    for s in sides:
        quiet()
        s.start()
    block = max(1, args.round_trips // 10)
    for _ in range(10):
        for s in sides:
            quiet()
            for _ in range(block):
                t = time.perf_counter()
                s.rt()
                res[s.name]["rt"].append(time.perf_counter() - t)
    # Memory before the streams, as the row says: idle after `1+1` (and round trips). After 20 MB
    # of output, plain's kernel kept 40 MiB more in some runs and not in others (glibc's
    # arenas: the sandbox's kernel gets MALLOC_ARENA_MAX=2, plain's does not).
    quiet()
    time.sleep(1)
    for s in sides:
        res[s.name]["mem"] = s.mem()
    for _ in range(args.streams):
        for s in sides:
            quiet()
            res[s.name]["stream"].append(s.stream(args.stream_lines))
    for _ in range(args.resets):
        for s in sides:
            quiet()
            t = time.perf_counter()
            path = s.reset()
            res[s.name]["reset"].append(time.perf_counter() - t)
            if path is not None:
                res[s.name]["paths"][path] = res[s.name]["paths"].get(path, 0) + 1
    for s in sides:
        s.stop()
    out = {}
    groups = {"cold": [(i, i + 1) for i in range(args.starts)],
              "reset": [(i, i + 1) for i in range(args.resets)],
              "rt": [(i * block, (i + 1) * block) for i in range(10)]}
    plain = res[sides[0].name]
    for name, r in res.items():
        out[name] = {"cold": median_ms(r["cold"]), "rt": median_ms(r["rt"]), "rt90": p90_ms(r["rt"]),
                     "reset": median_ms(r["reset"]), "reset_min": min(r["reset"]) * 1000,
                     "reset_max": max(r["reset"]) * 1000, "stream": statistics.median(r["stream"]),
                     "mem": r["mem"], "paths": r["paths"], "interval": {}}
        # The median's own interval (ms) for the measures with targets in ms (issue 21's).
        for key in ("cold", "reset"):
            out[name]["interval"][key + "_ms"] = paired_interval(plain[key], r[key], groups[key],
                                                                 lambda p, v: v)
        if r is plain:
            continue
        for key, g in groups.items():
            stat = (lambda p, v: v - p) if key == "rt" else (lambda p, v: v / p)
            out[name]["interval"][key] = paired_interval(plain[key], r[key], g, stat)
    return out


def cell(key, unit, v, plain, interval=None, own=None):
    if v is None:
        return "not built"
    if key == "paths" and plain is None and not v:
        return "(a new process)"
    if key == "paths":
        return ", ".join("%s %d" % kv for kv in sorted(v.items())) if v else "not reported"
    text = "%.2f %s" % (v, unit)
    if own:
        text += " (%.1f to %.1f)" % own
    if plain is None:
        return text
    if unit == "MB/s":
        return "%s (%.0f%% of plain)" % (text, 100 * v / plain)
    if key == "rt" and interval:
        return "%s (×%.2f, %+.2f ms; %+.2f to %+.2f)" % (text, v / plain, v - plain, *interval)
    if key in ("rt", "rt90"):
        return "%s (×%.2f, %+.2f ms)" % (text, v / plain, v - plain)
    if interval:
        return "%s (×%.2f; ×%.2f to ×%.2f)" % (text, v / plain, *interval)
    return "%s (×%.2f)" % (text, v / plain)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="a short run: 5 starts, 100 round trips, 5 resets, "
                    "3 streams of 5 MB (for checking; the committed results are a full run)")
    ap.add_argument("--starts", type=int, default=15)
    ap.add_argument("--round-trips", type=int, default=300)
    ap.add_argument("--resets", type=int, default=15)
    ap.add_argument("--stream-lines", type=int, default=20000)
    ap.add_argument("--streams", type=int, default=7)
    args = ap.parse_args()
    if args.quick:
        args.starts, args.round_trips, args.resets, args.streams, args.stream_lines = 5, 100, 5, 3, 5000
    zygote = knows_no_zygote()
    standby = knows("--standby")
    t_run = time.perf_counter()
    sides = [PlainSide(), EmbeddedSide("nozygote", ["--no-zygote"] if zygote else [])]
    if zygote:
        sides.append(EmbeddedSide("zygote", []))
    if standby:
        sides.append(StandbySide())
    try:
        sides.append(WarmSide())
        sides[-1].open()
        out = run(args, sides)
    finally:
        for s in sides:
            try:
                s.close()
            except Exception as e:  # the others are still closed
                print("bench/bench.py: closing %s: %s" % (s.name, e), file=sys.stderr)
    t_run = time.perf_counter() - t_run
    plain = out["plain"]
    rows = [
        ("cold start to first `1+1` result (median of %d)" % args.starts, "cold", "ms",
         "at most +10% (ipybox); issue 21: 100 ms without a warm pool"),
        ("reset, to the next `1+1` result (median of %d)" % args.resets, "reset", "ms",
         "issue 21: 30 ms"),
        ("reset, fastest", "reset_min", "ms", ""),
        ("reset, slowest", "reset_max", "ms", ""),
        ("how each reset started its kernel (`_meta[\"ipybox/kernel\"][\"start\"]`)", "paths", "", ""),
        ("`1+1` round trip (median of %d)" % args.round_trips, "rt", "ms", "at most +0.5 ms"),
        ("`1+1` round trip, 90th percentile", "rt90", "ms", ""),
        ("streaming throughput (%d MB of `print`, median of %d)" % (args.stream_lines // 1000, args.streams),
         "stream", "MB/s", "at least 90%"),
        ("memory of the process tree idle after `1+1` (PSS)", "mem", "MiB", "issue 21: 20 MiB"),
    ]
    cols = [("plain", "plain ipykernel"),
            ("nozygote", "ipybox mcp --no-zygote" if zygote else "ipybox mcp (no zygote: not built)"),
            ("zygote", "ipybox mcp (zygote)")] + \
        ([("standby", "ipybox mcp --standby")] if standby else []) + \
        [("warm", "warm pool (ipyboxd --user --warm 1)")]
    lines = ["# Benchmarks", "",
             "`make bench` on %s, %s, %d cores, Python %s; %s; load average %s at the end; the run took %.0f s." % (
                 platform.node(), platform.release(), os.cpu_count(), platform.python_version(),
                 time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 " ".join(open("/proc/loadavg").read().split()[:3]), t_run),
             "",
             "- plain: ipykernel with the ipc transport, no sandbox, driven directly over ZMQ from Python, started",
             "  with the same launcher as in the sandbox (ipykernel without its debugger); its reset is a new kernel.",
             "- ipybox mcp: `ipybox mcp --embedded` driven over MCP stdio from Python (MCP + supervisor + sandbox),",
             "  %s." % ("with `--no-zygote` and without (the zygote)" if zygote else
                        "without a zygote: this binary has no `--no-zygote` (`ipybox mcp --help`)"),
             "- warm pool: `ipyboxd --user --warm 1`; each session is created over MCP on its socket once the warm",
             "  worker is ready; its memory is the session's worker and its sandbox (as root, below the daemon's",
             "  private monitor), not the daemon's own processes nor the next warm worker.",
             "- The sides are measured in alternation (starts, blocks of round trips, streams, resets), each",
             "  started only when every side is idle (the warm pool's refill done). In brackets: against plain,",
             "  and for cold start, reset and the round trip a 95% interval of that ratio (of the difference,",
             "  for the round trip) from resampling the alternation's pairs (each start, each reset, each block",
             "  of round trips with plain's beside it); for cold start and reset first the interval of the",
             "  median itself, in ms. A target is met for sure only when the whole interval meets it.",
             "",
             "| measure | " + " | ".join(c[1] for c in cols) + " | target |",
             "|---|" + "---|" * len(cols) + "---|"]
    for label, key, unit, target in rows:
        cells = []
        for name, _ in cols:
            v = out[name][key] if name in out else None
            interval = out[name]["interval"].get(key) if name in out else None
            own = out[name]["interval"].get(key + "_ms") if name in out else None
            cells.append(cell(key, unit, v, None if name == "plain" else plain[key], interval, own))
        lines.append("| %s | %s | %s |" % (label, " | ".join(cells), target))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
