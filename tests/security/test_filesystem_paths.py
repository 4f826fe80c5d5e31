"""Attack catalog, family "Filesystem", the supervisor's side: a path, symlink or fifo that
kernel code leaves in a workspace or state directory must not steer what the supervisor, the
daemon or a later session does on the host (binds, cleanup, transfers, the state directory).
Each test plants the object for real (from a kernel, or racing as a plain user) and asserts an
unchanged host. The attacks from inside a sandbox are in test_filesystem.py."""
import os
import shutil
import subprocess
import sys
import textwrap
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import ipybox_test  # noqa: E402
from ipybox_test import IPYBOX  # noqa: E402


class PlantedSymlinks(unittest.TestCase):
    """A persistent workspace outlives its session: a symlink that kernel code leaves there must
    not steer where a later session's --container-bind lands, inside the sandbox or out."""

    def setUp(self):
        self.ws = ipybox_test.tempfile.mkdtemp(prefix="ipybox-sec-ws-")
        self.host = ipybox_test.tempfile.mkdtemp(prefix="ipybox-sec-bind-")
        with open(os.path.join(self.host, "marker"), "w") as f:
            f.write("bound")

    def tearDown(self):
        shutil.rmtree(self.ws, ignore_errors=True)
        shutil.rmtree(self.host, ignore_errors=True)

    def plant(self, code):
        c = ipybox_test.McpClient("--workspace", self.ws)
        try:
            out, res = c.execute(code)
            self.assertFalse(res["isError"], out)
        finally:
            c.close()

    def later_session(self, rel):
        """A session with a bind at rel: its first call's outcome, and the server's stderr."""
        c = None
        try:
            c = ipybox_test.McpClient("--workspace", self.ws, "--container-bind", "%s:%s" % (self.host, rel))
            out, _ = c.execute("import os\n"
                               "print([p for p in ('/usr/share/doc/marker', '/app/sub/marker', '/app/sub/x/marker')"
                               " if os.path.exists(p)])")
            return out, c.stderr_text()
        except EOFError as e:
            return None, str(e)
        finally:
            if c:
                c.close()

    def test_bind_through_a_planted_symlink_refused_with_its_name(self):
        self.plant("import os\nos.makedirs('/app/sub')\nos.symlink('../usr/share/doc', '/app/lnk')\n"
                   "os.symlink('sub', '/app/inner')\nos.symlink('/usr/share/doc', '/app/abs')")
        for rel in ("lnk", "inner", "inner/x", "abs", "lnk/sub"):
            with self.subTest(bind=rel):
                out, err = self.later_session(rel)
                self.assertNotIn("marker", out or "", "the bind at %s landed through the symlink: %s" % (rel, out))
                self.assertIsNone(out, "the session started with a bind through a symlink")
                self.assertIn("/app/%s" % rel.split("/")[0], err)
                self.assertIn("symlink", err)
        self.assertEqual(sorted(os.listdir(os.path.join(self.ws, "sub"))), [], "a mount point was made in sub/")

    def test_bind_at_a_real_directory_still_works(self):
        self.plant("import os\nos.makedirs('/app/sub')")
        out, err = self.later_session("sub")
        self.assertEqual(out, "['/app/sub/marker']\n", err)


# Run in the kernel: leaves in $HOME and in the run directory what a removal must not follow,
# wait on or give up on: symlinks (absolute and relative) to a host directory and file, FIFOs,
# a tree deeper than any fixed limit with the same at its bottom, a directory without write
# permission, and a process that keeps swapping a directory with a symlink to the host
# directory (RENAME_EXCHANGE) for as long as it lives.
PLANT_FOR_CLEANUP = r"""
import ctypes, os, subprocess, sys
HOST = %r
for top in (os.environ["HOME"], "/run/ipybox"):
    os.symlink(HOST, top + "/victim")
    os.symlink(HOST + "/keep.txt", top + "/victim-file")
    os.symlink("../" * 12 + HOST.lstrip("/"), top + "/victim-rel")
    os.mkfifo(top + "/fifo")
    fd = os.open(top, os.O_RDONLY)
    for i in range(%d):
        os.mkdir("d", dir_fd=fd)
        n = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = n
    os.symlink(HOST, "host", dir_fd=fd)
    os.mkfifo("fifo", dir_fd=fd)
    os.close(fd)
    os.makedirs(top + "/a/b/c")
    os.chmod(top + "/a/b", 0o500)
racer = ("import ctypes\nlibc = ctypes.CDLL(None)\nh = %%r\n"
         "while True:\n    libc.renameat2(-100, (h + '/a').encode(), -100, (h + '/victim').encode(), 2)\n"
         %% os.environ["HOME"])
subprocess.Popen([sys.executable, "-c", racer], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("planted")
"""


