"""Faults in file transfers and workspaces: the supervisor (`ipybox mcp`) SIGKILLed in the
middle of an upload or a download leaves nothing, neither on the host nor in /app of the next
session on that workspace, and an existing file keeps its old content; the empty default
workspace of a killed supervisor is removed by the next start, a non-empty one and one a
live session uses are kept."""
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import McpClient, alive, descendants, require_sandbox, wait_for  # noqa: E402

BIG = 200 << 20


def open_for_writing(pid, under):
    """The size of a regular file below `under` that pid has open for writing (named or not:
    an O_TMPFILE file shows as 'DIR/#INODE (deleted)'), or None."""
    fds = "/proc/%d/fd" % pid
    try:
        names = os.listdir(fds)
    except OSError:
        return None
    for n in names:
        try:
            link = os.readlink(os.path.join(fds, n))
            if not link.startswith(under + "/"):
                continue
            with open("/proc/%d/fdinfo/%s" % (pid, n)) as f:
                flags = int(next(line for line in f if line.startswith("flags:")).split()[1], 8)
            st = os.stat(os.path.join(fds, n))
        except (OSError, StopIteration, ValueError):
            continue
        if flags & 3 and (st.st_mode & 0o170000) == 0o100000:
            return st.st_size
    return None


def files_below(d):
    return sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)


class Case(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.tmp = tempfile.mkdtemp(prefix="ipybox-faults-files-")
        self.ws = os.path.join(self.tmp, "ws")
        self.allowed = os.path.join(self.tmp, "allowed")
        os.makedirs(self.ws)
        os.makedirs(self.allowed)
        self.env = dict(os.environ, XDG_STATE_HOME=os.path.join(self.tmp, "state"))
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, *options):
        c = McpClient("--embedded", *options, env=self.env)
        self.clients.append(c)
        return c

    def kill(self, c):
        """SIGKILL of the supervisor; waits until it and every process below it are gone."""
        kids = descendants(c.proc.pid)
        os.kill(c.proc.pid, signal.SIGKILL)
        c.proc.wait(30)
        c.proc.stdin.close()
        self.assertTrue(wait_for(lambda: not any(alive(k) for k in kids), timeout=30),
                        "processes of the killed session still run")

    def kill_mid_transfer(self, c, tool, args, under):
        """Starts the transfer and kills the supervisor once its file below `under` has some
        data but not all; returns the size seen."""
        c.send_request("tools/call", {"name": tool, "arguments": args})
        deadline = time.time() + 120
        while time.time() < deadline:
            size = open_for_writing(c.proc.pid, under)
            if size and size < BIG:
                self.kill(c)
                return size
            self.assertIsNone(c.proc.poll(), "ipybox mcp ended by itself")
            time.sleep(0.001)
        self.fail("the transfer's file below %s was never seen growing" % under)

    def app_listing(self, c):
        text, r = c.execute("import os, json\nprint(json.dumps(sorted(os.listdir('/app'))))")
        self.assertFalse(r.get("isError"), text)
        return json.loads(text.strip().splitlines()[-1])


class KilledUploadTest(Case):
    def setUp(self):
        super().setUp()
        with open(os.path.join(self.ws, "keep.txt"), "w") as f:
            f.write("kept")
        with open(os.path.join(self.ws, "old.bin"), "w") as f:
            f.write("old content")
        self.src = os.path.join(self.allowed, "big.bin")
        with open(self.src, "wb") as f:
            f.truncate(BIG)

    def check_after(self):
        self.assertEqual(files_below(self.ws), ["keep.txt", "old.bin"])
        with open(os.path.join(self.ws, "old.bin")) as f:
            self.assertEqual(f.read(), "old content")
        c = self.start("--workspace", self.ws, "--allowed-dir", self.allowed)
        self.assertEqual(self.app_listing(c), ["keep.txt", "old.bin"])
        # and uploads work again, leaving nothing else
        small = os.path.join(self.allowed, "small.txt")
        with open(small, "w") as f:
            f.write("small")
        r = c.call("upload_file", {"relpath": "small.txt", "local_path": small})
        self.assertFalse(r["isError"], r)
        self.assertEqual(files_below(self.ws), ["keep.txt", "old.bin", "small.txt"])

    def test_new_file(self):
        c = self.start("--workspace", self.ws, "--allowed-dir", self.allowed)
        self.app_listing(c)
        self.kill_mid_transfer(c, "upload_file", {"relpath": "sub/big.bin", "local_path": self.src}, self.ws)
        # the directory made on the way stays (empty); no file
        self.assertEqual(os.listdir(os.path.join(self.ws, "sub")), [])
        os.rmdir(os.path.join(self.ws, "sub"))
        self.check_after()

    def test_over_existing_file(self):
        c = self.start("--workspace", self.ws, "--allowed-dir", self.allowed)
        self.app_listing(c)
        self.kill_mid_transfer(c, "upload_file", {"relpath": "old.bin", "local_path": self.src}, self.ws)
        self.check_after()


class KilledDownloadTest(Case):
    def test_no_partial_file(self):
        c = self.start("--workspace", self.ws, "--allowed-dir", self.allowed)
        text, r = c.execute("with open('/app/big.bin', 'wb') as f:\n    f.truncate(%d)" % BIG)
        self.assertFalse(r.get("isError"), text)
        dest_dir = os.path.join(self.allowed, "out")
        os.mkdir(dest_dir)
        with open(os.path.join(dest_dir, "old.bin"), "w") as f:
            f.write("old content")
        for name in ("new.bin", "old.bin"):
            with self.subTest(name=name):
                if c.proc.poll() is not None:
                    c = self.start("--workspace", self.ws, "--allowed-dir", self.allowed)
                self.kill_mid_transfer(c, "download_file", {"relpath": "big.bin",
                                                            "local_path": os.path.join(dest_dir, name)}, dest_dir)
                self.assertEqual(os.listdir(dest_dir), ["old.bin"])
                with open(os.path.join(dest_dir, "old.bin")) as f:
                    self.assertEqual(f.read(), "old content")
        self.assertEqual(files_below(self.ws), ["big.bin"])


class DefaultWorkspaceTest(Case):
    def workspaces(self):
        return sorted(os.listdir(os.path.join(self.tmp, "state", "ipybox", "workspaces")))

    def test_killed_sessions_empty_workspace_goes(self):
        c = self.start()
        self.app_listing(c)
        (empty,) = self.workspaces()
        self.kill(c)
        self.assertEqual(self.workspaces(), [empty])  # what the kill left
        c = self.start()
        text, r = c.execute("open('/app/notes.txt', 'w').write('mine')")
        self.assertFalse(r.get("isError"), text)
        (full,) = set(self.workspaces()) - {empty}
        self.kill(c)

        live = self.start()
        self.app_listing(live)
        left = self.workspaces()
        self.assertNotIn(empty, left)
        self.assertIn(full, left)
        with open(os.path.join(self.tmp, "state", "ipybox", "workspaces", full, "notes.txt")) as f:
            self.assertEqual(f.read(), "mine")
        (mine,) = set(left) - {full}
        # another start leaves the live session's (empty) workspace alone
        other = self.start()
        self.app_listing(other)
        self.assertIn(mine, self.workspaces())
        self.assertEqual(self.app_listing(live), [])
        for c in (live, other):
            self.assertEqual(c.close(), 0)
        self.assertEqual(self.workspaces(), [full])


if __name__ == "__main__":
    unittest.main()
