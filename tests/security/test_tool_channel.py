"""Attacks on programmatic tool calling (attack catalog: "Kernel code calling the tool channel
directly with forged server names or parameters", "A malicious MCP tool server returning huge or
malformed results, or tool descriptions crafted to inject code into generated Python").

Kernel code talks to /opt/ipybox/tool.sock itself, naming unregistered servers, commands, URLs
and extra parameters, skipping approval, flooding it, and tampering with the package; hostile
servers try to inject code through their tool lists and to overwhelm the supervisor with their
answers. Each must be refused or contained, and the host must start no process it was not
configured to start."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
from ipybox_test import McpCase, descendants  # noqa: E402
import mcp_servers  # noqa: E402

# Sends one raw line on the tool socket from inside the kernel and prints the reply.
RAW = r"""
import socket, json
def raw(line, path='/opt/ipybox/tool.sock'):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    try:
        s.sendall(line if isinstance(line, bytes) else (line + '\n').encode())
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused before it was all sent: the answer is still there to read
    buf = b''
    while not buf.endswith(b'\n'):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    s.close()
    return json.loads(buf) if buf else None
"""


def text_of(result):
    return "\n".join(c.get("text", "") for c in result["content"] if c["type"] == "text")


class ToolChannelAttacks(McpCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ipybox-toolsec-")
        cls.config = os.path.join(cls.tmp.name, "mcp.json")
        with open(cls.config, "w") as f:
            json.dump({"mcpServers": {"everything": mcp_servers.everything_stdio_params()}}, f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        super().setUp()
        self.canary = os.path.join(self.tmp.name, "canary-%s" % self.id().rsplit(".", 1)[-1])

    def client(self, *options, **kw):
        return super().client("--mcp-config", self.config, *options, **kw)

    def cell(self, c, code, **kw):
        text, r = c.execute(RAW + code, **kw)
        self.assertFalse(r.get("isError"), text)
        return text

    def host_processes(self, c):
        return set(descendants(c.proc.pid))

    def test_forged_calls_are_refused_and_start_nothing(self):
        c = self.client("--approve-tools", "*")
        before = self.host_processes(c)
        touch = "touch %s" % self.canary
        forged = [
            {"server": "nope", "tool": "echo", "arguments": {}},
            {"server": "everything", "tool": "no-such-tool", "arguments": {}},
            {"server": "everything", "tool": "echo", "arguments": {"message": "x"}, "command": "sh"},
            {"server": "everything", "tool": "echo", "arguments": {}, "args": ["-c", touch]},
            {"server": "everything", "tool": "echo", "arguments": {}, "url": "http://127.0.0.1:1/mcp"},
            {"server": "everything", "tool": "echo", "arguments": {}, "headers": {"X": "y"}},
            {"server": "everything", "tool": "echo", "arguments": {}, "env": {"LD_PRELOAD": "/tmp/x.so"}},
            {"server": "everything", "tool": "echo", "arguments": {}, "server_params": {"command": "sh"}},
            {"server": {"command": "sh", "args": ["-c", touch]}, "tool": "echo", "arguments": {}},
            {"server": "everything", "tool": "echo", "arguments": [touch]},
            {"server": "everything\u0000x", "tool": "echo", "arguments": {}},
            {"server": "../everything", "tool": "echo", "arguments": {}},
        ]
        code = "for req in %r:\n    print(json.dumps(raw(json.dumps(req))))\n" % (forged,)
        code += "print(json.dumps(raw('not json at all')))\nprint(json.dumps(raw('[1,2]')))\n"
        code += "print(json.dumps(raw(json.dumps({'server': 'everything', 'tool': 'echo', 'arguments': {}, 'server': 'nope'}))))\n"
        text = self.cell(c, code)
        replies = [json.loads(line) for line in text.strip().splitlines()]
        self.assertEqual(len(replies), len(forged) + 3)
        for req, rep in zip(forged + ["junk", "array", "duplicate"], replies):
            self.assertEqual(rep.get("error", {}).get("kind"), "refused", (req, rep))
        self.assertIn("no MCP server named 'nope'", replies[0]["error"]["message"])
        self.assertIn("unexpected field 'command'", replies[2]["error"]["message"])
        self.assertFalse(os.path.exists(self.canary))
        self.assertEqual(self.host_processes(c) - before, set(), "a forged call started a process")

    def test_direct_calls_still_need_approval(self):
        # No --approve-tools and a client that cannot be asked: the socket gives nothing.
        c = self.client()
        text = self.cell(c, "print(json.dumps(raw(json.dumps({'server': 'everything', 'tool': 'echo', "
                            "'arguments': {'message': 'sneaky'}}))))")
        rep = json.loads(text.strip().splitlines()[-1])
        self.assertEqual(rep["error"]["kind"], "rejected")
        # And with a client that can be asked, it is asked (and its refusal holds).
        c2 = self.client(capabilities={"elicitation": {}})
        r, asked = c2.call_answering("execute_ipython_cell", {"code": RAW + (
            "print(json.dumps(raw(json.dumps({'server': 'everything', 'tool': 'echo', "
            "'arguments': {'message': 'sneaky'}}))))")}, lambda p: {"action": "decline"})
        self.assertEqual(len(asked), 1)
        self.assertIn("sneaky", asked[0]["message"])
        self.assertEqual(json.loads(text_of(r).strip().splitlines()[-1])["error"]["kind"], "rejected")

    def test_flood_oversize_and_half_requests_are_contained(self):
        c = self.client("--approve-tools", "*")
        text = self.cell(c, (
            "import socket\n"
            "held, busy = [], []\n"
            "for i in range(140):\n"
            "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect('/opt/ipybox/tool.sock')\n"
            "    s.settimeout(10)\n"
            "    try:\n"
            "        s.sendall(b'{\"server\": \"everything\"')  # never finished\n"
            "    except OSError:\n"
            "        pass  # turned away at once\n"
            "    held.append(s)\n"
            "for s in held[128:]:\n"
            "    busy.append(s.recv(4096).decode())\n"
            "print('busy:', len(busy), all('too many tool calls at once' in b for b in busy))\n"
            "for s in held: s.close()\n"
            "big = json.dumps({'server': 'everything', 'tool': 'echo', 'arguments': {'message': 'a' * (2 << 20)}})\n"
            "print('big:', json.dumps(raw(big)))\n"
            "print('after:', raw(json.dumps({'server': 'everything', 'tool': 'echo', 'arguments': {'message': 'ok'}})))\n"),
            timeout=120)
        self.assertIn('busy: 12 True', text)  # 128 connections at once, the most a session takes
        self.assertRegex(text, r'big: .*"refused".*over 1 MiB')
        self.assertIn("after: {'text': 'Echo: ok'}", text)

    def test_the_package_and_socket_cannot_be_tampered_with(self):
        c = self.client("--approve-tools", "*")
        text = self.cell(c, (
            "import os\n"
            "for attempt in (lambda: open('/opt/ipybox/mcptools/everything/echo.py', 'a'),\n"
            "                lambda: os.unlink('/opt/ipybox/tool.sock'),\n"
            "                lambda: os.rename('/opt/ipybox/mcptools', '/opt/ipybox/x'),\n"
            "                lambda: open('/opt/ipybox/mcptools/evil.py', 'w')):\n"
            "    try:\n        attempt(); print('TAMPERED')\n"
            "    except OSError as e:\n        print('refused', e.errno)\n"))
        self.assertNotIn("TAMPERED", text)
        self.assertEqual(text.count("refused 30"), 4, text)  # EROFS

    def test_hostile_tool_lists_stay_inert(self):
        with mcp_servers.fake_server_params("hostile", canary=self.canary) as fake:
            c = self.client("--approve-tools", "*")
            r = c.call("register_mcp_server", {"server_name": "evil", "server_params": fake})
            self.assertFalse(r.get("isError"), text_of(r))
            modules = json.loads(r["content"][0]["text"])
            self.assertTrue(modules)
            text = self.cell(c, (
                "import importlib, os\n"
                "for m in %r:\n"
                "    mod = importlib.import_module('mcptools.evil.' + m)\n"
                "    print(m, bool(mod.__doc__ is None or isinstance(mod.__doc__, str)))\n"
                "print('canary in sandbox:', os.path.exists('/app/pwned'))\n" % (modules,)))
            self.assertIn("canary in sandbox: False", text)
            self.assertFalse(os.path.exists(self.canary))

    def test_huge_malformed_and_hanging_answers_are_contained(self):
        with mcp_servers.fake_server_params("misbehave") as fake:
            c = self.client("--approve-tools", "*", "--mcp-timeout", "3")
            r = c.call("register_mcp_server", {"server_name": "bad", "server_params": fake})
            self.assertFalse(r.get("isError"), text_of(r))
            text = self.cell(c, (
                "import mcptools, importlib\n"
                "for name in ('huge', 'malformed', 'hang', 'ok'):\n"
                "    mod = importlib.import_module('mcptools.bad.' + name)\n"
                "    try:\n        out = mod.run(); print(name, 'OK', len(out))\n"
                "    except mcptools.ToolCallError as e:\n        print(name, type(e).__name__, e.kind)\n"),
                timeout=120)
            self.assertRegex(text, r"huge ToolCallError failed")
            self.assertRegex(text, r"malformed (ToolCallError failed|ToolTimeout timeout)")
            self.assertIn("hang ToolTimeout timeout", text)
            self.assertRegex(text, r"ok OK \d+")  # the server was restarted after the failures
            self.assertIn("2", c.execute("print(1+1)")[0])


if __name__ == "__main__":
    unittest.main()
