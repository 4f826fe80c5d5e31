"""The Python SDK against the real binaries and real kernels: every call, over `ipybox mcp
--embedded` as a subprocess and over an ipyboxd --user socket. Streaming order, cancel,
timeouts, a dead kernel, images, files, approvals (callback and stream, accept and reject; MCP
tool calls and shell commands), start-up failures, a lost supervisor, concurrent callers, the examples and `pip install`."""
import asyncio
import builtins
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SDK = os.path.join(ROOT, "sdk", "python")
EXAMPLES = os.path.join(SDK, "examples")
sys.path.insert(0, SDK)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import ipybox_native as ib  # noqa: E402
from daemon_fixture import Daemon  # noqa: E402
from ipybox_test import IPYBOX, require_sandbox, wait_for  # noqa: E402
from mcp_servers import everything_stdio_params, install_node_packages  # noqa: E402

PY = "/usr/bin/python3"
WEATHER = {"command": PY, "args": [os.path.join(EXAMPLES, "weather_server.py")]}
WEATHER_CALL = "from mcptools.weather import get_weather\nr = get_weather.run(get_weather.Params(city='Oslo'))\nprint(r.conditions)"
# A cell that says it is running (a chunk, and a file in /app), then waits for nothing.
LOOP = ("import time, pathlib\nx = 7\nprint('looping', flush=True)\npathlib.Path('/app/looping').touch()\n"
        "while True:\n    time.sleep(0.05)")


class SdkCase(unittest.IsolatedAsyncioTestCase):
    transport = "embedded"

    def setUp(self):
        require_sandbox(self)
        self.tmp = tempfile.TemporaryDirectory(prefix="ipybox-sdk-test-", dir="/tmp")
        self.ws = os.path.join(self.tmp.name, "ws")
        os.mkdir(self.ws)
        self.daemon = None
        if self.transport == "daemon":
            self.daemon = Daemon()

    def tearDown(self):
        if self.daemon:
            self.daemon.close()
        self.tmp.cleanup()

    def sandbox(self, **kw):
        kw.setdefault("ipybox", IPYBOX)
        kw.setdefault("workspace", self.ws)
        if self.transport == "daemon":
            kw.setdefault("socket", self.daemon.sock)
        else:
            kw.setdefault("transport", "embedded")
        return ib.Sandbox(**kw)

    def path(self, *parts):
        return os.path.join(self.tmp.name, *parts)


