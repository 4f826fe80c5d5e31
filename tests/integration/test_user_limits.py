"""Limits in user mode (issue 17, item 6): --memory, --max-processes and --cpu-weight for
`ipybox mcp` and `ipyboxd --user`, with no system service. A fork bomb and a memory hog are
bounded and reported in the cell's result (text and _meta), the session recovers (a fresh
kernel after an out-of-memory kill), nothing is left behind, and whatever this host cannot
enforce is said in one line on stderr at start.

Which mechanism applies depends on the host and the user (supervisor/ulimits.h): a transient
scope of the user's systemd manager (cgroup v2), per-sandbox cgroups in a v1 subtree the user
may write, else rlimits (RLIMIT_NPROC in the sandbox's user namespace, RLIMIT_AS per process);
root's sandboxes go through its private monitor (the system service's code). On this build
machine: DelegatedV1Limits (a plain user given a v1 memory and pids subtree), UnprivilegedUserLimits
(a plain user with rlimits only), UserModeLimits (the invoking user: root under make check).
Each test reads the notice and asserts what the host's mechanism promises; it skips, saying
why, only what the notice says cannot be enforced. The systemd + cgroup v2 path runs in the
Debian VM: tests/vm/limits_user.sh."""
import glob
import os
import pwd
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import McpClient, descendants, require_sandbox, wait_for  # noqa: E402
from daemon_fixture import Daemon  # noqa: E402

PROCS = 40
BOMB = ("import os, time\npids = []\ntry:\n    for i in range(300):\n        p = os.fork()\n"
        "        if p == 0:\n            time.sleep(5)\n            os._exit(0)\n        pids.append(p)\n"
        "finally:\n    print('forked', len(pids))\n    for p in pids:\n        os.waitpid(p, 0)\n")
HOG = "marker = 1\nx = bytearray(600 << 20)\nprint('allocated')"
USER = "ipbt-lim"


def early_stderr(c, timeout=5):
    """What ipybox mcp wrote to stderr by now (it says what it cannot enforce before it is ready)."""
    out = b""
    while True:
        r, _, _ = select.select([c.proc.stderr], [], [], timeout)
        if not r:
            return out.decode(errors="replace")
        chunk = os.read(c.proc.stderr.fileno(), 65536)
        if not chunk:
            return out.decode(errors="replace")
        out += chunk
        timeout = 0.2


def notice_for(stderr, option):
    lines = [l for l in stderr.splitlines() if l.startswith("ipybox: ") and "cannot be enforced" in l]
    assert len(lines) <= 1, "more than one notice line: %s" % lines
    parts = lines[0][len("ipybox: "):].split("; --") if lines else []
    for p in parts:
        if p.lstrip("-").startswith(option.lstrip("-") + " "):
            return p
    return None


def forked(text):
    n = [int(w.split()[1]) for w in text.splitlines() if w.startswith("forked ")]
    return n[0] if n else None


def execution(r):
    return r.get("_meta", {}).get("ipybox/execution", {})


class LimitsCase(unittest.TestCase):
    wrap = None
    env = None

    def setUp(self):
        require_sandbox(self)
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()

    def client(self, *options):
        c = McpClient("--embedded", *options, wrap=self.wrap, env=self.env)
        self.clients.append(c)
        return c, early_stderr(c)

    def check_fork_bomb(self):
        c, err = self.client("--max-processes", str(PROCS))
        text, r = c.execute(BOMB, timeout=120)
        n = forked(text)
        why = notice_for(err, "--max-processes")
        if why:
            self.assertGreater(n, PROCS, "not enforced, as the notice says")
            self.skipTest("this host: " + why)
        self.assertIsNotNone(n, text)
        self.assertLess(n, PROCS, "the fork bomb made %s processes: %s" % (n, text[-500:]))
        self.assertIn("limit of %d processes" % PROCS, text)
        meta = execution(r)
        self.assertEqual(meta.get("status"), "error", meta)
        self.assertIn("limit of %d processes" % PROCS, meta.get("note", ""))
        text, r = c.execute("print(6 * 7)")
        self.assertIn("42", text, "the session did not recover")
        return c

    def check_memory_hog(self):
        c, err = self.client("--memory", "256M")
        text, r = c.execute(HOG, timeout=120)
        meta = execution(r)
        why = notice_for(err, "--memory")
        after, _ = c.execute("print('marker' in globals(), 2 + 2)")
        if why:
            # No cgroup here: RLIMIT_AS bounds each process; the hog gets MemoryError and the
            # kernel, its state kept, goes on.
            self.assertIn("RLIMIT_AS", why)
            self.assertEqual(meta.get("ename"), "MemoryError", meta)
            self.assertIn("at most 256 MiB of address space", text)
            self.assertIn("True 4", after)
            self.skipTest("no bound on the sandbox's sum on this host (asserted the per-process one): " + why)
        self.assertNotIn("allocated", text)
        self.assertIn("ran out of memory (its limit is 256 MiB", text)
        self.assertEqual(meta.get("status"), "kernel_died", meta)
        self.assertIn("ran out of memory", meta.get("note", ""))
        self.assertIn("False 4", after, "the next call should run in a fresh kernel")


