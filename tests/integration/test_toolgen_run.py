"""The generated Python API of MCP servers (toolgen/) at run time: generated modules, imported
in a fresh interpreter, call tools through mcptools._runtime over a fake tool channel (a unix
socket of the test's own): arguments, results, structured content, errors, cancellation,
concurrency. What the generator writes is tested in test_toolgen.py."""
import asyncio
import json
import os
import signal
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from toolgen_case import (EVERYTHING, ToolgenCase, generate,  # noqa: E402,F401
                          hostile_tools, Imported)


def structured(value, *blocks):
    """A reply with structured content (and content blocks)."""
    return {"result": {"content": list(blocks), "structuredContent": value}}


class FakeChannel:
    """A tool channel on a unix socket: records each request line and answers it with
    replies[tool] (a dict, bytes, or a callable given the connection)."""

    def __init__(self, path, replies):
        self.path = path
        self.replies = replies
        self.requests = []
        self.closed = threading.Event()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                buf = b""
                while not buf.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                self.requests.append(buf)
                try:
                    tool = json.loads(buf)["tool"]
                except ValueError:
                    continue
                reply = self.replies.get(tool, {"error": {"kind": "refused", "message": "no such tool"}})
                if callable(reply):
                    reply(conn)
                    continue
                conn.sendall(reply if isinstance(reply, bytes) else json.dumps(reply).encode() + b"\n")

    def close(self):
        self.sock.close()


