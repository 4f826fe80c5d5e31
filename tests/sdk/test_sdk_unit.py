"""The Python SDK's own logic, without a sandbox: options to arguments, results and the
exceptions they raise, the JSON-RPC layer against a scripted peer, and that the package is
standard library only and Python 3.9 syntax."""
import ast
import asyncio
import base64
import builtins
import os
import random
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SDK = os.path.join(ROOT, "sdk", "python")
sys.path.insert(0, SDK)

import ipybox_native as ib  # noqa: E402
from ipybox_native.options import to_args  # noqa: E402
from ipybox_native.rpc import Connection, RpcError, no_answer  # noqa: E402


KEYS = ["content", "type", "text", "data", "mimeType", "_meta", "ipybox/execution", "isError"]
META_KEYS = ["status", "ename", "evalue", "traceback", "images", "outputBytes", "note", "path", "egressRefused", "egressRefusedMore"]


def call_result(text, status="ok", images=(), **meta):
    content = [{"type": "text", "text": text}]
    infos = []
    for data, mime, path in images:
        content.append({"type": "image", "data": base64.b64encode(data).decode(), "mimeType": mime})
        infos.append({"mimeType": mime, "path": path})
    m = {"status": status, "images": infos, "outputBytes": meta.pop("output_bytes", len(text.encode()))}
    m.update(meta)
    return {"content": content, "isError": status != "ok", "_meta": {"ipybox/execution": m}}


