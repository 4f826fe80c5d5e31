"""ipyboxd --user: the daemon on a unix socket, driven by real clients against real kernels.
Sessions across connections (named, attached from a second connection, private anonymous
ones), `ipybox mcp` as a bridge and its fallback, bad and stalling clients next to working
ones, fifty concurrent sessions, the idle timeout, other users refused, and SIGTERM / SIGKILL
of the daemon leaving no process behind."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from daemon_fixture import IPYBOXD, PROTOCOL, DaemonCase  # noqa: E402
from ipybox_test import IPYBOX, McpClient, McpError, descendants, proc_cmdline, wait_for  # noqa: E402
import mcp_servers  # noqa: E402



def session_processes(pid):
    """The daemon's descendants but its private monitor (started when root runs it, for the
    daemon's whole life, like the daemon itself)."""
    return [p for p in descendants(pid) if b"--private-monitor" not in proc_cmdline(p).split(b"\0")]


class Sessions(DaemonCase):
    def test_named_session_shared_by_two_connections(self):
        d = self.daemon()
        a, b = d.client(), d.client()
        self.assertEqual(a.request("ipybox/createSession", {"name": "work"}), {"name": "work"})
        self.assertEqual(a.execute("x = 5")[1]["isError"], False)
        self.assertEqual(b.request("ipybox/attachSession", {"name": "work"}), {"name": "work"})
        self.assertEqual(b.execute("print(x * 2)")[0], "10\n")
        listed = b.request("ipybox/listSessions")["sessions"]
        self.assertEqual([(s["name"], s["clients"], s["attached"]) for s in listed], [("work", 2, True)])
        # The session outlives the client that made it.
        a.close()
        self.assertEqual(b.execute("print(x)")[0], "5\n")
        with self.assertRaises(McpError) as e:
            b.request("ipybox/createSession", {"name": "work"})
        self.assertIn("exists", str(e.exception))
        self.assertEqual(b.request("ipybox/closeSession", {"name": "work"}), {"name": "work"})
        self.assertTrue(wait_for(lambda: not b.request("ipybox/listSessions")["sessions"]))
        # A connection that had a session never gets one made with the defaults behind its
        # back (the old one may have had other options): it is told, until it chooses one.
        for _ in range(2):
            with self.assertRaises(McpError) as err:
                b.execute("x")
            self.assertIn("The session 'work' was closed (closed by a client)", str(err.exception))
            self.assertEqual(err.exception.code, -32000)
        b.request("ipybox/createSession", {"name": "shared"})
        self.assertIn("NameError", b.execute("x")[0])
        b.execute("y = 1")
        e = d.client()
        e.request("ipybox/attachSession", {"name": "shared"})
        e.request("ipybox/closeSession")
        with self.assertRaises(McpError) as err:
            b.execute("print(y)")
        self.assertIn("The session 'shared' was closed (closed by a client)", str(err.exception))

    def test_private_session_is_invisible_and_ends_with_its_client(self):
        d = self.daemon()
        a, b = d.client(), d.client()
        self.assertEqual(a.execute("print('mine')")[0], "mine\n")
        mine = a.request("ipybox/listSessions")["sessions"]
        self.assertEqual(len(mine), 1)
        self.assertTrue(mine[0]["anonymous"])
        self.assertEqual(b.request("ipybox/listSessions")["sessions"], [])
        for name in (mine[0]["name"], "#1"):
            with self.assertRaises(McpError):
                b.request("ipybox/attachSession", {"name": name})
        workers = session_processes(d.proc.pid)
        self.assertTrue(workers)
        a.close()
        self.assertNoProcessesLeft(workers)

    def test_session_names_and_params_checked(self):
        d = self.daemon()
        c = d.client()
        for bad in ("", "../x", "-x", ".x", "a b", "x" * 65, 7):
            with self.assertRaises(McpError) as e:
                c.request("ipybox/createSession", {"name": bad})
            self.assertEqual(e.exception.code, -32602, bad)
        for params, words in [({"args": ["--help"]}, "not a sandbox option"),
                              ({"args": "--verbose"}, "'args'"),
                              ({"cwd": "relative"}, "absolute")]:
            with self.assertRaises(McpError) as e:
                c.request("ipybox/createSession", params)
            self.assertIn(words, str(e.exception))
        # A sandbox option the worker refuses: the client hears the worker's own sentence.
        with self.assertRaises(McpError) as e:
            c.request("ipybox/createSession", {"name": "bad", "args": ["--allowed-domain", "*"]})
        self.assertIn("could not start", str(e.exception))
        self.assertIn("*", str(e.exception))
        with self.assertRaises(McpError) as e:
            c.request("ipybox/nonsense")
        self.assertEqual(e.exception.code, -32601)
        # Per-session options reach the sandbox.
        self.assertEqual(c.request("ipybox/createSession", {"name": "env", "args": ["--container-env-var",
                                                                                  "GREETING=hi"]}), {"name": "env"})
        self.assertEqual(c.execute("import os; print(os.environ['GREETING'])")[0], "hi\n")

    def test_idle_named_session_is_closed(self):
        d = self.daemon("--idle-timeout", "1")
        a = d.client()
        a.request("ipybox/createSession", {"name": "idle"})
        workers = session_processes(d.proc.pid)
        a.close()
        b = d.client()
        self.assertTrue(wait_for(lambda: not b.request("ipybox/listSessions")["sessions"], 15))
        self.assertNoProcessesLeft(workers)
        self.assertIn("idle-timeout", d.log_text())

    def test_client_leaving_mid_cell_interrupts_it(self):
        d = self.daemon()
        a = d.client()
        a.request("ipybox/createSession", {"name": "long"})
        a.send_request("tools/call", {"name": "execute_ipython_cell",
                                      "arguments": {"code": "import time\nfor i in range(600): time.sleep(0.1)"}})
        time.sleep(1)
        a.close()
        b = d.client()
        b.request("ipybox/attachSession", {"name": "long"})
        t0 = time.time()
        self.assertEqual(b.execute("print(1 + 1)")[0], "2\n")
        self.assertLess(time.time() - t0, 20)


