"""Host paths of upload_file / download_file under attack from the kernel (attack catalog,
Filesystem: "a rename race during the copy"), and host files that never answer.

The workspace lies inside an allowed directory, so kernel code can change a host path the
client names: it swaps a real directory for a symlink leading outside the allowed
directories (renameat2 RENAME_EXCHANGE, in a loop, in a process of its own) while the test
calls upload_file and download_file thousands of times. Nothing outside may be read into
/app or written; a FIFO swapped in for a file may not block the server. A file on a FUSE
file system that does not answer (tests/lib/stallfs.py) may not stop the server either: it
keeps answering ping, the call can be cancelled or times out, and once the file system
answers nothing is left behind and no descriptor is kept."""
import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from daemon_fixture import Daemon  # noqa: E402
from ipybox_test import McpClient, require_sandbox, wait_for  # noqa: E402
import stallfs  # noqa: E402

# The kernel's flipper: exchanges two names as fast as it can until killed.
FLIPPER = r'''
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = sys.argv[1].encode(), sys.argv[2].encode()
AT_FDCWD, RENAME_EXCHANGE = -100, 2
if hasattr(libc, "renameat2"):
    swap = lambda: libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
else:  # x86_64 renameat2
    libc.syscall.restype = ctypes.c_long
    swap = lambda: libc.syscall(316, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
if swap() != 0:
    print("renameat2 failed: errno", ctypes.get_errno(), flush=True)
    sys.exit(1)
while True:
    swap()
'''

# The kernel's appender: grows /app/grow.bin by 64 KiB a millisecond, to 128 MiB at most.
GROWER = r'''
import time
with open("/app/grow.bin", "wb", buffering=0) as f:
    for _ in range(2048):
        f.write(b"x" * 65536)
        time.sleep(0.001)
'''

# Bounds of each race: whichever comes first.
RACE_SECONDS = 6
RACE_CALLS = 20000