class Options(unittest.TestCase):
    def test_names_are_the_clis(self):
        args = to_args({"allowed_domain": ["pypi.org", "*.example.com"], "max_connections": 8, "verbose": True,
                        "container_env_var": {"A": "1", "B": "x=y"}, "approve_tools": "weather/*",
                        "resolve": {"db.internal": "10.0.0.5"}, "tmp_size": "1G"})
        self.assertEqual(args, ["--allowed-domain", "pypi.org", "--allowed-domain", "*.example.com",
                                "--max-connections", "8", "--verbose", "--container-env-var", "A=1",
                                "--container-env-var", "B=x=y", "--approve-tools", "weather/*",
                                "--resolve", "db.internal:10.0.0.5", "--tmp-size", "1G"])

    def test_shell_approval_takes_ipybox_names(self):
        self.assertEqual(to_args({"approve_shell_cmds": True, "require_shell_escape": True}),
                         ["--approve-shell", "--require-shell-escape"])
        self.assertEqual(to_args({"approve_shell_cmds": False}), [])
        with self.assertRaises(ValueError) as cm:
            ib.Sandbox(require_shell_escape=True)
        self.assertIn("require_shell_escape=True requires approve_shell_cmds=True", str(cm.exception))

    def test_zygote_and_standby_switch_both_ways(self):
        self.assertEqual(to_args({"zygote": True, "standby": True}), ["--zygote", "--standby"])
        self.assertEqual(to_args({"zygote": False, "standby": False}), ["--no-zygote", "--no-standby"])
        self.assertEqual(to_args({"zygote": None, "standby": None}), [])
        with self.assertRaises(TypeError) as cm:
            to_args({"standby": "yes"})
        self.assertIn("standby: expected True, False or None", str(cm.exception))
        # A value of the wrong kind is named first, before the options' combination is checked.
        with self.assertRaises(TypeError) as cm:
            to_args({"standby": "yes", "zygote": False})
        self.assertIn("standby: expected True, False or None", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            ib.Sandbox(standby=True, zygote=False)
        self.assertIn("standby=True requires the zygote", str(cm.exception))

    def test_host_paths_are_made_absolute(self):
        here = os.getcwd()
        args = to_args({"workspace": "./ws", "allowed_dir": ["a", "/b"], "container_bind": {"data": "d"},
                        "mcp_config": "~/m.json"})
        self.assertEqual(args, ["--workspace", os.path.join(here, "ws"), "--allowed-dir", os.path.join(here, "a"),
                                "--allowed-dir", "/b", "--container-bind", os.path.join(here, "data") + ":d",
                                "--mcp-config", os.path.expanduser("~/m.json")])
        # A plain name without '/' is a workspace name (ipybox workspaces), passed as it is.
        self.assertEqual(to_args({"workspace": "ws"}), ["--workspace", "ws"])

    def test_sandbox_mcp_servers_is_a_flag(self):
        self.assertEqual(to_args({"sandbox_mcp_servers": True}), ["--sandbox-mcp-servers"])
        self.assertEqual(to_args({"sandbox_mcp_servers": False}), [])

    def test_none_and_false_are_left_out(self):
        self.assertEqual(to_args({"workspace": None, "verbose": False, "allowed_domain": None}), [])

    def test_unknown_option_is_named_with_a_hint(self):
        with self.assertRaises(TypeError) as cm:
            to_args({"allowed_domains": ["x"]})
        self.assertIn("'allowed_domains'", str(cm.exception))
        self.assertIn("allowed_domain", str(cm.exception).split("did you mean")[1])
        with self.assertRaises(TypeError):
            ib.Sandbox(alowed_dir="/tmp")

    def test_wrong_kinds_are_refused(self):
        for opts in ({"workspace": ["a", "b"]}, {"allowed_domain": 5}, {"allowed_domain": ["a", 5]},
                     {"max_connections": True}, {"container_env_var": {"A": ["x"]}}):
            with self.assertRaises(TypeError, msg=opts):
                to_args(opts)

    def test_transport_arguments_are_checked(self):
        with self.assertRaises(ValueError):
            ib.Sandbox(transport="docker")
        with self.assertRaises(ValueError):
            ib.Sandbox(transport="embedded", socket="/x.sock")
        with self.assertRaises(ValueError):
            ib.Sandbox(transport="embedded", session="work")
        with self.assertRaises(ValueError):
            ib.Sandbox(socket="/x.sock", env={"A": "1"})  # the daemon has its own environment


class Results(unittest.TestCase):
    def test_ok_text_excludes_the_supervisors_notes(self):
        png = b"\x89PNG\r\n\x1a\nfake"
        res = call_result("héllo ✓\n[image saved to /app/images/a.png]", images=[(png, "image/png", "/app/images/a.png")],
                          output_bytes=len("héllo ✓\n".encode()))
        r = ib.ExecutionResult.from_call_result(res)
        self.assertEqual(r.text, "héllo ✓\n")
        self.assertEqual(r.status, "ok")
        self.assertIsNone(r.error)
        self.assertEqual(r.images, [ib.Image(png, "image/png", "/app/images/a.png")])
        self.assertNotIn("fake", repr(r.images[0]))  # bytes stay out of reprs

    def test_egress_refusals_come_from_meta_and_stay_out_of_text(self):
        line = "[ipybox] egress refused: DNS lookup of pypi.org — the name is not allowed; allow it with --allowed-domain pypi.org"
        refused = {"host": "pypi.org", "port": None, "dns": True, "reason": "the name is not allowed",
                   "allow": "--allowed-domain pypi.org", "count": 2}
        res = call_result("x\n" + line + "\n", output_bytes=2, egressRefused=[refused, "junk"], egressRefusedMore=3)
        r = ib.ExecutionResult.from_call_result(res)
        self.assertEqual(r.text, "x\n")
        self.assertEqual(r.egress_refused, [refused])
        self.assertEqual(r.egress_refused_more, 3)
        self.assertEqual(ib.ExecutionResult.from_call_result(call_result("y")).egress_refused, [])

    def test_each_status_raises_its_exception(self):
        tb = "Traceback...\nZeroDivisionError: division by zero\n"
        cases = [
            (call_result("out\n" + tb, "error", ename="ZeroDivisionError", evalue="division by zero", traceback=tb),
             ib.ExecutionError),
            (call_result(tb, "error", ename="ToolRejected", evalue="no", traceback=tb), ib.ApprovalRejected),
            (call_result("", "timeout", note="The cell timed out after 1 s"), ib.TimeoutError),
            (call_result("", "timeout_restarted", note="restarted"), ib.TimeoutError),
            (call_result("", "kernel_died", note="The kernel died (status 3)"), ib.KernelDied),
            (call_result("", "cancelled", note="The cell was cancelled."), ib.Cancelled),
            (call_result("", "error", note="The sandbox ran out of memory"), ib.ExecutionError),
        ]
        for res, cls in cases:
            r = ib.ExecutionResult.from_call_result(res)
            self.assertIs(type(r.error), cls, res)
            self.assertIsInstance(r.error, ib.IpyboxError)
        err = ib.ExecutionResult.from_call_result(cases[0][0]).error
        self.assertEqual((err.ename, err.evalue, err.output), ("ZeroDivisionError", "division by zero", "out\n"))
        self.assertEqual(str(err), tb.rstrip("\n"))
        t = ib.ExecutionResult.from_call_result(cases[2][0]).error
        self.assertIsInstance(t, builtins.TimeoutError)
        self.assertFalse(t.restarted)
        self.assertTrue(ib.ExecutionResult.from_call_result(cases[3][0]).error.restarted)
        self.assertIn("out of memory", str(ib.ExecutionResult.from_call_result(cases[6][0]).error))

    def test_a_result_without_our_meta_is_read_from_its_text(self):
        r = ib.ExecutionResult.from_call_result({"content": [{"type": "text", "text": "Invalid arguments: x"}],
                                                 "isError": True})
        self.assertEqual((r.status, r.text), ("failed", "Invalid arguments: x"))
        self.assertIsInstance(r.error, ib.OperationError)  # not the code's error: it did not run
        self.assertIn("Invalid arguments", str(r.error))

    def test_a_cut_multibyte_boundary_does_not_raise(self):
        res = call_result("ü", output_bytes=1)
        self.assertEqual(ib.ExecutionResult.from_call_result(res).text, "\ufffd")

    def test_any_shape_gives_a_result(self):
        # Random JSON values in every place of a CallToolResult: a result, never an exception.
        rnd = random.Random(6)

        def value(depth=0):
            kinds = [None, True, 3, -1, 2.5, "", "x", "aGk=", "ok", "error", "image", "text"]
            if depth < 3:
                kinds += [[value(depth + 1) for _ in range(rnd.randrange(3))],
                          {k: value(depth + 1) for k in rnd.sample(KEYS, rnd.randrange(4))}]
            return rnd.choice(kinds)

        for _ in range(3000):
            res = value()
            if rnd.random() < 0.7:
                res = {"content": [{"type": rnd.choice(["text", "image"]), "text": value(), "data": value(),
                                    "mimeType": value()} for _ in range(rnd.randrange(3))],
                       "isError": value(), "_meta": rnd.choice([value(), {"ipybox/execution": {
                           k: value() for k in rnd.sample(META_KEYS, rnd.randrange(len(META_KEYS)))}}])}
            r = ib.ExecutionResult.from_call_result(res)
            self.assertIsInstance(r.text, str)
            self.assertTrue(all(isinstance(i.data, bytes) for i in r.images))
            r.error  # noqa: B018 (mapping the status to an exception must not fail either)

    def test_errors_survive_pickling(self):
        import pickle
        tb = "Traceback\nKeyError: 'k'\n"
        for res in (call_result(tb, "error", ename="KeyError", evalue="'k'", traceback=tb),
                    call_result("", "timeout", note="timed out"), call_result("", "kernel_died", note="died")):
            e = ib.ExecutionResult.from_call_result(res).error
            back = pickle.loads(pickle.dumps(e))
            self.assertIs(type(back), type(e))
            self.assertEqual((str(back), back.result.text), (str(e), e.result.text))

    def test_ipybox_names_are_there(self):
        # CodeExecutor follows ipybox's shapes (test_ipybox_port_unit.py); the rest are aliases.
        self.assertTrue(issubclass(ib.CodeExecutor, ib.Sandbox))
        self.assertIsInstance(ib.ExecutionResult(), ib.CodeExecutionResult)
        self.assertIs(ib.CodeExecutionChunk, ib.OutputChunk)
        self.assertIs(ib.CodeExecutionError, ib.ExecutionError)


class Peer:
    """The other end of a Connection: what it was sent, and lines to send it."""

    def __init__(self):
        self.reader = asyncio.StreamReader()
        self.sent = []

    # StreamWriter's surface that Connection uses.
    def write(self, data):
        import json
        for line in data.decode().splitlines():
            self.sent.append(json.loads(line))

    async def drain(self):
        pass

    def close(self):
        self.reader.feed_eof()

    close_error = None  # what wait_closed() raises (a broken pipe, say)

    async def wait_closed(self):
        if self.close_error is not None:
            raise self.close_error

    def say(self, msg):
        import json
        self.reader.feed_data((json.dumps(msg) + "\n").encode())


class Rpc(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.peer = Peer()
        self.requests = []
        self.notes = []

        async def on_request(rid, method, params):
            self.requests.append((rid, method, params))
            if method == "withdrawn":
                return no_answer()
            if method == "fails":
                raise RuntimeError("boom")
            return {"echo": params}

        self.conn = Connection(self.peer.reader, self.peer, on_request, lambda m, p: self.notes.append((m, p)))

    async def asyncTearDown(self):
        await self.conn.close()

    async def test_close_takes_a_broken_pipe_quietly(self):
        # A supervisor that ended first leaves a BrokenPipeError in its stdin's close waiter.
        self.peer.close_error = BrokenPipeError(32, "Broken pipe")
        await self.conn.close()
        self.assertIsNotNone(self.conn.lost)

    async def test_progress_comes_before_the_result_and_to_its_call_only(self):
        seen = []
        task = asyncio.ensure_future(self.conn.request("tools/call", {"name": "x"}, on_progress=seen.append))
        await asyncio.sleep(0)
        req = self.peer.sent[-1]
        token = req["params"]["_meta"]["progressToken"]
        self.peer.say({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": "other", "message": "not ours"}})
        self.peer.say({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": token, "message": "a"}})
        self.peer.say({"jsonrpc": "2.0", "id": req["id"], "result": {"ok": 1}})
        self.assertEqual(await task, {"ok": 1})
        self.assertEqual([p["message"] for p in seen], ["a"])

    async def test_error_responses_raise_rpc_error(self):
        task = asyncio.ensure_future(self.conn.request("m"))
        await asyncio.sleep(0)
        self.peer.say({"jsonrpc": "2.0", "id": self.peer.sent[-1]["id"],
                       "error": {"code": -32601, "message": "no such method"}})
        with self.assertRaises(RpcError) as cm:
            await task
        self.assertEqual((cm.exception.code, str(cm.exception)), (-32601, "no such method"))

    async def test_server_requests_are_answered_or_not(self):
        self.peer.say({"jsonrpc": "2.0", "id": "q1", "method": "ask", "params": {"a": 1}})
        self.peer.say({"jsonrpc": "2.0", "id": "q2", "method": "withdrawn", "params": {}})
        self.peer.say({"jsonrpc": "2.0", "id": "q3", "method": "fails", "params": {}})
        self.peer.say({"jsonrpc": "2.0", "id": "q4", "method": "ping"})
        for _ in range(20):
            await asyncio.sleep(0.01)
        answers = {m["id"]: m for m in self.peer.sent}
        self.assertEqual(answers["q1"]["result"], {"echo": {"a": 1}})
        self.assertNotIn("q2", answers)
        self.assertEqual(answers["q3"]["error"]["code"], -32603)
        self.assertEqual(answers["q4"]["result"], {})
        self.assertEqual([r[1] for r in self.requests], ["ask", "withdrawn", "fails"])

    async def test_junk_lines_are_skipped_and_the_end_fails_waiting_calls(self):
        task = asyncio.ensure_future(self.conn.request("m"))
        await asyncio.sleep(0)
        self.peer.reader.feed_data(b"not json\n[1,2]\n\n")
        self.peer.reader.feed_eof()
        with self.assertRaises(ib.ConnectionLost):
            await task
        self.assertEqual(self.notes[-1][0], "$lost")
        with self.assertRaises(ib.ConnectionLost):
            await self.conn.request("after")

    async def test_fail_ends_one_wait_and_drops_the_late_answer(self):
        task = asyncio.ensure_future(self.conn.request("m"))
        await asyncio.sleep(0)
        rid = self.peer.sent[-1]["id"]
        self.conn.fail(rid, ib.Cancelled("stop"))
        with self.assertRaises(ib.Cancelled):
            await task
        self.peer.say({"jsonrpc": "2.0", "id": rid, "result": {}})  # late: dropped
        self.assertEqual(await asyncio.wait_for(self._roundtrip(), 5), {"x": 1})

    async def test_requests_ipybox_would_drop_are_refused_here(self):
        with self.assertRaises(ValueError) as cm:
            await self.conn.request("tools/call", {"code": "x" * (16 << 20)})
        self.assertIn("at most 16 MiB", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            await self.conn.request("tools/call", {"code": "\udc80"})
        self.assertIn("not valid Unicode", str(cm.exception))
        self.assertEqual(self.peer.sent, [])

    async def _roundtrip(self):
        task = asyncio.ensure_future(self.conn.request("n"))
        await asyncio.sleep(0)
        self.peer.say({"jsonrpc": "2.0", "id": self.peer.sent[-1]["id"], "result": {"x": 1}})
        return await task


class Approval(unittest.IsolatedAsyncioTestCase):
    async def test_first_decision_wins_and_both_spellings_work(self):
        req = ib.ApprovalRequest(asyncio.get_running_loop(), "s", "t", {"a": 1}, "msg")
        await req.accept()
        req.reject()
        self.assertTrue(await req._wait())

    async def test_a_decision_may_come_from_another_thread(self):
        req = ib.ApprovalRequest(asyncio.get_running_loop(), "s", "t", {}, "msg")
        await asyncio.get_running_loop().run_in_executor(None, req.reject)
        self.assertFalse(await asyncio.wait_for(req._wait(), 5))

    async def test_withdrawn_requests_ignore_later_decisions(self):
        req = ib.ApprovalRequest(asyncio.get_running_loop(), "s", "t", {}, "msg")
        req._withdraw()
        req.accept()
        self.assertIsNone(await req._wait())


class Withdrawal(unittest.IsolatedAsyncioTestCase):
    async def test_a_withdrawal_ahead_of_its_request_is_kept(self):
        # notifications/cancelled can be read before the task that handles the request runs.
        asked = []
        sb = ib.Sandbox(transport="embedded", approval=lambda req: asked.append(req) or True)
        sb._loop = asyncio.get_running_loop()
        sb._on_notification("notifications/cancelled", {"requestId": "ipybox-approval-1"})
        params = {"message": "m", "_meta": {"ipybox/toolCall": {"server": "s", "tool": "t", "arguments": {}}}}
        from ipybox_native.rpc import _NO_ANSWER
        self.assertIs(await sb._on_elicitation("ipybox-approval-1", params), _NO_ANSWER)
        self.assertEqual(asked, [])
        # A later request with another id is asked as usual.
        answer = await asyncio.wait_for(sb._on_elicitation("ipybox-approval-2", params), 10)
        self.assertEqual(answer, {"action": "accept", "content": {}})
        self.assertEqual(len(asked), 1)


def parse_as_3_9(src, name):
    """ast.parse with feature_version (3, 9). CPython 3.11 before 3.11.5 (Debian 12 has 3.11.2)
    can fail it at random with "SystemError: AST constructor recursion depth mismatch"
    (gh-106905); a second try then parses."""
    for attempt in range(3):
        try:
            return ast.parse(src, name, feature_version=(3, 9))
        except SystemError:
            if attempt == 2:
                raise


class Package(unittest.TestCase):
    def sources(self):
        pkg = os.path.join(SDK, "ipybox_native")
        for name in sorted(os.listdir(pkg)):
            if name.endswith(".py"):
                with open(os.path.join(pkg, name)) as f:
                    yield name, f.read()

    def test_python_3_9_syntax_and_standard_library_only(self):
        # sys.stdlib_module_names is 3.10+; on 3.9 the modules the package may use.
        stdlib = getattr(sys, "stdlib_module_names", None) or {
            "abc", "asyncio", "base64", "builtins", "collections", "dataclasses", "inspect", "itertools", "json",
            "logging", "os", "pathlib", "pwd", "shutil", "tempfile", "threading", "time", "typing", "uuid"}
        for name, src in self.sources():
            tree = parse_as_3_9(src, name)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    mods = [node.module]
                else:
                    continue
                for m in mods:
                    self.assertIn(m.split(".")[0], stdlib | {"__future__"}, "%s imports %s" % (name, m))

    def test_no_3_10_only_calls(self):
        # The APIs a 3.9 interpreter lacks that this kind of code reaches for.
        for name, src in self.sources():
            for newer in ("aclosing", "anext(", "aiter(", "asyncio.timeout(", "TaskGroup", "zip(strict"):
                self.assertNotIn(newer, src, "%s uses %s (Python 3.10+)" % (name, newer))


if __name__ == "__main__":
    unittest.main()
