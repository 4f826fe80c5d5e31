"""Attacks on concurrent and cancellable tool calls (issue 19, review R2), from kernel code that
starts and abandons calls in bulk and races them against reset and kernel death: whatever way a
call ends, its thread and descriptors in the supervisor are freed, and the supervisor keeps
serving. Against the fake server of tests/lib/mcp_servers.py (--tools concurrent, --events).

The supervisor is the `ipybox mcp` process itself; its threads are counted in /proc/<pid>/task
and its descriptors in /proc/<pid>/fd, once idle (after a first call, so that the servers'
keeper threads exist), and again after the attack, once idle again."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
from ipybox_test import McpClient, descendants, require_sandbox, text_of, wait_for  # noqa: E402
import mcp_servers  # noqa: E402


def counts(pid):
    return len(os.listdir("/proc/%d/task" % pid)), len(os.listdir("/proc/%d/fd" % pid))


class ToolRaceCase(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.tmp = tempfile.TemporaryDirectory(prefix="ipybox-races-")
        self.addCleanup(self.tmp.cleanup)
        self.events = {n: os.path.join(self.tmp.name, n + ".events") for n in ("a", "b")}
        config = os.path.join(self.tmp.name, "mcp.json")
        with open(config, "w") as f:
            json.dump({"mcpServers": {n: mcp_servers.fake_stdio_params("--tools", "concurrent", "--events", p)
                                      for n, p in self.events.items()}}, f)
        self.c = McpClient("--mcp-config", config, "--approve-tools", "*")
        self.addCleanup(self.c.close)

    def cell(self, code, timeout=120):
        text, r = self.c.execute(code, timeout=timeout)
        self.assertFalse(r.get("isError"), text)
        return text

    def baseline(self):
        self.assertIn("ok ok", self.cell("from mcptools.a import ok as x\nfrom mcptools.b import ok as y\n"
                                         "print(x.run(), y.run())"))
        return counts(self.c.proc.pid)

    def assert_back_to(self, base):
        pid = self.c.proc.pid
        self.assertTrue(wait_for(lambda: counts(pid) == base, 30),
                        "threads and fds of the supervisor: %s, before the attack %s" % (counts(pid), base))

    def server_pids(self, server):
        """The processes of stdio server `server` (its events file is on its command line)."""
        def cmdline(pid):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    return f.read().decode(errors="replace")
            except OSError:
                return ""
        return [p for p in descendants(self.c.proc.pid) if self.events[server] in cmdline(p)]

    def cancelled(self, server):
        return {e["requestId"] for e in mcp_servers.read_events(self.events[server]) if e["event"] == "cancelled"}

    def calls(self, server, name):
        return {e["id"] for e in mcp_servers.read_events(self.events[server])
                if e["event"] == "call" and e.get("name") == name}


class TestAbandonedCalls(ToolRaceCase):
    def test_a_thousand_timed_out_calls_leave_no_thread_or_fd(self):
        base = self.baseline()
        text = self.cell((
            "import threading, mcptools\nfrom mcptools.a import hang as ha\nfrom mcptools.b import hang as hb\n"
            "n, lock = [0, 0], threading.Lock()\n"
            "def many(h):\n"
            "    for _ in range(50):\n"
            "        try:\n            h.run(call_timeout=0.05)\n"
            "        except mcptools.ToolTimeout:\n            k = 0\n"
            "        except mcptools.ToolCallError:\n            k = 1\n"
            "        with lock: n[k] += 1\n"
            "ts = [threading.Thread(target=many, args=(ha if i % 2 else hb,)) for i in range(20)]\n"
            "for t in ts: t.start()\n"
            "for t in ts: t.join()\n"
            "print('ended', n)\n"), timeout=300)
        self.assertIn("ended [1000, 0]", text)
        self.assert_back_to(base)
        # The servers were told of what reached them, and still serve.
        for s in ("a", "b"):
            sent = self.calls(s, "hang")
            self.assertTrue(sent)
            self.assertTrue(wait_for(lambda: sent <= self.cancelled(s), 30),
                            "%s: %d calls not cancelled" % (s, len(sent - self.cancelled(s))))
        self.assertIn("ok ok", self.cell("from mcptools.a import ok as x\nfrom mcptools.b import ok as y\n"
                                         "print(x.run(), y.run())"))

    def test_hanging_up_raw_connections_mid_call_cancels_them(self):
        # Kernel code writes a call on the tool socket itself and hangs up at once, 300 times,
        # 20 at a time, at varying moments (before the call reached the server or after).
        base = self.baseline()
        text = self.cell((
            "import json, socket, time\n"
            "req = (json.dumps({'server': 'a', 'tool': 'hang', 'arguments': {}}) + '\\n').encode()\n"
            "for i in range(15):\n"
            "    held = []\n"
            "    for j in range(20):\n"
            "        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect('/opt/ipybox/tool.sock')\n"
            "        s.sendall(req); held.append(s)\n"
            "        if j % 3 == 0: s.close()\n"
            "    time.sleep(0.01 * (i % 5))\n"
            "    for s in held: s.close()\n"
            "print('done')\n"), timeout=120)
        self.assertIn("done", text)
        self.assert_back_to(base)
        sent = self.calls("a", "hang")
        self.assertTrue(sent, "no call reached the server")
        self.assertTrue(wait_for(lambda: sent <= self.cancelled("a"), 30),
                        "%d calls not cancelled at the server" % len(sent - self.cancelled("a")))
        self.assertIn("ok", self.cell("from mcptools.a import ok\nprint(ok.run())"))

    def test_reset_with_calls_in_flight_frees_them_all(self):
        # A reset may start the servers again (their keeper threads and pipes then come with
        # the next call): the counts are taken after a reset and a call to each, both times.
        self.assertFalse(self.c.call("reset", {}).get("isError"))
        base = self.baseline()
        code = ("import threading, time\nfrom mcptools.a import hang\nfrom mcptools.b import sleep\n"
                "for i in range(32): threading.Thread(target=hang.run, daemon=True).start()\n"
                "for i in range(8): threading.Thread(target=sleep.run, kwargs={'seconds': 0.2 * i, 'tag': str(i)},"
                " daemon=True).start()\n"
                "time.sleep(1)\nprint('started')\n")
        for _ in range(3):
            self.assertIn("started", self.cell(code))
            r = self.c.call("reset", {})
            self.assertFalse(r.get("isError"), text_of(r))
        self.assert_back_to(self.baseline() and base)
        # A reset stops the servers (a stdio server is started again for the next call): every
        # hung call reached its server, and of the three servers of `a` one is left.
        hung = [e for e in mcp_servers.read_events(self.events["a"]) if e["event"] == "call" and e["name"] == "hang"]
        self.assertEqual(len(hung), 96)
        self.assertEqual(len(self.server_pids("a")), 1)
        self.assertIn("ok", self.cell("from mcptools.a import ok\nprint(ok.run())"))

    def test_kernel_death_with_calls_in_flight_frees_them_all(self):
        base = self.baseline()
        code = ("import threading, time, os\nfrom mcptools.a import hang\nfrom mcptools.b import sleep\n"
                "for i in range(20): threading.Thread(target=hang.run, daemon=True).start()\n"
                "for i in range(20): threading.Thread(target=sleep.run, kwargs={'seconds': 0.05 * i, 'tag': str(i)},"
                " daemon=True).start()\n"
                "time.sleep(0.5)\nos.kill(os.getpid(), 9)\n")
        for _ in range(3):
            self.c.execute(code, timeout=60)
        self.assertIn("ok", self.cell("from mcptools.a import ok\nprint(ok.run())"))
        self.assert_back_to(base)
        hung = self.calls("a", "hang")
        self.assertEqual(len(hung), 60)
        self.assertTrue(wait_for(lambda: hung <= self.cancelled("a"), 30),
                        "%d hung calls not cancelled at the server" % len(hung - self.cancelled("a")))


class TestApprovalAnswers(ToolRaceCase):
    """A client that answers approval questions twice, for the wrong id, or after they were
    withdrawn: a decision approves only its own call, once."""
    def setUp(self):
        require_sandbox(self)
        self.tmp = tempfile.TemporaryDirectory(prefix="ipybox-races-")
        self.addCleanup(self.tmp.cleanup)
        self.events = {"a": os.path.join(self.tmp.name, "a.events")}
        config = os.path.join(self.tmp.name, "mcp.json")
        with open(config, "w") as f:
            json.dump({"mcpServers": {"a": mcp_servers.fake_stdio_params("--tools", "concurrent", "--events",
                                                                         self.events["a"])}}, f)
        self.c = McpClient("--mcp-config", config, capabilities={"elicitation": {}})
        self.addCleanup(self.c.close)

    def test_duplicate_wrong_and_late_answers_approve_nothing_else(self):
        c = self.c
        code = ("import asyncio, mcptools\nfrom mcptools.a import sleep\n"
                "async def one(tag):\n"
                "    try:\n        return await sleep.run_async(seconds=0, tag=tag)\n"
                "    except mcptools.ToolRejected:\n        return 'rejected ' + tag\n"
                "print(await asyncio.gather(one('first'), one('second'), one('third')))\n")
        rid = c.send_request("tools/call", {"name": "execute_ipython_cell", "arguments": {"code": code, "timeout": 60}})
        asked = []
        while len(asked) < 3:
            msg = c.read_message(60)
            self.assertFalse(msg.get("id") == rid, "the cell ended before 3 questions were open: %s" % msg)
            if msg.get("method") == "elicitation/create":
                asked.append(msg)
        by_tag = {q["params"]["_meta"]["ipybox/toolCall"]["arguments"]["tag"]: q for q in asked}
        accept = {"action": "accept", "content": {}}
        # Answers for ids never asked, of the wrong kind, and with the cell's own request id.
        for bad in (999999, str(by_tag["first"]["id"]) + "x", "x" + str(by_tag["second"]["id"]), rid, None):
            c.send({"jsonrpc": "2.0", "id": bad, "result": accept})
        # "first" declined, then accepted again twice: the first answer holds.
        for res in ({"action": "decline"}, accept, accept):
            c.send({"jsonrpc": "2.0", "id": by_tag["first"]["id"], "result": res})
        # "second" accepted twice; "third" answered with an error, then accepted.
        c.send({"jsonrpc": "2.0", "id": by_tag["second"]["id"], "result": accept})
        c.send({"jsonrpc": "2.0", "id": by_tag["second"]["id"], "result": accept})
        c.send({"jsonrpc": "2.0", "id": by_tag["third"]["id"], "error": {"code": -1, "message": "no"}})
        c.send({"jsonrpc": "2.0", "id": by_tag["third"]["id"], "result": accept})
        r = c.wait_response(rid, 60)["result"]
        self.assertIn("['rejected first', 'slept 0 second', 'rejected third']", text_of(r))
        self.assertEqual([e["arguments"]["tag"] for e in mcp_servers.read_events(self.events["a"])
                          if e["event"] == "call"], ["second"])
        # Answers to the finished cell's questions change nothing; the session serves on.
        for q in asked:
            c.send({"jsonrpc": "2.0", "id": q["id"], "result": accept})
        text, r = c.execute("print(1+1)", timeout=60)
        self.assertIn("2", text)
        self.assertEqual(len([e for e in mcp_servers.read_events(self.events["a"]) if e["event"] == "call"]), 1)


if __name__ == "__main__":
    unittest.main()