class Basics(SdkCase):
    async def test_execute_keeps_state_and_says_where_it_runs(self):
        async with self.sandbox() as sb:
            self.assertEqual(sb.transport, self.transport)
            r = await sb.execute("x = 40\nx + 2")
            self.assertEqual((r.text, r.status, r.images, r.error), ("42\n", "ok", [], None))
            self.assertEqual((await sb.execute("print(x)")).text, "40\n")
            self.assertEqual(sb.server_info.get("name"), "ipybox")
            if self.transport == "embedded":
                self.assertEqual(sb.workspace, self.ws)
                self.assertTrue(sb.pid > 0)
            else:
                self.assertTrue(sb.session_name)

    async def test_an_exception_is_typed_and_the_kernel_goes_on(self):
        async with self.sandbox() as sb:
            await sb.execute("y = 1")
            with self.assertRaises(ib.ExecutionError) as cm:
                await sb.execute("print('before')\n{}['missing']")
            e = cm.exception
            self.assertEqual((e.ename, e.evalue, e.output), ("KeyError", "'missing'", "before\n"))
            self.assertIn("KeyError", e.traceback)
            self.assertNotIn("\x1b[", e.traceback)
            r = await sb.execute("1/0", check=False)
            self.assertIsInstance(r.error, ib.ExecutionError)
            self.assertEqual(r.error.ename, "ZeroDivisionError")
            self.assertEqual((await sb.execute("y")).text, "1\n")

    async def test_timeout_interrupts_and_keeps_state(self):
        async with self.sandbox() as sb:
            await sb.execute("z = 3")
            with self.assertRaises(ib.TimeoutError) as cm:
                await sb.execute("import time\nprint('started', flush=True)\ntime.sleep(60)", timeout=1)
            self.assertIsInstance(cm.exception, builtins.TimeoutError)
            self.assertFalse(cm.exception.restarted)
            self.assertIn("timed out after 1 s", str(cm.exception))
            self.assertIn("started", cm.exception.result.text)
            self.assertEqual((await sb.execute("z")).text, "3\n")

    async def test_a_dead_kernel_is_reported_and_replaced(self):
        async with self.sandbox() as sb:
            await sb.execute("w = 1")
            with self.assertRaises(ib.KernelDied) as cm:
                await sb.execute("import os\nos._exit(3)")
            self.assertIn("status 3", str(cm.exception))
            r = await sb.execute("'w' in dir()")
            self.assertEqual(r.text, "False\n")

    async def test_reset_clears_variables_and_keeps_files(self):
        async with self.sandbox() as sb:
            await sb.execute("v = 1\nopen('/app/kept.txt', 'w').write('k')")
            await sb.reset()
            self.assertEqual((await sb.execute("'v' in dir(), open('/app/kept.txt').read()")).text,
                             "(False, 'k')\n")

    async def test_zygote_and_standby_options_reach_the_sandbox(self):
        # reset's result says how its kernel started (_meta["ipybox/kernel"]["start"]).
        for kw, want in (({"zygote": False}, "exec"), ({"standby": True}, "standby")):
            async with self.sandbox(**kw) as sb:
                await sb.execute("1")
                starts = []
                for _ in range(10 if want == "standby" else 1):
                    await asyncio.sleep(1)  # a standby is prepared ~300 ms after the kernel answered
                    r = await sb._call_tool("reset", {})
                    starts.append(r["_meta"]["ipybox/kernel"]["start"])
                    if starts[-1] == want:
                        break
                self.assertEqual(starts[-1], want, (kw, starts))
                self.assertEqual((await sb.execute("1 + 1")).text, "2\n")

    async def test_images_come_as_bytes_with_their_path(self):
        async with self.sandbox() as sb:
            r = await sb.execute("%matplotlib inline\nimport matplotlib.pyplot as plt\n"
                                 "plt.plot([1, 3, 2]); plt.show()\nprint('plotted')")
            self.assertEqual(r.text, "plotted\n")
            self.assertEqual(len(r.images), 1)
            img = r.images[0]
            self.assertEqual(img.mime_type, "image/png")
            self.assertTrue(img.data.startswith(b"\x89PNG\r\n\x1a\n"))
            self.assertRegex(img.path, r"^/app/images/[0-9a-f]+\.png$")
            self.assertEqual(await sb.download_bytes(img.path[len("/app/"):]), img.data)
            img.save(self.path("plot.png"))
            with open(self.path("plot.png"), "rb") as f:
                self.assertEqual(f.read(), img.data)

    async def test_files_round_trip(self):
        data = os.urandom(1 << 20) + bytes(range(256))
        src = self.path("in.bin")
        with open(src, "wb") as f:
            f.write(data)
        async with self.sandbox() as sb:
            await sb.upload(src, "sub/dir/in.bin")
            self.assertEqual((await sb.execute("len(open('/app/sub/dir/in.bin', 'rb').read())")).text,
                             "%d\n" % len(data))
            await sb.download("sub/dir/in.bin", self.path("out", "deep", "out.bin"))
            with open(self.path("out", "deep", "out.bin"), "rb") as f:
                self.assertEqual(f.read(), data)
            await sb.upload_bytes(b"\x00bytes\xff", "b.bin")
            self.assertEqual(await sb.download_bytes("b.bin"), b"\x00bytes\xff")
            scratch = sb._scratch  # the private directory the bytes variants go through
            self.assertEqual(os.listdir(scratch), [])
            with self.assertRaises(ib.OperationError) as cm:
                await sb.upload(src, "../escape.bin")
            self.assertIn("upload_file failed", str(cm.exception))
            with self.assertRaises(ib.OperationError) as cm:
                await sb.download("b.bin", "/etc/ipybox-sdk-test.bin")
            self.assertIn("allowed", str(cm.exception))
            self.assertFalse(os.path.exists("/etc/ipybox-sdk-test.bin"))
            with self.assertRaises(ib.OperationError):
                await sb.download_bytes("missing.bin")
        self.assertFalse(os.path.exists(scratch))

    async def test_options_reach_the_sandbox(self):
        async with self.sandbox(container_env_var={"SDK_A": "1", "SDK_B": "two words"},
                                max_output_chars=200) as sb:
            self.assertEqual((await sb.execute("import os; os.environ['SDK_A'], os.environ['SDK_B']")).text,
                             "('1', 'two words')\n")
            r = await sb.execute("print('y' * 5000)")
            self.assertLess(len(r.text), 1000)


