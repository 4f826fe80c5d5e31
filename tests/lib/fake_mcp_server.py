"""The fake MCP server of the tests, run as `mcp_servers.py fake [options]` (that file's
fake_stdio_params() and fake_http() start it): it misbehaves on request, over stdio,
Streamable HTTP or legacy SSE on 127.0.0.1.

Standard library only (Debian's /usr/bin/python3).
"""
import contextlib
import json
import os
import subprocess
import sys
import threading
import time

# ---------------------------------------------------------------------------------------------
# The fake server. Tools (tools/call by name):
#   echo       its arguments back as text, and what the server knows of the request
#              (structuredContent: {"arguments", "headers", "initializes"})
#   hang       never answers
#   huge       answers with a result of --huge-bytes bytes (default 2 MiB)
#   malformed  sends malformed messages, then a response whose result is not an object
#   garbage    sends only malformed messages (200 of them)
#   exit       the server exits with status 3 (HTTP: mid-answer, the connection drops)
#   spawn      starts a child that sleeps a minute (its pid in --pid-file + ".child"), answers
#   ask        asks the client (ping, then sampling/createMessage) before answering; the result
#              holds the client's answers (HTTP: over an event stream, answers POSTed back)
#   flood_ask  (HTTP) asks the client (ping), floods --flood-bytes of notifications, then waits for
#              the answer and returns it
#   expire     (HTTP) the first call forgets the session (the next request with it gets 404);
#              later calls return {"initializes": N}
#   fail, ok   (stdio) an isError result; "ok"
# With --tools concurrent, calls run concurrently (stdio: a thread per call, whole lines written
# under a lock; HTTP: a request each; legacy SSE: a thread each) and the tools are:
#   sleep {seconds, tag}  answers "slept SECONDS TAG" after SECONDS, unless cancelled first
#   hang, ok, fail        never answers; "ok"; an isError result
#   stray                 an answer with an id never sent, then its own answer twice (HTTP: all in
#                         the answer's event stream)
#   late                  waits until its request is cancelled, then answers anyway (HTTP: on the
#                         stream the client closed, so it is never seen)
#   expire, garbage       (HTTP) as above
# --events FILE records {"event": "call"|"answered"|"cancelled"|"gave_up", ...} lines.
# tools/list: --tools normal (3 pages), crafted (odd names and descriptions), notarray, and the
# kinds of fake_server_params(): errors, misbehave, hostile.
# ---------------------------------------------------------------------------------------------

CRAFTED_TOOLS = [
    {"name": "x); import os; os.system('id') #", "description": "'''\"\"\"\nimport os\n", "inputSchema": {
        "type": "object", "properties": {"class": {"type": "string", "default": "'''\\"}}}},
    {"name": "\u00e9\u4e2d\U0001f600", "description": "\u0000 NUL and \u202e bidi", "inputSchema": {"type": "object"}},
    {"name": "__init__", "description": "d" * 100000, "inputSchema": {"type": "object"}},
    {"name": "", "inputSchema": {}},
    {"name": "n" * 300},
    "not an object",
]


KIND_TOOLS = {
    "errors": [("fail", "Always fails (an isError result)."), ("hang", "Never answers."), ("ok", "Answers ok.")],
    "concurrent": [("sleep", "Answers 'slept SECONDS TAG' after SECONDS seconds.",
                    {"seconds": {"type": "number"}, "tag": {"type": "string"}}),
                   ("hang", "Never answers."), ("ok", "Answers ok."), ("fail", "Always fails."),
                   ("stray", "Sends an answer with an id never sent and then its own answer twice."),
                   ("late", "Waits until the call is cancelled, then answers it anyway.", {})],
    "misbehave": [("huge", "Answers with more than the client accepts."),
                  ("malformed", "Answers with garbage, then a result that is not an object."),
                  ("hang", "Never answers."), ("ok", "Answers ok.")],
}