def walk_files(d):
    out = []
    for root, dirs, files in os.walk(d):
        out += [os.path.join(root, x) for x in files + dirs]
    return out


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class HostPathRaceTest(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.base = tempfile.mkdtemp(prefix="ipybox-races-")
        self.allowed = os.path.join(self.base, "allowed")
        self.ws = os.path.join(self.allowed, "ws")
        self.outside = os.path.join(self.base, "outside")
        os.makedirs(self.ws)
        os.makedirs(self.outside)
        self.secret = os.path.join(self.outside, "secret.txt")
        with open(self.secret, "w") as f:
            f.write("TOP-SECRET host file")
        self.c = McpClient("--workspace", self.ws, "--allowed-dir", self.allowed)

    def tearDown(self):
        try:
            self.c.call("execute_ipython_cell", {"code": "flipper.kill()\nflipper.wait()"}, timeout=10)
        except Exception:
            self.c.proc.kill()  # a server stuck in the host's kernel (as before the fix) answers nothing
        self.c.close()
        shutil.rmtree(self.base, ignore_errors=True)

    def start_flipper(self, setup, a, b):
        text, r = self.c.execute(
            "import os, subprocess, sys, time\n" + setup +
            "\nflipper = subprocess.Popen([sys.executable, '-c', %r, %r, %r])\ntime.sleep(0.3)\n"
            "print('flipping' if flipper.poll() is None else 'flipper exited %%s' %% flipper.returncode)"
            % (FLIPPER, a, b))
        self.assertIn("flipping", text, text)

    def stop_flipper(self):
        text, _ = self.c.execute("alive = flipper.poll() is None\nflipper.kill()\nflipper.wait()\nprint(alive)")
        self.assertIn("True", text, "the flipper stopped during the race: " + text)

    def call(self, tool, timeout=15, **args):
        r = self.c.call(tool, args, timeout=timeout)
        return r["isError"], r["content"][0]["text"]

    def race(self, fn):
        """Calls fn() until the time or count bound; returns how many calls were made."""
        deadline = time.time() + RACE_SECONDS
        n = 0
        while n < RACE_CALLS and time.time() < deadline:
            fn()
            n += 1
        return n

    def assert_outside_untouched(self):
        self.assertEqual(walk_files(self.outside), [self.secret])
        with open(self.secret) as f:
            self.assertEqual(f.read(), "TOP-SECRET host file")

    def assert_no_temp_files(self):
        left = [p for p in walk_files(self.base) if os.path.basename(p).startswith(".ipybox-tmp")]
        self.assertEqual(left, [])

    def test_directory_swapped_for_symlink_during_upload_and_download(self):
        # /app/race/d: a real directory holding a harmless secret.txt; /app/race/s: a symlink to
        # the host directory that holds the real one. The kernel exchanges the two names.
        self.start_flipper("os.makedirs('/app/race/d')\nopen('/app/race/d/secret.txt', 'w').write('public')\n"
                           "os.symlink(%r, '/app/race/s')\nopen('/app/payload.txt', 'w').write('payload')"
                           % self.outside, "/app/race/d", "/app/race/s")
        src = os.path.join(self.ws, "race", "d", "secret.txt")
        got = os.path.join(self.ws, "got.txt")
        outcomes = {"ok": 0, "refused": 0}
        leaked = []

        def upload():
            err, text = self.call("upload_file", relpath="got.txt", local_path=src)
            if err:
                outcomes["refused"] += 1
                return
            outcomes["ok"] += 1
            with open(got) as f:
                if "TOP-SECRET" in f.read():
                    leaked.append(text)

        n = self.race(upload)
        self.assertEqual(leaked, [], "the host secret reached /app")
        # Both sides of the race were met: the swap really happened under the calls.
        self.assertGreater(outcomes["ok"], 0, outcomes)
        self.assertGreater(outcomes["refused"], 0, outcomes)
        self.assert_outside_untouched()

        dl = {"ok": 0, "refused": 0}
        messages = set()

        def download():
            # new/ does not exist in either: its creation goes through the swapped name.
            err, text = self.call("download_file", relpath="payload.txt",
                                  local_path=os.path.join(self.ws, "race", "d", "new", "out.txt"))
            dl["refused" if err else "ok"] += 1
            if err:
                messages.add(text.split(": ", 1)[-1][:200])
            if os.listdir(self.outside) != ["secret.txt"]:
                leaked.append(text)

        m = self.race(download)
        self.stop_flipper()
        self.assertEqual(leaked, [], "download_file wrote outside the allowed directories")
        self.assertGreater(dl["refused"], 0, dl)
        # The symlink lies in the workspace: refused as one kernel code may have planted.
        self.assertTrue(any("a sandbox could write" in x for x in messages), messages)
        self.assert_outside_untouched()
        self.assert_no_temp_files()
        print("\n  %d uploads %s, %d downloads %s" % (n, outcomes, m, dl), file=sys.stderr)

    def test_fifo_swapped_in_for_a_file_never_blocks(self):
        # The kernel swaps a FIFO in for a regular file between any check and the open.
        self.start_flipper("os.makedirs('/app/fr')\nopen('/app/fr/x', 'w').write('regular')\nos.mkfifo('/app/fr/y')",
                           "/app/fr/x", "/app/fr/y")
        src = os.path.join(self.ws, "fr", "x")
        seen = {"ok": 0, "fifo": 0}

        def upload():
            # A call that blocks never returns: read_message's timeout fails the test.
            err, text = self.call("upload_file", timeout=10, relpath="fr-copy.txt", local_path=src)
            if err:
                self.assertIn("not a regular file", text)
                seen["fifo"] += 1
            else:
                seen["ok"] += 1
        self.race(upload)
        self.stop_flipper()
        self.assertGreater(seen["fifo"], 0, seen)
        self.assertGreater(seen["ok"], 0, seen)
        # A FIFO made on the host is refused at once too.
        fifo = os.path.join(self.allowed, "host.fifo")
        os.mkfifo(fifo)
        err, text = self.call("upload_file", relpath="f.txt", local_path=fifo)
        self.assertTrue(err)
        self.assertIn("not a regular file (it is a FIFO)", text)
        self.assertEqual(self.c.request("ping", timeout=5), {})

    def test_download_of_a_growing_file_ends(self):
        # Kernel code keeps appending to the file being downloaded (64 KiB a millisecond, up to
        # 128 MiB): the copy takes the file as far as it reached when the copy began.
        text, _ = self.c.execute(
            "import subprocess, sys, os, time\n"
            "flipper = subprocess.Popen([sys.executable, '-c', %r])\n"
            "while not os.path.exists('/app/grow.bin') or os.path.getsize('/app/grow.bin') < (1 << 20):\n"
            "    time.sleep(0.01)\n"
            "print('growing')" % GROWER)
        self.assertIn("growing", text)
        dst = os.path.join(self.allowed, "grow.copy")
        err, text = self.call("download_file", timeout=60, relpath="grow.bin", local_path=dst)
        self.assertFalse(err, text)
        text, _ = self.c.execute("print('appending' if flipper.poll() is None else 'done')")
        self.assertIn("appending", text, "the download waited for the appender to finish")
        size = os.path.getsize(dst)
        self.assertGreaterEqual(size, 1 << 20)
        self.assertLess(size, 128 << 20)
        self.c.execute("flipper.kill()\nflipper.wait()\nos.remove('/app/grow.bin')")


class PlantedSymlinkTest(unittest.TestCase):
    """Symlinks kernel code plants in its workspace, pointing elsewhere beneath an allowed
    directory (as with the defaults: the workspace in $HOME or /tmp, beside the user's own
    files). upload_file and download_file never follow them."""

    def setUp(self):
        require_sandbox(self)
        # Default-like: one allowed directory holding the workspace and the user's files.
        self.base = tempfile.mkdtemp(prefix="ipybox-planted-")
        self.ws = os.path.join(self.base, "ws")
        self.ssh = os.path.join(self.base, "dot-ssh")
        self.hostdir = os.path.join(self.base, "hostdir")
        for d in (self.ws, self.ssh, self.hostdir):
            os.makedirs(d)
        self.key = os.path.join(self.ssh, "id_rsa")
        with open(self.key, "w") as f:
            f.write("TOP-SECRET host key")
        self.c = McpClient("--workspace", self.ws, "--allowed-dir", self.base)

    def tearDown(self):
        try:
            self.c.call("execute_ipython_cell", {"code": "try:\n    flipper.kill()\n    flipper.wait()\n"
                                                         "except NameError:\n    pass"}, timeout=10)
        except Exception:
            self.c.proc.kill()
        self.c.close()
        shutil.rmtree(self.base, ignore_errors=True)

    def call(self, tool, **args):
        r = self.c.call(tool, args, timeout=15)
        return r["isError"], r["content"][0]["text"]

    def app_holds_secret(self):
        for p in walk_files(self.ws):
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, errors="replace") as f:
                    if "TOP-SECRET" in f.read():
                        return p
        return None

    def assert_host_untouched(self):
        self.assertEqual(sorted(walk_files(self.ssh)), [self.key])
        with open(self.key) as f:
            self.assertEqual(f.read(), "TOP-SECRET host key")
        self.assertEqual(walk_files(self.hostdir), [])

    def test_planted_links_are_not_followed(self):
        text, _ = self.c.execute(
            "import os\n"
            "os.symlink(%r, '/app/data.csv')\n"        # absolute, to the key
            "os.symlink('../dot-ssh/id_rsa', '/app/rel.csv')\n"  # relative: the host resolves it
            "os.symlink(%r, '/app/dir')\n"             # a host directory
            "os.makedirs('/app/sub')\n"
            "os.symlink(%r, '/app/sub/inner')\n"
            "open('/app/payload.txt', 'w').write('ssh-ed25519 AAAA attacker')\n"
            "print('planted')" % (self.key, self.hostdir, self.ssh))
        self.assertIn("planted", text)
        for name in ("data.csv", "rel.csv", "sub/inner/id_rsa"):
            err, text = self.call("upload_file", relpath="got-" + name.replace("/", "-"),
                                  local_path=os.path.join(self.ws, name))
            self.assertTrue(err, "upload of %s worked: %s" % (name, text))
            self.assertIn("a sandbox could write", text)
            self.assertIn("kernel code may have planted it", text)
            self.assertIn(os.path.join(self.ws, name.split("/inner")[0] + ("/inner" if "inner" in name else "")),
                          text)
        self.assertIsNone(self.app_holds_secret())
        for dest in ("dir/authorized_keys", "dir/new/authorized_keys", "sub/inner/authorized_keys",
                     "sub/../dir/authorized_keys"):
            err, text = self.call("download_file", relpath="payload.txt", local_path=os.path.join(self.ws, dest))
            self.assertTrue(err, "download to %s worked: %s" % (dest, text))
            self.assertIn("a sandbox could write", text)
        self.assert_host_untouched()
        # A planted link as the destination itself is replaced, not written through.
        err, text = self.call("download_file", relpath="payload.txt", local_path=os.path.join(self.ws, "data.csv"))
        self.assertFalse(err, text)
        self.assertFalse(os.path.islink(os.path.join(self.ws, "data.csv")))
        self.assert_host_untouched()
        # The user's own link, outside the workspace, is followed as before.
        mine = os.path.join(self.base, "my-link")
        os.symlink(self.key, mine)
        err, text = self.call("upload_file", relpath="mine.txt", local_path=mine)
        self.assertFalse(err, text)
        with open(os.path.join(self.ws, "mine.txt")) as f:
            self.assertEqual(f.read(), "TOP-SECRET host key")

    def test_directory_and_link_swapped_during_calls(self):
        # /app/d: a real directory holding a harmless id_rsa; /app/s: a symlink to the host
        # directory that holds the real one (inside the allowed directory). The kernel
        # exchanges the two names as fast as it can.
        text, _ = self.c.execute(
            "import os, subprocess, sys, time\n"
            "os.makedirs('/app/d')\nopen('/app/d/id_rsa', 'w').write('public')\n"
            "os.symlink(%r, '/app/s')\nopen('/app/payload.txt', 'w').write('payload')\n"
            "flipper = subprocess.Popen([sys.executable, '-c', %r, '/app/d', '/app/s'])\ntime.sleep(0.3)\n"
            "print('flipping' if flipper.poll() is None else 'flipper exited %%s' %% flipper.returncode)"
            % (self.ssh, FLIPPER))
        self.assertIn("flipping", text, text)
        src = os.path.join(self.ws, "d", "id_rsa")
        up = {"ok": 0, "refused": 0}
        leaked = []
        deadline = time.time() + 2 * RACE_SECONDS
        while up["ok"] + up["refused"] < RACE_CALLS and time.time() < deadline:
            err, text = self.call("upload_file", relpath="got.txt", local_path=src)
            up["refused" if err else "ok"] += 1
            if not err:
                with open(os.path.join(self.ws, "got.txt")) as f:
                    if "TOP-SECRET" in f.read():
                        leaked.append(text)
        self.assertEqual(leaked, [], "the host key reached /app")
        self.assertGreater(up["ok"], 0, up)
        self.assertGreater(up["refused"], 0, up)
        dl = {"ok": 0, "refused": 0}
        deadline = time.time() + 2 * RACE_SECONDS
        i = 0
        while dl["ok"] + dl["refused"] < RACE_CALLS and time.time() < deadline:
            i += 1
            # alternately an existing directory and one to make (its mkdirat goes through the name)
            dest = os.path.join(self.ws, "d", "out.txt" if i % 2 else "new%d/out.txt" % (i % 16))
            err, text = self.call("download_file", relpath="payload.txt", local_path=dest)
            dl["refused" if err else "ok"] += 1
            if sorted(os.listdir(self.ssh)) != ["id_rsa"]:
                leaked.append(text)
        text, _ = self.c.execute("alive = flipper.poll() is None\nflipper.kill()\nflipper.wait()\nprint(alive)")
        self.assertIn("True", text, "the flipper stopped during the race")
        self.assertEqual(leaked, [], "download_file wrote into the host directory")
        self.assertGreater(dl["refused"], 0, dl)
        self.assertIsNone(self.app_holds_secret())
        self.assert_host_untouched()
        print("\n  %d uploads %s, %d downloads %s" % (sum(up.values()), up, sum(dl.values()), dl), file=sys.stderr)


