"""Workspaces (issue 20, P4): `--workspace NAME` under the state directory, reused across
sessions of ipybox mcp, ipybox run and ipyboxd; unnamed ones named by time and session, removed
when empty; `ipybox workspaces` lists them and `ipybox workspaces prune` removes unnamed ones,
never one in use and never through a symlink sandbox code planted; bad names, and
--allowed-dir / --workspace parents that do not exist, refused with clear errors."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX, ROOT, McpClient, require_sandbox, text_of, wait_for  # noqa: E402

UNNAMED = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d)(\d\d)(\d\d)Z-([0-9a-f]{16})$")


class WorkspaceCase(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.tmp = tempfile.mkdtemp(prefix="ipybox-p4-")
        # A home of the test's own: nothing here touches the real user's state.
        self.home = os.path.join(self.tmp, "home")
        os.mkdir(self.home)
        self.env = dict(os.environ, HOME=self.home, XDG_STATE_HOME=os.path.join(self.home, ".local", "state"))
        self.env.pop("XDG_RUNTIME_DIR", None)
        self.wsroot = os.path.join(self.home, ".local", "state", "ipybox", "workspaces")
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def mcp(self, *options):
        c = McpClient("--embedded", *options, env=self.env)
        self.clients.append(c)
        return c

    def ipybox(self, *args, timeout=120):
        return subprocess.run([IPYBOX, *args], capture_output=True, text=True, timeout=timeout, env=self.env)

    def run_in(self, *options_then_cmd):
        return self.ipybox("run", *options_then_cmd)

    def workspaces(self):
        return sorted(os.listdir(self.wsroot)) if os.path.isdir(self.wsroot) else []

    def listing(self):
        r = self.ipybox("workspaces", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return {e["name"]: e for e in json.loads(r.stdout)}

    def age(self, name, days):
        """Sets every mtime in the workspace back by days (the walk takes the newest)."""
        t = time.time() - days * 86400
        top = os.path.join(self.wsroot, name)
        for d, dirs, files in os.walk(top):
            for f in dirs + files:
                os.utime(os.path.join(d, f), (t, t), follow_symlinks=False)
        os.utime(top, (t, t))


class Named(WorkspaceCase):
    def test_named_workspace_reused_by_two_mcp_sessions(self):
        a = self.mcp("--workspace", "proj")
        text, r = a.execute("open('/app/notes.txt', 'w').write('from the first session')\nprint('ok')")
        self.assertIn("ok", text, r)
        self.assertEqual(a.close(), 0)
        self.assertEqual(self.workspaces(), ["proj"])
        self.assertEqual(os.stat(os.path.join(self.wsroot, "proj")).st_mode & 0o777, 0o755)
        b = self.mcp("--workspace", "proj")
        text, _ = b.execute("print(open('/app/notes.txt').read())")
        self.assertIn("from the first session", text)
        b.close()
        self.assertEqual(self.workspaces(), ["proj"])

    def test_named_workspace_reused_by_ipybox_run_and_kept_empty(self):
        r = self.run_in("--workspace", "data.v1_x-y", "--", "/bin/sh", "-c", "echo 42 > /app/answer")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_in("--workspace", "data.v1_x-y", "--", "/bin/cat", "/app/answer")
        self.assertEqual((r.returncode, r.stdout), (0, "42\n"), r.stderr)
        # A named one stays even when empty: the user may come back to it.
        r = self.run_in("--workspace", "empty", "--", "/bin/true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.workspaces(), ["data.v1_x-y", "empty"])

    def test_named_workspace_of_a_daemon_session(self):
        from daemon_fixture import Daemon
        state = os.path.join(self.tmp, "dstate")
        d = Daemon(state=state)
        try:
            c = d.client()
            self.clients.append(c)
            c.request("ipybox/createSession", {"name": "w", "args": ["--workspace", "shared"]})
            text, _ = c.execute("open('/app/f', 'w').write('daemon'); print('done')")
            self.assertIn("done", text)
            with open(os.path.join(state, "ipybox", "workspaces", "shared", "f")) as f:
                self.assertEqual(f.read(), "daemon")
            bad = d.client()
            self.clients.append(bad)
            with self.assertRaises(Exception) as cm:
                bad.request("ipybox/createSession", {"name": "bad", "args": ["--workspace", "../up"]})
            self.assertIn("--workspace '../up'", str(cm.exception))
        finally:
            d.close()

    def test_sdk_sandbox_with_a_named_workspace(self):
        sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))
        import ipybox_native as ib
        env = {"HOME": self.home, "XDG_STATE_HOME": self.env["XDG_STATE_HOME"]}
        for i in range(2):
            with ib.SyncSandbox(transport="embedded", ipybox=IPYBOX, workspace="sdk-ws", env=env) as sb:
                self.assertEqual(sb.workspace, os.path.join(self.wsroot, "sdk-ws"))
                if i == 0:
                    sb.execute("open('/app/kept.txt', 'w').write('sdk')")
                else:
                    self.assertEqual(sb.execute("print(open('/app/kept.txt').read())").text.strip(), "sdk")
        self.assertEqual(self.workspaces(), ["sdk-ws"])

    def test_sdk_passes_a_name_as_a_name(self):
        sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))
        from ipybox_native import options
        self.assertEqual(options.to_args({"workspace": "proj"}), ["--workspace", "proj"])
        self.assertEqual(options.to_args({"workspace": "./proj"}), ["--workspace", os.path.abspath("proj")])
        import pathlib
        self.assertEqual(options.to_args({"workspace": pathlib.Path("proj")}),
                         ["--workspace", os.path.abspath("proj")])


class Unnamed(WorkspaceCase):
    def test_empty_one_removed_at_the_end(self):
        c = self.mcp()
        text, _ = c.execute("x = 1\nimport os\nprint(sorted(os.listdir('/app')))")
        self.assertIn("[]", text)
        self.assertEqual(len(self.workspaces()), 1)
        self.assertEqual(c.close(), 0)
        self.assertEqual(self.workspaces(), [])
        r = self.run_in("--", "/bin/true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.workspaces(), [])

    def test_non_empty_one_kept_with_a_name_that_says_when_and_which_session(self):
        before = time.time()
        c = self.mcp()
        c.execute("open('/app/result.csv', 'w').write('a,b\\n')")
        c.proc.stdin.close()
        c.proc.wait(30)
        stderr = c.proc.stderr.read().decode()
        after = time.time()
        names = self.workspaces()
        self.assertEqual(len(names), 1, names)
        m = UNNAMED.match(names[0])
        self.assertTrue(m, names[0])
        made = time.mktime(time.strptime(names[0][:18], "%Y-%m-%dT%H%M%SZ")) - time.timezone
        self.assertTrue(before - 2 <= made <= after + 2, (before, made, after))
        self.assertIn("workspace kept: " + os.path.join(self.wsroot, names[0]), stderr)
        self.assertTrue(os.path.exists(os.path.join(self.wsroot, names[0], "result.csv")))


class Listing(WorkspaceCase):
    def test_lists_name_kind_size_and_last_used(self):
        r = self.run_in("--workspace", "big", "--", "/usr/bin/python3", "-c",
                        "open('/app/blob', 'wb').write(b'x' * 300000)")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_in("--", "/bin/sh", "-c", "echo hi > /app/small")
        self.assertEqual(r.returncode, 0, r.stderr)
        entries = self.listing()
        self.assertEqual(len(entries), 2, entries)
        big = entries["big"]
        self.assertFalse(big["unnamed"])
        self.assertGreaterEqual(big["bytes"], 300000)
        self.assertLess(big["bytes"], 2000000)
        self.assertFalse(big["inUse"])
        self.assertLess(abs(big["lastUsed"] - time.time()), 120)
        (unnamed,) = [e for n, e in entries.items() if n != "big"]
        self.assertTrue(unnamed["unnamed"])
        self.assertTrue(UNNAMED.match(unnamed["name"]))
        self.assertEqual(unnamed["path"], os.path.join(self.wsroot, unnamed["name"]))
        # The table: a header, one line each, the sizes human-readable.
        r = self.ipybox("workspaces")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "KIND", "SIZE", "LAST", "USED"])
        row = [ln for ln in lines if ln.startswith("big ")]
        self.assertEqual(len(row), 1, r.stdout)
        self.assertRegex(row[0], r"^big\s+named\s+(29\d|30\d)\.\dK\s+\d{4}-\d\d-\d\d \d\d:\d\d$")
        self.assertTrue(any(ln.startswith(unnamed["name"] + " ") and " unnamed " in ln for ln in lines), r.stdout)

    def test_in_use_is_shown(self):
        c = self.mcp("--workspace", "live")
        c.execute("1")
        self.assertTrue(self.listing()["live"]["inUse"])
        c.close()
        self.assertFalse(self.listing()["live"]["inUse"])

    def test_help(self):
        r = self.ipybox("workspaces", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("ipybox workspaces prune [--older-than DAYS]", r.stdout)
        r = self.ipybox("workspaces", "--bogus")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown argument '--bogus'", r.stderr)
        r = self.ipybox("--help")
        self.assertIn("workspaces", r.stdout)


class Prune(WorkspaceCase):
    def unnamed_with(self, body="echo x > /app/f"):
        names = set(self.workspaces())
        r = self.run_in("--", "/bin/sh", "-c", body)
        self.assertEqual(r.returncode, 0, r.stderr)
        (new,) = set(self.workspaces()) - names
        return new

    def test_removes_old_unnamed_ones_and_keeps_named_and_recent_ones(self):
        old = self.unnamed_with()
        recent = self.unnamed_with()
        r = self.run_in("--workspace", "keep", "--", "/bin/sh", "-c", "echo k > /app/k")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.age(old, 10)
        self.age("keep", 10)
        r = self.ipybox("workspaces", "prune", "--older-than", "7")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("removed " + old, r.stdout)
        self.assertEqual(self.workspaces(), sorted([recent, "keep"]))
        # Without --older-than (or with 0): every unnamed one, never a named one.
        r = self.ipybox("workspaces", "prune", "--older-than=0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("removed " + recent, r.stdout)
        self.assertEqual(self.workspaces(), ["keep"])
        r = self.ipybox("workspaces", "prune")
        self.assertEqual((r.returncode, r.stdout), (0, "nothing removed: no unnamed workspaces\n"), r.stderr)
        self.assertEqual(self.workspaces(), ["keep"])
        # A named one goes only when named.
        r = self.ipybox("workspaces", "prune", "keep")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.workspaces(), [])

    def test_a_workspace_in_use_survives(self):
        c = self.mcp()
        c.execute("open('/app/precious', 'w').write('still here')")
        (name,) = self.workspaces()
        self.age(name, 30)
        r = self.ipybox("workspaces", "prune", "--older-than", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kept %s: in use by a running session" % name, r.stdout)
        self.assertEqual(self.workspaces(), [name])
        text, _ = c.execute("print(open('/app/precious').read())")
        self.assertIn("still here", text)
        n = self.mcp("--workspace", "busy")
        n.execute("1")
        r = self.ipybox("workspaces", "prune", "busy")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kept busy: in use by a running session", r.stdout)
        self.assertIn("busy", self.workspaces())
        # Once the session is gone, it goes.
        c.close()
        r = self.ipybox("workspaces", "prune")
        self.assertIn("removed " + name, r.stdout)
        self.assertNotIn(name, self.workspaces())

    def test_a_start_that_loses_its_workspace_to_a_prune_fails(self):
        """As a prune does: hold the workspace exclusively, rename it aside; a session starting
        with its name meanwhile must not use the directory being removed."""
        import fcntl
        ws = os.path.join(self.wsroot, "contested")
        os.makedirs(ws)
        fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            p = subprocess.Popen([IPYBOX, "run", "--workspace", "contested", "--", "/bin/sh", "-c",
                                  "echo used > /app/marker"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=self.env)

            def opened():
                try:
                    return any(os.readlink("/proc/%d/fd/%s" % (p.pid, f)) == ws
                               for f in os.listdir("/proc/%d/fd" % p.pid))
                except OSError:
                    return False
            self.assertTrue(wait_for(opened, 30), "ipybox run never opened the workspace")
            os.rename(ws, os.path.join(self.wsroot, ".pruning-0123456789abcdef"))
        finally:
            # Let go within the start's wait for its hold (a lock kept past it fails the start
            # itself, test_workspace_attacks): the start holds the renamed one, then looks.
            os.close(fd)
        out, err = p.communicate(timeout=60)
        self.assertNotEqual(p.returncode, 0, out)
        self.assertIn("was removed (by `ipybox workspaces prune`?) while the session started", err)
        self.assertFalse(os.path.exists(os.path.join(self.wsroot, ".pruning-0123456789abcdef", "marker")))
        # The next prune finishes what was left under the hidden name; a listing never shows it.
        self.assertEqual(self.listing(), {})
        r = self.ipybox("workspaces", "prune")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(self.wsroot), [])

    def test_planted_symlinks_are_removed_not_followed(self):
        outside = os.path.join(self.tmp, "outside")
        os.mkdir(outside)
        with open(os.path.join(outside, "host-file"), "w") as f:
            f.write("the user's")
        os.mkdir(os.path.join(outside, "dir"))
        with open(os.path.join(outside, "dir", "inner"), "w") as f:
            f.write("inner")
        # Sandbox code plants links to host paths (as the host will see them).
        name = self.unnamed_with("ln -s %s/host-file /app/link && ln -s %s/dir /app/dirlink && "
                                 "mkdir -p /app/a/b && ln -s %s /app/a/b/up" % (outside, outside, outside))
        self.assertTrue(os.path.islink(os.path.join(self.wsroot, name, "dirlink")))
        r = self.ipybox("workspaces", "prune")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("removed " + name, r.stdout)
        self.assertEqual(self.workspaces(), [])
        with open(os.path.join(outside, "host-file")) as f:
            self.assertEqual(f.read(), "the user's")
        with open(os.path.join(outside, "dir", "inner")) as f:
            self.assertEqual(f.read(), "inner")

    def test_a_symlink_in_place_of_a_workspace_is_left_alone(self):
        outside = os.path.join(self.tmp, "victim")
        os.mkdir(outside)
        open(os.path.join(outside, "keep"), "w").close()
        os.makedirs(self.wsroot)
        link = "2020-01-01T000000Z-0123456789abcdef"
        os.symlink(outside, os.path.join(self.wsroot, link))
        r = self.ipybox("workspaces", "prune")
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a directory", r.stderr)
        self.assertTrue(os.path.exists(os.path.join(outside, "keep")))

    def test_bad_arguments(self):
        for args, msg in ((["--older-than", "x"], "--older-than 'x'"), (["--older-than", "-1"], "--older-than '-1'"),
                          (["../etc"], "must not start with '.'"), (["a/b"], "only letters, digits"),
                          (["--what"], "unknown option '--what'")):
            with self.subTest(args=args):
                r = self.ipybox("workspaces", "prune", *args)
                self.assertEqual(r.returncode, 2, r.stdout)
                self.assertIn(msg, r.stderr)
        r = self.ipybox("workspaces", "prune", "nosuch")
        self.assertEqual(r.returncode, 1)
        self.assertIn("nosuch: no such workspace", r.stderr)


class BadInput(WorkspaceCase):
    def test_bad_workspace_names(self):
        for bad, msg in (("..", "must not start with '.'"), (".hidden", "must not start with '.'"),
                         ("", "empty"), ("a b", "only letters, digits"), ("x" * 65, "at most 64"),
                         ("-x", "must not start with '-'"), ("../x", "must be an absolute path"),
                         ("a/b", "must be an absolute path")):
            for cmd in (["run", "--workspace", bad, "--", "/bin/true"], ["mcp", "--embedded", "--workspace", bad]):
                with self.subTest(bad=bad, cmd=cmd[0]):
                    r = self.ipybox(*cmd)
                    self.assertEqual(r.returncode, 2, r.stderr)
                    self.assertIn(msg, r.stderr)
        self.assertEqual(self.workspaces(), [])

    def test_workspace_parent_must_exist(self):
        ws = os.path.join(self.tmp, "missing", "ws")
        for cmd in (["run", "--workspace", ws, "--", "/bin/true"], ["mcp", "--embedded", "--workspace", ws]):
            with self.subTest(cmd=cmd[0]):
                r = subprocess.run([IPYBOX, *cmd], capture_output=True, text=True, timeout=60, env=self.env,
                                   stdin=subprocess.DEVNULL)
                self.assertNotEqual(r.returncode, 0)
                self.assertIn("%s does not exist" % os.path.dirname(ws), r.stderr)
                self.assertFalse(os.path.exists(os.path.dirname(ws)))
        # The last component alone is made, as before.
        ws = os.path.join(self.tmp, "fresh")
        r = self.run_in("--workspace", ws, "--", "/bin/sh", "-c", "echo y > /app/y")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(os.path.join(ws, "y")))

    def test_allowed_dir_must_exist(self):
        missing = os.path.join(self.tmp, "no-such-dir")
        afile = os.path.join(self.tmp, "a-file")
        open(afile, "w").close()
        for d, msg in ((missing, "No such file or directory"), (afile, "need a directory")):
            with self.subTest(d=d):
                r = self.ipybox("mcp", "--embedded", "--allowed-dir", d)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("--allowed-dir %s" % d, r.stderr)
                self.assertIn(msg, r.stderr)
        from daemon_fixture import IPYBOXD
        r = subprocess.run([IPYBOXD, "--user", "--allowed-dir", missing], capture_output=True, text=True,
                           timeout=30, env=dict(self.env, XDG_RUNTIME_DIR=self.tmp))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--allowed-dir %s" % missing, r.stderr)


if __name__ == "__main__":
    unittest.main()