def hostile_tools(canary):
    """Tools whose text fields carry code that would create canary and /app/pwned if it ever ran,
    in each quoting context generated Python has (docstrings, strings, names, defaults)."""
    run = "__import__('os').system('touch %s /app/pwned')" % canary
    write = "open(%r, 'w').write('pwned')" % canary
    tq, sq = '"' * 3, "'" * 3
    esc = [
        tq + "\n" + run + "\n" + tq,              # closes a """docstring
        sq + "\n" + run + "\n" + sq,              # closes a '''docstring
        "\\" + '"' + tq + "); " + run + "; #",    # a backslash before the quotes
        "'); " + write + "; #",                   # closes a '...' string
        "\n" + run + "\n",                        # line breaks
        "\\" + run,                               # a trailing backslash joins lines
        "\u202e" + run,                           # bidi override
    ]
    props = {
        "text": {"type": "string", "description": esc[0] + esc[1], "default": esc[3]},
        'y"); %s #' % run: {"type": "integer", "description": esc[2]},
        "class": {"type": "string", "enum": ["a'); %s; ('" % run, esc[1], None], "title": esc[0]},
        "def": {"type": ["string", "null"], "default": esc[4]},
        "__import__": {"type": "object", "properties": {"nested": {"type": "string", "default": esc[2]}},
                       "default": {"k": esc[3]}},
        "n": {"type": "number", "default": 1e308, "description": esc[5]},
    }
    return [
        {"name": "innocent", "title": esc[0], "description": esc[0] + esc[1] + esc[2] + esc[6],
         "inputSchema": {"type": "object", "properties": props, "required": ["text", "class"]},
         "outputSchema": {"type": "object", "properties": {"r": {"type": "string", "description": esc[1]}}}},
        {"name": "also_innocent", "description": esc[3], "inputSchema": {"type": "object", "properties": {
            "x": {"type": "string", "default": esc[4], "description": esc[5]}}}},
        {"name": "x); %s #" % run, "description": "a name that is code", "inputSchema": {"type": "object"}},
        {"name": "../../escape", "description": "a name that is a path", "inputSchema": {"type": "object"}},
        {"name": "__init__", "description": esc[0], "inputSchema": {"type": "object"}},
        {"name": "os", "description": "shadows a module", "inputSchema": {"type": "object"}},
        {"name": "import", "description": "a keyword", "inputSchema": {"type": "object"}},
        {"name": "a" * 300, "description": "a long name", "inputSchema": {"type": "object"}},
    ]


class Fake:
    def __init__(self, opts):
        self.opts = opts
        self.lock = threading.Lock()
        self.initializes = 0
        self.session = None
        self.expired = set()
        self.flood_done = threading.Event()
        self.cancelled = {}          # request id (as JSON text) -> threading.Event, once cancelled

    def event(self, what, **fields):
        """--events FILE: one JSON line per thing seen ({"event": what, ...}), for tests to read
        (notifications/cancelled with its requestId, calls started and answered)."""
        path = self.opts.get("events")
        if not path:
            return
        with self.lock, open(path, "a") as f:
            f.write(json.dumps(dict(fields, event=what, t=time.time())) + "\n")

    def cancel_event(self, rid):
        key = json.dumps(rid)
        with self.lock:
            ev = self.cancelled.setdefault(key, threading.Event())
        return ev

    def log(self, *args):
        with self.lock:
            print(*args, flush=True)

    def tools_page(self, params):
        kind = self.opts.get("tools", "normal")
        if kind == "notarray":
            return {"tools": {"echo": {}}}
        if kind == "crafted":
            return {"tools": CRAFTED_TOOLS}
        if kind == "hostile":
            return {"tools": hostile_tools(self.opts.get("canary") or "/tmp/ipybox-canary")}
        if kind in KIND_TOOLS:
            return {"tools": [{"name": t[0], "description": t[1],
                               "inputSchema": {"type": "object", "properties": t[2] if len(t) > 2 else {}}}
                              for t in KIND_TOOLS[kind]]}
        page = int((params or {}).get("cursor") or 0)
        r = {"tools": [{"name": "echo" if page == 0 and i == 0 else "tool_%d_%d" % (page, i),
                        "inputSchema": {"type": "object"}} for i in range(2)]}
        if page < 2:
            r["nextCursor"] = str(page + 1)
        return r

    def initialize_result(self, params):
        with self.lock:
            self.initializes += 1
        return {"protocolVersion": self.opts.get("version") or params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}}


def garbage_lines(n):
    base = ["not json", "[]", '{"jsonrpc":"1.0","id":1}', "42", '{"id":999}', "{\"jsonrpc\":\"2.0\",\"method\":5}"]
    return [base[i % len(base)] for i in range(n)]


def huge_result(mid, size):
    return '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}' % (json.dumps(mid), "a" * size)


