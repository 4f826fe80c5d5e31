"""ipyboxd under faults: a client that stops reading (backpressure, bounded memory, others
served), a worker killed by a signal (told as such), idle connections (dropped after a
deadline, never locking out a real client) and refusals (logged at a bounded rate), and the
bridge `ipybox mcp` whose client closes stdin (the running call finishes, queued ones start
only while the client reads)."""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from daemon_fixture import DaemonCase  # noqa: E402
from ipybox_test import IPYBOX, McpError, alive, wait_for  # noqa: E402


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


class WorkerDeath(DaemonCase):
    def test_a_worker_killed_by_a_signal_is_reported_as_such(self):
        d = self.daemon()
        a, b = d.client(), d.client()
        a.request("ipybox/createSession", {"name": "k"})
        b.request("ipybox/attachSession", {"name": "k"})
        self.assertEqual(a.execute("print(1)")[0], "1\n")
        [w] = d.workers()
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


def closed_by_peer(sock, timeout):
    """Whether the daemon closed sock within timeout (EOF, or a reset)."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


class IdleConnections(DaemonCase):
    DEADLINE_MS = 4000

    def setUp(self):
        super().setUp()
        os.environ["IPYBOXD_FIRST_REQUEST_MS"] = str(self.DEADLINE_MS)

    def tearDown(self):
        os.environ.pop("IPYBOXD_FIRST_REQUEST_MS", None)
        super().tearDown()

    def test_idle_connections_do_not_lock_out_a_real_client_and_are_dropped(self):
        d = self.daemon()  # --max-clients 256
        idle = []
        try:
            for _ in range(300):
                s = socket.socket(socket.AF_UNIX)
                s.connect(d.sock)
                idle.append(s)
            t0 = time.monotonic()
            real = d.client()  # connects and initializes at once: it is let in
            self.assertEqual(real.request("ping"), {})
            self.assertLess(time.monotonic() - t0, self.DEADLINE_MS / 1000,
                            "the real client waited for the idle ones to be dropped")
            # A connection that has sent half a request is no better than a silent one.
            half = socket.socket(socket.AF_UNIX)
            half.connect(d.sock)
            half.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping"')
            idle.append(half)
            deadline = time.monotonic() + self.DEADLINE_MS / 1000 + 10
            for s in idle:
                self.assertTrue(closed_by_peer(s, max(0.1, deadline - time.monotonic())),
                                "an idle connection was not dropped")
            # The real client sat idle past the deadline too, but had spoken: it stays.
            time.sleep(self.DEADLINE_MS / 1000 + 1.5)
            self.assertEqual(real.request("ping"), {})
            self.assertEqual(real.execute("print(6 * 7)")[0], "42\n")
        finally:
            for s in idle:
                s.close()
        # Each drop is logged or counted, in a few lines.
        self.assertTrue(wait_for(lambda: "more connections dropped" in d.log_text(), 20), d.log_text()[-2000:])
        log = d.log_text()
        lines = [line for line in log.splitlines() if ": dropped" in line]
        self.assertLessEqual(len(lines), 3, log[-3000:])
        counted = sum(int(m) for m in re.findall(r"(\d+) more connections dropped", log))
        self.assertEqual(len(lines) + counted, len(idle), log[-3000:])

    def test_refusals_are_logged_at_a_bounded_rate(self):
        d = self.daemon("--max-clients", "3")
        clients = [d.client() for _ in range(3)]  # each has spoken: none gives way
        n = 200
        for _ in range(n):
            s = socket.socket(socket.AF_UNIX)
            s.connect(d.sock)
            self.assertTrue(closed_by_peer(s, 10), "a connection past --max-clients was kept")
            s.close()
        for c in clients:
            self.assertEqual(c.request("ping"), {})
        # The first refusal is logged at once, the rest as one count within the period.
        self.assertTrue(wait_for(lambda: "more connections refused at --max-clients" in d.log_text(), 20),
                        d.log_text()[-2000:])
        log = d.log_text()
        logged = [line for line in log.splitlines() if "refused a connection from pid" in line]
        self.assertLessEqual(len(logged), 3, log[-3000:])
        counted = sum(int(m) for m in re.findall(r"(\d+) more connections refused at --max-clients", log))
        self.assertEqual(len(logged) + counted, n, log[-3000:])


class StalledClient(DaemonCase):
    def test_a_client_that_stops_reading_holds_its_session_not_the_daemon(self):
        d = self.daemon()
        stalled, other = d.client(), d.client()
        stalled.request("ipybox/createSession", {"name": "s"})
        self.assertEqual(stalled.execute("x = 1; print(x)")[0], "1\n")
        base = rss_kib(d.proc.pid)
        # About 200 MB of output, streamed as progress, and the client reads none of it.
        code = "for i in range(200):\n    print('y' * 999_999, flush=True)\nprint('done')"
        rid = stalled.send_request("tools/call", {"name": "execute_ipython_cell",
                                                  "arguments": {"code": code, "timeout": 600}},
                                   meta={"progressToken": "p"})
        peak = base
        t_end = time.monotonic() + 20
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            self.assertEqual(other.request("ping", timeout=10), {})
            self.assertLess(time.monotonic() - t0, 5, "a ping waited for the stalled client")
            peak = max(peak, rss_kib(d.proc.pid))
            time.sleep(0.5)
        self.assertLess(peak - base, 32 << 10, "the daemon's RSS grew by %d KiB" % (peak - base))
        # It reads again: it was never dropped, the cell ends with all of its output streamed,
        # and the session lives on with its state.
        streamed = 0
        while True:
            msg = stalled.read_message(180)
            if msg.get("id") == rid:
                break
            streamed += len(msg["params"].get("message", ""))
        self.assertEqual(msg["result"]["isError"], False)
        self.assertTrue(msg["result"]["content"][0]["text"].endswith("done\n"))
        self.assertGreaterEqual(streamed, 200 * 1_000_000)
        self.assertEqual(stalled.execute("print(x + 1)")[0], "2\n")
        self.assertEqual(other.request("ping"), {})
        print("daemon RSS: base %d KiB, peak %d KiB with a stalled client" % (base, peak), file=sys.stderr)


class BridgeStdinClosed(DaemonCase):
    """`ipybox mcp` through a daemon whose client closes stdin with calls still queued."""

    def start(self, d, close_stdout=False):
        ws = tempfile.mkdtemp(prefix="ipybox-ws-")
        self.addCleanup(subprocess.run, ["rm", "-rf", ws])
        from ipybox_test import McpClient
        c = McpClient("--workspace", ws, env=d.env)
        self.addCleanup(c.close)
        self.assertEqual(c.execute("print('up')")[0], "up\n")
        calls = [c.send_request("tools/call", {"name": "execute_ipython_cell", "arguments": {"code": code}})
                 for code in ("import time; time.sleep(3); open('/app/one', 'w').write('1')",
                              "open('/app/two', 'w').write('2')",
                              "open('/app/three', 'w').write('3')")]
        if close_stdout:
            c.proc.stdout.close()
        c.proc.stdin.close()
        return c, ws, calls

    def test_queued_calls_do_not_start_when_the_client_does_not_read(self):
        d = self.daemon()
        c, ws, calls = self.start(d)
        # It reads nothing: the running call finishes, the queued ones never start.
        c.proc.wait(60)
        self.assertEqual(c.proc.returncode, 0)
        self.assertTrue(os.path.exists(os.path.join(ws, "one")))
        self.assertFalse(os.path.exists(os.path.join(ws, "two")))
        self.assertFalse(os.path.exists(os.path.join(ws, "three")))
        self.assertIn("2 queued calls not started", c.proc.stderr.read().decode())
        # The running call's answer was delivered, and no other.
        msg = c.wait_response(calls[0], 10)
        self.assertEqual(msg["result"]["isError"], False)
        with self.assertRaises(EOFError):
            c.read_message(10)
        self.assertTrue(wait_for(lambda: not d.workers(), 30), "the session outlived its bridge")

    def test_queued_calls_run_while_the_client_reads(self):
        d = self.daemon()
        c, ws, calls = self.start(d)
        for rid in calls:
            self.assertEqual(c.wait_response(rid, 60)["result"]["isError"], False)
        c.proc.wait(60)
        self.assertEqual(c.proc.returncode, 0)
        for name in ("one", "two", "three"):
            self.assertTrue(os.path.exists(os.path.join(ws, name)), name)

    def test_a_client_gone_both_ways_interrupts_the_running_call(self):
        d = self.daemon()
        c, ws, calls = self.start(d, close_stdout=True)
        c.proc.wait(30)
        time.sleep(4)  # past the end the cell would have had
        for name in ("one", "two", "three"):
            self.assertFalse(os.path.exists(os.path.join(ws, name)), name)

    def test_a_client_that_stops_reading_after_closing_stdin_interrupts_the_running_call(self):
        d = self.daemon()
        c, ws, calls = self.start(d)
        time.sleep(1)  # the bridge has seen the end of stdin; the first call runs
        c.proc.stdout.close()
        c.proc.wait(30)
        time.sleep(4)
        for name in ("one", "two", "three"):
            self.assertFalse(os.path.exists(os.path.join(ws, name)), name)
