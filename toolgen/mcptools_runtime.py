"""The tool channel of ipybox: how generated modules call the tools of MCP servers.

One unix stream connection per call to SOCKET_PATH. The request is one line of compact JSON,
{"server": str, "tool": str, "arguments": object}, ended by a newline; the reply is one line
(up to a newline or the end of the stream, at most 64 MiB):
    {"structured": <any JSON value>}   the tool's structured content
    {"text": str}                      the text of its answer
    {"error": {"kind": K, "message": str}}
with K one of "rejected" (the application refused the call), "tool_error" (the tool answered
with an error), "timeout", "refused" (unknown server or tool, bad request) and "failed".

Standard library only; Python 3.9 or later.
"""
import asyncio
import dataclasses
import enum
import json
import socket
import time
import typing

SOCKET_PATH = "/opt/ipybox/tool.sock"
MAX_REPLY = 64 * 1024 * 1024
_CHUNK = 65536


class ToolCallError(Exception):
    """A tool call that did not give a result. server, tool, kind and message say which and
    why; kind is "rejected", "tool_error", "timeout", "refused" or "failed"."""

    def __init__(self, server, tool, kind, message):
        self.server = server
        self.tool = tool
        self.kind = kind
        self.message = message
        super().__init__("%s/%s: %s" % (server, tool, message))

    def __reduce__(self):
        return (type(self), (self.server, self.tool, self.kind, self.message))


class ToolRejected(ToolCallError):
    """The application refused the call."""


class ToolError(ToolCallError):
    """The tool answered with an error (isError); message is its text."""


class ToolTimeout(ToolCallError, TimeoutError):
    """The call took too long."""


_ERRORS = {"rejected": ToolRejected, "tool_error": ToolError, "timeout": ToolTimeout}

for _cls in (ToolCallError, ToolRejected, ToolError, ToolTimeout):
    _cls.__module__ = "mcptools"
del _cls