class StalledHostFileTest(unittest.TestCase):
    """A host file system that does not answer: the transfer waits on a thread; the server
    does not."""

    def setUp(self):
        require_sandbox(self)
        self.base = tempfile.mkdtemp(prefix="ipybox-stall-")
        self.ws = os.path.join(self.base, "ws")
        os.makedirs(self.ws)
        self.c = McpClient("--workspace", self.ws, "--allowed-dir", self.base)
        # A first call, so that the session's descriptors are all there before counting.
        self.c.execute("1")
        try:
            self.fs = stallfs.StallFS(parent=self.base, stall_names=["slow"])
        except OSError as e:
            self.c.close()
            self.skipTest("no FUSE here: %s" % e)
        self.fds = fd_count(self.c.proc.pid)

    def tearDown(self):
        self.fs.close()
        self.c.close()
        shutil.rmtree(self.base, ignore_errors=True)

    def pings_answered(self, n=3):
        for _ in range(n):
            t = time.time()
            self.assertEqual(self.c.request("ping", timeout=5), {})
            self.assertLess(time.time() - t, 2)

    def assert_released(self):
        """After the file system answers: no descriptor kept, nothing left in the workspace."""
        self.fs.answer()
        self.assertTrue(wait_for(lambda: fd_count(self.c.proc.pid) <= self.fds, 20),
                        "descriptors kept: %d > %d" % (fd_count(self.c.proc.pid), self.fds))
        self.assertEqual([p for p in walk_files(self.ws) if not p.startswith(os.path.join(self.ws, "images"))], [])
        # The server goes on serving calls.
        text, _ = self.c.execute("print('still here')")
        self.assertIn("still here", text)

    def test_upload_of_a_stalled_file_can_be_cancelled(self):
        rid = self.c.send_request("tools/call", {"name": "upload_file",
                                                 "arguments": {"relpath": "stalled.txt", "local_path": self.fs.file}})
        self.assertTrue(self.fs.wait_flushes(1), "the upload never reached the file")
        self.pings_answered()
        self.c.notify("notifications/cancelled", {"requestId": rid, "reason": "test"})
        # The next call runs at once; the cancelled one gets no answer.
        text, _ = self.c.execute("import os\nprint(sorted(os.listdir('/app')))")
        self.assertNotIn("stalled.txt", text)
        self.assertFalse([m for m in self.c.notifications if m.get("id") == rid])
        self.assert_released()
        self.assertFalse(os.path.exists(os.path.join(self.ws, "stalled.txt")))

    def test_upload_of_a_stalled_file_times_out(self):
        rid = self.c.send_request("tools/call", {"name": "upload_file", "arguments": {
            "relpath": "stalled.txt", "local_path": self.fs.file, "timeout": 2}})
        self.assertTrue(self.fs.wait_flushes(1))
        self.pings_answered()
        r = self.c.wait_response(rid, timeout=20)["result"]
        self.assertTrue(r["isError"])
        self.assertIn("did not finish within 2 s", r["content"][0]["text"])
        self.pings_answered(1)
        self.assert_released()

    def test_download_into_a_stalled_directory_times_out(self):
        self.c.execute("open('/app/out.txt', 'w').write('x')")
        self.fds = fd_count(self.c.proc.pid)
        rid = self.c.send_request("tools/call", {"name": "download_file", "arguments": {
            "relpath": "out.txt", "local_path": os.path.join(self.fs.dir, "slow", "out.txt"), "timeout": 2}})
        self.assertTrue(self.fs.wait_lookups(1), "the download never looked the directory up")
        self.pings_answered()
        r = self.c.wait_response(rid, timeout=20)["result"]
        self.assertTrue(r["isError"])
        self.assertIn("did not finish within 2 s", r["content"][0]["text"])
        self.fs.answer()
        self.assertTrue(wait_for(lambda: fd_count(self.c.proc.pid) <= self.fds, 20))
        self.assertFalse(os.path.exists(os.path.join(self.fs.dir, "slow")))
        self.c.execute("import os\nos.remove('/app/out.txt')")
        self.assert_released()


