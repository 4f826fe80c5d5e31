"""System service benchmark: `ipyboxd` as root (the monitor, a frontend per user, sandboxes in
pool uids with cgroup limits), driven over MCP on one user's socket, in one run:

  creation rate     --sessions K named sessions created one after another from one connection:
                    K over the time from the first request to the last answer, and the median
  first result      K more sessions, each created and then sent `1+1`: the median time from
                    the createSession request to the cell's result
  memory            PSS (and RSS) of the whole service tree (monitor, frontend, workers, shims,
                    kernels) with the first K sessions idle, less the tree before any session,
                    per session; and the monitor (root's only process) alone
  most sessions     more sessions until createSession fails or --max-concurrent is reached; then
                    each is attached in turn and must answer `1+1`
  shutdown          SIGTERM with every session open: the time until the service has exited,
                    and whether any process in a pool uid is left
  warm              a second service with warm_sessions = 1: K sessions, each created once the
                    frontend's warm sandbox is ready, then sent `1+1`: the median time from the
                    createSession request to the cell's result

Needs root: it creates a user and a group (ipbb-bench) and removes them afterwards. The
client runs as that user (the socket is theirs alone), in a child process of this one.

Usage: bench/system.py [--out FILE] [--sessions K] [--max-concurrent N]
"""
import argparse
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import many  # noqa: E402
from daemon import IPYBOXD, Conn, RpcError, children, comm, descendants, median, mib, tree_mem  # noqa: E402

USER, GROUP = "ipbb-bench", "ipbb-benchers"
SOCK = "/run/ipybox/%s/ipybox.sock" % USER
POOL_START, POOL_SLOTS = 0x70000000, 256


def pool_procs():
    n = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/status" % d) as f:
                    st = dict(line.split(":", 1) for line in f if ":" in line)
            except OSError:
                continue
            uid = int(st["Uid"].split()[0])
            n += POOL_START <= uid < POOL_START + POOL_SLOTS * 65536 and not st["State"].strip().startswith("Z")
    return n