class SessionCleanup(unittest.TestCase):
    """When a session ends, the supervisor removes its private directories (the sandbox's
    $HOME and run directory) recursively. Whatever kernel code left there must not make it
    remove anything outside, wait for ever, or leave the session directory behind."""

    def setUp(self):
        ipybox_test.require_sandbox(self)
        self.tmp = ipybox_test.tempfile.mkdtemp(prefix="ipybox-sec-cleanup-")
        self.host = os.path.join(self.tmp, "host")
        os.makedirs(os.path.join(self.host, "sub"))
        for p in ("keep.txt", "sub/keep.txt"):
            with open(os.path.join(self.host, p), "w") as f:
                f.write("keep")
        self.ws = os.path.join(self.tmp, "ws")
        os.mkdir(self.ws)
        self.env = dict(os.environ, XDG_STATE_HOME=os.path.join(self.tmp, "state"))
        self.sessions = os.path.join(self.tmp, "state", "ipybox", "sessions")

    def tearDown(self):
        subprocess.run(["chmod", "-R", "u+rwX", self.tmp], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def assert_host_untouched_and_nothing_left(self):
        for p in ("keep.txt", "sub/keep.txt"):
            self.assertTrue(os.path.exists(os.path.join(self.host, p)), "the cleanup removed the host's %s" % p)
        left = os.listdir(self.sessions) if os.path.isdir(self.sessions) else []
        self.assertEqual(left, [], "session directories left behind")

    def test_kernel_session_dirs_removed_without_touching_the_host(self):
        c = ipybox_test.McpClient("--workspace", self.ws, env=self.env)
        try:
            out, res = c.execute(PLANT_FOR_CLEANUP % (self.host, 600), timeout=120)
            self.assertFalse(res["isError"], out)
            self.assertIn("planted", out)
        finally:
            rc = c.close(timeout=120)
        self.assertEqual(rc, 0)
        self.assert_host_untouched_and_nothing_left()

    def test_run_session_dirs_removed_without_touching_the_host(self):
        code = PLANT_FOR_CLEANUP.replace('"/run/ipybox"', '"/tmp"') % (self.host, 600)
        r = subprocess.run([IPYBOX, "run", "--workspace", self.ws, "--", "/usr/bin/python3", "-c", code],
                           capture_output=True, text=True, timeout=120, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertIn("planted", r.stdout)
        self.assert_host_untouched_and_nothing_left()



class NamedPathsThroughPlantedSymlinks(unittest.TestCase):
    """A workspace keeps what the kernel left in it. A path the user names for a later session
    (its --workspace, a --container-bind source, a --container-env-file, an --mcp-config) that
    runs through that directory must not be steered by a symlink planted there: the later
    session is refused, naming the symlink, and the host directory is never bound."""

    def setUp(self):
        ipybox_test.require_sandbox(self)
        self.tmp = ipybox_test.tempfile.mkdtemp(prefix="ipybox-sec-named-")
        self.ws = os.path.join(self.tmp, "project")
        os.mkdir(self.ws)
        self.secret = os.path.join(self.tmp, "secret")  # a host directory nobody bound
        os.mkdir(self.secret)
        with open(os.path.join(self.secret, "marker"), "w") as f:
            f.write("SECRET_MARKER")
        with open(os.path.join(self.secret, "env"), "w") as f:
            f.write("TOKEN=SECRET_MARKER\n")
        self.env = dict(os.environ, XDG_STATE_HOME=os.path.join(self.tmp, "state"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def wrap(self, cmd):
        return cmd

    def own_tree(self):
        pass

    def run_in(self, options, code):
        return subprocess.run(self.wrap([IPYBOX, "run", *options, "--", "/usr/bin/python3", "-c", code]),
                              capture_output=True, text=True, timeout=120, env=self.env)

    def plant(self):
        """Session 1: kernel code with the project as its workspace plants symlinks there."""
        r = self.run_in(["--workspace", self.ws], textwrap.dedent("""
            import os
            os.symlink(%r, "/app/data")
            os.symlink("../secret", "/app/rel")
            os.makedirs("/app/real")
            os.symlink(%r, "/app/real/inner")
            os.symlink(%r, "/app/.env")
            print("planted")
            """ % (self.secret, self.secret, os.path.join(self.secret, "env"))))
        self.assertEqual(r.returncode, 0, r.stderr)

    LOOK = ("import os\nprint([p for p in ('/app/marker', '/app/d/marker', '/app/d/inner/marker') "
            "if os.path.exists(p)], os.environ.get('TOKEN'))")

    def test_later_session_refuses_paths_through_planted_symlinks(self):
        self.plant()
        cases = {
            "--workspace data": ["--workspace", os.path.join(self.ws, "data")],
            "--workspace rel": ["--workspace", os.path.join(self.ws, "rel")],
            "bind data": ["--container-bind", os.path.join(self.ws, "data") + ":d"],
            "bind real/inner": ["--container-bind", os.path.join(self.ws, "real", "inner") + ":d"],
            "env file": ["--container-env-file", os.path.join(self.ws, ".env")],
            "rootfs": ["--rootfs", os.path.join(self.ws, "data")],
        }
        for name, opts in cases.items():
            with self.subTest(case=name):
                r = self.run_in(opts, self.LOOK)
                self.assertNotIn("SECRET_MARKER", r.stdout, "%s: the host directory reached the sandbox" % name)
                self.assertNotIn("marker", r.stdout, "%s: bound through the symlink: %s" % (name, r.stdout))
                self.assertNotEqual(r.returncode, 0, "%s: the session started: %s" % (name, r.stdout))
                self.assertIn("symlink", r.stderr)
                self.assertIn(self.ws, r.stderr)

    def test_real_paths_in_a_former_workspace_still_work(self):
        self.plant()
        with open(os.path.join(self.ws, "real", "marker"), "w") as f:
            f.write("ok")
        r = self.run_in(["--container-bind", os.path.join(self.ws, "real") + ":d"], self.LOOK)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("'/app/d/marker'", r.stdout)
        r = self.run_in(["--workspace", os.path.join(self.ws, "real")], self.LOOK)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("'/app/marker'", r.stdout)

    # Session 1's kernel code swaps /app/sub (a real directory) and /app/lnk (a symlink to a
    # host directory nobody bound) in a loop, while later sessions name <W1>/sub.
    SWAPPER = textwrap.dedent("""
        import ctypes, os, time
        libc = ctypes.CDLL(None, use_errno=True)
        os.makedirs("/app/sub", exist_ok=True)
        with open("/app/sub/key", "w") as f:
            f.write("REAL_KEY")
        with open("/app/sub/env", "w") as f:
            f.write("TOKEN=REAL_KEY\\n")
        os.symlink(%r, "/app/lnk")
        open("/app/ready", "w").close()
        end = time.time() + %d
        n = 0
        while time.time() < end and not os.path.exists("/app/stop"):
            libc.renameat2(-100, b"/app/sub", -100, b"/app/lnk", 2)  # RENAME_EXCHANGE
            n += 1
        if os.path.islink("/app/sub"):
            libc.renameat2(-100, b"/app/sub", -100, b"/app/lnk", 2)
        print("swapped", n)
        """)

    RACE_RUNS = 24
    RACE_SECONDS = 60

    def start_swapper(self):
        with open(os.path.join(self.secret, "key"), "w") as f:
            f.write("SECRET_MARKER")
        self.own_tree()
        p = subprocess.Popen(self.wrap([IPYBOX, "run", "--workspace", self.ws, "--", "/usr/bin/python3", "-c",
                                        self.SWAPPER % (self.secret, self.RACE_SECONDS + 30)]),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env)
        self.addCleanup(lambda: (p.kill(), p.wait()))
        ipybox_test.wait_for(lambda: os.path.exists(os.path.join(self.ws, "ready")), timeout=60)
        self.assertTrue(os.path.exists(os.path.join(self.ws, "ready")), "the swapper did not start")
        return p

    def stop_swapper(self, p):
        subprocess.run(self.wrap(["touch", os.path.join(self.ws, "stop")]), check=True)
        out, err = p.communicate(timeout=60)
        self.assertIn("swapped", out, err)
        self.assertGreater(int(out.split()[-1]), 1000, "the swapper hardly ran: " + out)

    REFUSALS = ("symlink", "changed while the sandbox was built", "kept changing")

    def race(self, name, options, command, real):
        """Runs the command in later sessions while the swapper runs: each one either sees the
        real directory or is refused with a clear message; the host directory never shows."""
        p = self.start_swapper()
        deadline = time.time() + self.RACE_SECONDS
        worked = refused = 0
        try:
            for _ in range(self.RACE_RUNS):
                if time.time() > deadline:
                    break
                r = subprocess.run(self.wrap([IPYBOX, "run", *options, "--", *command]), capture_output=True,
                                   text=True, timeout=120, env=self.env)
                self.assertNotIn("SECRET_MARKER", r.stdout + r.stderr, "%s: the host directory reached the "
                                 "sandbox" % name)
                if r.returncode == 0:
                    self.assertIn(real, r.stdout, "%s: %s %s" % (name, r.stdout, r.stderr))
                    worked += 1
                else:
                    self.assertTrue(any(m in r.stderr for m in self.REFUSALS), "%s: rc %d, unclear: %s"
                                    % (name, r.returncode, r.stderr))
                    refused += 1
        finally:
            self.stop_swapper(p)
        sys.stderr.write("[%s: %d ran on the real directory, %d refused] " % (name, worked, refused))
        self.assertGreater(worked + refused, 0)
        self.assertEqual(sorted(os.listdir(self.secret)), ["env", "key", "marker"], "written in the host dir")

    def test_race_workspace(self):
        self.race("--workspace", ["--workspace", os.path.join(self.ws, "sub")], ["/bin/cat", "/app/key"], "REAL_KEY")

    def test_race_bind(self):
        self.race("--container-bind", ["--container-bind", os.path.join(self.ws, "sub") + ":x"],
                  ["/bin/cat", "/app/x/key"], "REAL_KEY")

    def test_race_env_file(self):
        self.race("--container-env-file", ["--container-env-file", os.path.join(self.ws, "sub", "env")],
                  ["/bin/sh", "-c", "echo TOKEN=$TOKEN"], "TOKEN=REAL_KEY")

    def test_allowed_dir_through_a_planted_symlink(self):
        """--allowed-dir named through a symlink an earlier session planted in its workspace:
        refused at start (the directory allows nothing), so download_file writes nothing in
        the host directory it points at and upload_file reads nothing from it."""
        self.plant()
        with open(os.path.join(self.ws, "real", "mine.txt"), "w") as f:
            f.write("mine")
        c = ipybox_test.McpClient("--allowed-dir", os.path.join(self.ws, "data"),
                                  "--allowed-dir", os.path.join(self.ws, "real"), env=self.env)
        try:
            c.execute("open('/app/payload.txt', 'w').write('PAYLOAD')")
            r = c.call("download_file", {"relpath": "payload.txt",
                                         "local_path": os.path.join(self.ws, "data", "dropped.txt")}, timeout=60)
            self.assertTrue(r["isError"], r)
            r = c.call("upload_file", {"relpath": "got.txt",
                                       "local_path": os.path.join(self.ws, "data", "marker")}, timeout=60)
            self.assertTrue(r["isError"], r)
            self.assertIn("symlink", r["content"][0]["text"])
            text, _ = c.execute("import os\nprint(os.path.exists('/app/got.txt'))")
            self.assertIn("False", text)
            # the other allowed directory works
            r = c.call("upload_file", {"relpath": "mine.txt",
                                       "local_path": os.path.join(self.ws, "real", "mine.txt")}, timeout=60)
            self.assertFalse(r["isError"], r)
        finally:
            c.close()
        self.assertEqual(sorted(os.listdir(self.secret)), ["env", "marker"], "written in the host dir")



@unittest.skipUnless(os.geteuid() == 0 and shutil.which("useradd") and shutil.which("runuser"),
                     "needs root, useradd and runuser")
class NamedPathsRacingAsPlainUser(NamedPathsThroughPlantedSymlinks):
    """The racing cases again as a plain user: root's sandboxes take the monitor's path (the
    workspace and binds reach the shim as idmapped mounts, checked there by identity), a
    plain user's take the shim's own binds by path (the open_tree clone checked)."""
    USER = "ipyboxnamed"
    test_later_session_refuses_paths_through_planted_symlinks = None
    test_real_paths_in_a_former_workspace_still_work = None
    test_allowed_dir_through_a_planted_symlink = None

    @classmethod
    def setUpClass(cls):
        import pwd
        try:
            pwd.getpwnam(cls.USER)
        except KeyError:
            subprocess.run(["useradd", "-M", "-s", "/bin/sh", cls.USER], check=True)
        cls.pw = pwd.getpwnam(cls.USER)

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["pkill", "-KILL", "-u", cls.USER])
        subprocess.run(["userdel", cls.USER], capture_output=True)

    def setUp(self):
        super().setUp()
        os.chmod(self.tmp, 0o755)
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": self.tmp,
                    "XDG_STATE_HOME": os.path.join(self.tmp, "state")}

    def own_tree(self):
        for d, _, files in os.walk(self.tmp):
            for n in [d] + [os.path.join(d, f) for f in files]:
                os.chown(n, self.pw.pw_uid, self.pw.pw_gid)

    def wrap(self, cmd):
        return [shutil.which("runuser"), "-u", self.USER, "--", "env", "-C", "/tmp", *cmd]


if __name__ == "__main__":
    unittest.main()


class StateDirectoryNeverLent(unittest.TestCase):
    """ipybox's state directory holds the record of trees lent to sandboxes (the planted-symlink
    rule reads it), other sessions' directories and their tool packages and sockets: a
    --workspace or --container-bind that holds it, or lies inside it, is refused. One of its
    own default workspaces, named again, is fine."""

    def test_trees_holding_or_inside_the_state_directory_refused(self):
        tmp = ipybox_test.tempfile.mkdtemp(prefix="ipybox-sec-state-")
        try:
            state = os.path.join(tmp, "home", ".local", "state")
            os.makedirs(os.path.join(state, "ipybox", "workspaces", "old"))
            os.makedirs(os.path.join(state, "ipybox", "sessions"))
            env = dict(os.environ, XDG_STATE_HOME=state)
            probe = "import os; open('/app/granted', 'a').close(); print(sorted(os.listdir('/app')))"
            for opts in (["--workspace", os.path.join(tmp, "home")],
                         ["--workspace", os.path.join(tmp, "home", ".local")],
                         ["--workspace", os.path.join(state, "ipybox")],
                         ["--workspace", os.path.join(state, "ipybox", "sessions")],
                         ["--container-bind", os.path.join(tmp, "home", ".local") + ":x"]):
                with self.subTest(opts=opts):
                    r = subprocess.run([IPYBOX, "run", *opts, "--", "/usr/bin/python3", "-c", probe],
                                       capture_output=True, text=True, timeout=120, env=env)
                    self.assertNotEqual(r.returncode, 0, "the session started: %s" % r.stdout)
                    self.assertIn("state directory", r.stderr)
            r = subprocess.run([IPYBOX, "run", "--workspace", os.path.join(state, "ipybox", "workspaces", "old"),
                                "--", "/usr/bin/python3", "-c", "print('ok')"],
                               capture_output=True, text=True, timeout=120, env=env)
            self.assertEqual((r.returncode, r.stdout), (0, "ok\n"), r.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
