"""Attacks on workspaces and their prune: a session must never use a
workspace of the state directory without holding it, since `ipybox workspaces prune` may be
between its exclusive lock and its rename (its size walk of a tree that sandbox code filled
takes seconds) and would then remove the files of a running session."""
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX, descendants, require_sandbox, wait_for  # noqa: E402


class WorkspaceAttackCase(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.tmp = tempfile.mkdtemp(prefix="ipybox-r2-")
        self.home = os.path.join(self.tmp, "home")
        os.mkdir(self.home)
        self.env = dict(os.environ, HOME=self.home, XDG_STATE_HOME=os.path.join(self.home, ".local", "state"))
        self.env.pop("XDG_RUNTIME_DIR", None)
        self.wsroot = os.path.join(self.home, ".local", "state", "ipybox", "workspaces")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def ipybox(self, *args, timeout=120):
        return subprocess.run([IPYBOX, *args], capture_output=True, text=True, timeout=timeout, env=self.env)


class HoldOrFail(WorkspaceAttackCase):
    def test_a_start_never_uses_a_workspace_a_prune_holds_past_the_wait(self):
        """The prune holds the workspace exclusively while it walks it (here: the test holds it
        for longer than a start waits); then it renames and removes it. A session that started
        meanwhile must have failed, not be running on the files being removed."""
        ws = os.path.join(self.wsroot, "contested")
        os.makedirs(ws)
        with open(os.path.join(ws, "keep"), "w") as f:
            f.write("user data")
        fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            p = subprocess.Popen([IPYBOX, "run", "--workspace", "contested", "--", "/bin/sh", "-c",
                                  "cat /app/keep && echo started > /app/marker && sleep 6 && cat /app/keep"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env)
            self.procs.append(p)
            # Until the start has given up waiting: it ended, or its sandbox runs.
            started = wait_for(lambda: p.poll() is not None or
                               os.path.exists(os.path.join(ws, "marker")), 60)
            self.assertTrue(started, "ipybox run neither ended nor started its command")
        finally:
            os.close(fd)
        # What the prune does next, for real: nothing holds it (per flock), so it goes.
        r = self.ipybox("workspaces", "prune", "contested")
        out, err = p.communicate(timeout=60)
        self.assertNotEqual(p.returncode, 0, out)
        self.assertIn("keeps it locked exclusively", err)
        self.assertNotIn("started", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("removed contested", r.stdout)
        self.assertFalse(descendants(p.pid))

    def test_a_session_that_holds_its_workspace_keeps_it_from_a_prune(self):
        """The ordinary case next to it: once a start has its hold, a prune keeps the workspace."""
        p = subprocess.Popen([IPYBOX, "run", "--workspace", "held", "--", "/bin/sh", "-c",
                              "echo data > /app/f && sleep 5 && cat /app/f"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env)
        self.procs.append(p)
        self.assertTrue(wait_for(lambda: os.path.exists(os.path.join(self.wsroot, "held", "f")), 60))
        r = self.ipybox("workspaces", "prune", "held")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kept held: in use by a running session", r.stdout)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(out.strip(), "data")


class DeeperInside(WorkspaceAttackCase):
    """A session whose bind source, or whose --workspace path, lies inside a workspace of the
    state directory (workspaces/W/sub) holds W too: a prune removes W whole."""

    def use_while_pruning(self, inside, *options):
        """inside: where W/sub is in the sandbox."""
        r = self.ipybox("run", "--workspace", "W", "--", "/bin/sh", "-c", "mkdir -p /app/sub && echo data > /app/sub/f")
        self.assertEqual(r.returncode, 0, r.stderr)
        p = subprocess.Popen([IPYBOX, "run", *options, "--container-env-var", "D=" + inside, "--", "/bin/sh", "-c",
                              "cat $D/f && touch $D/.started && sleep 4 && cat $D/f"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env)
        self.procs.append(p)
        started = os.path.join(self.wsroot, "W", "sub", ".started")
        self.assertTrue(wait_for(lambda: os.path.exists(started) or p.poll() is not None, 60))
        self.assertIsNone(p.poll(), p.stderr.read() if p.poll() is not None else "")
        r = self.ipybox("workspaces", "prune", "W")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kept W: in use by a running session", r.stdout)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(out.split(), ["data", "data"])
        self.assertTrue(os.path.exists(os.path.join(self.wsroot, "W", "sub", "f")))
        r = self.ipybox("workspaces", "prune", "W")
        self.assertIn("removed W", r.stdout)

    def test_a_bind_of_a_directory_inside_a_workspace(self):
        self.use_while_pruning("/app/data", "--container-bind", os.path.join(self.wsroot, "W", "sub") + ":data")

    def test_a_workspace_path_inside_a_workspace(self):
        self.use_while_pruning("/app", "--workspace", os.path.join(self.wsroot, "W", "sub"))


class UnnamedLookalikes(WorkspaceAttackCase):
    def test_a_new_name_in_the_unnamed_form_is_refused_and_plain_prune_keeps_named_ones(self):
        """A name of 16 hex digits (or <UTC time>Z-<16 hex>) would be taken for an unnamed
        workspace, which a plain prune removes with the user's files."""
        for name in ("deadbeefcafe1234", "2026-01-02T030405Z-0123456789abcdef"):
            r = self.ipybox("run", "--workspace", name, "--", "/bin/sh", "-c", "echo precious > /app/thesis.tex")
            self.assertNotEqual(r.returncode, 0, name)
            self.assertIn("the form of the names ipybox gives unnamed workspaces", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.wsroot, name)))
        # Coming back to an existing unnamed one by its name still works (and it stays unnamed).
        r = self.ipybox("run", "--", "/bin/sh", "-c", "echo kept > /app/f")
        self.assertEqual(r.returncode, 0, r.stderr)
        (unnamed,) = os.listdir(self.wsroot)
        r = self.ipybox("run", "--workspace", unnamed, "--", "/bin/cat", "/app/f")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "kept"), r.stderr)
        # A named one with hex in it but not of the form: kept by a plain prune.
        r = self.ipybox("run", "--workspace", "deadbeefcafe12345", "--", "/bin/sh", "-c", "echo x > /app/f")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.ipybox("workspaces", "prune")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(self.wsroot), ["deadbeefcafe12345"])


