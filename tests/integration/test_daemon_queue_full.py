"""A daemon socket that is listening but never accepts (its listen queue
full) must not hold `ipybox mcp` or the Python SDK in connect(2): they give up within a bound
and then behave as with a daemon that does not answer (an error, or the embedded supervisor
with IPYBOX_FALLBACK=embedded)."""
import asyncio
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX, ROOT, McpClient, require_sandbox  # noqa: E402

# The bound: the connect waits 5 s (client/cli.h); the rest is slack for a loaded host.
BOUND = 40


class FullQueue:
    """A unix socket bound and listening with backlog 0, never accepting, its queue filled
    with real connections; at path (made in a private directory unless given)."""

    def __init__(self, path=None):
        self.tmp = None
        if path is None:
            self.tmp = tempfile.TemporaryDirectory(prefix="ipybox-f1-")
            path = os.path.join(self.tmp.name, "ipybox.sock")
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(0)
        self.queued = []
        while len(self.queued) < 64:
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.setblocking(False)
            try:
                c.connect(path)
            except BlockingIOError:
                c.close()
                break
            self.queued.append(c)

    def is_full(self):
        """Whether a blocking connect waits (and gives up after 0.3 s) rather than connecting."""
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 300000))
        try:
            c.connect(self.path)
            return False
        except BlockingIOError:
            return True
        finally:
            c.close()

    def close(self):
        for c in self.queued:
            c.close()
        self.listener.close()
        if self.tmp:
            self.tmp.cleanup()
        elif os.path.exists(self.path):
            os.unlink(self.path)


class IpyboxMcp(unittest.TestCase):
    def setUp(self):
        self.q = FullQueue()
        self.addCleanup(self.q.close)
        self.assertTrue(self.q.is_full(), "the listen queue could not be filled")
        self.state = tempfile.TemporaryDirectory(prefix="ipybox-f1-state-")
        self.addCleanup(self.state.cleanup)
        self.env = dict(os.environ, XDG_STATE_HOME=self.state.name)
        self.env.pop("IPYBOX_FALLBACK", None)
        self.env.pop("IPYBOX_CONNECT_TIMEOUT", None)

    def run_mcp(self, *args, env=None):
        t0 = time.monotonic()
        r = subprocess.run([IPYBOX, "mcp", *args], input=b"", capture_output=True, timeout=BOUND,
                           env=env or self.env)
        return r, time.monotonic() - t0

    def test_connect_to_a_full_queue_is_an_error_within_the_bound(self):
        r, took = self.run_mcp("--connect", self.q.path)
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 1, err)
        self.assertIn("ipyboxd at %s did not accept the connection within 5 s" % self.q.path, err)
        self.assertIn("listen queue is full", err)
        self.assertGreaterEqual(took, 4.5)  # it did wait for room in the queue
        self.assertEqual(r.stdout, b"")

    def test_a_shorter_connect_timeout_bounds_the_connect_too(self):
        env = dict(self.env, IPYBOX_CONNECT_TIMEOUT="1")
        r, _ = self.run_mcp("--connect", self.q.path, env=env)
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 1, err)
        self.assertIn("did not accept the connection within 1 s", err)

    def test_the_conventional_socket_full_is_the_same_error(self):
        # $XDG_RUNTIME_DIR/ipybox/ipybox.sock, found without --connect.
        with tempfile.TemporaryDirectory(prefix="ipybox-f1-run-") as rt:
            os.mkdir(os.path.join(rt, "ipybox"), 0o700)
            q = FullQueue(os.path.join(rt, "ipybox", "ipybox.sock"))
            try:
                self.assertTrue(q.is_full())
                r, _ = self.run_mcp(env=dict(self.env, XDG_RUNTIME_DIR=rt))
            finally:
                q.close()
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 1, err)
        self.assertIn("ipyboxd at %s/ipybox/ipybox.sock did not accept the connection" % rt, err)
        self.assertNotIn("running the embedded supervisor", err)

    def test_with_fallback_it_runs_embedded_and_answers(self):
        require_sandbox(self)
        env = dict(self.env, IPYBOX_FALLBACK="embedded")
        t0 = time.monotonic()
        c = McpClient("--connect", self.q.path, env=env, initialize=False)
        try:
            init = c.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                            "clientInfo": {"name": "f1", "version": "1"}}, timeout=BOUND + 60)
            self.assertIn("serverInfo", init)
            c.notify("notifications/initialized")
            text, r = c.execute("6 * 7")
            self.assertFalse(r["isError"], text)
            self.assertEqual(text.strip(), "42")
        finally:
            c.proc.stdin.close()
            c.proc.wait(60)
            err = c.proc.stderr.read().decode(errors="replace")
            c.close()
        self.assertLess(time.monotonic() - t0, BOUND + 120)
        self.assertIn("did not accept the connection within 5 s", err)
        self.assertIn("running the embedded supervisor instead (IPYBOX_FALLBACK=embedded)", err)


class Sdk(unittest.TestCase):
    def test_the_sdk_gives_up_with_the_reason(self):
        sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))
        from ipybox_native import Sandbox, SandboxError
        q = FullQueue()
        self.addCleanup(q.close)
        self.assertTrue(q.is_full())

        async def start():
            async with Sandbox(socket=q.path, ipybox=IPYBOX):
                pass

        t0 = time.monotonic()
        with self.assertRaises(SandboxError) as cm:
            asyncio.run(asyncio.wait_for(start(), BOUND))
        took = time.monotonic() - t0
        self.assertIn("ipyboxd at %s did not accept the connection within 5 s" % q.path, str(cm.exception))
        self.assertGreaterEqual(took, 4.5)
        # Still full: the SDK took no connection it then dropped.
        self.assertTrue(q.is_full())


if __name__ == "__main__":
    unittest.main()