def run_stdio(fake):
    out = sys.stdout

    def send_line(s):
        out.write(s + "\n")
        out.flush()

    def send(m):
        send_line(json.dumps(m))

    def read():
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        return json.loads(line)

    if fake.opts.get("pid_file"):
        with open(fake.opts["pid_file"], "w") as f:
            f.write(str(os.getpid()))
    concurrent = fake.opts.get("tools") == "concurrent"
    wlock = threading.Lock()
    if concurrent:
        def send_line(s):  # noqa: F811 (threads write whole lines)
            with wlock:
                out.write(s + "\n")
                out.flush()

        def send(m):  # noqa: F811
            send_line(json.dumps(m))
    while True:
        m = read()
        meth, mid, params = m.get("method"), m.get("id"), m.get("params") or {}
        if meth == "notifications/cancelled":
            rid = params.get("requestId")
            fake.event("cancelled", requestId=rid, reason=params.get("reason"))
            fake.cancel_event(rid).set()
            continue
        if concurrent and meth == "tools/call":
            fake.event("call", id=mid, name=params.get("name"), arguments=params.get("arguments"))
            threading.Thread(target=concurrent_call, args=(fake, send, send_line, mid, params), daemon=True).start()
            continue
        if meth == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": fake.initialize_result(params)})
        elif meth == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": fake.tools_page(params)})
        elif meth == "tools/call":
            name, args = params.get("name"), params.get("arguments")
            if name == "echo":
                send({"jsonrpc": "2.0", "id": mid, "result": {
                    "content": [{"type": "text", "text": json.dumps(args)}],
                    "structuredContent": {"arguments": args, "env": dict(os.environ)}}})
            elif name == "hang":
                time.sleep(3600)
            elif name == "fail":
                send({"jsonrpc": "2.0", "id": mid, "result": {
                    "content": [{"type": "text", "text": "failed on purpose"}], "isError": True}})
            elif name == "ok" or fake.opts.get("tools") == "hostile":
                send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "ok"}]}})
            elif name == "huge":
                send_line(huge_result(mid, int(fake.opts.get("huge_bytes", 2 << 20))))
                time.sleep(3600)
            elif name == "malformed":
                for line in garbage_lines(6):
                    send_line(line)
                send({"jsonrpc": "2.0", "id": mid, "result": "not an object"})
            elif name == "garbage":
                for line in garbage_lines(200):
                    send_line(line)
            elif name == "exit":
                sys.exit(3)
            elif name == "spawn":
                # Without our pipes, and not for long: should it outlive a failed test, it holds
                # no test runner's pipe open and ends by itself.
                child = subprocess.Popen(["/bin/sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
                with open(fake.opts["pid_file"] + ".child", "w") as f:
                    f.write(str(child.pid))
                send({"jsonrpc": "2.0", "id": mid, "result": {"content": []}})
            elif name == "ask":
                send({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
                send({"jsonrpc": "2.0", "id": 77, "method": "sampling/createMessage", "params": {}})
                got = [read(), read()]
                send({"jsonrpc": "2.0", "id": mid, "result": {"content": [], "structuredContent": {"answers": got}}})
            else:
                send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "Unknown tool: %s" % name}})
        elif mid is not None and meth is not None:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})


def concurrent_result(fake, mid, name, args):
    """The answer of a --tools concurrent tool (in its own thread), or None for none. May wait."""
    args = args or {}
    if name == "sleep":
        seconds = float(args.get("seconds", 1))
        if fake.cancel_event(mid).wait(seconds):
            fake.event("gave_up", id=mid)
            return None  # cancelled: a well-behaved server does not answer
        return {"content": [{"type": "text", "text": "slept %g %s" % (seconds, args.get("tag", ""))}]}
    if name == "hang":
        return None
    if name == "ok":
        return {"content": [{"type": "text", "text": "ok"}]}
    if name == "fail":
        return {"content": [{"type": "text", "text": "failed on purpose"}], "isError": True}
    if name == "late":
        fake.cancel_event(mid).wait(600)
        return {"content": [{"type": "text", "text": "late answer"}]}
    return {"error": "Unknown tool: %s" % name}