class Streaming(SdkCase):
    async def test_chunks_arrive_while_the_cell_runs_then_the_result(self):
        go = os.path.join(self.ws, "go")
        code = ("import os, time\nprint('first', flush=True)\nt = time.time()\n"
                "while not os.path.exists('/app/go') and time.time() - t < 60:\n    time.sleep(0.02)\n"
                "print('second')\n'done'")
        items = []
        async with self.sandbox() as sb:
            async for item in sb.stream(code):
                items.append(item)
                if isinstance(item, ib.OutputChunk) and "first" in item.text:
                    open(go, "w").close()  # the cell goes on only once we have seen its first output
            self.assertIsInstance(items[-1], ib.ExecutionResult)
            self.assertTrue(all(isinstance(i, ib.OutputChunk) for i in items[:-1]))
            self.assertEqual("".join(i.text for i in items[:-1]), "first\nsecond\n'done'\n")
            self.assertEqual(items[-1].text, "first\nsecond\n'done'\n")

    async def test_a_failing_cell_streams_its_output_then_raises(self):
        async with self.sandbox() as sb:
            seen = []
            with self.assertRaises(ib.ExecutionError):
                async for item in sb.stream("print('out', flush=True)\nraise ValueError('bad')"):
                    seen.append(item)
            # What the protocol guarantees: the output is streamed, in order, before the error is
            # raised. How it is cut into chunks is not: the traceback's text may share a chunk
            # with "out\n" (the daemon sends what it has), and "out\n" could come in pieces.
            self.assertTrue(seen, "no output was streamed before the error")
            self.assertTrue(all(isinstance(i, ib.OutputChunk) for i in seen), seen)
            streamed = "".join(i.text for i in seen)
            self.assertTrue(streamed.startswith("out\n"), streamed)
            items = [i async for i in sb.stream("raise ValueError('bad')", check=False)]
            self.assertEqual(items[-1].error.ename, "ValueError")

    async def test_cancel_interrupts_and_keeps_state(self):
        async with self.sandbox() as sb:
            with self.assertRaises(ib.Cancelled):
                async for item in sb.stream(LOOP):
                    if isinstance(item, ib.OutputChunk) and "looping" in item.text:
                        await sb.cancel()
            self.assertEqual((await sb.execute("x")).text, "7\n")

    async def test_cancelling_the_awaiting_task_interrupts_the_cell(self):
        async with self.sandbox() as sb:
            task = asyncio.ensure_future(sb.execute(LOOP))
            await asyncio.get_running_loop().run_in_executor(
                None, wait_for, lambda: os.path.exists(os.path.join(self.ws, "looping")), 60)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            self.assertEqual((await asyncio.wait_for(sb.execute("x"), 30)).text, "7\n")

    async def test_closing_a_stream_early_cancels_its_cell(self):
        async with self.sandbox() as sb:
            agen = sb.stream(LOOP)
            async for item in agen:
                if isinstance(item, ib.OutputChunk):
                    break
            await agen.aclose()
            self.assertEqual((await asyncio.wait_for(sb.execute("x"), 30)).text, "7\n")

    async def test_concurrent_calls_are_serialised_never_interleaved(self):
        code = "import time\nfor i in range(20):\n    print('%s', flush=True)\n    time.sleep(0.01)"
        async with self.sandbox() as sb:
            async def one(tag):
                return [i async for i in sb.stream(code % tag)]

            results = await asyncio.gather(*(one(t) for t in "abc"), sb.execute("print('d' * 3)"))
            for tag, items in zip("abc", results):
                text = "".join(i.text for i in items if isinstance(i, ib.OutputChunk))
                self.assertEqual(text, (tag + "\n") * 20)
                self.assertEqual(items[-1].text, (tag + "\n") * 20)
            self.assertEqual(results[3].text, "ddd\n")


