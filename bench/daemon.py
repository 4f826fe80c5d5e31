"""Daemon benchmark: `ipyboxd --user` on a unix socket, driven over MCP (newline-delimited
JSON-RPC) by a minimal client in this process, in one run, on one daemon:

  creation rate     --sessions K named sessions created one after another from one connection
                    (ipybox/createSession is answered once the session's kernel is up): K over
                    the time from the first request to the last answer, and the median of one
  first result      K more sessions, each created and then sent `1+1`: the median time from
                    the createSession request to the cell's result
  memory            PSS (and RSS) from /proc/PID/smaps_rollup of every process below the daemon
                    (/proc/PID/task/*/children), with the first K sessions idle (kernel up, no
                    cell run), less the daemon alone before any session, per session; and the
                    worker process (`ipybox mcp --embedded`, the session's supervisor) alone
  most sessions     more sessions until createSession fails, --max-concurrent is reached or
                    MemAvailable falls below --min-available percent of MemTotal; then every
                    session is attached in turn and must answer `1+1`
  shutdown          SIGTERM with every session open: the time until the daemon has exited,
                    and whether any process of a session or any session directory is left

The daemon runs with --max-sessions --daemon-max-sessions (high, so that the limit met is the
machine's or --max-concurrent) and its own XDG_STATE_HOME in a temporary directory.

A createSession still waiting after 3, 6 and 9 s is noted with what the new session's
processes wait on (/proc/PID/wchan).

Usage: bench/daemon.py [--out FILE] [--sessions K] [--max-concurrent N] [--min-available PCT]
                       [--daemon-max-sessions N] [--log FILE]
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import many  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
IPYBOXD = os.path.join(ROOT, os.environ.get("BUILD", "build"), "bin", "ipyboxd")
REQUEST_TIMEOUT = 120.0


class RpcError(Exception):
    pass


class Conn:
    """One client connection: requests answered in order, notifications skipped."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 0

    def close(self):
        self.sock.close()

    def _line(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RpcError("no answer within %.0f s" % REQUEST_TIMEOUT)
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                continue
            if not chunk:
                raise RpcError("the daemon closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def call(self, method, params=None):
        self.next_id += 1
        rid = self.next_id
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        deadline = time.monotonic() + REQUEST_TIMEOUT
        while True:
            line = self._line(deadline)
            if not line.strip():
                continue
            m = json.loads(line)
            if m.get("id") != rid:
                continue  # a notification (progress), or an answer nobody waits for
            if "error" in m:
                raise RpcError(m["error"].get("message", str(m["error"])))
            return m["result"]

    def cell(self, code):
        r = self.call("tools/call", {"name": "execute_ipython_cell", "arguments": {"code": code}})
        text = "".join(c.get("text", "") for c in r.get("content", []) if c.get("type") == "text")
        if r.get("isError"):
            raise RpcError("the cell failed: " + text[:300])
        return text


def children(pid):
    out = []
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        for c in children(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


def by_role(daemon):
    """The processes below the daemon by role: [(role, [pid, ...]), ...]. A worker is a child of
    the daemon; below it (as root, below the private monitor) the outer shim, the sandbox's
    PID 1 (a second shim) and the kernel."""
    roles = {"worker": [], "shims": [], "kernel": [], "private monitor": []}
    for w in children(daemon):
        # As root the sandboxes are below the daemon's private monitor (`ipyboxd
        # --private-monitor`), the daemon's other child, not below their workers.
        roles["private monitor" if private_monitor(w) else "worker"].append(w)
        for p in descendants(w):
            c = comm(p)
            roles["shims" if c == "ipybox-shim" else "private monitor" if private_monitor(p) else "kernel"].append(p)
    return [(r, p) for r, p in roles.items() if p]


def stat(pid):
    """(pid, start time, comm), state; to tell a process from a later one given the same pid."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return None, None
    head, rest = st.rsplit(")", 1)
    f = rest.split()
    return (pid, int(f[19]), head.split("(", 1)[1]), f[0]


def identity(pid):
    return stat(pid)[0]


def exists(ident):
    """Still there, possibly as a zombie not reaped yet."""
    return identity(ident[0]) == ident


def running(ident):
    """Still there and not a zombie."""
    i, state = stat(ident[0])
    return i == ident and state not in ("Z", "X")


def mem_kib(pid):
    """(PSS, RSS) in KiB from smaps_rollup, or None for a process that is gone."""
    pss = rss = None
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1])
    except OSError:
        return None
    return (pss, rss) if pss is not None and rss is not None else None


def tree_mem(pids):
    pss = rss = 0
    for p in pids:
        m = mem_kib(p)
        if m:
            pss += m[0]
            rss += m[1]
    return pss, rss


def private_monitor(pid):
    """Root's private monitor (`ipyboxd --private-monitor`; its program is ipybox-monitor)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return b"--private-monitor" in f.read().split(b"\0")
    except OSError:
        return False


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return "?"


def meminfo():
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            info[k] = int(v.split()[0])
    return info


class SlowWatch:
    """Notes what a session's processes wait on (/proc/PID/wchan) when its createSession takes
    longer than `after` seconds: the newest worker of the daemon and everything below it."""

    def __init__(self, daemon, after=3.0):
        self.daemon, self.after = daemon, after
        self.name = self.t0 = None
        self.seen = []
        self.lock = threading.Lock()
        self.stop = False
        threading.Thread(target=self._run, daemon=True).start()

    def begin(self, name):
        with self.lock:
            self.name, self.t0, self.taken = name, time.monotonic(), 0

    def end(self):
        with self.lock:
            self.name = None

    def _snapshot(self):
        ws = [i for i in map(identity, children(self.daemon)) if i]
        if not ws:
            return "no worker"
        w = max(ws, key=lambda i: i[1])[0]
        out = []
        for p in [w] + descendants(w):
            i, state = stat(p)
            try:
                with open("/proc/%d/wchan" % p) as f:
                    wchan = f.read().strip()
            except OSError:
                wchan = "?"
            if i:
                out.append("%s %s %s" % (i[2], state, wchan))
        return ", ".join(out)

    def _run(self):
        while not self.stop:
            time.sleep(0.25)
            with self.lock:
                if self.name is None:
                    continue
                dt = time.monotonic() - self.t0
                if dt < self.after * (self.taken + 1) or self.taken >= 3:
                    continue
                self.taken += 1
                name = self.name
            self.seen.append("createSession %s still waiting after %.1f s: %s" % (name, dt, self._snapshot()))


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def mib(kib):
    return "%.1f MiB" % (kib / 1024)


def wait_socket(path, proc, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            c = Conn(path)
            c.close()
            return True
        except OSError:
            time.sleep(0.02)
    return False


def concurrent(a):
    """The many-sessions section (bench/many.py) on a daemon of its own: (rows, notes, ok)."""
    work = tempfile.mkdtemp(prefix="ipybox-bench-daemon-many-")
    sock = os.path.join(work, "run", "d.sock")
    log_path = os.path.join(work, "ipyboxd.log")
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(work, "state"))
    # The limits a hundred sessions need: --max-sessions (default 64) above N + the probe;
    # --max-clients (default 256) already holds N + 2 connections.
    cmd = [IPYBOXD, "--user", "--socket", sock, "--max-sessions", str(a.concurrent + 8)]
    notes = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
    mem = {"what": "the daemon's tree (daemon, workers, shims, kernels)"}

    def measure(label):
        tree = [proc.pid] + descendants(proc.pid)
        mem[label] = tree_mem(tree)
        mem["nproc"] = len(tree)

    try:
        if not wait_socket(sock, proc):
            raise many.ManyError("the daemon did not start: " + open(log_path).read()[-2000:])
        time.sleep(a.settle / 2)
        res = many.run(sock, a.concurrent, a.start_parallel, measure, settle=max(a.settle, 3.0))
        rows = many.rows(res, mem)
        ok = res["answered"] == a.concurrent
    except many.ManyError as e:
        ok = False
        rows = [("%d concurrent sessions" % a.concurrent, "failed", str(e).replace("|", "/")[:500])]
        notes.append("the %d-session run failed: %s" % (a.concurrent, e))
    finally:
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            notes.append("the daemon of the %d sessions did not exit within 120 s of SIGTERM" % a.concurrent)
        stop = time.perf_counter() - t0
        with open(log_path) as f:
            odd = [line.strip() for line in f if any(w in line.lower() for w in ("warn", "error", "fail", "killed"))]
        shutil.rmtree(work, ignore_errors=True)
    rows.append(("SIGTERM to the daemon's exit after the %d sessions' connections closed" % a.concurrent,
                 "%.2f s" % stop, "exit status %s" % proc.returncode))
    notes += ["daemon log (%d sessions): `%s`" % (a.concurrent, line) for line in odd[:10]]
    return rows, notes, ok and proc.returncode == 0


MANY_INTRO = ("A daemon of its own (`ipyboxd --user --max-sessions N+8`: the default 64 is too few; "
              "--max-clients' default 256 holds the N + 2 connections), bench/many.py: %(n)d sessions, each "
              "private to a connection of its own, started, then `1+1` sent on all %(n)d at once, then idle. "
              "One more session (the probe) is made and run once before they start; from then on a sampler "
              "process runs `1+1` in it and a fork+exec of /bin/true, each every 100 ms, and reads the load "
              "average. The phases are told apart by time.\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--sessions", type=int, default=10, help="K: sessions for the rate, first result and memory")
    ap.add_argument("--max-concurrent", type=int, default=60, help="stop adding sessions at this many")
    ap.add_argument("--min-available", type=float, default=20.0,
                    help="stop adding sessions when MemAvailable falls below this percent of MemTotal")
    ap.add_argument("--daemon-max-sessions", type=int, default=1000, help="the daemon's --max-sessions")
    ap.add_argument("--log", help="keep the daemon's log (its stderr) here")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds to wait before measuring memory")
    ap.add_argument("--concurrent", type=int, default=100,
                    help="N for the concurrent-sessions section, on a daemon of its own (0: skip it)")
    ap.add_argument("--start-parallel", type=int, default=os.cpu_count() or 2,
                    help="createSession requests in flight at a time while the N start")
    a = ap.parse_args()
    if not os.access(IPYBOXD, os.X_OK):
        print("bench/daemon.py: %s is missing (make BUILD=...)" % IPYBOXD, file=sys.stderr)
        return 1
    k = a.sessions
    limit = max(a.max_concurrent, 2 * k)
    work = tempfile.mkdtemp(prefix="ipybox-bench-daemon-")
    sock = os.path.join(work, "run", "d.sock")
    state = os.path.join(work, "state")
    log_path = os.path.join(work, "ipyboxd.log")
    env = dict(os.environ, XDG_STATE_HOME=state)
    log = open(log_path, "w")
    proc = subprocess.Popen([IPYBOXD, "--user", "--socket", sock, "--max-sessions", str(a.daemon_max_sessions)],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
    rows, notes = [], []
    problems = 0
    load = open("/proc/loadavg").read().split()[:3]
    conns = []
    watch = None
    created = []  # names, in creation order
    try:
        if not wait_socket(sock, proc):
            print("bench/daemon.py: the daemon did not start:\n" + open(log_path).read(), file=sys.stderr)
            return 1
        time.sleep(a.settle / 2)
        base_pss, base_rss = tree_mem([proc.pid] + descendants(proc.pid))
        watch = SlowWatch(proc.pid)
        c = Conn(sock)
        conns.append(c)
        c.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "bench-daemon", "version": "1"}})

        # 1. Creation rate: K sessions one after another, nothing else in between.
        one = []
        t_first = time.perf_counter()
        for i in range(k):
            name = "idle-%d" % i
            t0 = time.perf_counter()
            watch.begin(name)
            c.call("ipybox/createSession", {"name": name})
            watch.end()
            one.append(time.perf_counter() - t0)
            created.append(name)
        total = time.perf_counter() - t_first
        rows.append(("sessions created per second (%d named, one after another from one connection)" % k,
                     "%.2f /s" % (k / total), "%d sessions in %.2f s" % (k, total)))
        rows.append(("one createSession, request to answer (kernel up; median of %d)" % k,
                     "%.0f ms" % (1000 * median(one)), "range %.0f–%.0f ms" % (1000 * min(one), 1000 * max(one))))

        # 3. Memory with the K idle sessions.
        time.sleep(a.settle)
        workers = [w for w in children(proc.pid) if not private_monitor(w)]
        tree = [proc.pid] + descendants(proc.pid)
        all_pss, all_rss = tree_mem(tree)
        w_pss, w_rss = tree_mem(workers)
        nproc = len(tree) - 1
        roles = by_role(proc.pid)
        mem_rows = []
        mem_rows.append(("memory per idle session, all its processes (worker + 2 shims + kernel): PSS (RSS); "
                     "the whole tree with %d sessions less the daemon alone before, over %d" % (k, k),
                     "%s (%s)" % (mib((all_pss - base_pss) / k), mib((all_rss - base_rss) / k)),
                     "%d processes below the daemon; PSS per session: %s; daemon alone before %s PSS (%s RSS)" % (
                         nproc, ", ".join("%s %s" % (r, mib(tree_mem(p)[0] / k)) for r, p in roles),
                         mib(base_pss), mib(base_rss))))
        mem_rows.append(("memory per idle session, the worker alone (`ipybox mcp --embedded`: the session's "
                     "supervisor, its egress proxy included): PSS (RSS), mean of %d" % len(workers),
                     "%s (%s)" % (mib(w_pss / max(len(workers), 1)), mib(w_rss / max(len(workers), 1))),
                     "the daemon itself with %d sessions: %s PSS (%s RSS)" % (
                         (k,) + tuple(mib(x) for x in tree_mem([proc.pid])))))

        # 2. Create then first result, on K more sessions.
        first = []
        for i in range(k):
            name = "first-%d" % i
            t0 = time.perf_counter()
            watch.begin(name)
            c.call("ipybox/createSession", {"name": name})
            watch.end()
            out = c.cell("1+1")
            first.append(time.perf_counter() - t0)
            created.append(name)
            if out.strip() != "2":
                notes.append("session %s answered `1+1` with %r" % (name, out))
                problems += 1
        rows.append(("createSession request to the first `1+1` result on it (median of %d)" % k,
                     "%.0f ms" % (1000 * median(first)),
                     "range %.0f–%.0f ms" % (1000 * min(first), 1000 * max(first))))
        rows += mem_rows

        # 4. The most concurrent sessions.
        total_kib = meminfo()["MemTotal"]
        why = "--max-concurrent %d reached" % limit
        later = []
        t_more = time.perf_counter()
        while len(created) < limit:
            avail = meminfo()["MemAvailable"]
            if avail < total_kib * a.min_available / 100:
                why = "MemAvailable %s below %g%% of MemTotal" % (mib(avail), a.min_available)
                break
            name = "more-%d" % len(created)
            t0 = time.perf_counter()
            try:
                watch.begin(name)
                c.call("ipybox/createSession", {"name": name})
                watch.end()
            except RpcError as e:
                why = "createSession failed: %s" % e
                break
            later.append(time.perf_counter() - t0)
            created.append(name)
        t_more = time.perf_counter() - t_more
        n = len(created)
        listed = c.call("ipybox/listSessions")["sessions"]
        ready = sum(1 for s in listed if s.get("ready"))
        answered, failed = 0, []
        rtt = []
        for name in created:
            try:
                c.call("ipybox/attachSession", {"name": name})
                t0 = time.perf_counter()
                out = c.cell("1+1")
                rtt.append(time.perf_counter() - t0)
                if out.strip() == "2":
                    answered += 1
                else:
                    failed.append("%s: %r" % (name, out))
            except RpcError as e:
                failed.append("%s: %s" % (name, e))
        time.sleep(a.settle)
        tree = [proc.pid] + descendants(proc.pid)
        n_pss, n_rss = tree_mem(tree)
        avail = meminfo()["MemAvailable"]
        rows.append(("most concurrent sessions reached (daemon --max-sessions %d)" % a.daemon_max_sessions,
                     "%d" % n, "stopped: %s; listSessions: %d sessions, %d ready" % (why, len(listed), ready)))
        if later:
            rows.append(("one createSession with %d to %d sessions already open (median of %d)" % (
                2 * k, n - 1, len(later)), "%.0f ms" % (1000 * median(later)),
                "range %.0f–%.0f ms; %.2f sessions/s" % (1000 * min(later), 1000 * max(later),
                                                          len(later) / t_more)))
        rows.append(("sessions answering `1+1` at the end (each attached in turn)", "%d of %d" % (answered, n),
                     "`1+1` round trip after the attach (the first cell of most): median %.1f ms, max %.1f ms" % (
                         1000 * median(rtt), 1000 * max(rtt)) if rtt else ""))
        rows.append(("memory per session with %d open, each having run one cell: PSS (RSS), as above" % n,
                     "%s (%s)" % (mib((n_pss - base_pss) / n), mib((n_rss - base_rss) / n)),
                     "whole tree %s PSS, %d processes; MemAvailable then %s of %s" % (
                         mib(n_pss), len(tree), mib(avail), mib(total_kib))))
        for f in failed:
            notes.append("did not answer `1+1`: " + f)
        problems += len(failed)
    except RpcError as e:
        notes.append("the run stopped early: %s" % e)
        problems += 1
        print("bench/daemon.py: %s" % e, file=sys.stderr)
    finally:
        for cc in conns:
            cc.close()
        idents = [i for i in map(identity, descendants(proc.pid)) if i] if proc.poll() is None else []
        nsess = len([w for w in children(proc.pid) if not private_monitor(w)]) if proc.poll() is None else 0
        t0 = time.perf_counter()
        stopped = True
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                stopped = False
                proc.kill()
                proc.wait()
        t_stop = time.perf_counter() - t0
        # Processes of the sessions still running when the daemon has exited, and how long they
        # stay; then how long until they are reaped (reparented: the host's PID 1 reaps them).
        left = [i for i in idents if running(i)]
        t_gone = t_reaped = None
        while time.perf_counter() - t0 < t_stop + 30:
            if t_gone is None and not any(running(i) for i in left):
                t_gone = time.perf_counter() - t0
            if not any(exists(i) for i in idents):
                t_reaped = time.perf_counter() - t0
                break
            time.sleep(0.01)
        still = [i for i in left if running(i)]
        dirs = []
        for sub in ("sessions", "workspaces"):
            d = os.path.join(state, "ipybox", sub)
            if os.path.isdir(d):
                dirs += [os.path.join(sub, x) for x in os.listdir(d)]
        kinds = {}
        for i in left:
            kinds[i[2]] = kinds.get(i[2], 0) + 1
        rows.append(("SIGTERM to the daemon's exit, %d sessions open" % nsess,
                     "%.2f s" % t_stop if stopped else "did not exit in 60 s (killed)",
                     "exit status %s; socket removed: %s; session directories left: %d" % (
                         proc.returncode, "yes" if not os.path.exists(sock) else "no", len(dirs))))
        detail = ", ".join("%d %s" % (v, c) for c, v in sorted(kinds.items()))
        if left and t_gone is not None:
            detail += "; the last stopped %.2f s after SIGTERM" % t_gone
        elif left:
            detail += "; %d still running 30 s later: %s" % (len(still), ", ".join("%d %s" % (i[0], i[2])
                                                                                   for i in still[:10]))
        detail += ("; all reaped %.2f s after SIGTERM" % t_reaped if t_reaped is not None
                   else "; not all reaped 30 s later")
        rows.append(("processes of the sessions still running (not zombies) when the daemon had exited",
                     "%d of %d" % (len(left), len(idents)), detail.lstrip("; ")))
        if still:
            notes.append("%d processes of the sessions outlived the daemon by more than 30 s" % len(still))
            problems += 1
        if not stopped:
            notes.append("the daemon did not exit within 60 s of SIGTERM")
            problems += 1
        log.close()
        if watch:
            watch.stop = True
            notes += watch.seen
        if a.log:
            shutil.copyfile(log_path, a.log)
        with open(log_path) as f:
            daemon_log = f.read().splitlines()
        ready_ms = [int(m.group(1)) for m in map(re.compile(r": ready in (\d+) ms").search, daemon_log) if m]
        if ready_ms:
            rows.insert(2, ("the worker's own start, as it logs it (`ready in N ms`: sandbox and kernel, without "
                            "the daemon's fork and exec; median of all %d sessions)" % len(ready_ms),
                            "%d ms" % median(ready_ms), "range %d–%d ms" % (min(ready_ms), max(ready_ms))))
        odd = [line for line in daemon_log if any(w in line.lower() for w in ("warn", "error", "fail", "killed",
                                                                              "unexpected", "cannot"))]
        shutil.rmtree(work, ignore_errors=True)
    for line in odd[:20]:
        notes.append("daemon log: `%s`" % line.strip())
    table = "| measure | result | detail |\n|---|---|---|\n"
    table += "".join("| %s |\n" % " | ".join(r) for r in rows)
    many_text = ""
    if a.concurrent > 0:
        many_rows, many_notes, ok = concurrent(a)
        problems += not ok
        many_text = ("\n## %d concurrent sessions\n\n%s\n| measure | result | detail |\n|---|---|---|\n" % (
            a.concurrent, MANY_INTRO % {"n": a.concurrent}) + "".join("| %s |\n" % " | ".join(r) for r in many_rows))
        if many_notes:
            many_text += "\n" + "".join("- %s\n" % line for line in many_notes)
    print(table)
    for line in notes:
        print("- " + line)
    print(many_text)
    if a.out:
        with open(a.out, "w") as f:
            f.write("# Daemon benchmark\n\n`make bench-daemon` (bench/daemon.py), one run on one `ipyboxd --user` "
                    "(socket and XDG_STATE_HOME in a temporary directory), driven over MCP on its socket by a "
                    "minimal client. Host: %d CPUs, %s MemTotal, load average %s at the start. Each session is a worker process "
                    "(`ipybox mcp --embedded`) with its sandbox shim and IPython kernel below it. Memory is "
                    "from /proc/PID/smaps_rollup: PSS shares pages used by several processes (the one binary "
                    "every worker runs, the Python libraries of the kernels) among them, so it adds up; RSS "
                    "counts them in full in each.\n\n" % (os.cpu_count(), mib(meminfo()["MemTotal"]), " ".join(load)) + table)
            if notes:
                f.write("\n" + "".join("- %s\n" % line for line in notes))
            f.write(many_text)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