def concurrent_call(fake, send, send_line, mid, params):
    name, args = params.get("name"), params.get("arguments")
    if name == "stray":
        send({"jsonrpc": "2.0", "id": 987654321, "result": {"content": [{"type": "text", "text": "stray"}]}})
        answer = {"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "first"}]}}
        send(answer)
        answer["result"]["content"][0]["text"] = "second"
        send(answer)
        fake.event("answered", id=mid, name=name)
        return
    r = concurrent_result(fake, mid, name, args)
    if r is None:
        return
    if "error" in r:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": r["error"]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "result": r})
    fake.event("answered", id=mid, name=name)


def run_http(fake, transport, port):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    import queue
    import urllib.parse

    answers = queue.Queue()      # the client's answers to our requests (Streamable HTTP "ask")
    streams = {}                 # legacy SSE: session id -> queue of messages for its stream

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, fmt, *args):
            fake.log("%s %s" % (self.command, fmt % args))

        def reply(self, status, body=b"", ctype="application/json", headers=()):
            self.send_response(status)
            if body or ctype != "application/json":
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def event(self, data, event=None):
            text = ("event: %s\n" % event if event else "") + "".join("data: %s\n" % ln for ln in data.split("\n"))
            self.wfile.write((text + "\n").encode())
            self.wfile.flush()

        def flood(self):
            """Notifications, --flood-bytes of them (64 MiB by default), 64 KiB each."""
            note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                               "params": {"level": "info", "data": "x" * 65536}})
            chunk = ("data: %s\n\n" % note).encode()
            total = int(fake.opts.get("flood_bytes", 64 << 20))
            sent = 0
            while sent < total:
                self.wfile.write(chunk)
                sent += len(chunk)
            self.wfile.flush()
            fake.log("flood of %d bytes written" % sent)
            fake.flood_done.set()

        def start_stream(self, headers=()):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()

        def body(self):
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n) or b"null")

        # -- Streamable HTTP (and legacy SSE's POSTs)
        def do_POST(self):
            parsed = urllib.parse.urlparse(self.path)
            if transport == "sse":
                return self.legacy_post(parsed)
            if parsed.path != "/mcp":
                return self.reply(404, b"no such path")
            if fake.opts.get("redirect"):
                return self.reply(307, b"moved", headers=[("Location", fake.opts["redirect"])])
            m = self.body()
            fake.log("message", json.dumps(m)[:300], "session", self.headers.get("Mcp-Session-Id"),
                     "version", self.headers.get("MCP-Protocol-Version"))
            sid = self.headers.get("Mcp-Session-Id")
            if isinstance(m, dict) and m.get("method") == "initialize":
                fake.session = "s-%d" % (fake.initializes + 1)
                result = fake.initialize_result(m.get("params") or {})
                answer = json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result})
                if fake.opts.get("flood_init"):
                    self.start_stream(headers=[("Mcp-Session-Id", fake.session)])
                    self.event(answer)
                    with contextlib.suppress(OSError):
                        self.flood()
                    return
                return self.reply(200, answer.encode(), headers=[("Mcp-Session-Id", fake.session)])
            if sid != fake.session or sid in fake.expired:
                return self.reply(404, json.dumps({"jsonrpc": "2.0", "error": {"code": -32001,
                                                                                "message": "Session not found"}}).encode())
            if not isinstance(m, dict) or "method" not in m:
                answers.put(m)  # a response of the client
                return self.reply(202)
            if "id" not in m:
                if m.get("method") == "notifications/cancelled":
                    rid = (m.get("params") or {}).get("requestId")
                    fake.event("cancelled", requestId=rid, reason=(m.get("params") or {}).get("reason"))
                    fake.cancel_event(rid).set()
                if fake.opts.get("flood_init") and m.get("method") == "notifications/initialized":
                    fake.flood_done.wait()  # a server that reads nothing more until its stream is out
                return self.reply(202)
            return self.answer(m)

        def answer(self, m):
            mid, meth, params = m["id"], m["method"], m.get("params") or {}

            def result(r):
                return self.reply(200, json.dumps({"jsonrpc": "2.0", "id": mid, "result": r}).encode())
            if meth == "tools/list":
                return result(fake.tools_page(params))
            if meth != "tools/call":
                return self.reply(200, json.dumps({"jsonrpc": "2.0", "id": mid,
                                                   "error": {"code": -32601, "message": "no"}}).encode())
            name, args = params.get("name"), params.get("arguments")
            if fake.opts.get("tools") == "concurrent" and name == "stray":
                # in the answer's stream: an answer with an id never sent, then its own twice
                fake.event("call", id=mid, name=name, arguments=args)
                self.start_stream()
                with contextlib.suppress(OSError):
                    self.event(json.dumps({"jsonrpc": "2.0", "id": 987654321, "result": {
                        "content": [{"type": "text", "text": "stray"}]}}))
                    for text in ("first", "second"):
                        self.event(json.dumps({"jsonrpc": "2.0", "id": mid, "result": {
                            "content": [{"type": "text", "text": text}]}}))
                    fake.event("answered", id=mid, name=name)
                return
            if fake.opts.get("tools") == "concurrent" and name not in ("expire", "garbage"):
                fake.event("call", id=mid, name=name, arguments=args)
                if name == "late" or name == "hang" or name == "sleep":
                    # an event stream, so that closing it is how the client gives up
                    self.start_stream()
                    self.wfile.write(b": waiting\n\n")
                    self.wfile.flush()
                    r = concurrent_result(fake, mid, name, args)
                    if r is None:
                        if name == "hang":  # the stream stays open until the client gives up
                            fake.cancel_event(mid).wait(3600)
                        return
                    with contextlib.suppress(OSError):
                        self.event(json.dumps({"jsonrpc": "2.0", "id": mid, "result": r}))
                        fake.event("answered", id=mid, name=name)
                    return
                r = concurrent_result(fake, mid, name, args)
                fake.event("answered", id=mid, name=name)
                if "error" in r:
                    return self.reply(200, json.dumps({"jsonrpc": "2.0", "id": mid, "error": {
                        "code": -32602, "message": r["error"]}}).encode())
                return result(r)
            if name == "echo":
                hdrs = {k.lower(): v for k, v in self.headers.items()}
                return result({"content": [{"type": "text", "text": json.dumps(args)}],
                               "structuredContent": {"arguments": args, "headers": hdrs,
                                                     "initializes": fake.initializes}})
            if name == "hang":
                time.sleep(3600)
            if name == "huge":
                return self.reply(200, huge_result(mid, int(fake.opts.get("huge_bytes", 2 << 20))).encode())
            if name == "huge_event":
                self.start_stream()
                self.event(huge_result(mid, int(fake.opts.get("huge_bytes", 2 << 20))))
                return
            if name == "malformed":
                self.start_stream()
                for line in garbage_lines(6):
                    self.event(line)
                self.event(json.dumps({"jsonrpc": "2.0", "id": mid, "result": "not an object"}))
                return
            if name == "garbage":
                self.start_stream()
                for line in garbage_lines(200):
                    self.event(line)
                time.sleep(3600)
            if name == "exit":
                self.start_stream()
                self.wfile.write(b": about to die\n\n")
                self.wfile.flush()
                os._exit(3)
            if name == "flood_ask":
                # a request of ours, then a flood while it waits for the answer
                self.start_stream()
                self.event(json.dumps({"jsonrpc": "2.0", "id": "p1", "method": "ping"}))
                self.flood()
                got = answers.get(timeout=60)
                self.event(json.dumps({"jsonrpc": "2.0", "id": mid,
                                       "result": {"content": [], "structuredContent": {"answers": [got]}}}))
                return
            if name == "expire":
                # the first call ends the session; later ones (in the new session) say how many
                # sessions there were
                if not fake.expired:
                    fake.expired.add(fake.session)
                    return result({"content": [{"type": "text", "text": "expired"}]})
                return result({"content": [], "structuredContent": {"initializes": fake.initializes}})
            if name == "ask":
                self.start_stream()
                self.event(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                                       "params": {"level": "info", "data": "asking"}}))
                self.event(json.dumps({"jsonrpc": "2.0", "id": "p1", "method": "ping"}))
                self.event(json.dumps({"jsonrpc": "2.0", "id": 77, "method": "sampling/createMessage",
                                       "params": {}}))
                got = [answers.get(timeout=30), answers.get(timeout=30)]
                self.event(json.dumps({"jsonrpc": "2.0", "id": mid,
                                       "result": {"content": [], "structuredContent": {"answers": got}}}))
                return
            return self.reply(200, json.dumps({"jsonrpc": "2.0", "id": mid, "error": {
                "code": -32602, "message": "Unknown tool: %s" % name}}).encode())

        def do_DELETE(self):
            fake.log("DELETE session", self.headers.get("Mcp-Session-Id"))
            self.reply(200)

        # -- legacy SSE
        def do_GET(self):
            parsed = urllib.parse.urlparse(self.path)
            if transport != "sse" or parsed.path != "/sse":
                return self.reply(405 if transport != "sse" else 404, b"")
            sid = "sse-%d" % len(streams)
            q = queue.Queue()
            streams[sid] = q
            self.start_stream()
            endpoint = fake.opts.get("endpoint") or "/message?sessionId=" + sid
            self.event(endpoint, event="endpoint")
            while True:
                try:
                    m = q.get(timeout=15)
                except queue.Empty:
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                    continue
                if m is None:
                    return
                if isinstance(m, bytes):
                    self.wfile.write(m)
                    self.wfile.flush()
                    continue
                self.event(m, event="message")

        def legacy_post(self, parsed):
            sid = urllib.parse.parse_qs(parsed.query).get("sessionId", [""])[0]
            q = streams.get(sid)
            if parsed.path != "/message" or q is None:
                return self.reply(404, b"unknown session")
            m = self.body()
            fake.log("message", json.dumps(m)[:300])
            self.reply(202, b"Accepted", ctype="text/plain")
            if not isinstance(m, dict) or "method" not in m:
                return
            mid, meth, params = m.get("id"), m["method"], m.get("params") or {}
            if mid is None and meth != "notifications/cancelled":
                return

            def send(msg):
                q.put(json.dumps(msg))
            if meth == "notifications/cancelled":
                rid = params.get("requestId")
                fake.event("cancelled", requestId=rid, reason=params.get("reason"))
                fake.cancel_event(rid).set()
                return
            if meth == "tools/call" and fake.opts.get("tools") == "concurrent":
                fake.event("call", id=mid, name=params.get("name"), arguments=params.get("arguments"))
                threading.Thread(target=concurrent_call, args=(fake, send, q.put, mid, params), daemon=True).start()
                return
            if meth == "initialize":
                return send({"jsonrpc": "2.0", "id": mid, "result": fake.initialize_result(params)})
            if meth == "tools/list":
                return send({"jsonrpc": "2.0", "id": mid, "result": fake.tools_page(params)})
            name, args = params.get("name"), params.get("arguments")
            if name == "echo":
                hdrs = {k.lower(): v for k, v in self.headers.items()}
                return send({"jsonrpc": "2.0", "id": mid, "result": {
                    "content": [{"type": "text", "text": json.dumps(args)}],
                    "structuredContent": {"arguments": args, "headers": hdrs}}})
            if name == "hang":
                return
            if name == "huge":
                return q.put(huge_result(mid, int(fake.opts.get("huge_bytes", 2 << 20))))
            if name == "malformed":
                for line in garbage_lines(6):
                    q.put(line)
                return send({"jsonrpc": "2.0", "id": mid, "result": "not an object"})
            if name == "exit":
                q.put(None)  # the stream ends
                return
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "Unknown tool: %s" % name}})

    class Server(ThreadingHTTPServer):
        request_queue_size = 256  # many calls connect at once (the default 5 drops SYNs: 1 s retries)
        daemon_threads = True

    server = Server(("127.0.0.1", port), Handler)
    fake.log("listening on 127.0.0.1:%d (%s)" % (port, transport))
    server.serve_forever()