@unittest.skipUnless(os.path.exists("/proc/self/ns/user"), "needs user namespaces")
class UserModeLimits(LimitsCase):
    """As the user running the tests (root under make check here: its private monitor)."""

    def test_fork_bomb_bounded_and_reported(self):
        self.check_fork_bomb()

    def test_memory_hog_bounded_and_reported(self):
        self.check_memory_hog()

    def test_notice_is_one_line_naming_the_option(self):
        c, err = self.client("--memory", "256M", "--max-processes", str(PROCS), "--cpu-weight", "50")
        lines = [l for l in err.splitlines() if "cannot be enforced" in l]
        self.assertLessEqual(len(lines), 1, err)
        for l in lines:
            self.assertTrue(l.startswith("ipybox: --"), l)
        # Whatever the host, the session works with all three asked for, and the process limit
        # is either in place (RLIMIT_NPROC inside is the limit, or a backstop 16 above a
        # cgroup's; both 2 above what was asked, for S0 and the zygote: architecture.md, "Zygote
        # kernels") or named in the notice.
        text, _ = c.execute("import resource\nprint('nproc', resource.getrlimit(resource.RLIMIT_NPROC)[0])")
        nproc = int(text.split("nproc ")[1].split()[0])
        if not notice_for(err, "--max-processes"):
            self.assertIn(nproc, (PROCS + 2, PROCS + 18), "RLIMIT_NPROC in the kernel is %d" % nproc)

    def test_daemon_user_mode_enforces_session_limits(self):
        d = Daemon("--max-processes", str(PROCS))
        try:
            c = d.client()
            c.request("ipybox/createSession", {"name": "lim"})
            text, r = c.execute(BOMB, timeout=120)
            n = forked(text)
            why = notice_for(d.log_text(), "--max-processes")
            if why:
                self.skipTest("this host: " + why)
            self.assertLess(n, PROCS, text[-500:])
            self.assertIn("limit of %d processes" % PROCS, text)
            text, _ = c.execute("print(6 * 7)")
            self.assertIn("42", text)
            c.close()
        finally:
            d.close()


def own_v1_dir(ctrl):
    """This process's cgroup in the v1 hierarchy of ctrl, or None."""
    mnt = "/sys/fs/cgroup/" + ctrl
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                if ctrl in ctrls.split(","):
                    return mnt + (path if path != "/" else "")
    except OSError:
        pass
    return None


class PlainUserCase(LimitsCase):
    """Runs ipybox mcp as a plain user made here (USER), with its own home."""
    USER = USER

    @classmethod
    def setUpClass(cls):
        try:
            pwd.getpwnam(cls.USER)
        except KeyError:
            subprocess.run(["useradd", "-m", "-s", "/bin/sh", cls.USER], check=True)
        pw = pwd.getpwnam(cls.USER)
        cls.pw = pw
        cls.home = tempfile.mkdtemp(prefix="ipybox-lim-")
        os.chown(cls.home, pw.pw_uid, pw.pw_gid)
        os.chmod(cls.home, 0o700)
        cls.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": cls.home,
                   "XDG_STATE_HOME": os.path.join(cls.home, "state")}
        runuser = shutil.which("runuser")
        user = cls.USER
        cls.wrap = staticmethod(lambda cmd: [runuser, "-u", user, "--", "env", "-C", "/tmp", *cmd])

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["pkill", "-KILL", "-u", cls.USER])
        shutil.rmtree(cls.home, ignore_errors=True)
        subprocess.run(["userdel", "-r", cls.USER], capture_output=True)