class Warm(DaemonCase):
    def test_warm_workers_serve_sessions_made_with_the_daemons_options(self):
        d = self.daemon("--warm", "1", "--max-sessions", "3", "--container-env-var", "WHO=daemon")
        # One worker is started ahead, before any client, and its sandbox comes up.
        self.assertTrue(wait_for(lambda: len(d.workers()) == 1, 20))
        first = d.workers()[0]
        self.assertTrue(wait_for(lambda: "session (warm %d): ready in" % first in d.log_text(), 30), d.log_text())
        c = d.client()
        # It is no session of anyone's yet: not listed, not attachable.
        self.assertEqual(c.request("ipybox/listSessions")["sessions"], [])
        with self.assertRaises(McpError):
            c.request("ipybox/attachSession", {"name": "(warm %d)" % first})
        # A session without options of its own takes it, with a fresh kernel; another worker
        # is started ahead.
        self.assertEqual(c.request("ipybox/createSession", {"name": "a"}), {"name": "a"})
        self.assertIn("session a: started (warm worker %d, ready)" % first, d.log_text())
        self.assertEqual(c.execute("import os; print(os.environ['WHO'], 'x' in dir())")[0], "daemon False\n")
        self.assertTrue(wait_for(lambda: len(d.workers()) == 2, 20))
        self.assertIn(first, d.workers())
        second = (set(d.workers()) - {first}).pop()
        # A session with options of its own never takes one.
        b = d.client()
        b.request("ipybox/createSession", {"name": "b", "args": ["--container-env-var", "WHO=client"]})
        self.assertEqual(b.execute("import os; print(os.environ['WHO'])")[0], "client\n")
        self.assertIn("session b: started (worker", d.log_text())
        self.assertIn(second, d.workers())
        own = (set(d.workers()) - {first, second}).pop()
        # A connection's first call gets the warm one too.
        self.assertTrue(wait_for(lambda: "session (warm %d): ready in" % second in d.log_text(), 30))
        e = d.client()
        self.assertEqual(e.execute("print(2 + 2)")[0], "4\n")
        self.assertIn("session #1: started (warm worker %d, ready)" % second, d.log_text())
        # Warm workers count against --max-sessions: with three sessions none is started.
        time.sleep(2)
        self.assertEqual(len(d.workers()), 3)
        # Once one closes, one is started ahead again, and serves the next session.
        c.request("ipybox/closeSession", {"name": "a"})
        self.assertTrue(wait_for(lambda: first not in d.workers() and len(d.workers()) == 3, 20))
        third = (set(d.workers()) - {second, own}).pop()
        self.assertTrue(wait_for(lambda: "session (warm %d): ready in" % third in d.log_text(), 30))
        c.request("ipybox/createSession", {"name": "c"})
        self.assertIn("session c: started (warm worker %d, ready)" % third, d.log_text())
        workers = d.workers()
        d.stop()
        self.assertNoProcessesLeft(workers)

    def test_a_warm_worker_gives_way_to_a_session_with_options(self):
        d = self.daemon("--warm", "1", "--max-sessions", "1")
        self.assertTrue(wait_for(lambda: len(d.workers()) == 1, 20))
        warm = d.workers()[0]
        c = d.client()
        c.request("ipybox/createSession", {"name": "own", "args": ["--container-env-var", "WHO=client"]})
        self.assertEqual(c.execute("import os; print(os.environ['WHO'])")[0], "client\n")
        self.assertIn("giving way to a session with options of its own", d.log_text())
        # It was sent SIGTERM; it takes its sandbox down before it is gone.
        self.assertTrue(wait_for(lambda: warm not in d.workers(), 20), d.workers())
        self.assertEqual(len(d.workers()), 1)

    def test_warm_workers_wait_only_for_clients_that_come(self):
        d = self.daemon("--warm", "1", "--idle-timeout", "2")
        self.assertTrue(wait_for(lambda: len(d.workers()) == 1, 20))
        # Nobody came: after --idle-timeout no sandbox waits.
        self.assertTrue(wait_for(lambda: not d.workers(), 20), d.log_text())
        self.assertIn("no client for --idle-timeout", d.log_text())
        # A client connects: one is started for it.
        c = d.client()
        self.assertTrue(wait_for(lambda: len(d.workers()) == 1, 20))
        self.assertEqual(c.execute("print(3)")[0], "3\n")
        self.assertIn("started (warm worker", d.log_text())

    def test_warm_workers_that_cannot_start_are_retried_ever_more_slowly(self):
        d = self.daemon("--warm", "1", "--workspace", "/proc/no-such-dir/ws")
        self.assertTrue(wait_for(lambda: "the next in 2 s" in d.log_text(), 30), d.log_text())
        self.assertIn("a warm worker could not start: cannot start: --workspace", d.log_text())
        self.assertNotIn("the next in 1 s", d.log_text().split("the next in 2 s")[1])
        self.assertIn("the next in 1 s", d.log_text())
        # A session made meanwhile fails with the worker's own sentence, as without --warm.
        c = d.client()
        with self.assertRaises(McpError) as e:
            c.request("ipybox/createSession", {"name": "x"})
        self.assertIn("--workspace", str(e.exception))

    def test_warm_is_checked(self):
        r = subprocess.run([IPYBOXD, "--user", "--warm", "5", "--max-sessions", "2"], capture_output=True,
                           text=True, timeout=30, env=dict(os.environ, XDG_RUNTIME_DIR=tempfile.gettempdir()))
        self.assertEqual(r.returncode, 2)
        self.assertIn("--warm 5 is more than --max-sessions 2", r.stderr)