class Approvals(SdkCase):
    async def test_callback_accepts_and_rejects(self):
        asked = []

        def decide(req):  # a plain function: it runs in a worker thread and may block
            asked.append((req.server_name, req.tool_name, req.tool_args))
            return req.tool_name == "get_weather"

        async with self.sandbox(approval=decide) as sb:
            modules = await sb.register_mcp_server("weather", WEATHER)
            self.assertEqual(sorted(modules), ["get_weather", "send_alert"])
            r = await sb.execute(WEATHER_CALL)
            self.assertIn(r.text.strip(), ("sunny", "cloudy", "rain", "snow", "fog"))
            with self.assertRaises(ib.ApprovalRejected) as cm:
                await sb.execute("from mcptools.weather import send_alert\n"
                                 "send_alert.run(send_alert.Params(text='hi'))")
            self.assertEqual(cm.exception.ename, "ToolRejected")
            self.assertIn("declined", cm.exception.evalue)
            r = await sb.execute("from mcptools import ToolRejected\ntry:\n"
                                 "    send_alert.run(send_alert.Params(text='hi'))\nexcept ToolRejected:\n"
                                 "    print('caught')")
            self.assertEqual(r.text, "caught\n")
        self.assertEqual(asked[0], ("weather", "get_weather", {"city": "Oslo"}))
        self.assertEqual(asked[1], ("weather", "send_alert", {"text": "hi"}))

    async def test_async_callback_that_decides_itself(self):
        async def decide(req):
            await asyncio.sleep(0)
            await req.accept()

        async with self.sandbox(approval=decide, mcp_config=self.weather_config()) as sb:
            self.assertIn((await sb.execute(WEATHER_CALL)).text.strip(), ("sunny", "cloudy", "rain", "snow", "fog"))

    async def test_a_failing_callback_rejects(self):
        def decide(req):
            raise RuntimeError("the approval UI crashed")

        async with self.sandbox(approval=decide, mcp_config=self.weather_config()) as sb:
            with self.assertLogs("ipybox_native", "ERROR"):
                with self.assertRaises(ib.ApprovalRejected):
                    await sb.execute(WEATHER_CALL)

    async def test_stream_yields_requests_to_accept_or_reject(self):
        async with self.sandbox(mcp_config=self.weather_config()) as sb:
            items = []
            async for item in sb.stream(WEATHER_CALL + "\nr2 = get_weather.run(get_weather.Params(city='Rome'))",
                                        check=False):
                items.append(item)
                if isinstance(item, ib.ApprovalRequest):
                    if item.tool_args["city"] == "Oslo":
                        await item.accept()
                    else:
                        item.reject()
            reqs = [i for i in items if isinstance(i, ib.ApprovalRequest)]
            self.assertEqual([r.tool_args for r in reqs], [{"city": "Oslo"}, {"city": "Rome"}])
            self.assertIn("get_weather", reqs[0].message)
            # The first call ran (its output came), the second was rejected.
            self.assertIsInstance(items[0], ib.ApprovalRequest)
            self.assertIn("".join(i.text for i in items if isinstance(i, ib.OutputChunk)).split("\n")[0],
                          ("sunny", "cloudy", "rain", "snow", "fog"))
            self.assertIsInstance(items[-1], ib.ExecutionResult)
            self.assertEqual(items[-1].ename, "ToolRejected")

    async def test_execute_without_a_callback_rejects_with_a_warning(self):
        async with self.sandbox(mcp_config=self.weather_config()) as sb:
            with self.assertLogs("ipybox_native", "WARNING") as logs:
                with self.assertRaises(ib.ApprovalRejected):
                    await sb.execute(WEATHER_CALL)
            self.assertIn("no approval callback", "\n".join(logs.output))

    async def test_approve_tools_needs_no_callback(self):
        async with self.sandbox(mcp_config=self.weather_config(), approve_tools="weather/get_*") as sb:
            self.assertTrue((await sb.execute(WEATHER_CALL)).text.strip())

    async def test_cancel_withdraws_an_open_request(self):
        async with self.sandbox(mcp_config=self.weather_config()) as sb:
            pending = []
            with self.assertRaises(ib.Cancelled):
                async for item in sb.stream("x = 5\n" + WEATHER_CALL):
                    if isinstance(item, ib.ApprovalRequest):
                        pending.append(item)
                        await sb.cancel()
            await asyncio.sleep(0.5)
            self.assertTrue(pending[0].decided)  # withdrawn by the supervisor, or failed with the call
            self.assertEqual((await sb.execute("x")).text, "5\n")

    async def test_two_requests_open_at_once_are_decided_in_any_order(self):
        # Concurrent tool calls (issue 19): both questions are open before either is decided.
        both, seen = asyncio.Event(), []

        async def decide(req):
            seen.append(req.tool_args["city"])
            if len(seen) == 2:
                both.set()
            await asyncio.wait_for(both.wait(), 60)
            if req.tool_args["city"] == "Rome":
                return True
            await asyncio.sleep(0.2)  # decided after Rome's
            return False

        code = ("import asyncio, mcptools\nfrom mcptools.weather import get_weather\n"
                "async def one(city):\n"
                "    try:\n        return await get_weather.run_async(city=city)\n"
                "    except mcptools.ToolRejected:\n        return 'rejected'\n"
                "r = await asyncio.gather(one('Oslo'), one('Rome'))\n"
                "print(r[0], r[1].conditions in ('sunny', 'cloudy', 'rain', 'snow', 'fog'))\n")
        async with self.sandbox(approval=decide, mcp_config=self.weather_config()) as sb:
            self.assertEqual((await sb.execute(code)).text, "rejected True\n")
        self.assertEqual(sorted(seen), ["Oslo", "Rome"])

    def weather_config(self):
        import json
        path = self.path("mcp.json")
        with open(path, "w") as f:
            json.dump({"mcpServers": {"weather": WEATHER}}, f)
        return path


