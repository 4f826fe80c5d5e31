"""ipyboxd as root: the system service with two real users created here. Per-user sockets,
sessions and files kept apart, sandboxes in pool uids with idmapped workspaces, limits
(memory, processes, CPU, /tmp) contained and reported while another user's session stays
responsive, many concurrent sessions, and SIGTERM / SIGKILL of the service leaving nothing
behind."""
import glob
import os
import ctypes
import fcntl
import pwd
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX, McpClient, McpError, alive, require_sandbox, wait_for  # noqa: E402
import stallfs  # noqa: E402
from test_mcp_sandboxed import PROBE_SERVER, probe_params  # noqa: E402

IPYBOXD = os.path.join(os.path.dirname(IPYBOX), "ipyboxd")
GROUP = "ipyboxtest"
USERS = ("ipbt-a", "ipbt-b")
POOL_START = 0x70000000
POOL_END = POOL_START + 256 * 65536


def proc_uids():
    """(pid, real uid) of every process that has not exited (zombies are left to their reaper)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/status" % d) as f:
                    st = dict(line.split(":", 1) for line in f if ":" in line)
            except OSError:
                continue
            if not st.get("State", "").strip().startswith(("Z", "X")):
                out.append((int(d), int(st["Uid"].split()[0])))
    return out


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def ppid_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def probe_servers():
    """(pid, uid) of the processes running test_mcp_sandboxed's probe server itself."""
    return [(p, u) for p, u in proc_uids() if cmdline(p)[:3] == ["/usr/bin/python3", "-c", PROBE_SERVER]]


def run_procs(uid):
    """(pid, uid) of uid's `ipybox run` processes that start the probe server."""
    return [(p, u) for p, u in proc_uids() if u == uid and "run" in cmdline(p)[1:2] and PROBE_SERVER in cmdline(p)]


def read(path):
    with open(path) as f:
        return f.read().strip()


def pool_pids():
    return [p for p, u in proc_uids() if POOL_START <= u < POOL_END]


# struct ipbm_msg (monitor/mon_proto.h): magic, type, id, err, status, nbinds, ro_binds,
# pids_max, cpu_weight, limits, memory_max, uid_base, reserved, text[256].
IPBM = struct.Struct("<IIIiiIIIIIQII256s")
IPBM_MAGIC, IPBM_ADOPT, IPBM_SPAWN, IPBM_KILL = 0x69706d31, 1, 2, 3
IPBM_ERROR, IPBM_ADOPTED = 101, 103


def ipbm(kind, **fields):
    v = dict(id=0, err=0, status=0, nbinds=0, ro_binds=0, pids_max=0, cpu_weight=0, limits=0, memory_max=0)
    v.update(fields)
    return IPBM.pack(IPBM_MAGIC, kind, v["id"], v["err"], v["status"], v["nbinds"], v["ro_binds"],
                     v["pids_max"], v["cpu_weight"], v["limits"], v["memory_max"], 0, 0, b"")


def adopt(chan):
    """Asks the monitor for a worker channel on a frontend channel: our end of the new one."""
    chan.send(ipbm(IPBM_ADOPT, id=4242))
    chan.settimeout(10)
    msg, fds, _, _ = socket.recv_fds(chan, IPBM.size, 1)
    reply = IPBM.unpack(msg)
    if reply[1] != IPBM_ADOPTED or reply[2] != 4242 or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise AssertionError("ADOPT refused: %r" % (reply,))
    return socket.socket(fileno=fds[0])