def fake_main(argv):
    import argparse
    ap = argparse.ArgumentParser(prog="mcp_servers.py fake")
    ap.add_argument("--transport", choices=["stdio", "http", "sse"], default="stdio")
    ap.add_argument("--port", type=int)
    ap.add_argument("--tools", choices=["normal", "crafted", "notarray", "errors", "misbehave", "hostile",
                                        "concurrent"],
                    default="normal")
    ap.add_argument("--canary", help="--tools hostile: the path its injected code would create")
    ap.add_argument("--events", help="append a JSON line per call, answer and notifications/cancelled seen")
    ap.add_argument("--version")
    ap.add_argument("--pid-file")
    ap.add_argument("--huge-bytes", type=int)
    ap.add_argument("--endpoint", help="legacy SSE: the endpoint event's data")
    ap.add_argument("--redirect", help="Streamable HTTP: answer every POST with 307 to this URL")
    ap.add_argument("--flood-bytes", type=int, help="bytes of notifications for flood_ask and --flood-init")
    ap.add_argument("--flood-init", action="store_true",
                    help="Streamable HTTP: answer initialize in an event stream followed by a flood of "
                         "notifications, and accept notifications/initialized only once it is all written")
    a = ap.parse_args(argv)
    opts = {k: v for k, v in vars(a).items() if v is not None}
    fake = Fake(opts)
    if a.transport == "stdio":
        run_stdio(fake)
    else:
        run_http(fake, a.transport, a.port)