class ShellApprovals(SdkCase):
    """approve_shell_cmds / require_shell_escape, as ipybox's CodeExecutor takes them."""
    FORMS = [("!touch /app/{f}", "shell"), ("!!touch /app/{f}", "shell"), ("%sx touch /app/{f}", "shell"),
             ("%system touch /app/{f}", "shell"), ("get_ipython().getoutput('touch /app/{f}')", "shell"),
             ("%%bash\ntouch /app/{f}\n", "shell_magic"), ("%%sh\ntouch /app/{f}\n", "shell_magic"),
             ("%%script sh\ntouch /app/{f}\n", "shell_magic")]

    async def test_callback_accepts_and_rejects_every_form(self):
        asked = []

        def decide(req):
            asked.append((req.server_name, req.tool_name, req.tool_args))
            return "/app/yes" in req.tool_args["cmd"]

        async with self.sandbox(approval=decide, approve_shell_cmds=True) as sb:
            for i, (code, tool) in enumerate(self.FORMS):
                with self.subTest(code=code):
                    del asked[:]
                    # {f} is a kernel variable on the line forms (IPython expands it), written
                    # out in the magics' cells (which IPython does not expand).
                    cell = code.format(f="yes%d" % i) if tool == "shell_magic" else \
                        "f = 'yes%d'\n%s" % (i, code)
                    await sb.execute(cell)
                    self.assertEqual(len(asked), 1)
                    self.assertEqual(asked[0][:2], ("ipybox", tool))
                    self.assertIn("touch /app/yes%d" % i, asked[0][2]["cmd"])
                    self.assertNotIn("{f}", asked[0][2]["cmd"])
                    del asked[:]
                    with self.assertRaises(ib.ApprovalRejected) as cm:
                        await sb.execute(code.format(f="no%d" % i) if tool == "shell_magic" else
                                         "f = 'no%d'\n%s" % (i, code))
                    self.assertEqual(cm.exception.ename, "ShellCommandRejected")
                    self.assertIn("did not run", cm.exception.evalue)
            r = await sb.execute("import os; print(sorted(n for n in os.listdir('/app') if n[:2] in ('ye', 'no')))")
            self.assertEqual(r.text.strip(), str(sorted("yes%d" % i for i in range(len(self.FORMS)))))

    async def test_stream_yields_shell_requests_like_ipybox(self):
        async with self.sandbox(approve_shell_cmds=True) as sb:
            items = []
            async for item in sb.stream('name = "world"\n!echo hello {name}'):
                items.append(item)
                if isinstance(item, ib.ApprovalRequest):
                    self.assertEqual((item.tool_name, item.tool_args), ("shell", {"cmd": "echo hello world"}))
                    self.assertIn("shell command", item.message)
                    await item.accept()
            self.assertIsInstance(items[0], ib.ApprovalRequest)
            self.assertEqual(items[-1].text.strip(), "hello world")

    async def test_pre_approved_and_escape_guard(self):
        async with self.sandbox(approve_shell_cmds=True, require_shell_escape=True,
                                approve_tools=["ipybox/shell"]) as sb:
            self.assertEqual((await sb.execute("!echo hello")).text.strip(), "hello")  # nobody asked
            with self.assertRaises(ib.ExecutionError) as cm:
                await sb.execute('import subprocess; subprocess.run(["echo", "hi"])')
            self.assertEqual(cm.exception.ename, "RuntimeError")
            self.assertIn("Direct subprocess calls are not allowed", cm.exception.evalue)
            with self.assertRaises(ib.ApprovalRejected):  # shell_magic is not pre-approved
                with self.assertLogs("ipybox_native", "WARNING"):
                    await sb.execute("%%bash\necho no\n")


class DaemonShellApprovals(ShellApprovals):
    transport = "daemon"