def _request(server, tool, arguments):
    if not isinstance(server, str) or not isinstance(tool, str):
        raise TypeError("server and tool must be strings")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise TypeError("the arguments of a tool call must be a dict, not %s" % type(arguments).__name__)
    line = json.dumps({"server": server, "tool": tool, "arguments": arguments},
                      separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return line.encode("ascii") + b"\n"


def _unavailable(server, tool, exc):
    return ToolCallError(server, tool, "failed",
                         "the tool channel is unavailable (%s): tools can be called only in an ipybox "
                         "session with MCP servers registered" % (exc.strerror or exc))


def _failed(server, tool, what):
    return ToolCallError(server, tool, "failed", what)


def _take_line(buf, start, server, tool):
    """The reply line in buf (bytes up to the first newline), or None to read on. A newline
    is looked for from `start` on (what came before was searched already)."""
    nl = buf.find(b"\n", start)
    if nl > MAX_REPLY or (nl < 0 and len(buf) > MAX_REPLY):
        raise _failed(server, tool, "the reply of the tool channel is larger than 64 MiB")
    return bytes(buf[:nl]) if nl >= 0 else None


def _result(server, tool, line):
    if not line.strip():
        raise _failed(server, tool, "the tool channel closed without a reply")
    try:
        reply = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _failed(server, tool, "the tool channel gave a reply that is not JSON") from None
    if isinstance(reply, dict) and len(reply) == 1:
        if "structured" in reply:
            return reply["structured"]
        if "text" in reply and isinstance(reply["text"], str):
            return reply["text"]
        error = reply.get("error")
        if isinstance(error, dict) and isinstance(error.get("kind"), str):
            kind = error["kind"]
            message = error.get("message")
            if not isinstance(message, str):
                message = "the call failed (%s)" % kind
            raise _ERRORS.get(kind, ToolCallError)(server, tool, kind, message)
    raise _failed(server, tool, "the tool channel gave a reply of an unknown shape")


# --- call(), acall() and their call_timeout (issue 19: concurrent and cancellable calls) ---


def _deadline(server, tool, call_timeout):
    """Seconds allowed for the whole call (None: no limit of the caller's own)."""
    if call_timeout is None:
        return None
    if isinstance(call_timeout, bool) or not isinstance(call_timeout, (int, float)) or not call_timeout > 0:
        raise ValueError("call_timeout must be a positive number of seconds or None, not %r" % (call_timeout,))
    return float(call_timeout)


def _timed_out(server, tool, call_timeout):
    return ToolTimeout(server, tool, "timeout",
                       "no answer within call_timeout=%g s; the call was cancelled" % call_timeout)


def call(server, tool, arguments=None, *, call_timeout=None):
    """Calls `tool` of MCP server `server` with `arguments` (a dict of JSON values). Returns the
    structured content (any JSON value) or the text of the answer (str); raises ToolCallError
    (or a subclass) when there is none. call_timeout (seconds): past it ToolTimeout is raised
    and the socket closed, which cancels the call at its server. Calls from several threads
    run concurrently."""
    data = _request(server, tool, arguments)
    limit = _deadline(server, tool, call_timeout)
    until = None if limit is None else time.monotonic() + limit
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.connect(SOCKET_PATH)
        except OSError as e:
            raise _unavailable(server, tool, e) from None
        buf = bytearray()
        try:
            sock.settimeout(limit)
            sock.sendall(data)
            while True:
                if until is not None:
                    sock.settimeout(max(until - time.monotonic(), 0.001))
                chunk = sock.recv(_CHUNK)
                if not chunk:
                    line = bytes(buf)
                    break
                start = len(buf)
                buf += chunk
                line = _take_line(buf, start, server, tool)
                if line is not None:
                    break
        except socket.timeout:
            raise _timed_out(server, tool, limit) from None
        except OSError as e:
            raise _failed(server, tool, "the tool channel failed: %s" % (e.strerror or e)) from None
    finally:
        sock.close()
    return _result(server, tool, line)


async def _aexchange(reader, writer, data, server, tool):
    buf = bytearray()
    writer.write(data)
    await writer.drain()
    while True:
        chunk = await reader.read(_CHUNK)
        if not chunk:
            return bytes(buf)
        start = len(buf)
        buf += chunk
        line = _take_line(buf, start, server, tool)
        if line is not None:
            return line


async def acall(server, tool, arguments=None, *, call_timeout=None):
    """call() for asyncio (the kernel's loop: top-level await works in a cell). Cancelling the
    task, or call_timeout passing, closes the socket and so cancels the call at its server."""
    data = _request(server, tool, arguments)
    limit = _deadline(server, tool, call_timeout)
    try:
        reader, writer = await asyncio.open_unix_connection(SOCKET_PATH)
    except OSError as e:
        raise _unavailable(server, tool, e) from None
    try:
        try:
            if limit is None:
                line = await _aexchange(reader, writer, data, server, tool)
            else:
                line = await asyncio.wait_for(_aexchange(reader, writer, data, server, tool), limit)
        except asyncio.TimeoutError:
            raise _timed_out(server, tool, limit) from None
        except OSError as e:
            raise _failed(server, tool, "the tool channel failed: %s" % (e.strerror or e)) from None
    finally:
        writer.close()
    return _result(server, tool, line)


# --- end of call(), acall() ---


def make_params(cls, params, kwargs):
    """The arguments of run(): a cls instance (or a dict of JSON values), or keyword arguments
    naming cls's fields, not both."""
    if params is not None and kwargs:
        raise TypeError("pass either a %s instance or keyword arguments, not both" % cls.__name__)
    if params is None:
        return cls(**kwargs)
    if isinstance(params, (cls, dict)):
        return params
    raise TypeError("params must be a %s instance (or a dict), not %s" % (cls.__name__, type(params).__name__))


def to_json(obj):
    """JSON values from generated dataclasses (by the fields' JSON names; None left out unless
    the field is required), enums, lists, tuples, dicts and scalars."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if value is None and not f.metadata.get("required", False):
                continue
            out[f.metadata.get("json", f.name)] = to_json(value)
        return out
    if isinstance(obj, enum.Enum):
        return to_json(obj.value)
    if isinstance(obj, dict):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    return obj


def _hints(cls):
    try:
        return typing.get_type_hints(cls)
    except Exception:
        return {}


_NO = object()


def _convert(tp, data):
    """data as tp, or _NO when it does not fit."""
    if tp is typing.Any or tp is object:
        return data
    if tp is None or tp is type(None):
        return data if data is None else _NO
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(data, dict):
            return _NO
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            key = f.metadata.get("json", f.name)
            if key in data:
                kwargs[f.name] = from_json(hints.get(f.name, f.type), data[key])
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                kwargs[f.name] = None
        return tp(**kwargs)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union:
        if data is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            v = _convert(a, data)
            if v is not _NO:
                return v
        return _NO
    if origin is typing.Literal:
        return data if data in args else _NO
    if origin in (list, typing.List):
        if not isinstance(data, list):
            return _NO
        item = args[0] if args else typing.Any
        return [from_json(item, v) for v in data]
    if origin in (dict, typing.Dict):
        if not isinstance(data, dict):
            return _NO
        value = args[1] if len(args) == 2 else typing.Any
        return {k: from_json(value, v) for k, v in data.items()}
    if tp is bool:
        return data if isinstance(data, bool) else _NO
    if tp is int:
        return data if isinstance(data, int) and not isinstance(data, bool) else _NO
    if tp is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
        return _NO
    if tp is str:
        return data if isinstance(data, str) else _NO
    if isinstance(tp, type):
        return data if isinstance(data, tp) else _NO
    return data


def from_json(tp, data):
    """data (JSON values) as type tp: generated dataclasses built from dicts (missing optional
    and unknown keys tolerated), typing.Optional/Union/List/Dict/Literal/Any followed. Where a
    value does not fit its type it is kept as it is."""
    v = _convert(tp, data)
    return data if v is _NO else v
