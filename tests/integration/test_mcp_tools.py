"""Programmatic MCP tool calling end to end (`ipybox mcp`, embedded supervisor): MCP servers
registered on the host (--mcp-config and the register_mcp_server tool), the generated
`mcptools` package imported in the kernel, calls through the tool socket with approval (by
--approve-tools, or by the MCP client answering elicitation requests), against
@modelcontextprotocol/server-everything over stdio, SSE and Streamable HTTP on loopback, and
against misbehaving fake servers. The attacks on the tool socket itself are in
tests/security/test_tool_channel.py."""
import json
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
from ipybox_test import (ACCEPT, DECLINE, ELICIT, McpCase, McpError, descendants, proc_cmdline,  # noqa: E402
                         text_of, wait_for)
import mcp_servers  # noqa: E402


class ToolCallingCase(McpCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ipybox-tools-")
        cls.everything = mcp_servers.everything_stdio_params()
        cls.config = os.path.join(cls.tmp.name, "mcp.json")
        with open(cls.config, "w") as f:
            json.dump({"mcpServers": {"everything": cls.everything}}, f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_cell(self, c, code, **kw):
        text, r = c.execute(code, **kw)
        self.assertFalse(r.get("isError"), text)
        return text


class TestRegistration(ToolCallingCase):
    def test_config_servers_and_a_loop_of_calls_in_one_cell(self):
        c = self.client("--mcp-config", self.config, "--approve-tools", "everything/*")
        tools = [t["name"] for t in c.request("tools/list")["tools"]]
        self.assertIn("register_mcp_server", tools)
        text = self.run_cell(c, (
            "from mcptools.everything import echo, get_sum\n"
            "outs = [echo.run(message=f'hello {i}') for i in range(3)]\n"
            "total = 0\n"
            "for i in range(3):\n"
            "    total += float(get_sum.run(get_sum.Params(a=i, b=10)).split(' is ')[1].rstrip('.'))\n"
            "print(outs, total)\n"))
        self.assertIn("['Echo: hello 0', 'Echo: hello 1', 'Echo: hello 2'] 33.0", text)

    def test_register_tool_returns_modules_and_they_import_at_once(self):
        c = self.client("--approve-tools", "ev/echo")
        # mcptools imported before the server exists: the new package must still be found.
        self.run_cell(c, "import mcptools")
        r = c.call("register_mcp_server", {"server_name": "ev", "server_params": self.everything})
        self.assertFalse(r.get("isError"), text_of(r))
        modules = json.loads(r["content"][0]["text"])
        self.assertIn("echo", modules)
        self.assertIn("get_sum", modules)
        self.assertIn("get_structured_content", modules)
        text = self.run_cell(c, "from mcptools.ev import echo\nprint(echo.run(message='x'))\nprint(echo.__doc__)")
        self.assertIn("Echo: x", text)
        self.assertIn("Echoes back the input string", text)

    def test_bad_registrations_are_refused_clearly(self):
        c = self.client()
        cases = [
            ({"server_name": "1bad", "server_params": self.everything}, "server"),
            ({"server_name": "ok", "server_params": {"command": "x", "shell": True}}, "shell"),
            ({"server_name": "ok", "server_params": {"url": "file:///etc/passwd"}}, "http"),
            ({"server_name": "ok", "server_params": {"command": "/nonexistent/server"}}, "/nonexistent/server"),
            ({"server_name": "ok", "server_params": {"url": "http://127.0.0.1:9/mcp"}}, "127.0.0.1"),
            ({"server_name": "ok", "server_params": {"command": "${IPYBOX_TEST_UNSET_VAR}"}},
             "IPYBOX_TEST_UNSET_VAR"),
        ]
        for args, word in cases:
            r = c.call("register_mcp_server", args)
            self.assertTrue(r.get("isError"), (args, r))
            self.assertIn(word, text_of(r), args)
        # Nothing was registered, nothing generated.
        text = self.run_cell(c, "import os; print(sorted(os.listdir('/opt/ipybox/mcptools')))")
        self.assertNotIn("ok", text.replace("'__init__.py'", ""))

    def test_placeholders_are_filled_on_the_host_and_never_reach_the_kernel(self):
        env = dict(os.environ, IPYBOX_TEST_SECRET="s3cr3t-value-42")
        params = dict(self.everything)
        params["env"] = dict(params.get("env") or {}, SECRET_FOR_SERVER="${IPYBOX_TEST_SECRET}")
        c = self.client("--approve-tools", "*", env=env)
        r = c.call("register_mcp_server", {"server_name": "ev", "server_params": params})
        self.assertFalse(r.get("isError"), text_of(r))
        text = self.run_cell(c, (
            "import os, subprocess\n"
            "from mcptools.ev import get_env\n"
            "print('SERVER-SAW' if 's3cr3t-value-42' in get_env.run() else 'SERVER-MISSED')\n"
            "found = subprocess.run(['grep', '-rl', 's3cr3t', '/opt/ipybox', '/app', '/run', '/tmp'],\n"
            "                       capture_output=True, text=True).stdout\n"
            "print('KERNEL-SAW' if 's3cr3t' in os.environ.get('SECRET_FOR_SERVER', '') or found else 'KERNEL-CLEAN')\n"))
        self.assertIn("SERVER-SAW", text)
        self.assertIn("KERNEL-CLEAN", text)

    def test_http_transports(self):
        for transport in ("streamableHttp", "sse"):
            with self.subTest(transport=transport), mcp_servers.everything_http(transport) as server:
                c = self.client("--approve-tools", "*")
                r = c.call("register_mcp_server", {"server_name": "web", "server_params": {"url": server.url}})
                self.assertFalse(r.get("isError"), text_of(r))
                text = self.run_cell(c, (
                    "from mcptools.web import echo, get_structured_content as g\n"
                    "print(echo.run(message='over http'))\n"
                    "r = g.run(location='Chicago')\n"
                    "print(type(r).__name__, r.temperature, r.conditions)\n"))
                self.assertIn("Echo: over http", text)
                self.assertIn("Result ", text)
                c.close()


class TestResults(ToolCallingCase):
    def test_structured_results_and_async(self):
        c = self.client("--mcp-config", self.config, "--approve-tools", "everything/*")
        text = self.run_cell(c, (
            "from mcptools.everything import get_structured_content as g, echo\n"
            "r = g.run(location='New York')\n"
            "print(type(r).__name__, isinstance(r.temperature, (int, float)), type(r.conditions).__name__)\n"
            "print(await echo.run_async(message='async'))\n"))
        self.assertIn("Result True str", text)
        self.assertIn("Echo: async", text)

    def test_tool_errors_rejections_and_timeouts_raise_distinct_exceptions(self):
        with mcp_servers.fake_server_params("errors") as fake:
            cfg = os.path.join(self.tmp.name, "fake.json")
            with open(cfg, "w") as f:
                json.dump({"mcpServers": {"fake": fake}}, f)
            c = self.client("--mcp-config", cfg, "--approve-tools", "fake/fail", "--approve-tools", "fake/hang",
                            "--mcp-timeout", "3")
            text = self.run_cell(c, (
                "import mcptools\n"
                "from mcptools.fake import fail, hang, ok\n"
                "for f in (fail, hang, ok):\n"
                "    try:\n"
                "        f.run()\n"
                "        print(f.__name__, 'no exception')\n"
                "    except mcptools.ToolRejected as e:\n"
                "        print(f.__name__, 'REJECTED', e)\n"
                "    except mcptools.ToolTimeout as e:\n"
                "        print(f.__name__, 'TIMEOUT', isinstance(e, TimeoutError))\n"
                "    except mcptools.ToolError as e:\n"
                "        print(f.__name__, 'TOOL_ERROR', e)\n"
                "print('cell goes on')\n"), timeout=60)
            self.assertIn("fail TOOL_ERROR", text)
            self.assertIn("hang TIMEOUT True", text)
            self.assertIn("ok REJECTED", text)  # not in --approve-tools, and the client cannot be asked
            self.assertIn("cell goes on", text)


class TestApproval(ToolCallingCase):
    def test_elicitation_accept_and_decline(self):
        c = self.client("--mcp-config", self.config, capabilities=ELICIT)
        code = ("import mcptools\nfrom mcptools.everything import echo\n"
                "try:\n    print('GOT', echo.run(message='please'))\n"
                "except mcptools.ToolRejected as e:\n    print('REJECTED', e)\n"
                "print('after')\n")
        r, asked = c.call_answering("execute_ipython_cell", {"code": code}, lambda p: ACCEPT)
        self.assertIn("GOT Echo: please", text_of(r))
        self.assertEqual(len(asked), 1)
        self.assertIn("'echo'", asked[0]["message"])
        self.assertIn("'everything'", asked[0]["message"])
        self.assertIn("please", asked[0]["message"])
        self.assertEqual(asked[0]["requestedSchema"]["type"], "object")
        r, asked = c.call_answering("execute_ipython_cell", {"code": code}, lambda p: DECLINE)
        self.assertIn("REJECTED", text_of(r))
        self.assertIn("after", text_of(r))
        self.assertNotIn("GOT", text_of(r))

    def test_concurrent_calls_go_on_after_a_rejection(self):
        # Three calls at once: the first is declined, the others must still be asked and run.
        c = self.client("--mcp-config", self.config, capabilities=ELICIT)
        code = ("import asyncio, mcptools\nfrom mcptools.everything import echo\n"
                "async def one(w):\n"
                "    try:\n        return await echo.run_async(message=w)\n"
                "    except mcptools.ToolRejected:\n        return 'rejected ' + w\n"
                "print(await asyncio.gather(one('first'), one('second'), one('third')))\n")
        r, asked = c.call_answering("execute_ipython_cell", {"code": code, "timeout": 60},
                                    lambda p: DECLINE if "first" in p["message"] else ACCEPT)
        self.assertIn("['rejected first', 'Echo: second', 'Echo: third']", text_of(r))
        self.assertEqual(len(asked), 3)

    def test_waiting_for_approval_does_not_count_against_the_timeout(self):
        c = self.client("--mcp-config", self.config, capabilities=ELICIT)

        def slow(params):
            time.sleep(5)
            return ACCEPT
        r, asked = c.call_answering("execute_ipython_cell", {
            "code": "from mcptools.everything import echo\nprint(echo.run(message='late'))", "timeout": 3}, slow)
        self.assertFalse(r.get("isError"), text_of(r))
        self.assertIn("Echo: late", text_of(r))

    def test_no_elicitation_and_no_policy_means_refused_with_a_reason(self):
        c = self.client("--mcp-config", self.config)
        text = self.run_cell(c, (
            "import mcptools\nfrom mcptools.everything import echo\n"
            "try:\n    echo.run(message='x')\nexcept mcptools.ToolRejected as e:\n    print('REJECTED', e)\n"))
        self.assertIn("REJECTED", text)
        self.assertIn("elicitation", text)
        self.assertIn("--approve-tools", text)

    def test_cancelling_a_cell_withdraws_its_question(self):
        c = self.client("--mcp-config", self.config, capabilities=ELICIT)
        rid = c.send_request("tools/call", {"name": "execute_ipython_cell", "arguments": {
            "code": "from mcptools.everything import echo\necho.run(message='never')"}})
        while True:
            msg = c.read_message(60)
            if msg.get("method") == "elicitation/create":
                ask_id = msg["id"]
                break
        c.notify("notifications/cancelled", {"requestId": rid, "reason": "test"})
        while True:
            msg = c.read_message(60)
            if msg.get("method") == "notifications/cancelled":
                self.assertEqual(msg["params"]["requestId"], ask_id)
                break
        # The session goes on; a late answer to the withdrawn question changes nothing.
        c.send({"jsonrpc": "2.0", "id": ask_id, "result": ACCEPT})
        self.assertIn("2", self.run_cell(c, "print(1+1)"))


class TestServerLife(ToolCallingCase):
    def server_pids(self, c):
        return [p for p in descendants(c.proc.pid) if b"server-everything" in proc_cmdline(p)]

    def test_reset_stops_stdio_servers_and_the_next_call_restarts_them(self):
        c = self.client("--mcp-config", self.config, "--approve-tools", "everything/*")
        self.assertTrue(wait_for(lambda: len(self.server_pids(c)) == 1, 20))
        c.call("reset")
        self.assertTrue(wait_for(lambda: not self.server_pids(c), 20), "reset left the stdio server running")
        self.assertIn("Echo: again", self.run_cell(c, "from mcptools.everything import echo\nprint(echo.run(message='again'))"))
        self.assertEqual(len(self.server_pids(c)), 1)

    def test_a_server_that_dies_is_restarted_on_next_use(self):
        c = self.client("--mcp-config", self.config, "--approve-tools", "everything/*")
        self.assertTrue(wait_for(lambda: len(self.server_pids(c)) == 1, 20))
        for pid in self.server_pids(c):
            os.kill(pid, 9)
        self.assertTrue(wait_for(lambda: not self.server_pids(c), 20))
        self.assertIn("Echo: back", self.run_cell(c, "from mcptools.everything import echo\nprint(echo.run(message='back'))"))

    def test_closing_the_session_stops_its_servers(self):
        c = self.client("--mcp-config", self.config, "--approve-tools", "everything/*")
        self.assertTrue(wait_for(lambda: len(self.server_pids(c)) == 1, 20))
        pids = self.server_pids(c)
        c.close()
        for pid in pids:
            self.assertFalse(os.path.exists("/proc/%d" % pid) and b"server-everything" in proc_cmdline(pid))


if __name__ == "__main__":
    unittest.main()