class DaemonBasics(Basics):
    transport = "daemon"


class DaemonStreaming(Streaming):
    transport = "daemon"


class DaemonApprovals(Approvals):
    transport = "daemon"


class RealServer(SdkCase):
    async def test_register_server_everything_and_call_it(self):
        install_node_packages()
        async with self.sandbox(approval=lambda req: True) as sb:
            modules = await sb.register_mcp_server("everything", everything_stdio_params())
            self.assertIn("echo", modules)
            r = await sb.execute("from mcptools.everything import echo\nprint(echo.run(echo.Params(message='hi')))")
            self.assertIn("hi", r.text)
            with self.assertRaises(ib.OperationError) as cm:
                await sb.register_mcp_server("bad name!", {"command": "true"})
            self.assertIn("server", str(cm.exception).lower())


class Failures(unittest.IsolatedAsyncioTestCase):
    def setUp(self):
        require_sandbox(self)

    async def test_a_missing_binary_says_where_it_looked(self):
        with self.assertRaises(ib.SandboxError) as cm:
            await ib.Sandbox(transport="embedded", ipybox="/nonexistent/ipybox").start()
        self.assertIn("cannot find the ipybox binary", str(cm.exception))
        self.assertIn("/nonexistent/ipybox", str(cm.exception))

    async def test_the_supervisors_sentence_is_the_error(self):
        with self.assertRaises(ib.SandboxError) as cm:
            await ib.Sandbox(transport="embedded", ipybox=IPYBOX, python="/nonexistent/python3").start()
        self.assertIn("--python: file not found: /nonexistent", str(cm.exception))  # the first missing component
        self.assertTrue(cm.exception.stderr)
        with self.assertRaises(ib.SandboxError) as cm:
            await ib.Sandbox(transport="embedded", ipybox=IPYBOX, allowed_domain="not a domain").start()
        self.assertTrue(str(cm.exception).startswith("--allowed-domain 'not a domain': not a valid domain name"),
                        str(cm.exception))

    def test_no_user_namespaces(self):
        # A user namespace whose limit of nested user namespaces is 0: ipybox cannot build one.
        script = ("import asyncio, sys\nsys.path.insert(0, %r)\nimport ipybox_native as ib\n"
                  "try:\n    asyncio.run(ib.Sandbox(transport='embedded', ipybox=%r).start())\n"
                  "except ib.SandboxError as e:\n    print('SandboxError:', e)\n") % (SDK, IPYBOX)
        r = subprocess.run(["unshare", "-Ur", "sh", "-c",
                            'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" -c "$1"', PY, script],
                           capture_output=True, text=True, timeout=120)
        # Root (of this namespace) starts sandboxes through its private monitor, which says so.
        self.assertRegex(r.stdout, r"SandboxError: cannot start: (cannot build the sandbox: user namespace|"
                                   r".*private monitor.*could not start the sandbox: cannot make the user namespace)",
                         r.stderr)
        self.assertIn("max_user_namespaces", r.stdout)

    async def test_no_daemon_to_reach(self):
        with self.assertRaises(ib.SandboxError) as cm:
            await ib.Sandbox(socket="/nonexistent/ipybox.sock").start()
        self.assertIn("cannot reach ipyboxd at /nonexistent/ipybox.sock", str(cm.exception))

    async def test_a_daemon_that_refuses_the_session(self):
        d = Daemon()
        try:
            with self.assertRaises(ib.SandboxError) as cm:
                await ib.Sandbox(socket=d.sock, allowed_domain="not a domain").start()
            self.assertIn("not a valid domain name", str(cm.exception))
        finally:
            d.close()

    async def test_auto_picks_a_daemon_when_one_answers(self):
        d = Daemon()
        old = os.environ.get("XDG_RUNTIME_DIR")
        try:
            os.environ["XDG_RUNTIME_DIR"] = d.runtime
            async with ib.Sandbox(ipybox=IPYBOX) as sb:
                self.assertEqual((sb.transport, sb.socket_path), ("daemon", d.sock))
            os.environ["XDG_RUNTIME_DIR"] = tempfile.gettempdir() + "/ipybox-sdk-no-daemon"
            if not any(os.path.exists(p) for p in ib.sandbox.daemon_sockets()):
                async with ib.Sandbox(ipybox=IPYBOX) as sb:
                    self.assertEqual(sb.transport, "embedded")
        finally:
            if old is None:
                os.environ.pop("XDG_RUNTIME_DIR", None)
            else:
                os.environ["XDG_RUNTIME_DIR"] = old
            d.close()

    async def test_a_killed_supervisor_is_a_clear_error_and_reset_reopens(self):
        async with ib.Sandbox(transport="embedded", ipybox=IPYBOX) as sb:
            await sb.execute("a = 1")
            pid = sb.pid
            os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.5)  # it dies between calls: the next call says how
            self.assertFalse(os.path.exists("/proc/%d" % pid) and open("/proc/%d/stat" % pid).read().split()[2] != "Z")
            with self.assertRaises(ib.ConnectionLost) as cm:
                await sb.execute("a")
            self.assertIn("killed by signal 9", str(cm.exception))
            self.assertIn("call start() or reset()", str(cm.exception))
            with self.assertRaises(ib.ConnectionLost):
                await sb.execute("a")
            await sb.reset()
            self.assertEqual((await sb.execute("'a' in dir()")).text, "False\n")

    async def test_a_daemon_that_goes_away_is_a_clear_error(self):
        d = Daemon()
        try:
            sb = ib.Sandbox(socket=d.sock)
            await sb.start()
            await sb.execute("1")
            d.stop(signal.SIGKILL)
            with self.assertRaises(ib.ConnectionLost) as cm:
                await sb.execute("2")
            self.assertIn("ipyboxd closed the connection", str(cm.exception))
            with self.assertRaises(ib.SandboxError):
                await sb.start()
            await sb.close()
        finally:
            d.close()

    async def test_a_daemon_session_closed_elsewhere_is_lost_and_reset_reopens(self):
        d = Daemon()
        try:
            async with ib.Sandbox(socket=d.sock, session="shared") as sb:
                await sb.execute("b = 2")
                other = d.client()
                other.request("ipybox/closeSession", {"name": "shared"})
                other.close()
                with self.assertRaises(ib.ConnectionLost) as cm:
                    await sb.execute("b")
                self.assertIn("call start() or reset()", str(cm.exception))
                await sb.reset()
                self.assertEqual((await sb.execute("'b' in dir()")).text, "False\n")
                await sb.close(end_session=True)
        finally:
            d.close()

    async def test_a_named_daemon_session_is_joined_again(self):
        d = Daemon()
        try:
            async with ib.Sandbox(socket=d.sock, session="keep") as sb:
                await sb.execute("kept = 'yes'")
            async with ib.Sandbox(socket=d.sock, session="keep") as sb:
                self.assertEqual(sb.session_name, "keep")
                self.assertEqual((await sb.execute("kept")).text, "'yes'\n")
                await sb.close(end_session=True)
            async with ib.Sandbox(socket=d.sock, session="keep") as sb:
                self.assertEqual((await sb.execute("'kept' in dir()")).text, "False\n")
        finally:
            d.close()

    async def test_close_during_a_cell_is_prompt_and_leaves_nothing(self):
        sb = ib.Sandbox(transport="embedded", ipybox=IPYBOX)
        await sb.start()
        pid = sb.pid
        task = asyncio.ensure_future(sb.execute("import time\nwhile True: time.sleep(0.05)"))
        await asyncio.sleep(1)
        t0 = asyncio.get_running_loop().time()
        await sb.close()
        self.assertLess(asyncio.get_running_loop().time() - t0, 10)
        with self.assertRaises((ib.Cancelled, ib.ConnectionLost)):
            await task
        self.assertFalse(os.path.exists("/proc/%d" % pid))
        self.assertEqual(children(), [])

    async def test_a_failed_start_leaves_nothing(self):
        before = set(os.listdir("/proc/self/fd"))
        for _ in range(3):
            with self.assertRaises(ib.SandboxError):
                await ib.Sandbox(transport="embedded", ipybox=IPYBOX, python="/nonexistent/python3").start()
        self.assertEqual(children(), [])
        self.assertEqual(set(os.listdir("/proc/self/fd")) - before, set())

    async def test_calls_before_start_are_refused(self):
        sb = ib.Sandbox(transport="embedded", ipybox=IPYBOX)
        with self.assertRaises(ib.SandboxError) as cm:
            await sb.execute("1")
        self.assertIn("not started", str(cm.exception))


