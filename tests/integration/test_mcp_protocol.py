"""MCP and JSON-RPC handling of `ipybox mcp`: negotiation, bad input, cancellation."""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import McpClient, McpError, require_sandbox  # noqa: E402


class ProtocolTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_sandbox(cls)
        cls.c = McpClient()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def test_initialize_echoes_a_known_version(self):
        self.assertEqual(self.c.init_result["protocolVersion"], "2025-06-18")
        self.assertEqual(self.c.init_result["serverInfo"]["name"], "ipybox")
        self.assertIn("tools", self.c.init_result["capabilities"])

    def test_initialize_answers_latest_for_unknown_version(self):
        r = self.c.request("initialize", {"protocolVersion": "1999-01-01", "capabilities": {},
                                          "clientInfo": {"name": "x", "version": "1"}})
        self.assertEqual(r["protocolVersion"], "2025-11-25")

    def test_ping(self):
        self.assertEqual(self.c.request("ping"), {})

    def test_tools_list(self):
        tools = {t["name"]: t for t in self.c.request("tools/list")["tools"]}
        self.assertEqual(set(tools), {"execute_ipython_cell", "upload_file", "download_file", "reset",
                                      "register_mcp_server"})
        self.assertEqual(sorted(tools["register_mcp_server"]["inputSchema"]["required"]),
                         ["server_name", "server_params"])
        ex = tools["execute_ipython_cell"]["inputSchema"]
        self.assertEqual(ex["required"], ["code"])
        self.assertEqual(ex["properties"]["timeout"]["default"], 120)
        self.assertEqual(sorted(tools["upload_file"]["inputSchema"]["required"]), ["local_path", "relpath"])
        self.assertIn("await", tools["execute_ipython_cell"]["description"])

    def raw(self, data):
        self.c.send_raw(data)
        return self.c.read_message(30)

    def test_malformed_json_then_keeps_serving(self):
        m = self.raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
        self.assertEqual(m["error"]["code"], -32700)
        self.assertIsNone(m["id"])
        self.assertEqual(self.c.request("ping"), {})

    def test_invalid_requests(self):
        for bad, code in [(b'[1,2]\n', -32600), (b'"str"\n', -32600),
                          (b'{"jsonrpc":"1.0","id":5,"method":"ping"}\n', -32600),
                          (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}\n', -32600),
                          (b'{"jsonrpc":"2.0","id":6,"method":7}\n', -32600),
                          (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":3}\n', -32600),
                          (b'{"jsonrpc":"2.0","id":8,"id":9,"method":"ping"}\n', -32700)]:
            with self.subTest(bad=bad):
                m = self.raw(bad)
                self.assertEqual(m["error"]["code"], code, m)
        self.assertEqual(self.c.request("ping"), {})

    def test_deeply_nested_json(self):
        m = self.raw(b'{"jsonrpc":"2.0","id":11,"method":"ping","params":{"a":' + b"[" * 100000 + b"]" * 100000 + b"}}\n")
        self.assertIn("error", m)
        self.assertEqual(self.c.request("ping"), {})

    def test_unknown_method(self):
        with self.assertRaises(McpError) as e:
            self.c.request("resources/list")
        self.assertEqual(e.exception.code, -32601)

    def test_unknown_tool(self):
        with self.assertRaises(McpError) as e:
            self.c.call("rm_rf_host", {})
        self.assertEqual(e.exception.code, -32602)
        self.assertIn("Unknown tool", str(e.exception))

    def test_missing_and_wrong_typed_arguments(self):
        for args, words in [({}, "'code' is required"), ({"code": 5}, "'code' must be a string"),
                            ({"code": "1", "timeout": "x"}, "'timeout'"),
                            ({"code": "1", "timeout": -1}, "'timeout'"),
                            ({"code": "1", "max_output_chars": 1.5}, "'max_output_chars'")]:
            with self.subTest(args=args):
                r = self.c.call("execute_ipython_cell", args)
                self.assertTrue(r["isError"])
                self.assertIn(words, r["content"][0]["text"])
        r = self.c.call("upload_file", {"relpath": "x"})
        self.assertTrue(r["isError"])
        self.assertIn("'local_path' is required", r["content"][0]["text"])
        with self.assertRaises(McpError) as e:
            self.c.request("tools/call", {"arguments": {}})
        self.assertEqual(e.exception.code, -32602)

    def test_arguments_not_an_object(self):
        r = self.c.request("tools/call", {"name": "execute_ipython_cell", "arguments": [1, 2]})
        self.assertTrue(r["isError"])

    def test_oversized_message_is_refused_and_serving_continues(self):
        big = b'{"jsonrpc":"2.0","id":99,"method":"ping","params":{"x":"' + b"a" * (17 << 20) + b'"}}\n'
        self.c.send_raw(big)
        m = self.c.read_message(60)
        self.assertEqual(m["error"]["code"], -32600)
        self.assertIn("too large", m["error"]["message"])
        self.assertEqual(self.c.request("ping"), {})

    def test_notifications_get_no_answer(self):
        self.c.notify("notifications/initialized")
        self.c.notify("notifications/whatever", {"x": 1})
        self.assertEqual(self.c.request("ping"), {})  # the next message is the ping's answer

    def test_ping_answers_while_a_cell_runs(self):
        rid = self.c.send_request("tools/call", {"name": "execute_ipython_cell",
                                                 "arguments": {"code": "import time; time.sleep(1.5); 'slept'"}})
        time.sleep(0.3)
        t = time.time()
        pid = self.c.send_request("ping")
        m = self.c.read_message(30)
        self.assertEqual(m.get("id"), pid, "ping must be answered before the running cell finishes")
        self.assertLess(time.time() - t, 1.0)
        m = self.c.wait_response(rid)
        self.assertIn("slept", m["result"]["content"][0]["text"])

    def test_cancel_interrupts_the_running_cell(self):
        self.c.execute("kept = 'yes'")
        rid = self.c.send_request("tools/call", {"name": "execute_ipython_cell",
                                                 "arguments": {"code": "import time; time.sleep(60)"}})
        time.sleep(0.5)
        t = time.time()
        self.c.notify("notifications/cancelled", {"requestId": rid, "reason": "test"})
        text, _ = self.c.execute("kept")
        self.assertLess(time.time() - t, 10)
        self.assertIn("yes", text, "the kernel's state survives a cancelled cell")
        # No response for the cancelled request was sent.
        self.assertFalse([n for n in self.c.notifications if n.get("id") == rid])

    def test_queued_calls_run_in_order(self):
        ids = [self.c.send_request("tools/call", {"name": "execute_ipython_cell",
                                                  "arguments": {"code": "import time; time.sleep(0.2); print(%d)" % i}})
               for i in range(3)]
        for i, rid in enumerate(ids):
            m = self.c.wait_response(rid)
            self.assertEqual(m["result"]["content"][0]["text"].strip(), str(i))


if __name__ == "__main__":
    unittest.main()
