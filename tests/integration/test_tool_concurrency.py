"""Concurrent and cancellable tool calls (issue 19): calls from kernel code to MCP servers run
each on its own thread in the supervisor, so a server that hangs holds only the calls to it; a
call the kernel side gives up on (cell timeout, interrupt, the generated API's call_timeout) is
cancelled at its server, which sees notifications/cancelled for it; one server takes up to 32
calls at once; several approval questions can be open at once, each answered and withdrawn
alone. Against the fake server of tests/lib/mcp_servers.py (--tools concurrent, --events).

Calls to *one* server overlap only with the concurrent MCP client (mcpclient, issue 19 H1,
merged here from i19-mcpc): test_a_hung_call_does_not_delay_a_second_call_to_the_same_server
fails with the client of main at 414b593, which serialises them."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
from ipybox_test import ACCEPT, DECLINE, ELICIT, McpCase, descendants, text_of, wait_for  # noqa: E402
import mcp_servers  # noqa: E402


class ConcurrencyCase(McpCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory(prefix="ipybox-conc-")
        self.addCleanup(self.tmp.cleanup)
        self.events = {n: os.path.join(self.tmp.name, n + ".events") for n in ("a", "b")}
        self.config = os.path.join(self.tmp.name, "mcp.json")
        with open(self.config, "w") as f:
            json.dump({"mcpServers": {n: mcp_servers.fake_stdio_params("--tools", "concurrent", "--events", p)
                                      for n, p in self.events.items()}}, f)

    def client(self, *options, **kw):
        return super().client("--mcp-config", self.config, *options, **kw)

    def cell(self, c, code, timeout=60):
        text, r = c.execute(code, timeout=timeout)
        self.assertFalse(r.get("isError"), text)
        return text

    def calls(self, server, name):
        """The ids of the calls of tool name the server saw."""
        return [e["id"] for e in mcp_servers.read_events(self.events[server])
                if e["event"] == "call" and e.get("name") == name]

    def server_pids(self, c, server):
        """The processes of stdio server `server` (found by its events file on the command line)."""
        def cmdline(pid):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    return f.read().decode(errors="replace")
            except OSError:
                return ""
        return [p for p in descendants(c.proc.pid) if self.events[server] in cmdline(p)]

    def cancelled(self, server):
        return [e["requestId"] for e in mcp_servers.read_events(self.events[server]) if e["event"] == "cancelled"]

    def assert_cancelled_at_server(self, server, name):
        ids = self.calls(server, name)
        self.assertEqual(len(ids), 1, mcp_servers.read_events(self.events[server]))
        self.assertTrue(wait_for(lambda: ids[0] in self.cancelled(server), 30),
                        "no notifications/cancelled for the call: %s" % mcp_servers.read_events(self.events[server]))


class TestIndependence(ConcurrencyCase):
    def test_a_hung_call_does_not_delay_a_call_to_another_server(self):
        c = self.client("--approve-tools", "*")
        # The hung call would hold a serial tool thread for --mcp-timeout (120 s): far past the
        # cell's 60 s.
        text = self.cell(c, (
            "import threading, time\n"
            "from mcptools.a import hang\nfrom mcptools.b import sleep\n"
            "threading.Thread(target=hang.run, daemon=True).start()\n"
            "time.sleep(1)\n"
            "print(sleep.run(seconds=0.1, tag='other'))\n"))
        self.assertIn("slept 0.1 other", text)
        self.assertEqual(len(self.calls("a", "hang")), 1)

    def test_a_hung_call_does_not_delay_a_second_call_to_the_same_server(self):
        # Needs the concurrent MCP client (H1): with the serialised one the second call waits.
        c = self.client("--approve-tools", "*")
        text = self.cell(c, (
            "import threading, time\n"
            "from mcptools.a import hang, sleep\n"
            "threading.Thread(target=hang.run, daemon=True).start()\n"
            "time.sleep(1)\n"
            "print(sleep.run(seconds=0.1, tag='same'))\n"))
        self.assertIn("slept 0.1 same", text)

    def test_a_hung_call_does_not_delay_a_second_call_to_the_same_http_server(self):
        ev = os.path.join(self.tmp.name, "http.events")
        with mcp_servers.fake_http("http", "--tools", "concurrent", "--events", ev) as srv:
            c = self.client("--approve-tools", "*")
            r = c.call("register_mcp_server", {"server_name": "h", "server_params": {"url": srv.url}})
            self.assertFalse(r.get("isError"), text_of(r))
            text = self.cell(c, (
                "import threading, time\n"
                "from mcptools.h import hang, sleep\n"
                "threading.Thread(target=hang.run, daemon=True).start()\n"
                "time.sleep(1)\n"
                "print(sleep.run(seconds=0.1, tag='same'))\n"))
            self.assertIn("slept 0.1 same", text)
            c.close()

    def test_twenty_concurrent_calls_from_kernel_threads_are_all_answered(self):
        c = self.client("--approve-tools", "*")
        text = self.cell(c, (
            "import concurrent.futures as cf\n"
            "from mcptools.a import sleep as sa\nfrom mcptools.b import sleep as sb\n"
            "with cf.ThreadPoolExecutor(20) as ex:\n"
            "    futs = [ex.submit((sa if i % 2 else sb).run, seconds=1, tag=str(i)) for i in range(20)]\n"
            "    outs = [f.result() for f in futs]\n"
            "print(sorted(int(o.split()[-1]) for o in outs))\n"), timeout=120)
        self.assertIn(str(list(range(20))), text)

    def test_one_server_takes_32_calls_at_once_and_refuses_more(self):
        c = self.client("--approve-tools", "*")
        text = self.cell(c, (
            "import threading, mcptools\n"
            "from mcptools.a import hang\n"
            "refused, lock = [], threading.Lock()\n"
            "def one():\n"
            "    try:\n        hang.run(call_timeout=20)\n"
            "    except mcptools.ToolCallError as e:\n"
            "        if e.kind == 'refused':\n"
            "            with lock: refused.append(e.message)\n"
            "ts = [threading.Thread(target=one) for _ in range(40)]\n"
            "for t in ts: t.start()\n"
            "for t in ts: t.join()\n"
            "print('refused', len(refused))\n"
            "print(refused[:1])\n"), timeout=120)
        self.assertIn("refused 8", text)
        self.assertIn("runs 32 calls already, the most one server takes at once", text)
        # The server goes on serving once they were cancelled.
        self.assertIn("ok", self.cell(c, "from mcptools.a import ok\nprint(ok.run())"))


class TestCancellation(ConcurrencyCase):
    def test_a_cell_timeout_cancels_the_call_at_the_stdio_server(self):
        c = self.client("--approve-tools", "*")
        self.assertTrue(wait_for(lambda: len(self.server_pids(c, "a")) == 1, 20))
        pids = self.server_pids(c, "a")
        text, r = c.execute("from mcptools.a import sleep\nsleep.run(seconds=120, tag='slow')", timeout=3)
        self.assertIn("timed out", text.lower() + json.dumps(r).lower())
        self.assert_cancelled_at_server("a", "sleep")
        # The server was not restarted for it, and serves the next call.
        self.assertIn("slept 0 next", self.cell(c, "from mcptools.a import sleep\nprint(sleep.run(seconds=0, tag='next'))"))
        self.assertEqual(self.server_pids(c, "a"), pids)

    def test_a_cell_timeout_cancels_the_call_at_http_and_sse_servers(self):
        for transport in ("http", "sse"):
            with self.subTest(transport=transport):
                ev = os.path.join(self.tmp.name, transport + ".events")
                with mcp_servers.fake_http(transport, "--tools", "concurrent", "--events", ev) as srv:
                    c = self.client("--approve-tools", "*")
                    r = c.call("register_mcp_server", {"server_name": "h", "server_params": {"url": srv.url}})
                    self.assertFalse(r.get("isError"), text_of(r))
                    c.execute("from mcptools.h import sleep\nsleep.run(seconds=120, tag='slow')", timeout=3)
                    self.events["h"] = ev
                    self.assert_cancelled_at_server("h", "sleep")
                    self.assertIn("slept 0 next",
                                  self.cell(c, "from mcptools.h import sleep\nprint(sleep.run(seconds=0, tag='next'))"))
                    c.close()

    def test_call_timeout_raises_tool_timeout_and_cancels_the_call(self):
        c = self.client("--approve-tools", "*")
        text = self.cell(c, (
            "import mcptools\nfrom mcptools.a import sleep\n"
            "try:\n    sleep.run(seconds=120, tag='x', call_timeout=1)\n"
            "except mcptools.ToolTimeout as e:\n    print('TIMEOUT', e.kind, e)\n"
            "import asyncio\n"
            "try:\n    await sleep.run_async(seconds=120, tag='y', call_timeout=1)\n"
            "except mcptools.ToolTimeout as e:\n    print('ATIMEOUT', e.kind)\n"))
        self.assertIn("TIMEOUT timeout", text)
        self.assertIn("call_timeout=1 s", text)
        self.assertIn("ATIMEOUT timeout", text)
        ids = self.calls("a", "sleep")
        self.assertEqual(len(ids), 2)
        self.assertTrue(wait_for(lambda: set(ids) <= set(self.cancelled("a")), 30), self.cancelled("a"))

    def test_past_mcp_timeout_an_idle_server_is_restarted_only_if_it_answered_nothing_since(self):
        c = self.client("--approve-tools", "*", "--mcp-timeout", "4")
        self.assertTrue(wait_for(lambda: len(self.server_pids(c, "a")) == 1, 20))
        pids = self.server_pids(c, "a")
        # `hang` passes its limit at 4 s; `sleep`, started at 2 s, answers at 5 s: the server
        # answered since, so it serves on.
        text = self.cell(c, (
            "import threading, time, mcptools\nfrom mcptools.a import hang, sleep, ok\n"
            "def h():\n"
            "    try:\n        hang.run()\n"
            "    except mcptools.ToolTimeout:\n        print('hang timed out')\n"
            "th = threading.Thread(target=h); th.start(); time.sleep(2)\n"
            "print(sleep.run(seconds=3, tag='meanwhile'))\nth.join()\nprint(ok.run())\n"))
        self.assertIn("hang timed out", text)
        self.assertIn("slept 3 meanwhile", text)
        self.assertEqual(self.server_pids(c, "a"), pids)
        # Alone, and nothing answered since: started again before the next call.
        text = self.cell(c, (
            "import mcptools\nfrom mcptools.a import hang, ok\n"
            "try:\n    hang.run()\nexcept mcptools.ToolTimeout:\n    print('hang timed out')\n"
            "print(ok.run())\n"))
        self.assertIn("hang timed out\nok", text)
        self.assertTrue(self.server_pids(c, "a"))
        self.assertNotEqual(self.server_pids(c, "a"), pids)

    def test_bad_call_timeout_is_refused_before_anything_is_sent(self):
        c = self.client("--approve-tools", "*")
        text = self.cell(c, (
            "from mcptools.a import ok\n"
            "for v in (0, -1, True, 'x'):\n"
            "    try:\n        ok.run(call_timeout=v)\n"
            "    except ValueError as e:\n        print('BAD', e)\n"))
        self.assertEqual(text.count("BAD call_timeout must be a positive number"), 4, text)
        self.assertEqual(self.calls("a", "ok"), [])


class TestApprovals(ConcurrencyCase):
    CODE = ("import asyncio, mcptools\nfrom mcptools.a import sleep\n"
            "async def one(tag):\n"
            "    try:\n        return await sleep.run_async(seconds=0, tag=tag)\n"
            "    except mcptools.ToolRejected:\n        return 'rejected ' + tag\n"
            "print(await asyncio.gather(one('first'), one('second')))\n")

    def open_questions(self, c, rid, n):
        """Reads until n approval questions are open at once (none answered yet)."""
        asked = []
        while len(asked) < n:
            msg = c.read_message(60)
            self.assertFalse(msg.get("id") == rid and ("result" in msg or "error" in msg),
                             "the cell ended before %d questions were open: %s" % (n, msg))
            if msg.get("method") == "elicitation/create":
                asked.append(msg)
        return asked

    def test_two_questions_open_at_once_answered_in_the_other_order(self):
        c = self.client(capabilities=ELICIT)
        rid = c.send_request("tools/call", {"name": "execute_ipython_cell", "arguments": {"code": self.CODE,
                                                                                           "timeout": 60}})
        asked = self.open_questions(c, rid, 2)
        self.assertNotEqual(asked[0]["id"], asked[1]["id"])
        by_tag = {q["params"]["_meta"]["ipybox/toolCall"]["arguments"]["tag"]: q for q in asked}
        self.assertEqual(set(by_tag), {"first", "second"})
        c.send({"jsonrpc": "2.0", "id": by_tag["second"]["id"], "result": ACCEPT})
        c.send({"jsonrpc": "2.0", "id": by_tag["first"]["id"], "result": DECLINE})
        r = c.wait_response(rid, 60)["result"]
        self.assertIn("['rejected first', 'slept 0 second']", text_of(r))
        self.assertEqual([e["arguments"]["tag"] for e in mcp_servers.read_events(self.events["a"])
                          if e["event"] == "call"], ["second"])

    def test_an_interrupted_cell_withdraws_every_open_question(self):
        c = self.client(capabilities=ELICIT)
        rid = c.send_request("tools/call", {"name": "execute_ipython_cell", "arguments": {"code": self.CODE}})
        asked = self.open_questions(c, rid, 2)
        c.notify("notifications/cancelled", {"requestId": rid, "reason": "test"})
        withdrawn = set()
        while withdrawn != {q["id"] for q in asked}:
            msg = c.read_message(60)
            if msg.get("method") == "notifications/cancelled":
                withdrawn.add(msg["params"]["requestId"])
        for q in asked:  # late answers change nothing
            c.send({"jsonrpc": "2.0", "id": q["id"], "result": ACCEPT})
        self.assertIn("2", self.cell(c, "print(1+1)"))
        self.assertEqual(self.calls("a", "sleep"), [])

    def test_pre_approved_calls_do_not_wait_behind_a_question(self):
        c = self.client("--approve-tools", "b/*", capabilities=ELICIT)
        code = ("import threading\nfrom mcptools.a import ok as aok\nfrom mcptools.b import sleep\n"
                "threading.Thread(target=aok.run, daemon=True).start()\n"
                "import time; time.sleep(1)\n"
                "print(sleep.run(seconds=0, tag='free'))\n")
        r, asked = c.call_answering("execute_ipython_cell", {"code": code, "timeout": 60}, lambda p: None, timeout=60)
        self.assertIn("slept 0 free", text_of(r))
        self.assertEqual(len(asked), 1)
        self.assertEqual(self.calls("a", "ok"), [])


if __name__ == "__main__":
    unittest.main()