class RunTest(ToolgenCase):
    def setUp(self):
        super().setUp()
        generate(self.root, "everything", EVERYTHING)
        self.canary = os.path.join(self.tmp, "canary")
        generate(self.root, "evil", hostile_tools(self.canary))
        self.im = Imported(self.root).__enter__()
        self.rt = self.im.module("mcptools._runtime")
        self.mcptools = self.im.module("mcptools")
        self.sock_path = os.path.join(self.tmp, "tool.sock")
        self.rt.SOCKET_PATH = self.sock_path
        self.replies = {}
        self.chan = FakeChannel(self.sock_path, self.replies)

    def tearDown(self):
        self.chan.close()
        self.im.__exit__(None, None, None)
        super().tearDown()

    def request(self, i=-1):
        line = self.chan.requests[i]
        self.assertTrue(line.endswith(b"\n"))
        self.assertEqual(line.count(b"\n"), 1)
        req = json.loads(line)
        # compact and ASCII only
        self.assertEqual(line, json.dumps(req, separators=(",", ":"), ensure_ascii=True).encode() + b"\n")
        self.assertEqual(list(req), ["server", "tool", "arguments"])
        return req

    def test_text_and_structured(self):
        echo = self.im.module("mcptools.everything.echo")
        self.replies["echo"] = {"text": "Echo: h\u00e9llo"}
        self.assertEqual(echo.run(message="h\u00e9llo"), "Echo: h\u00e9llo")
        self.assertEqual(self.request(), {"server": "everything", "tool": "echo", "arguments": {"message": "h\u00e9llo"}})
        self.assertEqual(echo.run(echo.Params(message="x")), "Echo: h\u00e9llo")
        self.assertEqual(self.request()["arguments"], {"message": "x"})

        gsc = self.im.module("mcptools.everything.get_structured_content")
        self.replies["get-structured-content"] = structured({"temperature": 22, "conditions": "Sunny",
                                                                "humidity": 65, "extra": [1]})
        r = gsc.run(location="Chicago")
        self.assertIsInstance(r, gsc.Result)
        self.assertEqual((r.temperature, r.conditions, r.humidity), (22.0, "Sunny", 65.0))
        self.assertIsInstance(r.temperature, float)
        self.assertEqual(self.request()["arguments"], {"location": "Chicago"})
        # a text answer from a tool with an output schema stays text
        self.replies["get-structured-content"] = {"text": "plain"}
        self.assertEqual(gsc.run(location="Chicago"), "plain")
        # tolerant conversion: missing keys become None, mismatched values stay as they are
        self.replies["get-structured-content"] = structured({"temperature": "hot"})
        r = gsc.run(location="Chicago")
        self.assertEqual((r.temperature, r.conditions, r.humidity), ("hot", None, None))
        # structured content that is not an object is returned as it is
        self.replies["get-structured-content"] = structured([1, 2])
        self.assertEqual(gsc.run(location="Chicago"), [1, 2])

        # run_async
        self.replies["get-structured-content"] = structured({"temperature": 1.5, "conditions": "c", "humidity": 2})
        r = asyncio.run(gsc.run_async(location="New York"))
        self.assertEqual(r, gsc.Result(temperature=1.5, conditions="c", humidity=2.0))
        self.assertEqual(self.request()["arguments"], {"location": "New York"})
        self.assertEqual(asyncio.run(echo.run_async(message="a")), "Echo: h\u00e9llo")

    def test_rich_results(self):
        import base64
        import pickle
        m = self.mcptools
        echo = self.im.module("mcptools.everything.echo")
        gsc = self.im.module("mcptools.everything.get_structured_content")
        png, wav, blob = b"\x89PNG\r\n\x1a\n\x00\xff", b"RIFF\x00\x01", b"\x00\x01\x02"
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        blocks = [{"type": "text", "text": "before"},
                  {"type": "image", "data": b64(png), "mimeType": "image/png"},
                  {"type": "audio", "data": b64(wav), "mimeType": "audio/wav"},
                  {"type": "resource", "uri": "test://t", "mimeType": "text/plain", "text": "T"},
                  {"type": "resource", "uri": "test://b", "blob": b64(blob)},
                  {"type": "resource_link", "uri": "test://l", "name": "L", "mimeType": "text/plain",
                   "description": "d", "size": 3},
                  {"type": "text", "text": "after"}]
        self.replies["echo"] = {"result": {"content": blocks}}
        want = ["before", m.Image(png, "image/png"), m.Audio(wav, "audio/wav"),
                m.Resource("test://t", "text/plain", text="T"), m.Resource("test://b", data=blob),
                m.ResourceLink("test://l", "L", "text/plain", description="d", size=3), "after"]
        for run in (lambda: echo.run(message="m"), lambda: asyncio.run(echo.run_async(message="m"))):
            got = run()
            self.assertEqual(got, want)
            self.assertIsInstance(got[1].data, bytes)
        full = echo.run_full(message="m")
        self.assertIsInstance(full, m.ToolResult)
        self.assertEqual((full.content, full.structured, full.is_error, full.dropped), (want, None, False, []))
        self.assertEqual(full.text, "before\nafter")
        self.assertEqual(asyncio.run(echo.run_full_async(message="m")), full)
        self.assertEqual(repr(got[1]), "Image(image/png, 10 bytes)")
        self.assertNotIn("\\x00", repr(got[4]))  # blob bytes are not in the repr
        # displaying: the image's own MIME type (base64, as Jupyter carries it) and text/plain
        bundle = got[1]._repr_mimebundle_()
        self.assertEqual(bundle["image/png"], b64(png))
        self.assertEqual(got[1]._repr_png_(), png)
        self.assertIsNone(got[1]._repr_jpeg_())
        svg = m.Image(b"<svg/>", "image/svg+xml")
        self.assertEqual(svg._repr_mimebundle_()["image/svg+xml"], "<svg/>")
        self.assertEqual(list(m.Image(b"x", "image/x-odd")._repr_mimebundle_()), ["text/plain"])

        # text only: a str as before; several text blocks joined; none: ""
        self.replies["echo"] = {"result": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}
        self.assertEqual(echo.run(message="m"), "a\nb")
        self.assertEqual(echo.run_full(message="m").content, ["a", "b"])
        self.replies["echo"] = {"result": {"content": []}}
        self.assertEqual(echo.run(message="m"), "")
        self.replies["echo"] = {"text": "one"}
        self.assertEqual(echo.run_full(message="m"), m.ToolResult(["one"]))
        # dropped blocks are told in the full result
        self.replies["echo"] = {"result": {"content": [{"type": "text", "text": "a"}], "dropped": ["block 2: why"]}}
        self.assertEqual(echo.run(message="m"), "a")
        self.assertEqual(echo.run_full(message="m").dropped, ["block 2: why"])

        # structured content with blocks: run() gives the Result, run_full() both, typed
        self.replies["get-structured-content"] = structured({"temperature": 1, "conditions": "c", "humidity": 2},
                                                            {"type": "text", "text": "{...}"})
        self.assertIsInstance(gsc.run(location="x"), gsc.Result)
        full = gsc.run_full(location="x")
        self.assertEqual(full.structured, gsc.Result(temperature=1.0, conditions="c", humidity=2.0))
        self.assertEqual(full.content, ["{...}"])
        self.replies["echo"] = structured({"k": 1})
        self.assertEqual(echo.run_full(message="m").structured, {"k": 1})

        # isError: run() raises ToolError carrying the whole answer; run_full() returns it
        self.replies["echo"] = {"result": {"content": [{"type": "text", "text": "bad"}, blocks[1]], "isError": True}}
        with self.assertRaises(m.ToolError) as cm:
            echo.run(message="m")
        self.assertEqual((cm.exception.kind, cm.exception.message), ("tool_error", "bad"))
        self.assertEqual(cm.exception.result.content, ["bad", m.Image(png, "image/png")])
        e = pickle.loads(pickle.dumps(cm.exception))
        self.assertEqual((type(e), e.message, e.result), (m.ToolError, "bad", cm.exception.result))
        full = echo.run_full(message="m")
        self.assertTrue(full.is_error)
        self.replies["echo"] = {"result": {"content": [], "isError": True}}
        with self.assertRaises(m.ToolError) as cm:
            echo.run(message="m")
        self.assertIn("without a message", cm.exception.message)
        # run_full still raises when there is no answer
        self.replies["echo"] = {"error": {"kind": "rejected", "message": "no"}}
        with self.assertRaises(m.ToolRejected):
            echo.run_full(message="m")

        # results of a shape the supervisor never sends fail clearly, never half-typed
        for bad in ({"content": "x"}, {"content": [1]}, {"content": [{"type": "video"}]},
                    {"content": [{"type": "image", "data": "AAA", "mimeType": "image/png"}]},
                    {"content": [{"type": "image", "data": "AA\nA=", "mimeType": "image/png"}]},
                    {"content": [{"type": "image", "data": "AAAA"}]},
                    {"content": [{"type": "resource", "uri": "u"}]},
                    {"content": [{"type": "resource_link", "uri": "u", "name": "n", "size": True}]},
                    {"content": [], "dropped": [1]}, {"structuredContent": 1}):
            with self.subTest(result=bad):
                self.replies["echo"] = {"result": bad}
                with self.assertRaises(m.ToolCallError) as cm:
                    echo.run_full(message="m")
                self.assertEqual(cm.exception.kind, "failed")
                self.assertIn("unknown shape", cm.exception.message)

    def test_arguments(self):
        x = self.im.module("mcptools.evil.x___import_os__")
        self.replies["x); import os #"] = {"text": "ok"}
        p = x.Params(f_str="s", f_Params=x.Params2(f_typing="t"), f_class=None)
        self.assertEqual(x.run(p), "ok")
        req = self.request()
        self.assertEqual(req["tool"], "x); import os #")
        args = req["arguments"]
        # JSON names; None left out unless required; defaults included
        self.assertEqual(args["str"], "s")
        self.assertEqual(args["Params"], {"typing": "t"})
        self.assertNotIn("class", args)
        self.assertEqual(args["import"], -12345678901234)
        self.assertEqual(args["__init__"]["k"][1:], [None, True, 1.5])
        self.assertNotIn("", args)
        # keyword arguments and a Params instance, but not both
        self.assertEqual(x.run(f_str="a", f_Params=None), "ok")
        self.assertEqual(self.request()["arguments"]["Params"], None)  # required: sent as null
        with self.assertRaises(TypeError):
            x.run(p, f_str="b")
        with self.assertRaises(TypeError):
            asyncio.run(x.run_async(p, f_str="b"))
        with self.assertRaises(TypeError):
            x.run(42)
        with self.assertRaises(TypeError):
            x.run(nope=1)
        n = len(self.chan.requests)
        self.assertEqual(len(self.chan.requests), n)  # refused before any call
        # a dict passes through as the arguments
        self.assertEqual(x.run({"raw": [1]}), "ok")
        self.assertEqual(self.request()["arguments"], {"raw": [1]})

    def test_errors(self):
        echo = self.im.module("mcptools.everything.echo")
        m = self.mcptools
        cases = [("rejected", m.ToolRejected), ("tool_error", m.ToolError), ("timeout", m.ToolTimeout),
                 ("refused", m.ToolCallError), ("failed", m.ToolCallError), ("other", m.ToolCallError)]
        for kind, cls in cases:
            with self.subTest(kind=kind):
                self.replies["echo"] = {"error": {"kind": kind, "message": "why: " + kind}}
                for call in (lambda: echo.run(message="m"), lambda: asyncio.run(echo.run_async(message="m"))):
                    with self.assertRaises(m.ToolCallError) as cm:
                        call()
                    e = cm.exception
                    self.assertIs(type(e), cls)
                    self.assertEqual((e.server, e.tool, e.kind, e.message), ("everything", "echo", kind, "why: " + kind))
                    self.assertIn("why: " + kind, str(e))
        self.assertTrue(issubclass(m.ToolTimeout, TimeoutError))
        self.assertTrue(issubclass(m.ToolRejected, m.ToolCallError))
        # unknown tool (the fake channel's default answer)
        with self.assertRaises(m.ToolCallError) as cm:
            self.rt.call("everything", "nope", {})
        self.assertEqual(cm.exception.kind, "refused")
        # malformed replies and an empty one
        for reply in (b"not json\n", b"[1]\n", b'{"text": 5}\n', b'{"a": 1, "b": 2}\n', b"\n",
                      lambda conn: None):
            with self.subTest(reply=reply):
                self.replies["echo"] = reply
                with self.assertRaises(m.ToolCallError) as cm:
                    echo.run(message="m")
                self.assertEqual(cm.exception.kind, "failed")
        # a reply without a newline before EOF still counts
        self.replies["echo"] = b'{"text": "eof"}'
        self.assertEqual(echo.run(message="m"), "eof")
        self.assertEqual(asyncio.run(echo.run_async(message="m")), "eof")

    def test_reply_limit(self):
        echo = self.im.module("mcptools.everything.echo")
        self.rt.MAX_REPLY = 1000
        self.replies["echo"] = {"text": "x" * 5000}
        for call in (lambda: echo.run(message="m"), lambda: asyncio.run(echo.run_async(message="m"))):
            with self.assertRaises(self.mcptools.ToolCallError) as cm:
                call()
            self.assertIn("64 MiB", str(cm.exception))
        self.replies["echo"] = {"text": "x" * 900}
        self.assertEqual(echo.run(message="m"), "x" * 900)
        # a large reply under the real limit, read in linear time
        self.rt.MAX_REPLY = 64 * 1024 * 1024
        big = "\u00e9" * (8 * 1024 * 1024)
        self.replies["echo"] = {"text": big}
        t0 = time.monotonic()
        self.assertEqual(echo.run(message="m"), big)
        self.assertEqual(asyncio.run(echo.run_async(message="m")), big)
        self.assertLess(time.monotonic() - t0, 20)

    def test_channel_unavailable(self):
        echo = self.im.module("mcptools.everything.echo")
        self.rt.SOCKET_PATH = os.path.join(self.tmp, "absent.sock")
        for call in (lambda: echo.run(message="m"), lambda: asyncio.run(echo.run_async(message="m"))):
            with self.assertRaises(self.mcptools.ToolCallError) as cm:
                call()
            self.assertEqual(cm.exception.kind, "failed")
            self.assertIn("tool channel is unavailable", str(cm.exception))

    def test_interrupt_closes_the_connection(self):
        echo = self.im.module("mcptools.everything.echo")
        peer_closed = threading.Event()

        def hold(conn):  # never answers; notes when the client hangs up
            conn.settimeout(10)
            try:
                peer_closed.set() if conn.recv(1) == b"" else None
            except OSError:
                pass

        self.replies["echo"] = hold

        def interrupt(signum, frame):
            raise KeyboardInterrupt

        old = signal.signal(signal.SIGALRM, interrupt)
        kept = None
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            echo.run(message="m")
        except KeyboardInterrupt as e:
            kept = e  # its traceback keeps the frames and their sockets alive: only close() ends it
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        self.assertIsNotNone(kept, "KeyboardInterrupt did not propagate")
        self.assertTrue(peer_closed.wait(5), "the connection stayed open after KeyboardInterrupt")
        del kept

    def test_async_cancel_closes_the_connection(self):
        echo = self.im.module("mcptools.everything.echo")
        peer_closed = threading.Event()

        def hold(conn):
            conn.settimeout(10)
            try:
                peer_closed.set() if conn.recv(1) == b"" else None
            except OSError:
                pass

        self.replies["echo"] = hold

        async def main():
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(echo.run_async(message="m"), 0.3)

        asyncio.run(main())
        self.assertTrue(peer_closed.wait(5), "the connection stayed open after cancellation")


if __name__ == "__main__":
    unittest.main()
