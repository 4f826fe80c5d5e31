"""The installed system service as its users meet it (the VM tier: tests/vm/system.sh runs this
as root in a stock Debian 12 under systemd with cgroup v2, after `make install` and `systemctl
enable --now ipyboxd` with the unit as shipped and /etc/ipybox/ipyboxd.conf setting
memory_max and pids_max). Users alice and bob run `ipybox mcp` as themselves (runuser, no
XDG_RUNTIME_DIR): sockets, limits in the sandboxes' cgroups and in results, recovery, two
users at once, where the users' processes run, and `systemctl restart`, `stop` and `kill -s
KILL` with sessions running. Tests run in name order; each starts the service if it is down."""
import glob
import itertools
import os
import pwd
import shutil
import stat
import subprocess
import sys
import threading
import time
import unittest

os.environ.setdefault("IPYBOX", "/usr/local/bin/ipybox")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from ipybox_test import McpClient, alive, descendants, wait_for  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from test_mcp_sandboxed import PROBE_SERVER, probe_params  # noqa: E402

UNIT = "ipyboxd.service"
USERS = ("alice", "bob")
CG = "/sys/fs/cgroup"
SERVICE_CG = CG + "/system.slice/ipyboxd.service"
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"  # the users' PATH has no sbin


def read_conf(path="/etc/ipybox/ipyboxd.conf"):
    conf = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0]
            if "=" in line:
                k, v = line.split("=", 1)
                conf[k.strip()] = v.strip()
    return conf


def size(v):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(v[-1:].upper())
    return int(v[:-1]) * mult if mult else int(v)


CONF = read_conf()
MEMORY_MAX = size(CONF["memory_max"])
PIDS_MAX = int(CONF["pids_max"])
# With a zygote (`zygote = true`; the service's default is false) the sandbox's cgroup also holds
# S0 and the zygote: pids.max is the limit + 2, so that the kernel keeps what the limit says
# (architecture.md, "Zygote kernels").
ZYGOTE_PIDS = 2 if CONF.get("zygote", "false").strip() == "true" else 0
# `standby = true` (with zygote = true; suite 5): a standby kernel beside each running one, which
# a reset activates; it takes one of the kernel's own processes (pids.max is not raised for it).
STANDBY = bool(ZYGOTE_PIDS) and CONF.get("standby", "false").strip() == "true"
CPU_WEIGHT = int(CONF.get("cpu_weight", "100"))
POOL_START = int(CONF.get("uid_pool_start", "1879048192"))
POOL_END = POOL_START + int(CONF.get("uid_pool_size", "256")) * 65536
markers = itertools.count()


def run(*cmd, timeout=120):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def show(prop):
    return run("systemctl", "show", "-p", prop, "--value", UNIT).stdout.strip()


def journal():
    return run("journalctl", "-u", UNIT, "-o", "cat", "--no-pager").stdout


def journal_lines():
    return journal().splitlines()


def journal_tail(n=30):
    return "\n".join(journal().splitlines()[-n:])


def sock(user):
    return "/run/ipybox/%s/ipybox.sock" % user


def uid_of(user):
    return pwd.getpwnam(user).pw_uid


def proc(pid):
    """uid, cgroup (v2 path), cmdline of a running process; None when it is gone or a zombie."""
    try:
        with open("/proc/%d/status" % pid) as f:
            st = dict(line.split(":", 1) for line in f if ":" in line)
        if st["State"].strip().startswith(("Z", "X")):
            return None
        with open("/proc/%d/cgroup" % pid) as f:
            cg = [x[3:] for x in f.read().splitlines() if x.startswith("0::")][0]
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        return {"pid": pid, "uid": int(st["Uid"].split()[0]), "cgroup": cg, "cmd": cmd}
    except (OSError, KeyError, IndexError, ValueError):
        return None


def processes():
    return [p for p in (proc(int(d)) for d in os.listdir("/proc") if d.isdigit()) if p]


def pool_procs():
    return [p for p in processes() if POOL_START <= p["uid"] < POOL_END]


def service_procs():
    """Every process in the service's cgroup tree."""
    return [p for p in processes() if (CG + p["cgroup"]).startswith(SERVICE_CG + "/") or CG + p["cgroup"] == SERVICE_CG]


def service_cgroups():
    """{path: inode} of every cgroup below the service's (sandboxes', users', the monitor's)."""
    out = {}
    for root, dirs, _ in os.walk(SERVICE_CG):
        for d in dirs:
            try:
                out[os.path.join(root, d)] = os.stat(os.path.join(root, d)).st_ino
            except OSError:
                pass
    return out


