"""The mount points that --container-bind needs inside /app are made by
ipybox in the workspace; in an unnamed workspace they must not count as something the user
made: the workspace is removed at the end of a session when it holds nothing else. They are
removed with rmdir only, on directory fds, never through a symlink sandbox code left."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX, McpClient, require_sandbox, wait_for  # noqa: E402
from daemon_fixture import Daemon  # noqa: E402


class BindPoints(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.tmp = tempfile.mkdtemp(prefix="ipybox-f1-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.home = os.path.join(self.tmp, "home")
        os.mkdir(self.home)
        self.env = dict(os.environ, HOME=self.home, XDG_STATE_HOME=os.path.join(self.home, ".local", "state"))
        self.env.pop("XDG_RUNTIME_DIR", None)
        self.wsroot = os.path.join(self.home, ".local", "state", "ipybox", "workspaces")
        self.data = os.path.join(self.tmp, "data")
        os.mkdir(self.data)

    def workspaces(self):
        return sorted(os.listdir(self.wsroot)) if os.path.isdir(self.wsroot) else []

    def session(self, code, *options):
        """One `ipybox mcp` session running code; returns its stderr once it has ended."""
        c = McpClient("--embedded", *options, env=self.env)
        try:
            text, r = c.execute(code)
            self.assertFalse(r["isError"], text)
            self.assertEqual(len(self.workspaces()), 1)
            c.proc.stdin.close()
            self.assertEqual(c.proc.wait(60), 0)
            return c.proc.stderr.read().decode(errors="replace")
        finally:
            c.close()

    def test_an_unnamed_workspace_with_only_bind_points_is_removed(self):
        err = self.session("open('/app/deep/er/data/out.txt', 'w').write('kept')\n"
                           "import os; print(sorted(os.listdir('/app')))",
                           "--container-bind", "%s:deep/er/data" % self.data,
                           "--container-bind", "%s:two/./binds" % self.data)
        self.assertEqual(self.workspaces(), [], err)
        self.assertNotIn("workspace kept", err)
        # The bind's source is the user's: what the session wrote there stays.
        with open(os.path.join(self.data, "out.txt")) as f:
            self.assertEqual(f.read(), "kept")
        self.assertEqual(sorted(os.listdir(self.data)), ["out.txt"])

    def test_ipybox_run_too(self):
        r = subprocess.run([IPYBOX, "run", "--container-bind", "%s:x/./y" % self.data, "--", "/bin/true"],
                           capture_output=True, text=True, timeout=120, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.workspaces(), [], r.stderr)

    def test_a_daemon_session_too(self):
        state = os.path.join(self.tmp, "dstate")
        wsroot = os.path.join(state, "ipybox", "workspaces")
        d = Daemon(state=state)
        self.addCleanup(d.close)
        c = d.client()
        try:
            c.request("ipybox/createSession", {"args": ["--container-bind", "%s:in/put" % self.data]})
            text, r = c.execute("import os; print(os.listdir('/app/in'))")
            self.assertEqual(text.strip(), "['put']")
            self.assertEqual(len(os.listdir(wsroot)), 1)
        finally:
            c.close()
        # The private session ends with its connection.
        self.assertTrue(wait_for(lambda: os.listdir(wsroot) == [], 60), (os.listdir(wsroot), d.log_text()))

    def test_what_the_user_made_beside_them_keeps_the_workspace(self):
        err = self.session("open('/app/deep/mine.txt', 'w').write('x')",
                           "--container-bind", "%s:deep/data" % self.data)
        names = self.workspaces()
        self.assertEqual(len(names), 1, err)
        ws = os.path.join(self.wsroot, names[0])
        self.assertIn("workspace kept: " + ws, err)
        # The user's file stays; the empty mount point next to it is gone.
        self.assertEqual(sorted(os.listdir(os.path.join(ws, "deep"))), ["mine.txt"])

    def test_a_symlink_left_in_the_way_is_not_followed(self):
        # Sandbox code moves the mount point's parent away and puts a symlink in its place,
        # pointing at a host directory that has an empty directory of the mount point's name.
        victim = os.path.join(self.tmp, "victim")
        os.makedirs(os.path.join(victim, "data"))
        err = self.session("import os\n"
                           "os.rename('/app/deep', '/app/moved')\n"
                           "os.symlink(%r, '/app/deep')\n"
                           "print(os.readlink('/app/deep'))" % victim,
                           "--container-bind", "%s:deep/data" % self.data)
        self.assertTrue(os.path.isdir(os.path.join(victim, "data")), err)
        names = self.workspaces()
        self.assertEqual(len(names), 1, err)
        ws = os.path.join(self.wsroot, names[0])
        self.assertEqual(os.readlink(os.path.join(ws, "deep")), victim)
        self.assertEqual(sorted(os.listdir(ws)), ["deep", "moved"])

    def test_a_file_in_the_bind_point_s_place_stays(self):
        # The sandbox cannot replace a mount point, but it can move its parent away and put a
        # file in its place: nothing is removed then, the moved directory included.
        err = self.session("import os\nos.rename('/app/a', '/app/b')\nopen('/app/a', 'w').write('file')",
                           "--container-bind", "%s:a/data" % self.data)
        names = self.workspaces()
        self.assertEqual(len(names), 1, err)
        ws = os.path.join(self.wsroot, names[0])
        with open(os.path.join(ws, "a")) as f:
            self.assertEqual(f.read(), "file")
        # The moved parent is the user's doing, kept with the empty mount point in it.
        self.assertEqual(os.listdir(os.path.join(ws, "b")), ["data"])
        self.assertEqual(sorted(os.listdir(ws)), ["a", "b"])


if __name__ == "__main__":
    unittest.main()
