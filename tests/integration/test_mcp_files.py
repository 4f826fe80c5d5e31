"""upload_file / download_file: round trips, path rules, planted symlinks and hard links,
allowed directories, and no partial files on failure."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import McpClient, require_sandbox  # noqa: E402


class FilesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_sandbox(cls)
        cls.base = tempfile.mkdtemp(prefix="ipybox-files-")
        cls.ws = os.path.join(cls.base, "ws")
        cls.allowed = os.path.join(cls.base, "allowed")
        cls.outside = os.path.join(cls.base, "outside")
        cls.bound = os.path.join(cls.base, "bound")
        for d in (cls.ws, cls.allowed, cls.outside):
            os.makedirs(d)
        cls.secret = os.path.join(cls.outside, "secret.txt")
        with open(cls.secret, "w") as f:
            f.write("host secret")
        cls.c = McpClient("--workspace", cls.ws, "--allowed-dir", cls.allowed,
                          "--container-bind", cls.bound + ":data")

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        shutil.rmtree(cls.base, ignore_errors=True)

    def call(self, tool, **args):
        r = self.c.call(tool, args)
        return r["isError"], r["content"][0]["text"]

    def host(self, name, content=b"payload"):
        p = os.path.join(self.allowed, name)
        with open(p, "wb") as f:
            f.write(content)
        return p

    def assert_no_temp_files(self, d):
        for root, _, files in os.walk(d):
            self.assertFalse([f for f in files if f.startswith(".ipybox-tmp")], root)

    def test_round_trip_binary(self):
        data = bytes(range(256)) * 1000
        err, text = self.call("upload_file", relpath="in/sub/data.bin", local_path=self.host("data.bin", data))
        self.assertFalse(err, text)
        text, r = self.c.execute("d = open('in/sub/data.bin', 'rb').read()\nopen('out.bin', 'wb').write(d[::-1])\nlen(d)")
        self.assertIn(str(len(data)), text)
        dst = os.path.join(self.allowed, "new", "dir", "out.bin")
        err, text = self.call("download_file", relpath="out.bin", local_path=dst)
        self.assertFalse(err, text)
        with open(dst, "rb") as f:
            self.assertEqual(f.read(), data[::-1])
        self.assert_no_temp_files(self.ws)
        self.assert_no_temp_files(self.allowed)

    def test_upload_overwrites_atomically(self):
        self.call("upload_file", relpath="over.txt", local_path=self.host("a.txt", b"first"))
        err, _ = self.call("upload_file", relpath="over.txt", local_path=self.host("b.txt", b"second"))
        self.assertFalse(err)
        with open(os.path.join(self.ws, "over.txt"), "rb") as f:
            self.assertEqual(f.read(), b"second")

    def test_relpath_escapes_are_refused(self):
        src = self.host("x.txt")
        for rel in ["../escape.txt", "a/../../escape.txt", "/etc/passwd", "", ".", "a/", "x\x00y"]:
            with self.subTest(rel=rel):
                err, text = self.call("upload_file", relpath=rel, local_path=src)
                self.assertTrue(err, text)
                err, text = self.call("download_file", relpath=rel, local_path=os.path.join(self.allowed, "d.txt"))
                self.assertTrue(err, text)
        self.assertFalse(os.path.exists(os.path.join(self.base, "escape.txt")))

    def test_planted_symlinks_are_not_followed(self):
        # Kernel code plants symlinks pointing at host paths (as seen from the host).
        self.c.execute("import os\nos.symlink(%r, '/app/link_file')\nos.symlink(%r, '/app/link_dir')"
                       % (self.secret, self.outside))
        dst = os.path.join(self.allowed, "stolen.txt")
        err, text = self.call("download_file", relpath="link_file", local_path=dst)
        self.assertTrue(err)
        self.assertIn("symlink", text)
        self.assertFalse(os.path.exists(dst))
        err, text = self.call("download_file", relpath="link_dir/secret.txt", local_path=dst)
        self.assertTrue(err)
        self.assertFalse(os.path.exists(dst))
        err, text = self.call("upload_file", relpath="link_dir/planted.txt", local_path=self.host("p.txt"))
        self.assertTrue(err)
        self.assertIn("symlink", text)
        self.assertFalse(os.path.exists(os.path.join(self.outside, "planted.txt")))
        err, text = self.call("upload_file", relpath="link_file", local_path=self.host("q.txt", b"overwrite"))
        self.assertFalse(err, text)  # replaces the link itself, never writes through it
        with open(self.secret) as f:
            self.assertEqual(f.read(), "host secret")
        self.assertFalse(os.path.islink(os.path.join(self.ws, "link_file")))

    def test_hard_link_in_workspace_is_refused(self):
        self.c.execute("open('/app/orig.txt', 'w').write('o')\nimport os\nos.link('/app/orig.txt', '/app/hard.txt')")
        err, text = self.call("download_file", relpath="hard.txt", local_path=os.path.join(self.allowed, "h.txt"))
        self.assertTrue(err)
        self.assertIn("hard link", text)

    def test_local_path_outside_allowed_dirs(self):
        err, text = self.call("upload_file", relpath="s.txt", local_path=self.secret)
        self.assertTrue(err)
        self.assertIn("is outside the allowed directories", text)
        self.assertFalse(os.path.exists(os.path.join(self.ws, "s.txt")))
        # A symlink inside an allowed dir pointing outside is judged by its target.
        link = os.path.join(self.allowed, "to_secret")
        if not os.path.lexists(link):
            os.symlink(self.secret, link)
        err, text = self.call("upload_file", relpath="s.txt", local_path=link)
        self.assertTrue(err)
        self.c.execute("open('/app/dl.txt', 'w').write('x')")
        for dst in [os.path.join(self.outside, "dl.txt"), os.path.join(self.allowed, "..", "outside", "dl.txt"),
                    "relative/dl.txt"]:
            with self.subTest(dst=dst):
                err, text = self.call("download_file", relpath="dl.txt", local_path=dst)
                self.assertTrue(err, text)
        self.assertFalse(os.path.exists(os.path.join(self.outside, "dl.txt")))

    def test_missing_and_wrong_kinds(self):
        err, text = self.call("upload_file", relpath="m.txt", local_path=os.path.join(self.allowed, "missing"))
        self.assertTrue(err)
        self.assertIn("not found", text)
        err, text = self.call("upload_file", relpath="m.txt", local_path=self.allowed)
        self.assertTrue(err)
        err, text = self.call("download_file", relpath="missing.txt", local_path=os.path.join(self.allowed, "m"))
        self.assertTrue(err)
        self.assertIn("does not exist", text)
        self.c.execute("import os; os.makedirs('/app/adir', exist_ok=True)")
        err, text = self.call("download_file", relpath="adir", local_path=os.path.join(self.allowed, "m"))
        self.assertTrue(err)
        self.assertIn("not a regular file", text)
        err, text = self.call("upload_file", relpath="adir", local_path=self.host("y.txt"))
        self.assertTrue(err)
        self.c.execute("open('/app/f.txt','w').write('f')")
        err, text = self.call("download_file", relpath="f.txt", local_path=self.allowed)
        self.assertTrue(err)
        self.assertFalse(os.path.exists(os.path.join(self.allowed, "m")))

    def test_fifo_in_workspace_does_not_hang(self):
        self.c.execute("import os\nos.mkfifo('/app/pipe')")
        err, text = self.call("download_file", relpath="pipe", local_path=os.path.join(self.allowed, "pipe.out"))
        self.assertTrue(err)
        self.assertFalse(os.path.exists(os.path.join(self.allowed, "pipe.out")))

    def test_container_bind(self):
        self.assertTrue(os.path.isdir(self.bound), "the bind's host path is created")
        err, text = self.call("upload_file", relpath="data/b.txt", local_path=self.host("b2.txt", b"bound"))
        self.assertFalse(err, text)
        with open(os.path.join(self.bound, "b.txt"), "rb") as f:
            self.assertEqual(f.read(), b"bound")
        text, _ = self.c.execute("print(open('/app/data/b.txt').read())\nopen('/app/data/c.txt','w').write('from kernel')")
        self.assertIn("bound", text)
        with open(os.path.join(self.bound, "c.txt")) as f:
            self.assertEqual(f.read(), "from kernel")


if __name__ == "__main__":
    unittest.main()