def ipybox_mounts(mountinfo):
    """Lines of a mountinfo that mention ipybox or mount something at /app (systemd's own
    mounts for the unit, at /run/systemd/..., aside)."""
    out = []
    for line in mountinfo.splitlines():
        f = line.split()
        if len(f) > 4 and f[4].startswith("/run/systemd/"):
            continue
        if "ipybox" in line or (len(f) > 4 and (f[4] == "/app" or f[4].startswith("/app/"))):
            out.append(line)
    return out


def cgfile(d, name):
    try:
        with open(os.path.join(d, name)) as f:
            return f.read().strip()
    except OSError:
        return None


def snapshot():
    """What a running service has: its main pid, its processes (as users and in the pool), the
    cgroups below its own (sandboxes', users', the monitor's), the journal's length."""
    main = int(show("MainPID") or 0)
    return {"main": main, "pool": {p["pid"] for p in pool_procs()}, "cgroups": service_cgroups(),
            "procs": {p["pid"]: p["cmd"] for p in service_procs()}, "journal": len(journal_lines())}


def text(result):
    return "".join(c.get("text", "") for c in result["content"] if c["type"] == "text")


def timed_systemctl(verb):
    """systemctl VERB on the unit: its result and how long it took (printed)."""
    t0 = time.time()
    r = run("systemctl", verb, UNIT)
    took = time.time() - t0
    print("systemctl %s took %.1f s" % (verb, took))
    return r, took