class Bridge(DaemonCase):
    def test_ipybox_mcp_uses_a_daemon_and_falls_back(self):
        d = self.daemon()
        with McpClient(env=d.env) as c:
            self.assertEqual(c.execute("print(40 + 2)")[0], "42\n")
            self.assertEqual(len(descendants(d.proc.pid)) > 0, True)
            c.proc.stdin.close()
            c.proc.wait(30)
            self.assertIn("using ipyboxd at " + d.sock, c.proc.stderr.read().decode())
        with McpClient("--embedded", env=d.env) as c:
            self.assertEqual(c.execute("print(1)")[0], "1\n")
            c.proc.stdin.close()
            c.proc.wait(30)
            self.assertIn("embedded supervisor", c.proc.stderr.read().decode())
        empty = tempfile.mkdtemp(prefix="ipybox-rt-")
        try:
            with McpClient(env=dict(d.env, XDG_RUNTIME_DIR=empty)) as c:
                self.assertEqual(c.execute("print(2)")[0], "2\n")
                c.proc.stdin.close()
                c.proc.wait(30)
                self.assertIn("no ipyboxd at %s/ipybox/ipybox.sock" % empty, c.proc.stderr.read().decode())
        finally:
            os.rmdir(empty)
        r = subprocess.run([IPYBOX, "mcp", "--connect", "/nonexistent/ipybox.sock"], input=b"", capture_output=True,
                           timeout=30, env=d.env)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"cannot reach ipyboxd at /nonexistent/ipybox.sock", r.stderr)
        # Options given to `ipybox mcp` shape the daemon's session for it.
        with McpClient("--container-env-var", "VIA=bridge", env=d.env) as c:
            self.assertEqual(c.execute("import os; print(os.environ['VIA'])")[0], "bridge\n")


