"""Resources running out: a full filesystem under the workspace and under the state directory
(small tmpfs mounts made by the test, as root), and a low fd limit for the supervisor. Calls
fail with a clear error or work, nothing half-written is left visible, nothing hangs or
crashes, and the session works again once space is freed."""
import base64
import contextlib
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlib  # noqa: E402
from faultlib import Baseline, FaultCase  # noqa: E402

# A 1x1 PNG, shown by a cell: ipybox saves images under /app/images/.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
FILL = ("import errno, os\n"
        "n = 0\n"
        "try:\n"
        "    with open(%r, 'wb') as f:\n"
        "        while True:\n"
        "            f.write(b'x' * 65536)\n"
        "            f.flush()\n"
        "            n += 1\n"
        "except OSError as e:\n"
        "    print('full', errno.errorcode[e.errno], n)\n")
SHOW_IMAGE = ("from IPython.display import Image, display\n"
              "import base64\n"
              "display(Image(data=base64.b64decode(%r)))\n"
              "print('shown')\n") % base64.b64encode(PNG).decode()
CLEAR = ("clear", "no space", "space", "enospc", "quota", "full")


def text_of(r):
    return "".join(c.get("text", "") for c in r.get("content", []) if c.get("type") == "text")


class ResourceCase(FaultCase):
    def tmpfs(self, name, size):
        path = os.path.join(self.tmp, name)
        os.makedirs(path, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0755" % size, "ipybox-faults", path],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise unittest.SkipTest("cannot mount a tmpfs (root needed): " + r.stderr.strip())
        self.addCleanup(subprocess.run, ["umount", "-l", path])
        return path

    def assert_clear_error(self, text, what):
        self.assertTrue(any(w in text.lower() for w in CLEAR[1:]),
                        "%s failed without saying the disk is full: %r" % (what, text[-2000:]))


class TestFullWorkspace(ResourceCase):
    def test_full_workspace(self):
        ws = self.tmpfs("ws", "16m")
        src = faultlib.make_upload_source(self.tmp, 32 << 20)
        s = self.session()
        base = Baseline(s)
        # An upload bigger than the filesystem: a clear error, nothing visible in /app.
        r = s.call("upload_file", {"relpath": "big.bin", "local_path": src})
        self.assertTrue(r.get("isError"), text_of(r))
        self.assert_clear_error(text_of(r), "upload_file")
        self.assertEqual(set(os.listdir(ws)) - base.workspace, set(), "a failed upload left files in /app")
        # A cell fills the disk: its own error; an image cannot be saved; the call still ends.
        text, r = s.execute(FILL % "/app/filler")
        self.assertIn("full ENOSPC", text)
        text, r = s.execute(SHOW_IMAGE)
        self.assertIn("shown", text)
        images = os.path.join(ws, "images")
        for n in os.listdir(images) if os.path.isdir(images) else []:
            self.assertEqual(os.path.getsize(os.path.join(images, n)), len(PNG), "a half-written image: " + n)
        small = os.path.join(self.tmp, "small.bin")
        with open(small, "wb") as f:
            f.write(os.urandom(1 << 20))
        r = s.call("upload_file", {"relpath": "small.bin", "local_path": small})
        self.assertTrue(r.get("isError"), text_of(r))
        self.assert_clear_error(text_of(r), "upload_file")
        self.assertFalse(os.path.exists(os.path.join(ws, "small.bin")))
        self.assertEqual(set(os.listdir(ws)) - base.workspace - {"filler", "images"}, set(),
                         "failed writes left files in /app")
        # Space freed: everything works again, in the same session.
        os.unlink(os.path.join(ws, "filler"))
        r = s.call("upload_file", {"relpath": "small.bin", "local_path": small})
        self.assertFalse(r.get("isError"), text_of(r))
        self.assertEqual(os.path.getsize(os.path.join(ws, "small.bin")), 1 << 20)
        text, r = s.execute("print(open('/app/small.bin', 'rb').read() == open('/app/small.bin', 'rb').read(), 1+1)")
        self.assertIn("True 2", text)
        os.unlink(os.path.join(ws, "small.bin"))
        with contextlib.suppress(FileNotFoundError):
            subprocess.run(["rm", "-rf", images])
        self.close_and_assert_clean(s, base)


class TestFullStateDir(ResourceCase):
    def test_full_state_directory(self):
        state = self.tmpfs("state", "8m")
        filler = os.path.join(state, "filler")

        def fill():
            with open(filler, "ab") as f:
                with contextlib.suppress(OSError):
                    while True:
                        f.write(b"x" * 65536)
                        f.flush()

        # Full from the start: the session fails to start with a clear error, or works.
        fill()
        try:
            s = self.session(state=state)
        except (EOFError, AssertionError) as e:
            self.assert_clear_error(str(e), "the session's start")
        else:
            base = Baseline(s)
            text, r = s.execute("print(1+1)")
            if r.get("isError"):
                self.assert_clear_error(text, "a cell")
            else:
                self.assertIn("2", text)
            self.close_and_assert_clean(s, base)
        os.unlink(filler)
        # Full during a session: cells (their history goes to $HOME in the state directory),
        # reset (a new kernel's connection file) fail clearly or work; freed, all works again.
        s = self.session(state=state)
        base = Baseline(s)
        text, r = s.execute("x = 41\nprint('set')")
        self.assertIn("set", text)
        fill()
        text, r = s.execute("print(x + 1)")
        if r.get("isError"):
            self.assert_clear_error(text, "a cell")
        else:
            self.assertIn("42", text)
        r = s.call("reset")
        if r.get("isError"):
            self.assert_clear_error(text_of(r), "reset")
        text, r = s.execute("print('after reset')")
        if r.get("isError"):
            self.assert_clear_error(text, "a cell after reset")
        os.unlink(filler)
        text, r = s.execute("print(1+1)")
        if r.get("isError") and faultlib.death_report(text, r):
            text, r = s.execute("print(1+1)")
        self.assertFalse(r.get("isError"), text)
        self.assertIn("2", text)
        self.assert_settled(s, base)
        self.close_and_assert_clean(s, base)


class TestLowFdLimit(FaultCase):
    def test_low_fd_limits(self):
        """RLIMIT_NOFILE of the supervisor from tight to barely enough: every call ends with a
        result or a clear error, the process never dies of a signal, nothing is left."""
        src = faultlib.make_upload_source(self.tmp, 8 << 20)
        for limit in (16, 32, 64, 96, 128):
            with self.subTest(nofile=limit):
                wrap = (lambda n: lambda cmd: ["prlimit", "--nofile=%d:%d" % (n, n), "--", *cmd])(limit)
                try:
                    s = self.session(*faultlib.tool_options(self.tmp), wrap=wrap)
                except EOFError as e:
                    self.assertIn("ipybox mcp", str(e))
                    self.assertRegex(str(e).lower(), "descriptor|too many open files|emfile|fd",
                                     "the start failed without saying why")
                    continue
                base = Baseline(s)
                for name, args in (("execute_ipython_cell", {"code": "print(1+1)"}),
                                   ("execute_ipython_cell", {"code": faultlib.TOOL_TOUCH}),
                                   ("upload_file", {"relpath": "u.bin", "local_path": src}),
                                   ("reset", {}),
                                   ("execute_ipython_cell", {"code": "print(1+1)"})):
                    try:
                        r = s.call(name, args)
                    except faultlib.McpError as e:
                        self.assertTrue(str(e).strip())
                        continue
                    if r.get("isError"):
                        self.assertTrue(text_of(r).strip(), "%s: an error without text" % name)
                    path = os.path.join(s.workspace, "u.bin")
                    if os.path.exists(path):
                        self.assertEqual(os.path.getsize(path), 8 << 20, "a half-written upload")
                self.assertIsNone(s.client.proc.poll(), "the supervisor died: %s" % s.client.stderr_text())
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(s.workspace, "u.bin"))
                self.close_and_assert_clean(s, base)
                self.assertGreaterEqual(s.client.proc.returncode, 0, "the supervisor died of a signal")


if __name__ == "__main__":
    unittest.main()