ROOT_USERS = os.geteuid() == 0 and shutil.which("useradd") and shutil.which("runuser")


@unittest.skipUnless(ROOT_USERS and own_v1_dir("memory") and own_v1_dir("pids"),
                     "needs root, useradd, runuser and cgroup v1 memory and pids hierarchies")
class DelegatedV1Limits(PlainUserCase):
    """A plain user to whom root gave a v1 memory and pids subtree (the old way of delegating):
    per-sandbox cgroups u<pid>-<n> there, limits reported, nothing left after close or SIGKILL."""
    USER = USER + "1"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # The user's processes run in the test's own v1 cgroups (runuser moves nothing), so
        # their base is <own>/ipybox in each hierarchy: root makes it the user's.
        cls.bases = []
        for ctrl in ("memory", "pids"):
            base = os.path.join(own_v1_dir(ctrl), "ipybox")
            os.makedirs(base, exist_ok=True)
            os.chown(base, cls.pw.pw_uid, cls.pw.pw_gid)
            for f in ("cgroup.procs", "tasks"):
                os.chown(os.path.join(base, f), cls.pw.pw_uid, cls.pw.pw_gid)
            cls.bases.append(base)

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        for base in cls.bases:
            for d in glob.glob(os.path.join(base, "u*-*")):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
            try:
                os.rmdir(base)
            except OSError:
                pass

    def made(self, pid):
        return [d for b in self.bases for d in glob.glob(os.path.join(b, "u%d-*" % pid))]

    def supervisor(self, c):
        """The ipybox process under runuser (which stays as its parent)."""
        for p in [c.proc.pid] + descendants(c.proc.pid):
            try:
                with open("/proc/%d/comm" % p) as f:
                    if f.read().strip() == "ipybox":
                        return p
            except OSError:
                pass
        self.fail("no ipybox process under %d" % c.proc.pid)

    def test_fork_bomb_bounded_and_reported(self):
        self.check_fork_bomb()

    def test_memory_hog_bounded_and_reported(self):
        self.check_memory_hog()

    def test_nothing_left_after_close_or_sigkill(self):
        c, err = self.client("--max-processes", str(PROCS), "--memory", "256M")
        self.assertNotIn("cannot be enforced", err)
        c.execute("print(1)")
        pid = self.supervisor(c)
        self.assertTrue(self.made(pid), "no cgroup for the sandbox under %s" % self.bases)
        with open(os.path.join(self.made(pid)[0], "cgroup.procs")) as f:
            self.assertTrue(f.read().split(), "the sandbox's processes are not in its cgroup")
        c.close()
        self.clients.remove(c)
        self.assertTrue(wait_for(lambda: not self.made(pid), 20), self.made(pid))
        # SIGKILL: the sandbox dies with its supervisor (parent-death signals); the cgroups it
        # leaves the next start removes.
        c, _ = self.client("--max-processes", str(PROCS))
        c.execute("print(1)")
        pid = self.supervisor(c)
        self.assertTrue(self.made(pid))
        os.kill(pid, signal.SIGKILL)
        c.proc.wait()
        try:
            c.proc.stdin.close()
        except OSError:
            pass
        self.assertTrue(self.made(pid), "expected the killed supervisor's cgroups to stay until the next start")
        nxt, _ = self.client("--max-processes", str(PROCS))
        nxt.execute("print(1)")
        self.assertTrue(wait_for(lambda: not self.made(pid), 20), self.made(pid))


@unittest.skipUnless(ROOT_USERS, "needs root, useradd and runuser")
class UnprivilegedUserLimits(PlainUserCase):
    """As a plain user without any cgroup of their own (on this build machine: rlimits, the user
    may not write the v1 hierarchies and has no systemd manager)."""

    def test_fork_bomb_bounded_and_reported(self):
        self.check_fork_bomb()

    def test_memory_hog_bounded_and_reported(self):
        self.check_memory_hog()


if __name__ == "__main__":
    unittest.main()