class Robustness(DaemonCase):
    def test_bad_and_stalling_clients_change_nothing_for_others(self):
        d = self.daemon()
        good = d.client()
        good.request("ipybox/createSession", {"name": "good"})
        rid = good.send_request("tools/call", {"name": "execute_ipython_cell", "arguments": {
            "code": "import time\nfor i in range(5):\n    print(i, flush=True)\n    time.sleep(0.3)"}})
        stalled = socket.socket(socket.AF_UNIX)
        stalled.connect(d.sock)
        stalled.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping"')  # no newline, ever
        silent = socket.socket(socket.AF_UNIX)
        silent.connect(d.sock)
        bad = d.client(initialize=False)
        bad.send_raw(b"{not json\n[1,2]\n\x00\xff\n" + b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}\n')
        replies = [bad.read_message(30) for _ in range(4)]
        self.assertEqual([r["error"]["code"] for r in replies], [-32700, -32600, -32700, -32602])
        bad.send_raw(b"x" * (17 << 20) + b"\n")
        self.assertIn("too large", bad.read_message(60)["error"]["message"])
        self.assertEqual(bad.request("ping"), {})
        # A client that asks for megabytes and never reads them holds up nobody else.
        hog = d.client()
        hog.request("ipybox/createSession", {"name": "hog"})
        hog.send_request("tools/call", {"name": "execute_ipython_cell", "arguments": {
            "code": "print('y' * 5_000_000)", "max_output_chars": 10_000_000}})
        msg = good.wait_response(rid, 60)
        self.assertEqual(msg["result"]["content"][0]["text"], "0\n1\n2\n3\n4\n")
        # Large answers and streamed output pass through whole, and the session lives on.
        text, _ = good.execute("print('z' * 3_000_000)", max_output_chars=10_000_000, progress_token="big")
        self.assertEqual(text, "z" * 3_000_000 + "\n")
        self.assertEqual(good.execute("print(i)")[0], "4\n")
        other = d.client()
        self.assertEqual(other.execute("print('fine')")[0], "fine\n")
        for s in (stalled, silent):
            s.close()

    def test_fifty_concurrent_sessions(self):
        d = self.daemon("--max-sessions", "60")
        n = 50
        clients = [d.client() for _ in range(n)]
        errors = []

        def run(i, c):
            try:
                c.request("ipybox/createSession", {"name": "s%d" % i}, timeout=300)
                c.execute("me = %d" % i, timeout=300)
                for k in range(3):
                    text, _ = c.execute("print(me, %d, flush=True)\nimport time; time.sleep(0.05)\nprint(me * 1000 + %d)"
                                        % (k, k), timeout=300)
                    if text != "%d %d\n%d\n" % (i, k, i * 1000 + k):
                        errors.append((i, k, text))
            except Exception as e:  # noqa: BLE001
                errors.append((i, repr(e)))

        threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        self.assertEqual(errors, [])
        listed = clients[0].request("ipybox/listSessions")["sessions"]
        self.assertEqual(sorted(s["name"] for s in listed), sorted("s%d" % i for i in range(n)))
        for c in clients:
            c.close()

    def test_other_users_are_refused(self):
        d = self.daemon()
        # Past the file modes (the socket and its directories opened up), the peer's uid is
        # still checked.
        for p in (d.tmp.name, d.runtime, os.path.dirname(d.sock)):
            os.chmod(p, 0o711)
        os.chmod(d.sock, 0o666)
        r = subprocess.run([sys.executable, "-c", """
import os, socket, sys
os.setgid(65534); os.setuid(65534)
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10)
try:
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ipybox/listSessions"}\\n')
    print("closed" if s.recv(100) == b"" else "answered")
except (BrokenPipeError, ConnectionResetError):
    print("closed")
""", d.sock], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.stdout.strip(), "closed", r.stderr)
        self.assertIn("refused a connection from uid 65534", d.log_text())

    def test_a_second_daemon_on_the_same_socket_is_refused(self):
        d = self.daemon()
        r = subprocess.run([IPYBOXD, "--user"], capture_output=True, text=True, timeout=30, env=d.env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("another ipyboxd is listening at " + d.sock, r.stderr)
        # Without --user it is the system service, which only root may run.
        r = subprocess.run([IPYBOXD], capture_output=True, text=True, timeout=30, env=d.env,
                           preexec_fn=lambda: (os.setgroups([]), os.setgid(65534), os.setuid(65534)))
        self.assertEqual(r.returncode, 2)
        self.assertIn("runs as root", r.stderr)
        self.assertIn("ipyboxd --user", r.stderr)
        r = subprocess.run([IPYBOXD, "--user", "--allowed-domain", "*"], capture_output=True, text=True, timeout=30,
                           env=d.env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("'*'", r.stderr)


class Approvals(DaemonCase):
    def test_two_questions_open_at_once_reach_their_client_and_are_answered_alone(self):
        # Concurrent tool calls (issue 19): the worker asks two questions at once; the daemon
        # passes both on, routes each answer to its own question, and withdraws them alone.
        d = self.daemon()
        c = d.client(initialize=False)
        self.addCleanup(c.close)
        c.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {"elicitation": {}},
                                 "clientInfo": {"name": "ipybox-tests", "version": "1"}})
        c.notify("notifications/initialized")
        with tempfile.TemporaryDirectory(prefix="ipybox-daemon-ask-") as tmp:
            events = os.path.join(tmp, "a.events")
            r = c.call("register_mcp_server", {"server_name": "a", "server_params": mcp_servers.fake_stdio_params(
                "--tools", "concurrent", "--events", events)})
            self.assertFalse(r.get("isError"), r)
            code = ("import asyncio, mcptools\nfrom mcptools.a import sleep\n"
                    "async def one(tag):\n"
                    "    try:\n        return await sleep.run_async(seconds=0, tag=tag)\n"
                    "    except mcptools.ToolRejected:\n        return 'rejected ' + tag\n"
                    "print(await asyncio.gather(one('first'), one('second'), one('third')))\n")
            rid = c.send_request("tools/call", {"name": "execute_ipython_cell", "arguments": {"code": code,
                                                                                               "timeout": 60}})
            asked = {}
            while len(asked) < 3:
                msg = c.read_message(60)
                self.assertNotEqual(msg.get("id"), rid, "the cell ended before three questions were open: %s" % msg)
                if msg.get("method") == "elicitation/create":
                    asked[msg["params"]["_meta"]["ipybox/toolCall"]["arguments"]["tag"]] = msg["id"]
            self.assertEqual(len(set(asked.values())), 3)
            # Answered in another order than asked, each with its own outcome.
            c.send({"jsonrpc": "2.0", "id": asked["second"], "result": {"action": "accept", "content": {}}})
            c.send({"jsonrpc": "2.0", "id": asked["third"], "result": {"action": "decline"}})
            c.send({"jsonrpc": "2.0", "id": asked["first"], "result": {"action": "accept", "content": {}}})
            r = c.wait_response(rid, 60)["result"]
            text = "".join(x.get("text", "") for x in r["content"] if x["type"] == "text")
            self.assertIn("['slept 0 first', 'slept 0 second', 'rejected third']", text)
            self.assertEqual(sorted(e["arguments"]["tag"] for e in mcp_servers.read_events(events)
                                    if e["event"] == "call"), ["first", "second"])
            # Three open at once, then the cell is cancelled: each is withdrawn, by its own id.
            rid = c.send_request("tools/call", {"name": "execute_ipython_cell", "arguments": {"code": code}})
            open_ids = set()
            while len(open_ids) < 3:
                msg = c.read_message(60)
                if msg.get("method") == "elicitation/create":
                    open_ids.add(msg["id"])
            c.notify("notifications/cancelled", {"requestId": rid, "reason": "test"})
            withdrawn = set()
            while withdrawn != open_ids:
                msg = c.read_message(60)
                if msg.get("method") == "notifications/cancelled":
                    withdrawn.add(msg["params"]["requestId"])
            self.assertIn("2", c.execute("print(1+1)")[0])


