"""Many concurrent sessions on one ipyboxd socket (bench/daemon.py and bench/system.py):

  start    N sessions, each private to a connection of its own (closed when it disconnects),
           created with --start-parallel createSession requests in flight at a time
  answer   `1+1` sent on all N connections at once: the time from the first request to the
           last answer, and each session's own (its request to its answer), median and max
  idle     then nothing: the caller measures memory (measure("idle"))

Meanwhile a sampler process checks that the host stays responsive, every 100 ms: the latency
of a fork+exec of /bin/true (posix_spawn, waited for) and of `1+1` in one more session (the
probe, created and run once before the N start, then idle), each in its own thread, and the
1-minute load average. Samples are assigned to phases by CLOCK_MONOTONIC (system-wide):
idle before (the probe alone), start, answer.

run() uses only the socket: bench/system.py calls it as the user, in its client process."""
import ctypes
import json
import os
import select
import signal
import socket
import threading
import time

PROTOCOL = "2025-06-18"
TICK = 0.1
TIMEOUT = 300.0


class ManyError(Exception):
    pass


class Line:
    """One connection with requests that may be outstanding while others are read."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 0
        self.want = None  # the id waited for
        self.sent_at = None

    def send(self, method, params=None):
        self.next_id += 1
        self.want = self.next_id
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        self.sent_at = time.monotonic()
        self.sock.sendall(json.dumps(msg).encode() + b"\n")

    def feed(self):
        """Reads what is there; returns the awaited message once it is whole, else None."""
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ManyError("the daemon closed a connection")
        self.buf += chunk
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            if not line.strip():
                continue
            m = json.loads(line)
            if m.get("id") == self.want and ("result" in m or "error" in m):
                self.want = None
                return m
        return None

    def call(self, method, params=None):
        self.send(method, params)
        end = time.monotonic() + TIMEOUT
        while True:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise ManyError("no answer to %s within %.0f s" % (method, TIMEOUT))
            m = self.feed()
            if m is not None:
                if "error" in m:
                    raise ManyError("%s: %s" % (method, m["error"].get("message", m["error"])))
                return m["result"]

    def init(self):
        self.call("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                 "clientInfo": {"name": "bench-many", "version": "1"}})

    def close(self):
        self.sock.close()


CELL = {"name": "execute_ipython_cell", "arguments": {"code": "1+1"}}


def cell_text(m):
    r = m.get("result") or {}
    text = "".join(c.get("text", "") for c in r.get("content", []) if c.get("type") == "text")
    return text.strip() if not r.get("isError") else "error: " + text[:200]


def drive(lines, send, what):
    """Sends a request on every line (at most `inflight` at once is the caller's business via
    send's return) and waits for all answers: [(line, message, seconds)]."""
    pending = {ln.sock.fileno(): ln for ln in lines if ln.want is not None}
    out = []
    end = time.monotonic() + TIMEOUT
    while pending:
        left = end - time.monotonic()
        if left <= 0:
            raise ManyError("%d of the %s requests had no answer within %.0f s" % (len(pending), what, TIMEOUT))
        for fd in select.select(list(pending), [], [], left)[0]:
            ln = pending[fd]
            m = ln.feed()
            if m is None:
                continue
            out.append((ln, m, time.monotonic() - ln.sent_at))
            del pending[fd]
            nxt = send()
            if nxt is not None:
                pending[nxt.sock.fileno()] = nxt
    return out


def die_with_parent():
    """SIGKILL when the parent ends (however it ends: bench/system.py SIGKILLs its client)."""
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def sampler(sock, ready_w, stop_r, out_w):
    """The sampler process: its probe session, then samples until stop_r is readable."""
    try:
        probe = Line(sock)
        probe.init()
        probe.call("ipybox/createSession", {})
        text = cell_text({"result": probe.call("tools/call", CELL)})
        if text != "2":
            raise ManyError("the probe answered %r" % text)
        samples = []  # (monotonic time, kind, seconds)
        stop = threading.Event()

        def true_loop():
            while not stop.is_set():
                t0 = time.monotonic()
                pid = os.posix_spawn("/bin/true", ["/bin/true"], {})
                os.waitpid(pid, 0)
                samples.append((t0, "true", time.monotonic() - t0))
                with open("/proc/loadavg") as f:
                    samples.append((t0, "load", float(f.read().split()[0])))
                time.sleep(max(0.0, TICK - (time.monotonic() - t0)))

        def probe_loop():
            while not stop.is_set():
                t0 = time.monotonic()
                try:
                    text = cell_text({"result": probe.call("tools/call", CELL)})
                except ManyError as e:
                    text = str(e)
                samples.append((t0, "probe" if text == "2" else "probe-wrong", time.monotonic() - t0))
                time.sleep(max(0.0, TICK - (time.monotonic() - t0)))

        threads = [threading.Thread(target=f, daemon=True) for f in (true_loop, probe_loop)]
        for t in threads:
            t.start()
        os.write(ready_w, b"r")
        os.read(stop_r, 1)
        stop.set()
        for t in threads:
            t.join(TIMEOUT)
        data = json.dumps({"samples": samples}).encode()
    except Exception as e:  # reported to the parent, which fails the run
        data = json.dumps({"error": "%s: %s" % (type(e).__name__, e)}).encode()
    with os.fdopen(out_w, "wb") as f:
        f.write(data)
    os._exit(0)


def summary(samples, t0, t1):
    def pick(kind):
        return sorted(dt for t, k, dt in samples if k == kind and t0 <= t < t1)

    def med(v):
        return v[len(v) // 2] if v else float("nan")

    tr, pr, load = pick("true"), pick("probe"), pick("load")
    return {"true_med": 1000 * med(tr), "true_max": 1000 * max(tr or [float("nan")]), "true_n": len(tr),
            "probe_med": 1000 * med(pr), "probe_max": 1000 * max(pr or [float("nan")]), "probe_n": len(pr),
            "probe_wrong": len([1 for t, k, _ in samples if k == "probe-wrong" and t0 <= t < t1]),
            "load_max": max(load or [float("nan")])}


def run(sock, n, parallel, measure, idle_before=3.0, settle=3.0):
    """N concurrent sessions on sock. measure(label) is called with "base" before any session
    (the probe's neither) and "idle" once the N have answered and settled; the sessions close
    when this returns (their connections are closed), also on failure. Returns a dict."""
    measure("base")
    ready_r, ready_w = os.pipe()
    stop_r, stop_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for fd in (ready_r, stop_w, out_r):
            os.close(fd)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        die_with_parent()
        try:
            sampler(sock, ready_w, stop_r, out_w)
        finally:
            os._exit(1)
    for fd in (ready_w, stop_r, out_w):
        os.close(fd)
    lines = []
    res = {"n": n, "parallel": parallel}
    try:
        if os.read(ready_r, 1) != b"r":
            raise ManyError("the sampler's probe session did not start: " + os.read(out_r, 4096).decode())
        t_idle = time.monotonic()
        time.sleep(idle_before)
        # start: N connections, N private sessions.
        t_start = time.monotonic()
        for _ in range(n):
            ln = Line(sock)
            ln.init()
            lines.append(ln)
        todo = iter(lines)

        def next_create():
            ln = next(todo, None)
            if ln is not None:
                ln.send("ipybox/createSession", {})
            return ln

        for _ in range(max(1, parallel)):
            next_create()
        created = drive(lines, next_create, "createSession")
        t_answer = time.monotonic()
        failed = [m["error"].get("message", "?") for _, m, _ in created if "error" in m]
        if failed:
            raise ManyError("%d of %d createSession failed, the first: %s" % (len(failed), n, failed[0]))
        res["create"] = [dt for _, _, dt in created]
        res["start_total"] = t_answer - t_start
        # answer: `1+1` on all at once.
        for ln in lines:
            ln.send("tools/call", CELL)
        answers = drive(lines, lambda: None, "`1+1`")
        t_done = time.monotonic()
        res["answer_total"] = max(ln_t for ln_t in (ln.sent_at + dt for ln, _, dt in answers)) - min(
            ln.sent_at for ln in lines)
        res["answer"] = [dt for _, _, dt in answers]
        res["answered"] = sum(1 for _, m, _ in answers if cell_text(m) == "2")
        res["wrong"] = [cell_text(m) for _, m, _ in answers if cell_text(m) != "2"][:5]
        # the phase after: idle.
        time.sleep(settle)
        t_after = time.monotonic()
        os.write(stop_w, b"s")
        data = b""
        while True:
            chunk = os.read(out_r, 1 << 20)
            if not chunk:
                break
            data += chunk
        got = json.loads(data or b'{"error": "the sampler ended without a word"}')
        if "error" in got:
            raise ManyError("the sampler: " + got["error"])
        s = got["samples"]
        res["phases"] = [("idle, the probe alone (%.0f s)" % idle_before, summary(s, t_idle, t_start)),
                         ("while the %d start" % n, summary(s, t_start, t_answer)),
                         ("while the %d answer `1+1`" % n, summary(s, t_answer, t_done)),
                         ("after, all idle (%.0f s)" % settle, summary(s, t_done, t_after))]
        measure("idle")
        return res
    finally:
        for ln in lines:
            ln.close()
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        os.waitpid(pid, 0)
        for fd in (ready_r, stop_w, out_r):
            os.close(fd)


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def rows(res, mem):
    """Table rows (measure, result, detail) from run()'s result and the caller's memory:
    mem = {"base": (pss, rss) KiB, "idle": (pss, rss) KiB, "nproc": processes, "what": tree}."""
    n = res["n"]
    c, a = res["create"], res["answer"]
    out = [("%d concurrent sessions: started, %d createSession requests in flight at a time, each on a "
            "connection of its own" % (n, res["parallel"]), "%.1f s" % res["start_total"],
            "%.2f sessions/s; one createSession (request to answer): median %.0f ms, max %.0f ms" % (
                n / res["start_total"], 1000 * median(c), 1000 * max(c)))]
    out.append(("%d sessions answering `1+1` sent to all at once: first request to last answer" % n,
                "%.0f ms" % (1000 * res["answer_total"]),
                "%d of %d answered 2%s; one session, request to answer: median %.0f ms, slowest %.0f ms" % (
                    res["answered"], n, (" (others: %s)" % ", ".join(map(repr, res["wrong"]))) if res["wrong"] else "",
                    1000 * median(a), 1000 * max(a))))
    base, idle = mem["base"], mem["idle"]
    out.append(("%d sessions idle after `1+1`: PSS of %s (RSS)" % (n, mem["what"]),
                "%.0f MiB (%.0f MiB)" % (idle[0] / 1024, idle[1] / 1024),
                "%d processes; before any session %.1f MiB PSS (%.1f MiB RSS)" % (
                    mem["nproc"], base[0] / 1024, base[1] / 1024)))
    out.append(("per idle session: PSS (RSS), the tree less the tree before any session, over %d (the %d and "
                "the probe)" % (n + 1, n), "%.1f MiB (%.1f MiB)" % ((idle[0] - base[0]) / 1024 / (n + 1),
                                                                 (idle[1] - base[1]) / 1024 / (n + 1)), ""))
    for label, p in res["phases"]:
        out.append(("host responsiveness %s: /bin/true, probe `1+1` (medians)" % label,
                    "%.1f ms, %.0f ms" % (p["true_med"], p["probe_med"]),
                    "fork+exec of /bin/true median %.1f ms, max %.1f ms (%d samples); `1+1` in the idle probe "
                    "session median %.0f ms, max %.0f ms (%d samples%s); 1-min load average up to %.2f" % (
                        p["true_med"], p["true_max"], p["true_n"], p["probe_med"], p["probe_max"], p["probe_n"],
                        ", %d wrong" % p["probe_wrong"] if p["probe_wrong"] else "", p["load_max"])))
    return out