class FutureTimes(WorkspaceAttackCase):
    def test_sandbox_set_future_mtimes_do_not_keep_a_workspace_from_prune(self):
        """Kernel code stamps everything in /app with a time far ahead; once the session is
        30 days old (the test ages what ipybox stamped itself: the top), prune --older-than 1
        removes it all the same, and the listing's last use is not in the future."""
        far = 4102444800  # 2100-01-01
        r = self.ipybox("run", "--", "/usr/bin/python3", "-c",
                        "import os; os.makedirs('/app/d'); open('/app/d/f', 'w').write('x'); "
                        "[os.utime(p, (%d, %d)) for p in ('/app/d/f', '/app/d', '/app')]" % (far, far))
        self.assertEqual(r.returncode, 0, r.stderr)
        (name,) = os.listdir(self.wsroot)
        top = os.path.join(self.wsroot, name)
        self.assertEqual(int(os.stat(os.path.join(top, "d", "f")).st_mtime), far)
        old = time.time() - 30 * 86400
        os.utime(top, (old, old))
        r = self.ipybox("workspaces", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        (e,) = json.loads(r.stdout)
        self.assertLessEqual(e["lastUsed"], time.time() + 86400)
        r = self.ipybox("workspaces", "prune", "--older-than", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("removed " + name, r.stdout)
        self.assertEqual(os.listdir(self.wsroot), [])


if __name__ == "__main__":
    unittest.main()