class SystemService(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.clients = []
        self.ensure_service()

    def tearDown(self):
        for c in self.clients:
            try:
                c.close(timeout=10)
            except Exception:
                pass

    # -- the service
    def ensure_service(self):
        if show("ActiveState") != "active":
            run("systemctl", "start", UNIT)
        ok = wait_for(lambda: show("ActiveState") == "active" and all(os.path.exists(sock(u)) for u in USERS),
                      60, 0.5)
        if not ok:
            self.fail("%s is %s/%s (Result=%s); sockets: %s; journal:\n%s" % (
                UNIT, show("ActiveState"), show("SubState"), show("Result"),
                {u: os.path.exists(sock(u)) for u in USERS}, journal_tail()))

    # -- users' clients
    def client(self, user, *options, connect=True):
        """`ipybox mcp` run by user: runuser, an environment of its own without XDG_RUNTIME_DIR,
        in the user's home. connect: with --connect to the user's socket (a test about the
        service then fails at the connection instead of running the embedded supervisor)."""
        pw = pwd.getpwnam(user)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": pw.pw_dir,
               "XDG_STATE_HOME": os.path.join(pw.pw_dir, ".local", "state")}
        opts = (("--connect", sock(user)) if connect else ()) + options
        c = McpClient(*opts, env=env, wrap=lambda cmd: [RUNUSER, "-u", user, "--", "env", "-C", pw.pw_dir, *cmd])
        self.clients.append(c)
        return c

    @staticmethod
    def finish(c):
        """Ends a client's input; its stderr once it exited."""
        c.proc.stdin.close()
        c.proc.wait(60)
        return c.proc.stderr.read().decode(errors="replace")

    def busy(self, c, code="import time; time.sleep(600)"):
        """Starts a cell that runs on; returns at once."""
        c.send_request("tools/call", {"name": "execute_ipython_cell", "arguments": {"code": code}})

    def sandbox_of(self, c):
        """The cgroup directory (sb-N) of c's sandbox, found by a file its kernel makes in its /tmp."""
        marker = "ipbvm-marker-%d" % next(markers)
        out, res = c.execute("open('/tmp/%s', 'w').close()" % marker)
        self.assertFalse(res.get("isError"), out)
        for p in pool_procs():
            if os.path.exists("/proc/%d/root/tmp/%s" % (p["pid"], marker)):
                parts = p["cgroup"].split("/")
                sb = [i for i, x in enumerate(parts) if x.startswith("sb-")]
                return CG + "/".join(parts[:sb[0] + 1] if sb else parts)
        self.fail("no sandbox process shows /tmp/%s; pool processes: %s" % (marker, pool_procs()))

    def sessions(self, n_alice=2, n_bob=1):
        """Sessions of both users, each with a kernel up; the last of alice's is running a cell."""
        cs = [self.client("alice") for _ in range(n_alice)] + [self.client("bob") for _ in range(n_bob)]
        for c in cs:
            self.assertEqual(c.execute("print(1 + 1)")[0], "2\n")
        self.busy(cs[n_alice - 1])
        time.sleep(1)
        return cs

    def assert_clients_ended(self, cs, what):
        hung = [c.proc.pid for c in cs if not wait_for(lambda: c.proc.poll() is not None, 60, 0.2)]
        self.assertFalse(hung, "after %s these clients' `ipybox mcp` still run (their connection did not end): %s"
                         % (what, hung))

    def assert_nothing_left(self, before, what):
        """Nothing of the sessions before remains: processes (the service's and the pool's), the
        sandboxes' cgroups, mounts; and no closer was left waiting. Says every one that fails."""
        problems = []
        wait_for(lambda: not (before["pool"] & {p["pid"] for p in pool_procs()}), 30, 0.2)
        left = [p for p in pool_procs() if p["pid"] in before["pool"]]
        if left:
            problems.append("sandbox processes from before remain: %s" % left)
        if not wait_for(lambda: not pool_procs(), 30, 0.2):
            problems.append("processes in the pool's uids run: %s" % pool_procs())
        old = {pid: cmd for pid, cmd in before["procs"].items() if alive(pid)}
        if old:
            problems.append("the service's processes from before remain: %s" % old)
        again = [d for d, ino in before["cgroups"].items() if os.path.isdir(d) and os.stat(d).st_ino == ino]
        if again:
            problems.append("cgroups from before remain: %s" % again)
        with open("/proc/self/mountinfo") as f:
            host = ipybox_mounts(f.read())
        if host:
            problems.append("the host's mount table has %s" % host)
        main = show("MainPID")
        if main not in ("", "0"):
            r = run("nsenter", "-t", main, "-m", "cat", "/proc/self/mountinfo")
            if r.returncode != 0 or ipybox_mounts(r.stdout):
                problems.append("the service's mount namespace has %s%s" % (ipybox_mounts(r.stdout), r.stderr))
        # The monitor hands closing a user's descriptors to children (closers); one still waiting
        # at the stop is logged. No user here sent a descriptor that could make a close wait.
        waits = [x for x in journal_lines()[before["journal"]:] if "closer still waits" in x]
        if waits:
            problems.append("the journal has %s" % waits)
        self.assertEqual(problems, [], "after %s" % what)

    def assert_new_sessions_work(self, what):
        self.ensure_service()
        for u in USERS:
            c = self.client(u)
            self.assertEqual(c.execute("print(1 + 1)")[0], "2\n", "%s's new session after %s" % (u, what))

    # -- 1
    def test_01_each_user_has_a_socket_only_they_can_use(self):
        for u in USERS:
            d = os.path.dirname(sock(u))
            st = os.stat(d)
            print("%s: %s owner %d mode %o; %s" % (u, d, st.st_uid, stat.S_IMODE(st.st_mode), sock(u)))
            self.assertEqual(st.st_uid, 0, d)
            self.assertEqual(stat.S_IMODE(st.st_mode) & 0o022, 0, "%s is writable by others" % d)
            st = os.stat(sock(u))
            self.assertTrue(stat.S_ISSOCK(st.st_mode), sock(u))
            self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (uid_of(u), 0o600), sock(u))
            connect = "import socket; socket.socket(socket.AF_UNIX).connect(%r); print('connected')"
            r = run("runuser", "-u", u, "--", "/usr/bin/python3", "-c", connect % sock(u))
            self.assertEqual(r.stdout, "connected\n",
                             "%s cannot reach their own socket (%s is mode %o): %s" % (
                                 u, d, stat.S_IMODE(os.stat(d).st_mode), r.stderr.strip()[-300:]))
        r = run("runuser", "-u", "bob", "--", "/usr/bin/python3", "-c", connect % sock("alice"))
        self.assertNotEqual(r.returncode, 0, "bob reached alice's socket")

    # -- 2
    def test_02_ipybox_mcp_finds_the_service_by_itself(self):
        c = self.client("alice", connect=False)
        out, res = c.execute("1+1")
        err = self.finish(c)
        self.assertNotIn("embedded supervisor", err)
        self.assertIn("using ipyboxd at %s" % sock("alice"), err)
        self.assertEqual(out.strip(), "2", res)

    # -- 3
    def test_03_memory_limit_kills_the_kernel_and_a_fresh_one_follows(self):
        c = self.client("alice")
        d = self.sandbox_of(c)
        got = {f: cgfile(d, f) for f in ("memory.max", "memory.swap.max", "pids.max", "cpu.weight")}
        print("sandbox cgroup %s: %s" % (d, got))
        self.assertTrue(d.startswith(SERVICE_CG + "/"), d)
        self.assertEqual(got, {"memory.max": str(MEMORY_MAX), "memory.swap.max": "0", "pids.max": str(PIDS_MAX + ZYGOTE_PIDS),
                               "cpu.weight": str(CPU_WEIGHT)})
        out, res = c.execute("x = b'x' * (1 << 30)\nprint('survived')")
        print("result: %r" % text(res)[-400:])
        self.assertNotIn("survived", out)
        self.assertTrue(res.get("isError"), text(res))
        self.assertIn("ran out of memory (its limit is %d MiB" % (MEMORY_MAX >> 20), text(res))
        self.assertIn("A fresh kernel was started", text(res))
        events = dict(line.split() for line in (cgfile(d, "memory.events") or "").splitlines())
        print("memory.events: %s" % events)
        self.assertGreaterEqual(int(events.get("oom_kill", 0)), 1, events)
        self.assertEqual(c.execute("print(1 + 1, 'x' in globals())")[0], "2 False\n")

    # -- 4
    def test_04_process_limit_is_reported_and_the_session_recovers(self):
        c = self.client("alice")
        out, res = c.execute(
            "import os, time\npids = []\ntry:\n    for i in range(500):\n        p = os.fork()\n"
            "        if p == 0:\n            time.sleep(3)\n            os._exit(0)\n        pids.append(p)\n"
            "except OSError as e:\n    print('fork failed', e.errno)\n"
            "finally:\n    [os.waitpid(p, 0) for p in pids]\n    print('forked', len(pids))\n")
        print("result: %r" % text(res)[-400:])
        self.assertIn("fork failed 11", out)
        forked = [int(x.split()[1]) for x in out.splitlines() if x.startswith("forked ")]
        self.assertTrue(forked and forked[0] < PIDS_MAX, out)
        self.assertIn("reached its limit of %d processes" % PIDS_MAX, text(res))
        self.assertEqual(c.execute("print(1 + 1)")[0], "2\n")
        self.assertEqual(c.execute("import subprocess; print(subprocess.run(['/bin/true']).returncode)")[0], "0\n")

    # -- 5
    def test_05_cpu_weight_is_the_sandbox_cgroups(self):
        c = self.client("alice", "--cpu-weight", "50")
        d = self.sandbox_of(c)
        print("sandbox cgroup %s: cpu.weight %s" % (d, cgfile(d, "cpu.weight")))
        self.assertEqual(cgfile(d, "cpu.weight"), "50", d)

    # -- 6
    def test_06_two_users_at_once_each_with_their_own_files(self):
        # Each user's sessions start at once. Under TCG (software emulation: systemd-detect-virt
        # says qemu) a kernel takes about 12 s of 2 slow CPUs to start, and more than 60 s
        # (the supervisor's limit) when 10 start together: 3 each there.
        n = 3 if run("systemd-detect-virt").stdout.strip() == "qemu" else 5
        got, cs = {}, {}
        home = {u: pwd.getpwnam(u).pw_dir for u in USERS}
        # Workspaces kept from earlier runs (suite 4 runs this module a second time) are not ours.
        xs = {u: home[u] + "/.local/state/ipybox/workspaces/*/x" for u in USERS}
        before = {u: set(glob.glob(xs[u])) for u in USERS}

        def one(user, i):
            try:
                c = cs[(user, i)] = self.client(user)
                got[(user, i)] = c.execute("1+1")[0].strip()
            except Exception as e:  # reported below, with the others
                got[(user, i)] = "%s: %s" % (type(e).__name__, e)
        threads = [threading.Thread(target=one, args=(u, i)) for u in USERS for i in range(n)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(400)
        print("%d sessions answered in %.1f s" % (len(threads), time.time() - t0))
        self.assertEqual(got, {(u, i): "2" for u in USERS for i in range(n)})
        out, res = cs[("alice", 0)].execute("open('/app/x', 'w').write('from alice')")
        self.assertFalse(res.get("isError"), out)
        for i in range(n):
            self.assertEqual(cs[("bob", i)].execute("import os; print(os.path.exists('/app/x'))")[0], "False\n")
        made = sorted(set(glob.glob(xs["alice"])) - before["alice"])
        self.assertEqual(len(made), 1, made)
        self.assertEqual(os.stat(made[0]).st_uid, uid_of("alice"))
        r = run("runuser", "-u", "bob", "--", "cat", made[0])
        self.assertNotEqual(r.returncode, 0, "bob reads alice's %s" % made[0])
        self.assertNotIn("from alice", r.stdout)
        self.assertEqual(sorted(set(glob.glob(xs["bob"])) - before["bob"]), [])

    # -- 7
    def test_07_users_processes_run_in_bounded_cgroups(self):
        c = self.client("alice")
        c.execute("print(1)")
        main = int(show("MainPID"))
        monitor = proc(main)["cgroup"]
        uid = uid_of("alice")
        mine = {p["pid"]: p for p in (proc(x) for x in descendants(main)) if p and p["uid"] == uid}
        mine.update({p["pid"]: p for p in service_procs() if p["uid"] == uid})
        self.assertTrue(mine, "no process of alice's in the service")
        report, bad = [], []
        for p in mine.values():
            bounds = {"memory.max": None, "pids.max": None}
            d = CG + p["cgroup"]
            while d.startswith(SERVICE_CG + "/"):
                for f in bounds:
                    v = cgfile(d, f)
                    if bounds[f] is None and v not in (None, "max"):
                        bounds[f] = "%s in %s" % (v, d[len(SERVICE_CG):])
                d = os.path.dirname(d)
            line = "pid %d (%s) in %s: memory.max %s, pids.max %s" % (
                p["pid"], p["cmd"][:80], p["cgroup"], bounds["memory.max"], bounds["pids.max"])
            report.append(line)
            if p["cgroup"] == monitor or None in bounds.values():
                bad.append(line + (" (the monitor's own cgroup)" if p["cgroup"] == monitor else ""))
        print("\n".join(report))
        self.assertEqual(bad, [], "alice's processes of the service without a memory and pids bound of their own")

    # -- 8
    def test_08_restart_with_sessions_running(self):
        cs = self.sessions()
        before = snapshot()
        r, took = timed_systemctl("restart")
        self.assertEqual(r.returncode, 0, r.stderr + journal_tail())
        self.assertLess(took, 25, "the stop waited for its timeout:\n" + journal_tail())
        self.assert_clients_ended(cs, "systemctl restart")
        self.assert_nothing_left(before, "systemctl restart")
        self.assert_new_sessions_work("systemctl restart")

    # -- 9
    def test_09_stop_with_sessions_running(self):
        cs = self.sessions()
        before = snapshot()
        r, took = timed_systemctl("stop")
        self.assertEqual(r.returncode, 0, r.stderr)
        state = {p: show(p) for p in ("ActiveState", "Result", "ExecMainCode", "ExecMainStatus")}
        print(state)
        self.assertEqual(state["ActiveState"], "inactive")
        self.assertEqual(state["Result"], "success", journal_tail())
        self.assertEqual((state["ExecMainCode"], state["ExecMainStatus"]), ("1", "0"), "the monitor's exit: " + str(state))
        self.assert_clients_ended(cs, "systemctl stop")
        self.assert_nothing_left(before, "systemctl stop")
        self.assertEqual(service_procs(), [])
        self.assertEqual(service_cgroups(), {})
        self.assertFalse(os.path.exists(SERVICE_CG), "%s remains: %s" % (SERVICE_CG, os.listdir(SERVICE_CG)
                                                                         if os.path.isdir(SERVICE_CG) else ""))
        self.assertEqual([u for u in USERS if os.path.exists(sock(u))], [], "sockets remain")

    # -- 10
    def kill_and_restart(self, *how):
        cs = self.sessions()
        before = snapshot()
        restarts = int(show("NRestarts") or 0)
        r = run("systemctl", "kill", *how, "-s", "KILL", UNIT)
        self.assertEqual(r.returncode, 0, r.stderr)
        back = wait_for(lambda: show("ActiveState") == "active" and show("MainPID") not in ("0", str(before["main"])),
                        60, 0.5)
        self.assertTrue(back, "not restarted: %s/%s, Result=%s\n%s" % (
            show("ActiveState"), show("SubState"), show("Result"), journal_tail()))
        self.assertEqual(int(show("NRestarts")), restarts + 1)
        what = "systemctl kill %s-s KILL" % "".join(x + " " for x in how)
        self.assert_clients_ended(cs, what)
        self.assert_nothing_left(before, what)
        self.assert_new_sessions_work(what)

    def test_10_kill_with_sessions_running(self):
        self.kill_and_restart()

    def test_11_monitor_alone_killed_with_sessions_running(self):
        self.kill_and_restart("--kill-who=main")

    # -- 12
    def test_12_a_sandboxed_mcp_server_runs_in_a_sandbox_the_monitor_made(self):
        # alice's worker runs as alice; the server's `ipybox run` gets a channel of its own from
        # the monitor (a sub-channel of the worker's), so the server runs like the kernel: in a
        # pool uid and a sandbox cgroup under the service's, seeing nothing of alice's home.
        pw = pwd.getpwnam("alice")
        secret = os.path.join(pw.pw_dir, "ipbvm-mcp-secret")
        with open(secret, "w") as f:
            f.write("alice's secret")
        os.chown(secret, pw.pw_uid, pw.pw_gid)
        self.addCleanup(os.unlink, secret)

        def servers():
            return [p for p in processes() if p["cmd"] == ("/usr/bin/python3 -c " + PROBE_SERVER).strip()]

        c = self.client("alice", "--approve-tools", "*")
        r = c.call("register_mcp_server", {"server_name": "boxed", "server_params": probe_params(sandbox={})})
        self.assertFalse(r.get("isError"), text(r) + "\n" + journal_tail())

        def probe(what, arg):
            out, res = c.execute("from mcptools.boxed import probe\nprint(repr(probe.run(what=%r, arg=%r)))"
                                 % (what, arg), timeout=180)
            self.assertFalse(res.get("isError"), out)
            return eval(out.strip().splitlines()[-1])

        got = probe("read", secret)
        self.assertTrue(got.startswith("ERR FileNotFoundError"), got)
        self.assertEqual(probe("env", "HOME"), "/home/appuser")
        found = servers()
        print("the probe server: %s" % [(p["pid"], p["uid"], p["cgroup"]) for p in found])
        self.assertTrue(found, "no process runs the probe server")
        for p in found:
            self.assertTrue(POOL_START <= p["uid"] < POOL_END, "the server runs as uid %d, not in the pool" % p["uid"])
            self.assertTrue((CG + p["cgroup"]).startswith(SERVICE_CG + "/") and "/sb-" in p["cgroup"],
                            "the server's cgroup %s is no sandbox cgroup of the service's" % p["cgroup"])
        # The session ends: so does the server, with its sandbox.
        self.finish(c)
        self.assertTrue(wait_for(lambda: not servers(), 30, 0.2), "the server outlived its session: %s" % servers())

    def test_13_reset_follows_the_zygote_setting(self):
        # zygote = true (suite 4): a reset forks the kernel from the sandbox's zygote, and the
        # sandbox's processes include it (S0 and the zygote under the sandbox's cgroup, as
        # pids.max counts them); false (the shipped default): a reset starts it the slow way.
        # standby = true (suite 5): a reset activates the standby prepared beside the kernel.
        want = "standby" if STANDBY else "zygote" if ZYGOTE_PIDS else "exec"
        c = self.client("alice")
        self.assertEqual(c.execute("x = 1; print(1 + 1)")[0], "2\n")
        d = self.sandbox_of(c)

        def pythons():
            return [p for p in pool_procs() if (CG + p["cgroup"] == d or (CG + p["cgroup"]).startswith(d + "/"))
                    and os.path.basename(p["cmd"].split(" ", 1)[0]).startswith("python3")]

        for _ in range(2):
            if STANDBY:
                # Made 300 ms after the kernel answered, then ~30 ms of CPU (far more under TCG).
                deadline = time.time() + 60
                while len(pythons()) < 3 and time.time() < deadline:
                    time.sleep(0.2)
                time.sleep(5)
            r = c.call("reset")
            self.assertFalse(r.get("isError"), text(r))
            kernel = r["_meta"]["ipybox/kernel"]
            print("reset: %s" % kernel)
            self.assertEqual(kernel["start"], want, text(r))
            self.assertEqual(c.execute("print(1 + 1, 'x' in globals())")[0], "2 False\n")
        if STANDBY:
            deadline = time.time() + 60
            while len(pythons()) < 3 and time.time() < deadline:
                time.sleep(0.2)
        found = pythons()
        print("pythons in %s: %d" % (d, len(found)))
        self.assertEqual(len(found), 3 if STANDBY else 2 if ZYGOTE_PIDS else 1, found)

if __name__ == "__main__":
    unittest.main()