def other_services(ours):
    """Other system services (`ipyboxd --config`, root) running now: they share the pool of sandbox
    uids and, on a host where they share the cgroup root, the cgroups (u-<uid> of the same uid
    included), so their limits and clean-ups can act on ours."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in ours:
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"ipyboxd" and b"--config" in argv:
            out.append("%s %s" % (d, b" ".join(argv).decode(errors="replace").strip()))
    return out


def client(k, limit, to_parent, from_parent):
    """The user's side: every measurement that speaks MCP. Results go to the parent as JSON;
    it is told when the idle sessions are there (for memory) and waits for a go."""
    become_user()
    res = {}
    c = Conn(SOCK)
    c.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "bench-system", "version": "1"}})
    one = []
    t_first = time.perf_counter()
    for i in range(k):
        t0 = time.perf_counter()
        c.call("ipybox/createSession", {"name": "idle-%d" % i})
        one.append(time.perf_counter() - t0)
    res["rate_total"] = time.perf_counter() - t_first
    res["one"] = one
    os.write(to_parent, b"idle\n")
    os.read(from_parent, 1)
    first = []
    for i in range(k):
        t0 = time.perf_counter()
        c.call("ipybox/createSession", {"name": "first-%d" % i})
        out = c.cell("1+1")
        first.append(time.perf_counter() - t0)
        assert out.strip() == "2", out
    res["first"] = first
    created = 2 * k
    res["why"] = "--max-concurrent %d reached" % limit
    while created < limit:
        try:
            c.call("ipybox/createSession", {"name": "more-%d" % created})
        except RpcError as e:
            res["why"] = "createSession failed: %s" % e
            break
        created += 1
    names = [s["name"] for s in c.call("ipybox/listSessions")["sessions"]]
    ok, rtt = 0, []
    for name in names:
        c.call("ipybox/attachSession", {"name": name})
        t0 = time.perf_counter()
        try:
            ok += c.cell("1+1").strip() == "2"
        except RpcError:
            continue
        rtt.append(time.perf_counter() - t0)
    res.update(created=created, listed=len(names), answered=ok, rtt=rtt)
    os.write(to_parent, (json.dumps(res) + "\n").encode())
    os.read(from_parent, 1)  # sessions stay open until the service is stopped
    os._exit(0)


def start_service(work, name, conf_text):
    conf = os.path.join(work, name + ".conf")
    with open(conf, "w") as f:
        f.write(conf_text)
    log_path = os.path.join(work, name + ".log")
    proc = subprocess.Popen([IPYBOXD, "--config", conf], stdin=subprocess.DEVNULL, stdout=open(log_path, "w"),
                            stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while not (os.path.exists(SOCK) and "serving uid" in open(log_path).read()):
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("the service did not start:\n" + open(log_path).read())
        time.sleep(0.05)
    return proc, log_path


def warm_client(k, to_parent, from_parent):
    """The user's side of the warm phase: a session created each time the parent says a warm
    sandbox is ready, and `1+1` sent on it."""
    become_user()
    c = Conn(SOCK)
    c.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "bench-system", "version": "1"}})
    first = []
    for i in range(k):
        os.read(from_parent, 1)
        t0 = time.perf_counter()
        c.call("ipybox/createSession", {"name": "warm-%d" % i})
        out = c.cell("1+1")
        first.append(time.perf_counter() - t0)
        assert out.strip() == "2", out
    os.write(to_parent, (json.dumps({"first": first}) + "\n").encode())
    os._exit(0)


def warm_phase(work, k):
    proc, log_path = start_service(work, "warm", "users = group %s\nmax_sessions_per_user = %d\nmemory_max = 1G\n"
                                   "warm_sessions = 1\n" % (GROUP, k + 2))
    up_r, up_w = os.pipe()
    down_r, down_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            warm_client(k, up_w, down_r)
        finally:
            os._exit(1)
    os.close(up_w)  # so that the client's death is an end of file here, not a hang
    os.close(down_r)
    try:
        for i in range(k):
            deadline = time.time() + 60
            while open(log_path).read().count("): ready in") < i + 1:  # "session (warm PID): ready in"
                if time.time() > deadline:
                    raise RuntimeError("no warm sandbox ready:\n" + open(log_path).read()[-2000:])
                time.sleep(0.02)
            os.write(down_w, b"g")
        line = os.fdopen(up_r).readline()
        if not line:
            raise RuntimeError("the warm client failed: " + open(log_path).read()[-2000:])
        first = json.loads(line)["first"]
        used = open(log_path).read().count("started (warm worker")
        return first, used
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def become_user():
    pw = pwd.getpwnam(USER)
    os.setgroups([])
    os.setresgid(pw.pw_gid, pw.pw_gid, pw.pw_gid)
    os.setresuid(pw.pw_uid, pw.pw_uid, pw.pw_uid)


def many_client(n, parallel, to_parent, from_parent):
    """The user's side of the concurrent-sessions phase: bench/many.py, with the parent (root)
    measuring memory when told."""
    become_user()

    def measure(label):
        os.write(to_parent, (label + "\n").encode())
        if os.read(from_parent, 1) != b"g":
            raise many.ManyError("the parent went away")

    try:
        msg = {"res": many.run(SOCK, n, parallel, measure)}
    except many.ManyError as e:
        msg = {"error": str(e)}
    os.write(to_parent, ("result " + json.dumps(msg) + "\n").encode())
    os._exit(0)


def cgroup_use(pid):
    """(cgroup, [(file, value) of memory, of pids]) of pid's cgroup: the peak where the kernel keeps
    one, else the current value (cgroup v1 or v2); None where there is none."""
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            entries = [line.strip().split(":", 2) for line in f]
    except OSError:
        return None
    paths = {}
    for _, ctrls, rel in entries:
        for ctrl in ctrls.split(",") if ctrls else [""]:
            paths[ctrl] = rel
    found, where = [], None
    for ctrl, names in (("memory", ("memory.peak", "memory.max_usage_in_bytes", "memory.current",
                                    "memory.usage_in_bytes")), ("pids", ("pids.peak", "pids.current"))):
        for base, rel in (("/sys/fs/cgroup/" + ctrl, paths.get(ctrl)), ("/sys/fs/cgroup", paths.get("")),
                          ("/sys/fs/cgroup/unified", paths.get(""))):
            v = None
            for name in names:
                try:
                    with open("%s%s/%s" % (base, rel, name)) as f:
                        v = (name, int(f.read().split()[0]))
                    break
                except (OSError, ValueError, TypeError):
                    continue
            if v:
                found.append(v)
                where = rel
                break
        else:
            found.append(None)
    return (where, found) if where else None


def many_phase(work, n, parallel):
    """N concurrent sessions on a service of their own: (rows, notes, ok)."""
    conf = "users = group %s\nmax_sessions_per_user = %d\nmemory_max = 1G\n" % (GROUP, n + 8)
    proc, log_path = start_service(work, "many", conf)
    mem = {"what": "the service's tree (monitor, frontend, workers, shims, kernels)"}
    notes, rows, ok = [], [], False
    up_r, up_w = os.pipe()
    down_r, down_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            many_client(n, parallel, up_w, down_r)
        finally:
            os._exit(1)
    os.close(up_w)
    os.close(down_r)
    users_cg = None
    seen = set()
    try:
        up = os.fdopen(up_r)
        while True:
            line = up.readline()
            if not line:
                raise RuntimeError("the client of the %d sessions failed: %s" % (n, open(log_path).read()[-2000:]))
            if line.startswith("result "):
                got = json.loads(line[7:])
                break
            seen.update(other_services({proc.pid}))
            tree = [proc.pid] + descendants(proc.pid)
            mem[line.strip()] = tree_mem(tree)
            mem["nproc"] = len(tree)
            if line.strip() == "idle":
                frontends = [c for c in children(proc.pid) if comm(c) == "ipyboxd"]
                users_cg = cgroup_use(frontends[0]) if frontends else None
            os.write(down_w, b"g")
        if "error" in got:
            rows.append(("%d concurrent sessions" % n, "failed", got["error"].replace("|", "/")[:500]))
            notes.append("the %d-session run failed: %s" % (n, got["error"]))
        else:
            rows = many.rows(got["res"], mem)
            ok = got["res"]["answered"] == n
        if users_cg:
            rel, ((mname, mval), (pname, pval)) = users_cg[0], [x or ("?", 0) for x in users_cg[1]]
            rows.append(("the user's cgroup (frontend and workers; user_memory_max, user_pids_max) with %d sessions"
                         % n, "%s %.0f MiB, %s %d" % (mname, mval / 1048576, pname, pval), rel))
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        os.close(down_w)
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            notes.append("the service of the %d sessions did not exit within 120 s of SIGTERM" % n)
        stop = time.perf_counter() - t0
    rows.append(("SIGTERM to the service's exit after the %d sessions' connections closed" % n, "%.2f s" % stop,
                 "exit status %d; processes in pool uids after: %d" % (proc.returncode, pool_procs())))
    if seen:
        notes.append("another system service ran during the %d sessions: %s" % (n, "; ".join(sorted(seen))[:400]))
    with open(log_path) as f:
        notes += ["service log (%d sessions): `%s`" % (n, line.strip()) for line in f
                  if any(w in line.lower() for w in ("warn", "error", "fail", "killed"))][:10]
    return rows, notes, ok and proc.returncode == 0


MANY_INTRO = ("A service of its own for these, configured with `max_sessions_per_user = N + 8` (the default 16 is "
              "too few) and `memory_max = 1G` as above; the defaults of `uid_pool_size` (256 sandboxes) and of "
              "`user_memory_max` (1G) and `user_pids_max` (1024), which bound the user's frontend and workers "
              "together, are kept (what they used is in the table). bench/many.py, run by the user's client process: "
              "%(n)d sessions, each private to a connection of its own, started, then `1+1` sent on all %(n)d at "
              "once, then idle. One more session (the probe) is made and run once before they start; from then "
              "on a sampler process runs `1+1` in it and a fork+exec of /bin/true, each every 100 ms, and reads "
              "the load average. The phases are told apart by time.\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--max-concurrent", type=int, default=40)
    ap.add_argument("--concurrent", type=int, default=100,
                    help="N for the concurrent-sessions section, on a service of its own (0: skip it)")
    ap.add_argument("--start-parallel", type=int, default=os.cpu_count() or 2,
                    help="createSession requests in flight at a time while the N start")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/system.py: the system service needs root", file=sys.stderr)
        return 1
    k, limit = a.sessions, max(a.max_concurrent, 2 * a.sessions)
    others = other_services(set())
    subprocess.run(["groupadd", "-f", GROUP], check=True)
    subprocess.run(["useradd", "-m", "-G", GROUP, "-s", "/bin/sh", USER], check=True, capture_output=True)
    work = tempfile.mkdtemp(prefix="ipybox-bench-system-")
    load = open("/proc/loadavg").read().split()[:3]
    rows, notes = [], []
    many_rows, many_notes, status = [], [], 0
    pid = 0
    proc = None
    try:
        proc, log_path = start_service(work, "ipyboxd", "users = group %s\nmax_sessions_per_user = %d\n"
                                       "memory_max = 1G\n" % (GROUP, limit + 8))
        time.sleep(1)
        base_pss, base_rss = tree_mem([proc.pid] + descendants(proc.pid))
        up_r, up_w = os.pipe()
        down_r, down_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                client(k, limit, up_w, down_r)
            finally:
                os._exit(1)
        os.close(up_w)  # so that the client's death is an end of file here, not a hang
        os.close(down_r)
        up = os.fdopen(up_r)
        if up.readline().strip() != "idle":
            raise RuntimeError("the client failed: " + open(log_path).read()[-2000:])
        time.sleep(2)
        tree = [proc.pid] + descendants(proc.pid)
        all_pss, all_rss = tree_mem(tree)
        mon_pss, mon_rss = tree_mem([proc.pid])
        os.write(down_w, b"g")
        line = up.readline()
        if not line:
            raise RuntimeError("the client failed: " + open(log_path).read()[-2000:])
        res = json.loads(line)
        one, first = res["one"], res["first"]
        rows.append(("sessions created per second (%d named, one after another from one connection)" % k,
                     "%.2f /s" % (k / res["rate_total"]), "%d sessions in %.2f s" % (k, res["rate_total"])))
        rows.append(("one createSession, request to answer (kernel up; median of %d)" % k,
                     "%.0f ms" % (1000 * median(one)), "range %.0f–%.0f ms" % (1000 * min(one), 1000 * max(one))))
        rows.append(("createSession request to the first `1+1` result on it (median of %d)" % k,
                     "%.0f ms" % (1000 * median(first)),
                     "range %.0f–%.0f ms" % (1000 * min(first), 1000 * max(first))))
        rows.append(("memory per idle session, all its processes (worker + shims + kernel): PSS (RSS); the "
                     "service tree with %d sessions less the tree before, over %d" % (k, k),
                     "%s (%s)" % (mib((all_pss - base_pss) / k), mib((all_rss - base_rss) / k)),
                     "%d processes in the tree; before any session: %s PSS (%s RSS), monitor + frontend" % (
                         len(tree), mib(base_pss), mib(base_rss))))
        rows.append(("the monitor (root's only process) with %d sessions: PSS (RSS)" % k,
                     "%s (%s)" % (mib(mon_pss), mib(mon_rss)), ""))
        rows.append(("most concurrent sessions reached (one user; max_sessions_per_user %d)" % (limit + 8),
                     str(res["created"]), "stopped: %s; listSessions: %d" % (res["why"], res["listed"])))
        rtt = res["rtt"] or [0]
        rows.append(("sessions answering `1+1` at the end (each attached in turn)",
                     "%d of %d" % (res["answered"], res["listed"]),
                     "`1+1` round trip after the attach: median %.1f ms, max %.1f ms" % (
                         1000 * median(rtt), 1000 * max(rtt))))
        procs_before = pool_procs()
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        stop = time.perf_counter() - t0
        rows.append(("SIGTERM to the service's exit, %d sessions open" % res["created"], "%.2f s" % stop,
                     "exit status %d; processes in pool uids: %d before, %d after; /run/ipybox left: %s" % (
                         proc.returncode, procs_before, pool_procs(), "yes" if os.path.exists("/run/ipybox") else "no")))
        warm, used = warm_phase(work, k)
        rows.append(("with warm_sessions = 1: createSession request to the first `1+1` result, each made once a "
                     "warm sandbox is ready (median of %d)" % k, "%.1f ms" % (1000 * median(warm)),
                     "range %.1f–%.1f ms; %d of %d sessions took a warm sandbox" % (
                         1000 * min(warm), 1000 * max(warm), used, k)))
        others += other_services(set())
        if a.concurrent > 0:
            many_rows, many_notes, ok = many_phase(work, a.concurrent, a.start_parallel)
            status |= not ok
    finally:
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
        if proc and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run(["pkill", "-KILL", "-u", USER], capture_output=True)
        subprocess.run(["userdel", "-r", USER], capture_output=True)
        subprocess.run(["groupdel", GROUP], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    others += other_services({proc.pid} if proc else set())
    if others:
        notes.append("another system service ran during this one (its sandboxes share the uid pool and may "
                     "share the cgroups; these numbers are not this service's alone): "
                     + "; ".join(sorted(set(others)))[:400])
    text = ["| measure | result | detail |", "|---|---|---|"] + ["| %s | %s | %s |" % r for r in rows]
    many_text = ""
    if many_rows:
        many_text = ("\n## %d concurrent sessions\n\n%s\n| measure | result | detail |\n|---|---|---|\n" % (
            a.concurrent, MANY_INTRO % {"n": a.concurrent}) + "".join("| %s | %s | %s |\n" % r for r in many_rows))
        if many_notes:
            many_text += "\n" + "".join("- %s\n" % line for line in many_notes)
    print("\n".join(text))
    print(many_text)
    if a.out:
        with open(a.out, "w") as f:
            f.write("# System service benchmark\n\n`make bench-system` (bench/system.py, as root), one run on "
                    "one `ipyboxd` system service with one user (ipbb-bench, created for the run), driven over MCP on "
                    "that user's socket by a minimal client running as the user. Host: %d CPUs, load average "
                    "%s at the start. Each session is a worker (the user's), an outer shim started by the "
                    "monitor in a pool uid range and cgroup (memory 1 GiB, no swap), the sandbox's PID 1 and "
                    "the kernel. Compare bench/daemon.md (`ipyboxd --user`, same client).\n\n"
                    % (os.cpu_count(), " ".join(load)))
            f.write("\n".join(text) + "\n")
            if notes:
                f.write("\n" + "".join("- %s\n" % n for n in notes))
            f.write(many_text)
    return status


if __name__ == "__main__":
    sys.exit(main())
