"""ipyboxd under faults: a client that stops reading (backpressure, bounded memory, others
served), a worker killed by a signal (told as such), idle connections (dropped after a
deadline, never locking out a real client) and refusals (logged at a bounded rate), and the
bridge `ipybox mcp` whose client closes stdin (the running call finishes, queued ones start
only while the client reads)."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from daemon_fixture import Daemon  # noqa: E402
from ipybox_test import IPYBOX, McpError, alive, descendants, require_sandbox, wait_for  # noqa: E402


def workers(daemon_pid):
    """The daemon's worker processes (`ipybox mcp --embedded`)."""
    out = []
    for p in descendants(daemon_pid):
        try:
            with open("/proc/%d/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"--embedded" in argv and b"mcp" in argv:
            out.append(p)
    return out


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


class DaemonFaultCase(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.daemons = []

    def tearDown(self):
        for d in self.daemons:
            d.close()

    def daemon(self, *args, **kw):
        d = Daemon(*args, **kw)
        self.daemons.append(d)
        return d


class WorkerDeath(DaemonFaultCase):
    def test_a_worker_killed_by_a_signal_is_reported_as_such(self):
        d = self.daemon()
        a, b = d.client(), d.client()
        a.request("ipybox/createSession", {"name": "k"})
        b.request("ipybox/attachSession", {"name": "k"})
        self.assertEqual(a.execute("print(1)")[0], "1\n")
        [w] = workers(d.proc.pid)
        rid = a.send_request("tools/call", {"name": "execute_ipython_cell",
                                            "arguments": {"code": "import time; time.sleep(60)"}})
        time.sleep(1)
        os.kill(w, signal.SIGKILL)
        msg = a.wait_response(rid, 60)
        text = msg["error"]["message"]
        self.assertIn("The session 'k' ended unexpectedly: its worker was killed by signal 9", text)
        self.assertNotIn("ready in", text)  # not the start-up banner
        self.assertEqual(msg["error"]["code"], -32000)
        # The other client is told the same at its next call.
        with self.assertRaises(McpError) as e:
            b.execute("print(2)")
        self.assertIn("killed by signal 9", str(e.exception))
        self.assertIn("session k: the worker was killed by signal 9", d.log_text())
        self.assertEqual(a.request("ping"), {})

    def test_a_worker_that_cannot_start_says_why(self):
        d = self.daemon()
        c = d.client()
        with self.assertRaises(McpError) as e:
            c.request("ipybox/createSession", {"args": ["--allowed-domain", "*"]})
        text = str(e.exception)
        self.assertIn("could not start: ", text)
        self.assertIn("*", text)  # the worker's own sentence
        self.assertIn("(its worker exited with status 2)", text)