class Lifecycle(DaemonCase):
    def sessions(self, d, k):
        c = d.client()
        for i in range(k):
            c.request("ipybox/createSession", {"name": "k%d" % i})
            c.execute("print(1)")
        return c

    def test_sigterm_closes_every_session(self):
        d = self.daemon()
        c = self.sessions(d, 3)
        procs = descendants(d.proc.pid)
        self.assertGreaterEqual(len(procs), 9)  # worker, shim and its PID 1, kernel per session
        self.assertEqual(d.stop(signal.SIGTERM), 0)
        self.assertNoProcessesLeft(procs)
        self.assertFalse(os.path.exists(d.sock))
        self.assertEqual(os.listdir(os.path.join(d.env["XDG_STATE_HOME"], "ipybox", "sessions")), [])
        c.close()

    def test_sigkill_leaves_no_sandbox_and_restart_cleans_up(self):
        d = self.daemon()
        c = self.sessions(d, 2)
        procs = descendants(d.proc.pid)
        d.stop(signal.SIGKILL)
        self.assertNoProcessesLeft(procs)
        c.close()
        self.assertTrue(os.path.exists(d.sock))
        # The next daemon takes over the socket the dead one left, and removes its state.
        d2 = self.daemon(runtime=d.runtime, state=d.env["XDG_STATE_HOME"])
        self.assertEqual(os.listdir(os.path.join(d.env["XDG_STATE_HOME"], "ipybox", "sessions")), [])
        with d2.client() as c2:
            self.assertEqual(c2.execute("print('again')")[0], "again\n")


if __name__ == "__main__":
    unittest.main()