class StalledHostFileDaemonTest(unittest.TestCase):
    """The same through ipyboxd: the session's worker keeps serving its session."""

    def setUp(self):
        require_sandbox(self)
        self.base = tempfile.mkdtemp(prefix="ipybox-stall-d-")
        self.ws = os.path.join(self.base, "ws")
        os.makedirs(self.ws)
        self.d = Daemon()
        self.c = self.d.client()
        self.c.request("ipybox/createSession", {"name": "stall", "args": ["--workspace", self.ws,
                                                                          "--allowed-dir", self.base]})
        try:
            self.fs = stallfs.StallFS(parent=self.base)
        except OSError as e:
            self.c.close()
            self.d.close()
            self.skipTest("no FUSE here: %s" % e)

    def tearDown(self):
        self.fs.close()
        self.c.close()
        self.d.close()
        shutil.rmtree(self.base, ignore_errors=True)

    def test_cancelled_upload_of_a_stalled_file(self):
        rid = self.c.send_request("tools/call", {"name": "upload_file",
                                                 "arguments": {"relpath": "stalled.txt", "local_path": self.fs.file}})
        self.assertTrue(self.fs.wait_flushes(1), "the upload never reached the file")
        self.c.notify("notifications/cancelled", {"requestId": rid, "reason": "test"})
        # The worker runs the session's next call while the file system still does not answer.
        r = self.c.call("execute_ipython_cell", {"code": "print('served')"}, timeout=30)
        self.assertIn("served", r["content"][0]["text"])
        self.assertFalse([m for m in self.c.notifications if m.get("id") == rid])
        self.fs.answer()
        self.assertTrue(wait_for(lambda: walk_files(self.ws) == [] or
                                 all(p.startswith(os.path.join(self.ws, "images")) for p in walk_files(self.ws)),
                                 20), walk_files(self.ws))
        r = self.c.call("upload_file", {"relpath": "after.txt", "local_path": self.fs.file}, timeout=30)
        self.assertFalse(r["isError"], r)


if __name__ == "__main__":
    unittest.main()