def children():
    """This process's child processes (not zombies)."""
    me = str(os.getpid())
    out = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if pid.isdigit() and fields[1] == me and fields[0] != "Z":
            out.append(int(pid))
    return out


class Sync(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)

    def test_the_blocking_api(self):
        with tempfile.TemporaryDirectory(prefix="ipybox-sdk-test-", dir="/tmp") as ws:
            with ib.SyncSandbox(transport="embedded", ipybox=IPYBOX, workspace=ws) as sb:
                self.assertEqual(sb.execute("2 + 2").text, "4\n")
                self.assertEqual([type(i).__name__ for i in sb.stream("print(1)")], ["OutputChunk", "ExecutionResult"])
                with self.assertRaises(ib.ExecutionError):
                    sb.execute("1/0")
                sb.upload_bytes(b"abc", "f.txt")
                self.assertEqual(sb.download_bytes("f.txt"), b"abc")
                # Threads share it; each gets its own result.
                out = {}

                def run(tag):
                    out[tag] = sb.execute("import time; time.sleep(0.05); print(%r)" % tag).text

                threads = [threading.Thread(target=run, args=(t,)) for t in "pqrs"]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(120)
                self.assertEqual(out, {t: t + "\n" for t in "pqrs"})
                # cancel() from another thread.
                threading.Thread(target=lambda: (wait_for(lambda: os.path.exists(os.path.join(ws, "looping")), 60),
                                                 sb.cancel())).start()
                with self.assertRaises(ib.Cancelled):
                    sb.execute(LOOP)
                self.assertEqual(sb.execute("x").text, "7\n")
                sb.reset()
                self.assertEqual(sb.execute("'x' in dir()").text, "False\n")
                # A call from the thread whose stream is open would wait for itself: refused.
                it = sb.stream("print('s')")
                next(it)
                with self.assertRaises(RuntimeError):
                    sb.execute("1")
                it.close()
                self.assertEqual(sb.execute("3").text, "3\n")

    def test_workspace_known_once_started(self):
        # The supervisor writes its ready line (with the workspace) to stderr before it answers
        # initialize, but the SDK's stderr reader is a thread of its own: a start could return
        # before it had read the line, and `workspace` was None (seen in CI). The reader is
        # slowed here so that the race is lost every time without the wait for the line.
        orig = ib.sandbox.Sandbox._read_stderr

        def slow(self, fd):
            time.sleep(1.5)
            orig(self, fd)
        with tempfile.TemporaryDirectory(prefix="ipybox-sdk-test-", dir="/tmp") as ws:
            with mock.patch.object(ib.sandbox.Sandbox, "_read_stderr", slow):
                with ib.SyncSandbox(transport="embedded", ipybox=IPYBOX, workspace=ws) as sb:
                    self.assertEqual(sb.workspace, ws)

    def test_a_failed_start_closes_its_loop(self):
        sb = ib.SyncSandbox(transport="embedded", ipybox=IPYBOX, python="/nonexistent/python3")
        with self.assertRaises(ib.SandboxError):
            with sb:
                pass
        self.assertIsNone(sb._loop)