def steal_fd(pid, fd):
    """A copy of another process's descriptor (pidfd_getfd, as root)."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        got = libc.syscall(438, pidfd, fd, 0)  # SYS_pidfd_getfd
        if got < 0:
            raise OSError(ctypes.get_errno(), "pidfd_getfd")
        return got
    finally:
        os.close(pidfd)


def sandbox_cgroups():
    return glob.glob("/sys/fs/cgroup/*/ipyboxd/sb-*") + glob.glob("/sys/fs/cgroup/*/*/ipyboxd/sb-*") + \
        glob.glob("/sys/fs/cgroup/**/sb-[0-9]*", recursive=True)


class Service:
    def __init__(self, conf):
        self.tmp = tempfile.TemporaryDirectory(prefix="ipybox-system-")
        self.conf = os.path.join(self.tmp.name, "ipyboxd.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.log = open(os.path.join(self.tmp.name, "service.log"), "w+")
        self.log_from = 0
        self.start()

    def start(self):
        self.log_from = len(self.log_text())
        # UMask=0077 as in the shipped unit: every mode the service gives must be its own.
        self.proc = subprocess.Popen([IPYBOXD, "--config", self.conf], stdout=self.log, stderr=self.log,
                                     preexec_fn=lambda: os.umask(0o077))
        ok = wait_for(lambda: all(os.path.exists(self.sock(u)) for u in USERS) and
                      self.frontends() >= len(USERS) or self.proc.poll() is not None)
        if not ok or self.proc.poll() is not None:
            raise AssertionError("the service did not start: " + self.log_text())

    def frontends(self):
        return self.log_text()[self.log_from:].count("ipyboxd-frontend: serving uid")

    @staticmethod
    def sock(user):
        return "/run/ipybox/%s/ipybox.sock" % user

    def log_text(self):
        if not hasattr(self, "log"):
            return ""
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def client(self, user, *options):
        sock = self.sock(user)
        return McpClient("--connect", sock, *options,
                         wrap=lambda cmd: ["runuser", "-u", user, "--", "env", "-C", "/tmp", *cmd])

    def stop(self, sig=signal.SIGTERM, timeout=40):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def text(result):
    return "".join(c.get("text", "") for c in result["content"] if c["type"] == "text")


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("useradd") and shutil.which("runuser"),
                     "needs root, useradd and runuser")
class SystemService(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        subprocess.run(["groupadd", "-f", GROUP], check=True)
        for u in USERS:
            try:
                pwd.getpwnam(u)
            except KeyError:
                subprocess.run(["useradd", "-m", "-G", GROUP, "-s", "/bin/sh", u], check=True)
        cls.svc = Service("users = group %s\nmemory_max = 256M\nmemory_max_bound = 512M\npids_max = 64\n"
                          "tmp_size = 32M\nidle_timeout = 600\nwarm_sessions = 1\nuser_memory_max = 700M\n"
                          "user_pids_max = 300\n" % GROUP)

    @classmethod
    def tearDownClass(cls):
        rc = cls.svc.stop()
        log = cls.svc.log_text()
        cls.svc.log.close()
        cls.svc.tmp.cleanup()
        left = pool_pids()
        for u in USERS:
            subprocess.run(["pkill", "-KILL", "-u", u])
            subprocess.run(["userdel", "-r", u], capture_output=True)
        subprocess.run(["groupdel", GROUP], capture_output=True)
        assert rc == 0, "the service exited %s: %s" % (rc, log)
        assert not left, "sandbox processes left after SIGTERM: %s" % left
        assert not os.path.exists("/run/ipybox"), "/run/ipybox left behind"

    def setUp(self):
        require_sandbox(self)
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()

    def client(self, user, *options):
        c = self.svc.client(user, *options)
        self.clients.append(c)
        return c

    def as_user(self, user, code):
        return subprocess.run(["runuser", "-u", user, "--", "/usr/bin/python3", "-c", code], capture_output=True,
                              text=True, timeout=60, cwd="/tmp")

    def test_each_user_has_a_socket_only_they_can_use(self):
        a, b = (pwd.getpwnam(u) for u in USERS)
        for u, pw in ((USERS[0], a), (USERS[1], b)):
            st = os.stat(self.svc.sock(u))
            self.assertEqual((st.st_uid, st.st_mode & 0o777), (pw.pw_uid, 0o600))
        r = self.as_user(USERS[0], "import socket; s = socket.socket(socket.AF_UNIX); "
                         "s.connect(%r); print('connected')" % self.svc.sock(USERS[1]))
        self.assertIn("PermissionError", r.stderr)
        self.assertNotIn("connected", r.stdout)

    def test_users_see_only_their_own_sessions_and_files(self):
        a = self.client(USERS[0])
        b = self.client(USERS[1])
        a.request("ipybox/createSession", {"name": "work-a"})
        out, res = a.execute("import os\nopen('/app/made-by-a.txt', 'w').write('a')\n"
                             "open('/tmp/scratch', 'w').write('x')\nprint(os.getuid(), os.getpid())")
        self.assertFalse(res["isError"], out)
        self.assertEqual(out.split()[0], "1000")
        self.assertNotIn("work-a", [s["name"] for s in b.request("ipybox/listSessions")["sessions"]])
        for method in ("ipybox/attachSession", "ipybox/closeSession"):
            with self.assertRaises(McpError) as e:
                b.request(method, {"name": "work-a"})
            self.assertIn("work-a", str(e.exception))
        self.assertIn("work-a", [s["name"] for s in a.request("ipybox/listSessions")["sessions"]])
        # The kernel runs in a pool uid: neither root nor a real user; so are its files.
        kernel_uids = {u for _, u in proc_uids() if POOL_START <= u < POOL_END}
        self.assertTrue(kernel_uids)
        real = {p.pw_uid for p in pwd.getpwall()}
        self.assertFalse(kernel_uids & real)
        self.assertNotIn(0, kernel_uids)
        scratch = [p for p, u in proc_uids() if POOL_START <= u < POOL_END and
                   os.path.exists("/proc/%d/root/tmp/scratch" % p)]
        self.assertTrue(scratch)
        owner = os.stat("/proc/%d/root/tmp/scratch" % scratch[0]).st_uid
        self.assertTrue(POOL_START <= owner < POOL_END and owner not in real, owner)
        # Each sandbox's outermost user namespace belongs to root, not to its pool base uid:
        # no host process with a pool uid has rights over a sandbox.
        shims = [p for p, u in proc_uids() if POOL_START <= u < POOL_END and (u - POOL_START) % 65536 == 0]
        self.assertTrue(shims)
        for p in shims:
            fd = os.open("/proc/%d/ns/user" % p, os.O_RDONLY)
            try:
                owner = struct.unpack("I", fcntl.ioctl(fd, 0xb704, b"\0" * 4))[0]  # NS_GET_OWNER_UID
            finally:
                os.close(fd)
            self.assertEqual(owner, 0, "pid %d" % p)
        # The workspace is the user's own on disk (idmapped): usable by its owner, not by B.
        ua = pwd.getpwnam(USERS[0])
        made = glob.glob(os.path.join(ua.pw_dir, ".local/state/ipybox/workspaces/*/made-by-a.txt"))
        self.assertEqual(len(made), 1)
        self.assertEqual(os.stat(made[0]).st_uid, ua.pw_uid)
        # B cannot name A's files, even with A's home among B's allowed directories: file
        # operations run with B's own credentials.
        secret = os.path.join(ua.pw_dir, "secret.txt")
        with open(secret, "w") as f:
            f.write("a's secret")
        os.chown(secret, ua.pw_uid, ua.pw_gid)
        os.chmod(secret, 0o600)
        os.chmod(ua.pw_dir, 0o700)
        res = b.call("upload_file", {"relpath": "stolen.txt", "local_path": secret})
        self.assertTrue(res["isError"])
        self.assertRegex(text(res), "allowed|Permission denied")
        b2 = self.client(USERS[1], "--allowed-dir", ua.pw_dir)
        res = b2.call("upload_file", {"relpath": "stolen.txt", "local_path": secret})
        self.assertTrue(res["isError"], text(res))
        self.assertIn("ermission denied", text(res))
        b2.execute("open('/app/planted.txt', 'w').write('b')")
        res = b2.call("download_file", {"relpath": "planted.txt",
                                           "local_path": os.path.join(ua.pw_dir, "planted.txt")})
        self.assertTrue(res["isError"], text(res))
        self.assertFalse(os.path.exists(os.path.join(ua.pw_dir, "planted.txt")))
        a.request("ipybox/closeSession", {"name": "work-a"})

    def test_limits_are_contained_and_reported(self):
        a = self.client(USERS[0])
        b = self.client(USERS[1])
        self.assertEqual(b.execute("print('b is here')")[0], "b is here\n")
        # Memory: 256M with no swap; the kernel is killed, reported, and a fresh one started.
        out, res = a.execute("x = b'x' * (600 << 20)\nprint('survived')")
        self.assertTrue(res["isError"])
        self.assertNotIn("survived", out)
        self.assertIn("ran out of memory (its limit is 256 MiB", text(res))
        self.assertIn("A fresh kernel was started", text(res))
        self.assertEqual(a.execute("print(1 + 1)")[0], "2\n")
        self.assertEqual(b.execute("print('b still here')")[0], "b still here\n")
        # Processes: 64; forks fail, the cell says why, the service and B are unaffected.
        out, res = a.execute(
            "import os, time\nn = 0\nfor i in range(500):\n    try:\n        pid = os.fork()\n"
            "    except OSError as e:\n        print('fork failed', e.errno)\n        break\n"
            "    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n    n += 1\nprint('forked', n)")
        self.assertIn("fork failed 11", out)
        self.assertIn("reached its limit of 64 processes", text(res))
        self.assertEqual(b.execute("print('b again')")[0], "b again\n")
        a.call("reset")
        self.assertEqual(a.execute("print('after reset')")[0], "after reset\n")
        # A full /tmp (32M): ENOSPC inside the sandbox only.
        out, res = a.execute("try:\n    with open('/tmp/fill', 'wb') as f:\n"
                             "        for i in range(100):\n            f.write(b'0' * (1 << 20))\n"
                             "except OSError as e:\n    print('full', e.errno)")
        self.assertIn("full 28", out)
        # CPU: a spinning cell is interrupted at its timeout while B keeps working.
        done = {}
        t = threading.Thread(target=lambda: done.setdefault("r", a.execute("while True: pass", timeout=6)))
        t.start()
        time.sleep(1)
        start = time.time()
        self.assertEqual(b.execute("print(sum(range(1000)))")[0], "499500\n")
        self.assertLess(time.time() - start, 5)
        t.join(60)
        self.assertIn("timed out", text(done["r"][1]))

    def test_a_warm_sandbox_serves_the_next_session(self):
        # warm_sessions = 1: once a user has connected, their frontend keeps one session
        # started ahead, in the pool (none is started for users who do not come).
        a = self.client(USERS[0])
        self.assertEqual(a.execute("import os; print(os.getuid(), 'x' in dir())")[0], "1000 False\n")
        log = self.svc.log_text
        self.assertTrue(wait_for(lambda: "): ready in" in log(), 30), log())
        taken = log().count("started (warm worker")
        b = self.client(USERS[0])
        self.assertEqual(b.execute("print('next')")[0], "next\n")
        self.assertEqual(log().count("started (warm worker"), taken + 1)
        self.assertRegex(log(), r"session #\d+: started \(warm worker \d+, ready\)")

    def test_ipybox_mcp_finds_the_service_by_itself(self):
        c = McpClient(wrap=lambda cmd: ["runuser", "-u", USERS[0], "--", "env", "-C", "/tmp", *cmd])
        self.clients.append(c)
        self.assertEqual(c.execute("import os; print(os.getuid())")[0], "1000\n")
        c.proc.stdin.close()
        c.proc.wait(30)
        self.assertIn("using ipyboxd at /run/ipybox/%s/ipybox.sock" % USERS[0], c.proc.stderr.read().decode())

    def test_a_system_socket_that_cannot_be_used_is_never_silently_replaced(self):
        # The user's directory closed to them (as UMask=0077 once made it): ipybox mcp says so
        # and stops; the embedded supervisor (without the administrator's limits) runs only
        # when the user's configuration asks for it.
        d = os.path.dirname(self.svc.sock(USERS[0]))
        os.chmod(d, 0o700)
        try:
            def mcp(*env):
                return subprocess.run(["runuser", "-u", USERS[0], "--", "env", "-u", "XDG_RUNTIME_DIR", "-C", "/tmp",
                                       *env, IPYBOX, "mcp"], input=b"", capture_output=True, timeout=60)
            r = mcp()
            err = r.stderr.decode()
            self.assertEqual(r.returncode, 1, err)
            self.assertIn("the system service's socket %s is there but cannot be used (Permission denied)"
                          % self.svc.sock(USERS[0]), err)
            self.assertIn("Not running the embedded supervisor", err)
            self.assertNotIn("; running the embedded supervisor", err)
            r = mcp("IPYBOX_FALLBACK=embedded", "XDG_STATE_HOME=/tmp/ipbt-fallback-state")
            self.assertIn("running the embedded supervisor", r.stderr.decode())
        finally:
            os.chmod(d, 0o755)
            shutil.rmtree("/tmp/ipbt-fallback-state", ignore_errors=True)

    def test_a_user_whose_home_cannot_be_used_is_told_why(self):
        ub = pwd.getpwnam(USERS[1])
        mode = os.stat(ub.pw_dir).st_mode & 0o7777
        os.chmod(ub.pw_dir, 0)
        try:
            # With an option of its own: a warm session (started ahead, before the home was
            # closed) serves only sessions made with the service's options alone.
            r = subprocess.run(["runuser", "-u", USERS[1], "--", "env", "-u", "XDG_RUNTIME_DIR", "-C", "/tmp",
                                IPYBOX, "mcp", "--tmp-size", "16M"], input=b"", capture_output=True, timeout=60)
            err = r.stderr.decode()
            self.assertEqual(r.returncode, 1, err)
            self.assertIn(ub.pw_dir, err)
            self.assertIn("Permission denied", err)
        finally:
            os.chmod(ub.pw_dir, mode)

    def test_modes_are_the_services_own_not_the_umask(self):
        # The service runs with umask 077 here (as under the shipped unit).
        self.assertEqual(os.stat("/run/ipybox").st_mode & 0o7777, 0o755)
        for u in USERS:
            self.assertEqual(os.stat(os.path.dirname(self.svc.sock(u))).st_mode & 0o7777, 0o755)
        a = self.client(USERS[0])
        out, res = a.execute("import os\nopen('/app/m.txt', 'w').close()\n"
                             "print(oct(os.stat('/home').st_mode & 0o777), oct(os.stat('/app/m.txt').st_mode & 0o777))")
        self.assertFalse(res["isError"], out)
        self.assertEqual(out, "0o755 0o644\n")

    def test_the_users_processes_run_in_their_own_bounded_cgroup(self):
        # Each user's frontend and workers: in u-<uid> (user_memory_max = 700M, user_pids_max
        # = 300), never in the monitor's own cgroup, and without a way out (root's cgroup).
        ua = pwd.getpwnam(USERS[0])
        a = self.client(USERS[0])
        self.assertEqual(a.execute("print('here')")[0], "here\n")
        def cmdline(pid):
            try:
                with open("/proc/%d/cmdline" % pid) as f:
                    return f.read().split("\0")
            except OSError:
                return []
        # The frontend (ipyboxd --frontend) and the session's worker (ipybox mcp --embedded);
        # not the client's own `ipybox mcp`, which runs where the test started it.
        mine = [p for p, u in proc_uids() if u == ua.pw_uid and {"--frontend", "--embedded"} & set(cmdline(p))]
        self.assertGreaterEqual(len(mine), 2, "no frontend and worker of %s found" % USERS[0])
        for pid in mine:
            try:
                with open("/proc/%d/cgroup" % pid) as f:
                    lines = f.read().splitlines()
            except FileNotFoundError:
                continue
            groups = {}
            for line in lines:
                _, ctrls, path = line.split(":", 2)
                groups[ctrls] = path
            mem = groups.get("memory") or groups.get("")
            pids = groups.get("pids") or groups.get("")
            for path in (mem, pids):
                self.assertTrue(path.endswith("/u-%d" % ua.pw_uid), "%d in %s" % (pid, groups))
            if "memory" in groups:
                base = "/sys/fs/cgroup/memory" + mem
                limit = read(base + "/memory.limit_in_bytes")
                npids = read("/sys/fs/cgroup/pids" + pids + "/pids.max")
            else:
                base = "/sys/fs/cgroup" + mem
                limit = read(base + "/memory.max")
                npids = read(base + "/pids.max")
            self.assertEqual((limit, npids), (str(700 << 20), "300"))
            self.assertEqual(os.stat(base).st_uid, 0)

    def test_limits_within_the_administrators_bounds(self):
        # The bridge's session cannot start: it says why and ends.
        with self.assertRaises(EOFError):
            self.client(USERS[0], "--memory", "2G")
        self.assertIn("--memory 2048 MiB is outside what the administrator allows (16 to 512 MiB)",
                      self.svc.log_text())
        c = self.client(USERS[0], "--memory", "400M", "--max-processes", "100")
        self.assertEqual(c.execute("print('ok')")[0], "ok\n")
        limits = [open(p).read().strip() for p in glob.glob("/sys/fs/cgroup/memory/**/ipyboxd/sb-*/"
                                                             "memory.limit_in_bytes", recursive=True)]
        limits += [open(p).read().strip() for p in glob.glob("/sys/fs/cgroup/**/sb-*/memory.max", recursive=True)]
        self.assertIn(str(400 << 20), limits)

    def test_many_concurrent_sessions(self):
        # 20 by default; the VM tier asks for fewer under software emulation (IPYBOX_TEST_CONCURRENT).
        n = int(os.environ.get("IPYBOX_TEST_CONCURRENT", "20"))
        results = {}

        def run(i):
            c = self.svc.client(USERS[i % 2])
            try:
                results[i] = c.execute("import time; time.sleep(0.5); print('session %d')" % i)[0]
            finally:
                c.close()
        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        self.assertEqual(results, {i: "session %d\n" % i for i in range(n)})

    def test_symlinks_in_a_workspace_lead_nowhere_on_the_host(self):
        # A's workspace holds a symlink to a host directory anyone may write to; a bind whose
        # destination passes through it is placed inside the sandbox, never on the host.
        ua = pwd.getpwnam(USERS[0])
        target = tempfile.mkdtemp(prefix="ipbt-target-")
        os.chmod(target, 0o1777)
        ws = os.path.join(ua.pw_dir, "ws-link")
        src = os.path.join(ua.pw_dir, "src-dir")
        for d in (ws, src):
            os.makedirs(d, exist_ok=True)
            os.chown(d, ua.pw_uid, ua.pw_gid)
        link = os.path.join(ws, "link")
        os.symlink(target, link)
        os.lchown(link, ua.pw_uid, ua.pw_gid)
        try:
            try:
                c = self.client(USERS[0], "--workspace", ws, "--container-bind", "%s:link/x" % src)
                c.execute("print(1)")
            except EOFError:
                pass  # refusing the session is as good
            self.assertEqual(os.listdir(target), [])
        finally:
            shutil.rmtree(target)
            shutil.rmtree(ws)
            shutil.rmtree(src)

    def test_a_bind_shows_what_is_mounted_below_it_not_what_that_covers(self):
        ua = pwd.getpwnam(USERS[0])
        parent = os.path.join(ua.pw_dir, "parent")
        cover = os.path.join(parent, "cover")
        os.makedirs(cover, exist_ok=True)
        with open(os.path.join(cover, "hidden.txt"), "w") as f:
            f.write("under the mount")
        for d in (parent, cover, os.path.join(cover, "hidden.txt")):
            os.chown(d, ua.pw_uid, ua.pw_gid)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "cover", cover], check=True)
        try:
            with open(os.path.join(cover, "on-top.txt"), "w") as f:
                f.write("on top")
            try:
                c = self.client(USERS[0], "--container-bind", "%s:p" % parent)
            except EOFError as e:
                # Kernels before 6.3 cannot idmap tmpfs (Debian 12's 6.1): the bind is refused
                # and says why; what the mount covers is never shown either way.
                self.assertIn("cannot make an idmapped mount of bind 1", str(e))
                self.assertIn("its filesystem may not support idmapped mounts", str(e))
                return
            out, res = c.execute("import os; print(sorted(os.listdir('/app/p/cover')))")
            self.assertFalse(res["isError"], out)
            self.assertEqual(out, "['on-top.txt']\n")
        finally:
            subprocess.run(["umount", cover])
            shutil.rmtree(parent)

    def test_a_venv_in_a_private_home_runs_the_kernel_in_a_pool_uid(self):
        """--python in a 0700 home: the worker opens the environment with the user's rights and
        the monitor idmaps it, so the pool uid runs it; nothing else of the home is shown."""
        ua = pwd.getpwnam(USERS[0])
        mode = os.stat(ua.pw_dir).st_mode & 0o7777
        os.chmod(ua.pw_dir, 0o700)
        venv = os.path.join(ua.pw_dir, "venv-pyenv")
        try:
            r = subprocess.run(["runuser", "-u", USERS[0], "--", "/usr/bin/python3", "-m", "venv",
                                "--system-site-packages", "--without-pip", venv], cwd="/tmp", capture_output=True,
                               text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            c = self.client(USERS[0], "--python", venv + "/bin/python")
            out, res = c.execute("import os, sys\nprint(sys.prefix, os.getuid())\nprint(sorted(os.listdir(%r)))\n"
                                 "print(os.access(sys.prefix, os.W_OK))" % ua.pw_dir)
            self.assertFalse(res["isError"], out)
            self.assertEqual(out.splitlines(), ["%s 1000" % venv, "['venv-pyenv']", "False"])
        finally:
            os.chmod(ua.pw_dir, mode)
            shutil.rmtree(venv, ignore_errors=True)

    def test_spawn_takes_only_the_descriptors_it_expects(self):
        chan = socket.socket(fileno=steal_fd(self.frontend_pid(USERS[0]), 4))
        theirs = adopt(chan)
        sync, sync_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        r, w = os.pipe()
        stream, _ = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with tempfile.TemporaryFile() as f:
            for fds, why in (([r, f.fileno(), w, sync.fileno()], "descriptor 1 is not a pipe"),
                             ([r, w, w, stream.fileno()], "sync descriptor is not a seqpacket")):
                socket.send_fds(theirs, [ipbm(IPBM_SPAWN)], fds)
                theirs.settimeout(10)
                reply = IPBM.unpack(theirs.recv(IPBM.size))
                self.assertEqual(reply[1], 101)  # IPBM_ERROR
                self.assertIn(why, reply[-1].split(b"\0")[0].decode())
        for x in (chan, theirs, sync, sync_peer, stream):
            x.close()
        os.close(r)
        os.close(w)

    def test_the_monitor_holds_each_user_to_a_quota(self):
        # The frontend is the user's: acting as it, A cannot take more than their share.
        chan = socket.socket(fileno=steal_fd(self.frontend_pid(USERS[0]), 4))
        theirs = adopt(chan)
        theirs.settimeout(20)
        r, w = os.pipe()
        keep = []
        replies = []
        for _ in range(40):  # max_sessions_per_user is 16: at most 32 sandboxes
            sync, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            keep += [sync, peer]
            socket.send_fds(theirs, [ipbm(IPBM_SPAWN)], [r, w, w, sync.fileno()])
            while True:
                msg, fds, _, _ = socket.recv_fds(theirs, IPBM.size, 4)
                for fd in fds:
                    os.close(fd)
                reply = IPBM.unpack(msg)
                if reply[1] != 102:  # not an EXITED
                    break
            replies.append(reply)
            if reply[1] == 101:
                break
        self.assertEqual(replies[-1][1], 101, "40 sandboxes for one user")
        self.assertIn(b"the most the service allows", replies[-1][-1])
        self.assertLessEqual(len(replies) - 1, 32)
        # B is not held back by A's quota; nor by A's channels, also limited (16 + 4).
        for _ in range(24):
            chan.send(ipbm(IPBM_ADOPT, id=7))
        b = self.client(USERS[1])
        self.assertEqual(b.execute("print('b fine')")[0], "b fine\n")
        extra, refused = [], 0
        chan.setblocking(False)
        for _ in range(24):  # answered at once, before B's session started
            msg, fds, _, _ = socket.recv_fds(chan, IPBM.size, 1)
            extra += [socket.socket(fileno=fd) for fd in fds]
            reply = IPBM.unpack(msg)
            refused += reply[1] == IPBM_ERROR and b"sessions open" in reply[-1]
        self.assertGreater(refused, 0)
        self.assertLessEqual(len(extra), 20)  # max_sessions_per_user + 4, one of them `theirs`
        # Closing A's channels frees all of it: the sandboxes are killed, and A starts again.
        shims = {int(x[4]) for x in replies if x[1] == 100}
        for x in extra + keep + [theirs, chan]:
            x.close()
        os.close(r)
        os.close(w)
        self.assertTrue(wait_for(lambda: not shims & set(pool_pids())))
        a = self.client(USERS[0])
        self.assertEqual(a.execute("print('a fine')")[0], "a fine\n")

    def test_a_worker_channel_adopts_sub_channels_that_die_with_it(self):
        # A worker asks for a sub-channel for each sandboxed MCP server it starts: it spawns
        # like the worker's own, adopts nothing, is bounded, and closes with its parent.
        chan = socket.socket(fileno=steal_fd(self.frontend_pid(USERS[0]), 4))
        worker = adopt(chan)
        sub = adopt(worker)
        sync, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        r, w = os.pipe()
        socket.send_fds(sub, [ipbm(IPBM_SPAWN)], [r, w, w, sync.fileno()])
        sub.settimeout(20)
        msg, fds, _, _ = socket.recv_fds(sub, IPBM.size, 4)
        for fd in fds:
            os.close(fd)
        reply = IPBM.unpack(msg)
        self.assertEqual(reply[1], 100, reply[-1].split(b"\0")[0])  # SPAWNED
        shim = reply[4]
        self.assertIn(shim, pool_pids())
        other = adopt(worker)
        other.send(ipbm(IPBM_ADOPT, id=5))
        other.settimeout(10)
        self.assertEqual(other.recv(IPBM.size), b"", "a sub-channel adopted")
        subs, refused = [], None
        worker.settimeout(10)
        for i in range(40):  # max_sessions_per_user is 16: at most 32 sub-channels
            worker.send(ipbm(IPBM_ADOPT, id=100 + i))
            msg, fds, _, _ = socket.recv_fds(worker, IPBM.size, 1)
            subs += [socket.socket(fileno=fd) for fd in fds]
            reply = IPBM.unpack(msg)
            if reply[1] == IPBM_ERROR:
                refused = reply[-1].split(b"\0")[0].decode()
                break
        self.assertIsNotNone(refused, "40 sub-channels for one user")
        self.assertIn("sandboxed MCP servers' channels open, the most the service allows", refused)
        self.assertLessEqual(len(subs) + 1, 32)
        for x in subs:
            x.close()
        # The worker's channel closes (its worker is gone): the sub-channel closes too, and the
        # sandbox it spawned is killed.
        worker.close()
        self.assertTrue(wait_for(lambda: shim not in pool_pids(), 30), "the sub-channel's sandbox survived")
        sub.settimeout(10)
        while True:
            msg, fds, _, _ = socket.recv_fds(sub, IPBM.size, 4)
            for fd in fds:
                os.close(fd)
            if not msg:
                break
            self.assertEqual(IPBM.unpack(msg)[1], 102)  # only an EXITED may come first
        for x in (chan, sub, other, sync, peer):
            x.close()
        os.close(r)
        os.close(w)

    def test_a_sandboxed_mcp_server_runs_in_a_sandbox_the_monitor_made(self):
        # The session's worker runs as the user; the server's `ipybox run` gets a sub-channel of
        # the worker's, so the server runs in a pool uid (not the user's, as unprivileged user
        # namespaces would have it), sees nothing of the user's home, and ends with the session.
        user = pwd.getpwnam(USERS[0])
        secret = os.path.join(user.pw_dir, "ipbt-mcp-secret")
        with open(secret, "w") as f:
            f.write("the user's secret")
        os.chown(secret, user.pw_uid, user.pw_gid)
        self.addCleanup(os.unlink, secret)
        c = self.client(USERS[0], "--approve-tools", "*")
        r = c.call("register_mcp_server", {"server_name": "boxed", "server_params": probe_params(sandbox={})})
        self.assertFalse(r.get("isError"), text(r))

        def probe(what, arg):
            out, res = c.execute("from mcptools.boxed import probe\nprint(repr(probe.run(what=%r, arg=%r)))"
                                 % (what, arg), timeout=120)
            self.assertFalse(res.get("isError"), out)
            return eval(out.strip().splitlines()[-1])

        self.assertTrue(probe("read", secret).startswith("ERR FileNotFoundError"))
        self.assertEqual(probe("env", "HOME"), "/home/appuser")
        servers = probe_servers()
        self.assertTrue(servers, "no process runs the probe server")
        self.assertEqual([p for p, u in servers if not POOL_START <= u < POOL_END], [],
                         "the server runs outside the service's uid pool")
        # The worker dies: its sub-channels close and the server's sandbox is killed with them.
        worker = {ppid_of(p) for p, u in run_procs(user.pw_uid)}
        self.assertEqual(len(worker), 1, worker)
        os.kill(worker.pop(), signal.SIGKILL)
        self.assertTrue(wait_for(lambda: not probe_servers(), 30), "the server outlived its worker")

    def test_a_sandboxed_mcp_server_the_monitor_cannot_make_is_refused_with_the_reason(self):
        # Acting as A's frontend, take what the monitor allows A: the server is refused, never
        # started another way, and the registration says why.
        c = self.client(USERS[0], "--approve-tools", "*")
        self.assertEqual(c.execute("print(1)")[0], "1\n")
        chan = socket.socket(fileno=steal_fd(self.frontend_pid(USERS[0]), 4))
        worker = adopt(chan)
        worker.settimeout(20)
        boxed = {"server_name": "boxed", "server_params": probe_params(sandbox={})}
        subs = []
        for i in range(40):  # every sub-channel A may hold
            worker.send(ipbm(IPBM_ADOPT, id=200 + i))
            msg, fds, _, _ = socket.recv_fds(worker, IPBM.size, 1)
            subs += [socket.socket(fileno=fd) for fd in fds]
            if IPBM.unpack(msg)[1] == IPBM_ERROR:
                break
        r = c.call("register_mcp_server", boxed)
        self.assertTrue(r.get("isError"), text(r))
        print("refused: " + text(r))
        self.assertIn("sandboxed MCP servers' channels open, the most the service allows", text(r))
        for x in subs:
            x.close()
        rd, wr = os.pipe()
        keep, shims = [], set()
        for _ in range(40):  # every sandbox A may run
            sync, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            keep += [sync, peer]
            socket.send_fds(worker, [ipbm(IPBM_SPAWN)], [rd, wr, wr, sync.fileno()])
            while True:
                msg, fds, _, _ = socket.recv_fds(worker, IPBM.size, 4)
                for fd in fds:
                    os.close(fd)
                reply = IPBM.unpack(msg)
                if reply[1] != 102:  # not an EXITED
                    break
            if reply[1] != 100:
                break
            shims.add(reply[4])
        self.assertEqual(reply[1], IPBM_ERROR)
        r = c.call("register_mcp_server", boxed)
        self.assertTrue(r.get("isError"), text(r))
        print("refused: " + text(r))
        self.assertIn("its sandbox could not be made", text(r))
        self.assertIn("sandboxes running, the most the service allows", text(r))
        self.assertFalse(probe_servers(), "the server runs")
        # All of it given back: the same registration works.
        for x in keep + [worker, chan]:
            x.close()
        os.close(rd)
        os.close(wr)
        self.assertTrue(wait_for(lambda: not shims & set(pool_pids()), 30))
        r = c.call("register_mcp_server", boxed)
        self.assertFalse(r.get("isError"), text(r))

    def test_a_pool_that_meets_delegated_subordinate_ids_is_refused(self):
        lines = open("/etc/subuid").read().splitlines() if os.path.exists("/etc/subuid") else []
        mine = [(n + 1, ln) for n, ln in enumerate(lines) if ln.startswith(USERS[0] + ":")]
        if not mine:
            self.skipTest("useradd gave %s no /etc/subuid range" % USERS[0])
        line, text = mine[0]
        start = int(text.split(":")[1])
        with tempfile.NamedTemporaryFile("w", suffix=".conf") as conf:
            # A group that does not exist: nothing of the running service is touched either way.
            conf.write("users = group no-such-group-ipbt\nuid_pool_start = %d\nuid_pool_size = 1\n"
                       "uid_min = 1000\nuid_max = %d\n" % (start, min(start - 1, 59999)))
            conf.flush()
            r = subprocess.run([IPYBOXD, "--config", conf.name], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("meets the range on line %d of /etc/subuid" % line, r.stderr)

    def frontend_pid_or_none(self, user):
        uid = pwd.getpwnam(user).pw_uid
        for pid, u in proc_uids():
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if u == uid and b"--frontend" in argv:
                return pid
        return None

    def frontend_pid(self, user):
        pid = self.frontend_pid_or_none(user)
        if pid is None:
            self.fail("no frontend for %s" % user)
        return pid

    def test_a_hostile_frontend_channel_stops_nothing(self):
        # User A's frontend is theirs to control: act as it on its own monitor channel (fd 4).
        chan = socket.socket(fileno=steal_fd(self.frontend_pid(USERS[0]), 4))
        self.assertEqual(chan.type, socket.SOCK_SEQPACKET)
        theirs = adopt(chan)
        theirs.send(ipbm(IPBM_KILL, id=999))
        # A worker that asks and never reads the answers (limits out of bounds are refused
        # with an error record, and the channel stays open until it stops taking records).
        sent = 0
        try:
            while sent < 100000:
                theirs.send(ipbm(IPBM_SPAWN, memory_max=1), socket.MSG_DONTWAIT)
                sent += 1
        except (BlockingIOError, BrokenPipeError, ConnectionResetError):
            pass  # full, or already closed by the monitor (it could not send an answer): both fine
        self.assertGreater(sent, 0)
        # The monitor still serves everyone: new sessions for B and for A start and answer.
        b = self.client(USERS[1])
        self.assertEqual(b.execute("print('b fine')")[0], "b fine\n")
        a = self.client(USERS[0])
        self.assertEqual(a.execute("print('a fine')")[0], "a fine\n")
        # The channel that stopped reading was closed by the monitor (once it had an answer it
        # could not send): the other end hangs up.
        poller = select.poll()
        poller.register(theirs, select.POLLHUP)

        def hung_up():
            try:
                theirs.send(ipbm(IPBM_SPAWN, memory_max=1), socket.MSG_DONTWAIT)
            except OSError:
                pass
            return any(ev & select.POLLHUP for _, ev in poller.poll(0))
        self.assertTrue(wait_for(hung_up, 30), "the monitor kept a channel that does not read")
        chan.close()
        theirs.close()

    def closers(self):
        """The monitor's children that run its own program (closers: fds.h), and where each
        waits."""
        me = self.svc.proc.pid
        with open("/proc/%d/cmdline" % me, "rb") as f:
            argv = f.read()
        out = {}
        for pid, _ in proc_uids():
            try:
                with open("/proc/%d/stat" % pid) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    same = f.read() == argv
                with open("/proc/%d/wchan" % pid) as f:
                    wchan = f.read()
            except OSError:
                continue
            if ppid == me and same:
                out[pid] = wchan
        return out

    def monitor_fds_on(self, path):
        n = 0
        for fd in os.listdir("/proc/%d/fd" % self.svc.proc.pid):
            try:
                n += os.readlink("/proc/%d/fd/%s" % (self.svc.proc.pid, fd)).startswith(path + "/")
            except OSError:
                pass
        return n

    def test_descriptors_a_user_sends_never_stop_the_monitor(self):
        # A file on a FUSE filesystem whose server does not answer FLUSH: close() waits for it
        # (for ever with signals blocked, as the monitor has them). A user hands such files to
        # the monitor (their own FUSE mount would do; this one is root's, with allow_other, so
        # that the test can open it).
        try:
            fs = stallfs.StallFS()
        except OSError as e:
            self.skipTest("no FUSE here: %s" % e)
        with fs:
            chan = socket.socket(fileno=steal_fd(self.frontend_pid(USERS[0]), 4))
            t1, t2 = adopt(chan), adopt(chan)
            t1.settimeout(20)
            sync, sync_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            r, w = os.pipe()
            # While the test holds the file, it starts no process: a child would close it too.
            f = os.open(fs.file, os.O_RDONLY)
            socket.send_fds(t1, [ipbm(IPBM_SPAWN)], [r, f, w, sync.fileno()])
            self.assertEqual(IPBM.unpack(t1.recv(IPBM.size))[1], IPBM_ERROR)
            self.assertTrue(fs.wait_flushes(1), "the monitor never closed the file")
            # Hundreds more while that close waits: held; with 256 waiting, A is not read.
            for _ in range(2):
                socket.send_fds(t1, [ipbm(IPBM_SPAWN)], [f] * 150)
                self.assertEqual(IPBM.unpack(t1.recv(IPBM.size))[1], IPBM_ERROR)
            socket.send_fds(t1, [ipbm(IPBM_SPAWN)], [f] * 150)
            # Nor is a channel that hangs up with a record queued.
            socket.send_fds(t2, [ipbm(IPBM_SPAWN)], [f] * 150)
            t2.close()
            threading.Thread(target=os.close, args=(f,), daemon=True).start()
            self.assertTrue(fs.wait_flushes(2))
            # The close waits in one of the monitor's children, never in the monitor.
            self.assertTrue(wait_for(lambda: any("fuse" in x or "request_wait_answer" in x
                                                 for x in self.closers().values()), 10),
                            "no child waits on the close: %s" % self.closers())
            with open("/proc/%d/wchan" % self.svc.proc.pid) as st:
                wchan = st.read()
            self.assertFalse("fuse" in wchan or "request_wait_answer" in wchan, wchan)
            self.assertTrue(wait_for(lambda: "wait to be closed" in self.svc.log_text(), 10))
            time.sleep(1)
            self.assertEqual(self.monitor_fds_on(fs.dir), 300)
            b = self.client(USERS[1])
            self.assertEqual(b.execute("print('b fine')")[0], "b fine\n")
            t1.setblocking(False)
            self.assertRaises(BlockingIOError, t1.recv, IPBM.size)
            t1.settimeout(20)
            # Once the filesystem answers, everything held is closed and A is served again.
            fs.answer()
            self.assertEqual(IPBM.unpack(t1.recv(IPBM.size))[1], IPBM_ERROR)
            # (What the hung-up channel queued was never received: it is released with the
            # channel, with no FLUSH.)
            self.assertTrue(wait_for(lambda: fs.flushes >= 2 + 450, 20), "held descriptors not closed: %d" % fs.flushes)
            self.assertTrue(wait_for(lambda: not self.closers(), 10), self.closers())
            self.assertEqual(self.monitor_fds_on(fs.dir), 0)
            self.assertIn("serving the user again", self.svc.log_text())
            a = self.client(USERS[0])
            self.assertEqual(a.execute("print('a fine')")[0], "a fine\n")
            for x in (chan, t1, sync, sync_peer):
                x.close()
            for fd in (r, w):
                os.close(fd)

    def test_a_frontend_channel_takes_no_descriptor_it_did_not_ask_for(self):
        # ADOPT carries none (the monitor makes each channel itself): one that does closes the
        # frontend's channel, and the frontend is restarted.
        old = self.frontend_pid(USERS[0])
        chan = socket.socket(fileno=steal_fd(old, 4))
        mine, _peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        socket.send_fds(chan, [ipbm(IPBM_ADOPT)], [mine.fileno()])
        chan.settimeout(10)
        self.assertEqual(chan.recv(IPBM.size), b"")  # hung up
        self.assertTrue(wait_for(lambda: not alive(old), 10))
        self.assertTrue(wait_for(lambda: self.frontend_pid_or_none(USERS[0]) not in (None, old), 20))
        a = self.client(USERS[0])
        self.assertEqual(a.execute("print('a back')")[0], "a back\n")
        for x in (chan, mine, _peer):
            x.close()

    def test_zz_sigkill_leaves_no_sandbox_and_restart_cleans_up(self):
        a = self.client(USERS[0])
        a.execute("print(1)")
        self.assertTrue(pool_pids())
        self.svc.proc.kill()
        self.svc.proc.wait()
        self.assertTrue(wait_for(lambda: not pool_pids(), 20), "left: %s" % pool_pids())
        users = {pwd.getpwnam(u).pw_uid for u in USERS}
        self.assertTrue(wait_for(lambda: not [p for p, u in proc_uids() if u in users], 20))
        left = {d: os.stat(d).st_ino for d in sandbox_cgroups() if os.path.isdir(d)}
        self.assertTrue(left)
        self.svc.start()
        # Every cgroup the killed service left is gone (the new service's warm sandboxes may
        # have made cgroups of the same names since: new ones).
        again = [d for d, ino in left.items() if os.path.isdir(d) and os.stat(d).st_ino == ino]
        self.assertFalse(again)
        self.assertIn("removed sandbox cgroups an earlier run left", self.svc.log_text()[self.svc.log_from:])
        c = self.client(USERS[1])
        self.assertEqual(c.execute("print('back')")[0], "back\n")


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("unshare"), "needs root and unshare")
class ServiceStartChecks(unittest.TestCase):
    """What the service cannot work with is named at start, before any user is served."""

    def start(self, conf, prelude="", binary=IPYBOXD):
        with tempfile.TemporaryDirectory(prefix="ipybox-start-") as tmp:
            path = os.path.join(tmp, "ipyboxd.conf")
            with open(path, "w") as f:
                f.write(conf)
            # A private mount namespace: the service's /proc may be changed there only. Other
            # proc mounts (a chroot's) are taken away, so the service's own is the one judged.
            script = ("for m in $(awk '$9 == \"proc\" && $5 != \"/proc\" {print $5}' /proc/self/mountinfo); do "
                      "umount -l \"$m\"; done; %s exec \"$0\" --config \"$1\"" % prelude)
            # Its own process group: a service that did start (the check missed) is ended with
            # everything it started, not left serving.
            p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script, binary, path],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
            try:
                out, err = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                out, err = p.communicate()
                self.fail("the service started (it was stopped after 60 s): " + err)
            return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def test_a_proc_covered_in_part_is_named(self):
        # A file of /proc covered by a bind (as a unit's BindPaths= or InaccessiblePaths= there
        # would): sandboxes could not mount their own /proc; the service says so, not starting.
        r = self.start("users = group root\n", "mount --bind /dev/null /proc/kmsg;")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("cannot mount a /proc for a sandbox's pid namespace", r.stderr)
        self.assertIn("InaccessiblePaths=", r.stderr)

    def test_defaults_above_the_hosts_are_refused(self):
        with open("/proc/meminfo") as f:
            total = int(f.readline().split()[1]) << 10
        big = (total >> 20) + 1024
        r = self.start("memory_max = %dM\nmemory_max_bound = %dM\n" % (big, big))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("memory_max = %d MiB is more than this host's memory" % big, r.stderr)

    def test_a_build_users_cannot_reach_is_named(self):
        # Users' frontends run the service's own binary as them: from a checkout under a
        # directory closed to others (/root is 0700) none could start.
        with tempfile.TemporaryDirectory(prefix="ipybox-closed-") as tmp:
            # The program itself (IPYBOXD may be a wrapper), and its shim beside it.
            real = os.path.realpath(IPYBOX)
            bindir = os.path.join(tmp, "bin")
            os.mkdir(bindir)
            shutil.copy2(real, os.path.join(bindir, "ipyboxd"))
            shutil.copytree(os.path.join(os.path.dirname(os.path.dirname(real)), "libexec", "ipybox"),
                            os.path.join(tmp, "libexec", "ipybox"))
            os.chmod(tmp, 0o700)
            r = self.start("users = group root\n", binary=os.path.join(bindir, "ipyboxd"))
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("users cannot run %s/ipyboxd, which their frontends run as them: %s is mode 0700"
                          % (bindir, tmp), r.stderr)
