"""A failed SDK start says its error and nothing else: no "Future exception was never
retrieved ... BrokenPipeError" or other asyncio noise on stderr (issue 20).

Each case runs many failing starts in a subprocess under PYTHONASYNCIODEBUG=1, -X dev and
-W error, collects garbage (where asyncio reports futures whose exception nobody took), and
checks that stderr holds exactly one line per start: the SandboxError the script printed.
The broken pipe is racy (it needs the supervisor to close its input before the SDK's first
write leaves), so the fast case runs 200 starts; before the fix about one in seven left the
message behind."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SDK = os.path.join(ROOT, "sdk", "python")
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

from ipybox_test import IPYBOX  # noqa: E402

PY = "/usr/bin/python3"

# Starts a Sandbox N times with the given keywords; prints each SandboxError as one "ERR" line.
SCRIPT = r"""
import asyncio, gc, json, sys
sys.path.insert(0, sys.argv[1])
from ipybox_native import Sandbox, SandboxError
kw = json.loads(sys.argv[2])
async def main():
    # Debug mode also reports callbacks slower than 0.1 s: on a busy machine, any are.
    asyncio.get_running_loop().slow_callback_duration = 3600
    for _ in range(int(sys.argv[3])):
        try:
            async with Sandbox(**kw):
                print("started?!", file=sys.stderr)
        except SandboxError as e:
            print("ERR " + " ".join(str(e).split()), file=sys.stderr)
        gc.collect()
asyncio.run(main())
gc.collect()
"""

# A supervisor that closes its input and ends at once (what a bad option does, faster).
CLOSES_INPUT = "#!/bin/sh\nexec 0<&-\nexit 2\n"


class FailedStartIsQuiet(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ipybox-sdk-noise-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_starts(self, kw, n, expect):
        env = dict(os.environ, PYTHONASYNCIODEBUG="1")
        p = subprocess.run([PY, "-X", "dev", "-W", "error", "-c", SCRIPT, SDK, __import__("json").dumps(kw), str(n)],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                           timeout=300, cwd=self.tmp)
        err = p.stderr.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 0, err[-3000:])
        lines = err.splitlines()
        self.assertEqual(len(lines), n, "stderr has more than the %d errors:\n%s" % (n, err[-3000:]))
        for line in lines:
            self.assertTrue(line.startswith("ERR ") and expect in line, "unexpected stderr line: %r\n%s"
                            % (line, err[-3000:]))

    def test_supervisor_that_closes_its_input_at_once(self):
        fake = os.path.join(self.tmp, "ipybox")
        with open(fake, "w") as f:
            f.write(CLOSES_INPUT)
        os.chmod(fake, 0o755)
        self.run_starts({"transport": "embedded", "ipybox": fake}, 200, "exited with status 2")

    def test_bad_option(self):
        self.run_starts({"transport": "embedded", "ipybox": IPYBOX, "memory": "bogus"}, 20,
                        "--memory 'bogus': expected a size")

    def test_binary_missing(self):
        self.run_starts({"transport": "embedded", "ipybox": os.path.join(self.tmp, "nonexistent")}, 20,
                        "cannot find the ipybox binary")

    def test_daemon_socket_refusing(self):
        path = os.path.join(self.tmp, "refusing.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)  # bound, never listening: connect() is refused
        try:
            self.run_starts({"socket": path, "ipybox": IPYBOX}, 20, "cannot reach ipyboxd at " + path)
        finally:
            s.close()

    def test_daemon_that_hangs_up(self):
        path = os.path.join(self.tmp, "hangup.sock")
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(path)
        srv.listen(64)
        stop = threading.Event()

        def serve():
            while not stop.is_set():
                try:
                    c, _ = srv.accept()
                except OSError:
                    return
                c.close()  # accepts, then closes before any answer

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            self.run_starts({"socket": path, "ipybox": IPYBOX}, 50, "ipyboxd")
        finally:
            stop.set()
            srv.shutdown(socket.SHUT_RDWR)
            srv.close()
            t.join(5)


if __name__ == "__main__":
    unittest.main()