class Packaging(unittest.TestCase):
    def test_examples_run(self):
        require_sandbox(self)
        env = dict(os.environ, IPYBOX_BIN=IPYBOX)
        with tempfile.TemporaryDirectory(prefix="ipybox-sdk-test-", dir="/tmp") as out:
            r = subprocess.run([PY, os.path.join(EXAMPLES, "data_analysis.py"), out], capture_output=True, text=True,
                               env=env, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("warmest month", r.stdout)
            with open(os.path.join(out, "temperatures.png"), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            r = subprocess.run([PY, os.path.join(EXAMPLES, "agent_loop.py"), "--yes"], capture_output=True, text=True,
                               env=env, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("approve weather/get_weather", r.stdout)
            self.assertIn("rejected weather/send_alert", r.stdout)
            self.assertIn("final answer:", r.stdout)

    def test_pip_install_into_a_venv(self):
        with tempfile.TemporaryDirectory(prefix="ipybox-sdk-pip-") as tmp:
            src = os.path.join(tmp, "src")  # a copy: building in place would leave files in the checkout
            shutil.copytree(SDK, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
            venv = os.path.join(tmp, "venv")
            subprocess.run([PY, "-m", "venv", "--system-site-packages", venv], check=True, timeout=300)
            r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--no-build-isolation",
                                "--quiet", src], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            r = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                                "import ipybox_native, importlib.metadata as m; print(ipybox_native.__file__); "
                                "print(m.version('ipybox-native'))"],
                               capture_output=True, text=True, cwd=tmp, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            where, version = r.stdout.split()
            self.assertTrue(where.startswith(venv), where)
            self.assertEqual(version, ib.__version__)


if __name__ == "__main__":
    unittest.main()
