"""The tool channel of ipybox: how generated modules call the tools of MCP servers.

One unix stream connection per call to SOCKET_PATH. The request is one line of compact JSON,
{"server": str, "tool": str, "arguments": object}, ended by a newline; the reply is one line
(up to a newline or the end of the stream, at most 64 MiB; supervisor/toolmsg.h):
    {"text": str}                      the answer was one text block and nothing else
    {"result": {"content": [block, ...], "structuredContent": <any JSON value>,
                "isError": true, "dropped": [str, ...]}}   anything else (all but content optional)
    {"error": {"kind": K, "message": str}}                  no answer
with K one of "rejected" (the application refused the call), "timeout", "refused" (unknown
server or tool, bad request) and "failed". The blocks, checked by the supervisor:
    {"type": "text", "text": str}
    {"type": "image" | "audio", "data": base64, "mimeType": str}
    {"type": "resource", "uri": str, "mimeType"?: str, "text": str | "blob": base64}
    {"type": "resource_link", "uri": str, "name": str, "mimeType"?, "title"?, "description"?: str,
     "size"?: int}
"dropped" says which blocks the supervisor left out as malformed, and why.

Standard library only; Python 3.9 or later.
"""
import asyncio
import base64
import binascii
import dataclasses
import enum
import json
import socket
import sys
import time
import typing

SOCKET_PATH = "/opt/ipybox/tool.sock"
MAX_REPLY = 64 * 1024 * 1024
_CHUNK = 65536


class ToolCallError(Exception):
    """A tool call that did not give a result. server, tool, kind and message say which and
    why; kind is "rejected", "tool_error", "timeout", "refused" or "failed". result is the
    tool's whole answer (a ToolResult) for a ToolError, else None."""

    def __init__(self, server, tool, kind, message, result=None):
        self.server = server
        self.tool = tool
        self.kind = kind
        self.message = message
        self.result = result
        super().__init__("%s/%s: %s" % (server, tool, message))

    def __reduce__(self):
        return (type(self), (self.server, self.tool, self.kind, self.message, self.result))


class ToolRejected(ToolCallError):
    """The application refused the call."""


class ToolError(ToolCallError):
    """The tool answered with an error (isError); message is its text, result all of its
    answer (a ToolResult)."""


class ToolTimeout(ToolCallError, TimeoutError):
    """The call took too long."""


_ERRORS = {"rejected": ToolRejected, "tool_error": ToolError, "timeout": ToolTimeout}


def _size(data):
    n = len(data)
    return "%d bytes" % n if n < 10 * 1024 else "%.1f KiB" % (n / 1024) if n < 10 * 1024 * 1024 \
        else "%.1f MiB" % (n / 1024 / 1024)


@dataclasses.dataclass(frozen=True, repr=False)
class Image:
    """An image a tool returned: data (bytes, decoded) and mime_type ("image/png", ...).
    Displayed in a cell (the last expression, or IPython's display()) it shows as an image
    when it is PNG, JPEG, GIF, WebP or SVG."""
    data: bytes
    mime_type: str

    def __repr__(self):
        return "Image(%s, %s)" % (self.mime_type, _size(self.data))

    def _repr_png_(self):
        return self.data if self.mime_type == "image/png" else None

    def _repr_jpeg_(self):
        return self.data if self.mime_type == "image/jpeg" else None

    def _repr_mimebundle_(self, include=None, exclude=None):
        if self.mime_type == "image/svg+xml":
            try:
                shown = self.data.decode("utf-8")
            except UnicodeDecodeError:
                return {"text/plain": repr(self)}
        elif self.mime_type in _SHOWN_IMAGES:
            shown = base64.b64encode(self.data).decode("ascii")
        else:
            return {"text/plain": repr(self)}
        return {self.mime_type: shown, "text/plain": repr(self)}


_SHOWN_IMAGES = ("image/png", "image/jpeg", "image/gif", "image/webp")


@dataclasses.dataclass(frozen=True, repr=False)
class Audio:
    """Audio a tool returned: data (bytes, decoded) and mime_type ("audio/wav", ...)."""
    data: bytes
    mime_type: str

    def __repr__(self):
        return "Audio(%s, %s)" % (self.mime_type, _size(self.data))


@dataclasses.dataclass(frozen=True)
class Resource:
    """A resource embedded in a tool's answer: its uri, mime_type (or None), and its contents,
    either text (str) or data (bytes, decoded); the other one is None."""
    uri: str
    mime_type: typing.Optional[str] = None
    text: typing.Optional[str] = None
    data: typing.Optional[bytes] = dataclasses.field(default=None, repr=False)


@dataclasses.dataclass(frozen=True)
class ResourceLink:
    """A link to a resource (not its contents): uri and name, and what the server said of it."""
    uri: str
    name: str
    mime_type: typing.Optional[str] = None
    title: typing.Optional[str] = None
    description: typing.Optional[str] = None
    size: typing.Optional[int] = None


@dataclasses.dataclass
class ToolResult:
    """All of a tool's answer. content: its blocks in order, str for text, else Image, Audio,
    Resource or ResourceLink; structured: its structured content (a Result of the tool's module
    when it declares an output schema and the content is an object, else JSON values) or None;
    is_error: the tool reported an error; dropped: the blocks the supervisor left out as
    malformed, and why (str each)."""
    content: typing.List[typing.Any] = dataclasses.field(default_factory=list)
    structured: typing.Any = None
    is_error: bool = False
    dropped: typing.List[str] = dataclasses.field(default_factory=list)

    @property
    def text(self):
        """The text blocks, joined by newlines."""
        return "\n".join(b for b in self.content if isinstance(b, str))


for _cls in (ToolCallError, ToolRejected, ToolError, ToolTimeout, Image, Audio, Resource, ResourceLink, ToolResult):
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


def _b64(value):
    if not isinstance(value, str):
        raise ValueError
    return base64.b64decode(value.encode("ascii"), validate=True)


def _opt(block, key, kind):
    value = block.get(key)
    if value is not None and not isinstance(value, kind):
        raise ValueError
    return value


def _block(block):
    kind = block.get("type")
    if kind == "text":
        if not isinstance(block.get("text"), str):
            raise ValueError
        return block["text"]
    if kind in ("image", "audio"):
        mime = block.get("mimeType")
        if not isinstance(mime, str):
            raise ValueError
        return (Image if kind == "image" else Audio)(_b64(block.get("data")), mime)
    if kind == "resource":
        if not isinstance(block.get("uri"), str):
            raise ValueError
        text = _opt(block, "text", str)
        data = _b64(block.get("blob")) if text is None else None
        return Resource(block["uri"], _opt(block, "mimeType", str), text, data)
    if kind == "resource_link":
        if not isinstance(block.get("uri"), str) or not isinstance(block.get("name"), str):
            raise ValueError
        size = block.get("size")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool)):
            raise ValueError
        return ResourceLink(block["uri"], block["name"], _opt(block, "mimeType", str), _opt(block, "title", str),
                            _opt(block, "description", str), size)
    raise ValueError


def _tool_result(result):
    content = result.get("content")
    dropped = result.get("dropped", [])
    if not isinstance(content, list) or not isinstance(dropped, list) or \
            not all(isinstance(b, dict) for b in content) or not all(isinstance(d, str) for d in dropped):
        raise ValueError
    return ToolResult([_block(b) for b in content], result.get("structuredContent"),
                      result.get("isError") is True, dropped)


def _result(server, tool, line):
    """The ToolResult in a reply line; raises ToolCallError for an error reply."""
    if not line.strip():
        raise _failed(server, tool, "the tool channel closed without a reply")
    try:
        reply = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _failed(server, tool, "the tool channel gave a reply that is not JSON") from None
    except RecursionError:
        # The supervisor passes on up to 2048 levels; Python's parser stops at its recursion limit.
        raise _failed(server, tool, "the tool's result is nested too deeply to read (more levels than "
                                    "Python's recursion limit, %d)" % sys.getrecursionlimit()) from None
    if isinstance(reply, dict) and len(reply) == 1:
        if "text" in reply and isinstance(reply["text"], str):
            return ToolResult([reply["text"]])
        if isinstance(reply.get("result"), dict):
            try:
                return _tool_result(reply["result"])
            except (ValueError, binascii.Error):
                raise _failed(server, tool, "the tool channel gave a result of an unknown shape") from None
        error = reply.get("error")
        if isinstance(error, dict) and isinstance(error.get("kind"), str):
            kind = error["kind"]
            message = error.get("message")
            if not isinstance(message, str):
                message = "the call failed (%s)" % kind
            raise _ERRORS.get(kind, ToolCallError)(server, tool, kind, message)
    raise _failed(server, tool, "the tool channel gave a reply of an unknown shape")


def _typed(result, result_type):
    if result_type is not None and isinstance(result.structured, dict):
        result.structured = from_json(result_type, result.structured)
    return result


def _value(server, tool, result):
    """What call() returns for a ToolResult (its docstring says what)."""
    if result.is_error:
        raise ToolError(server, tool, "tool_error", result.text or "the tool reported an error without a message",
                        result)
    if result.structured is not None:
        return result.structured
    if all(isinstance(b, str) for b in result.content):
        return result.text
    return list(result.content)


# --- the exchange over the tool channel, and call_timeout (concurrent, cancellable calls) ---


def _deadline(call_timeout):
    """Seconds allowed for the whole call (None: no limit of the caller's own)."""
    if call_timeout is None:
        return None
    if isinstance(call_timeout, bool) or not isinstance(call_timeout, (int, float)) or not call_timeout > 0:
        raise ValueError("call_timeout must be a positive number of seconds or None, not %r" % (call_timeout,))
    return float(call_timeout)


def _timed_out(server, tool, call_timeout):
    return ToolTimeout(server, tool, "timeout",
                       "no answer within call_timeout=%g s; the call was cancelled" % call_timeout)


def _exchange(server, tool, arguments, call_timeout=None):
    """The answer (a ToolResult) of one call: one connection, one line each way. Past
    call_timeout the socket is closed, which cancels the call at its server. Calls from several
    threads run concurrently."""
    data = _request(server, tool, arguments)
    limit = _deadline(call_timeout)
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


async def _aread(reader, writer, data, server, tool):
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


async def _aexchange(server, tool, arguments, call_timeout=None):
    """_exchange() for asyncio. Cancelling the task, or call_timeout passing, closes the socket
    and so cancels the call at its server."""
    data = _request(server, tool, arguments)
    limit = _deadline(call_timeout)
    try:
        reader, writer = await asyncio.open_unix_connection(SOCKET_PATH)
    except OSError as e:
        raise _unavailable(server, tool, e) from None
    try:
        try:
            if limit is None:
                line = await _aread(reader, writer, data, server, tool)
            else:
                line = await asyncio.wait_for(_aread(reader, writer, data, server, tool), limit)
        except asyncio.TimeoutError:
            raise _timed_out(server, tool, limit) from None
        except OSError as e:
            raise _failed(server, tool, "the tool channel failed: %s" % (e.strerror or e)) from None
    finally:
        writer.close()
    return _result(server, tool, line)


def call(server, tool, arguments=None, *, call_timeout=None):
    """Calls `tool` of MCP server `server` with `arguments` (a dict of JSON values). Returns the
    structured content (any JSON value) when the tool gives one; else the text of its answer
    (str, its text blocks joined by newlines) when it has only text; else its blocks in order
    (a list: str for text, Image, Audio, Resource, ResourceLink). Raises ToolError when the
    tool reports an error, ToolCallError (or another subclass) when there is no answer.
    call_timeout (seconds): past it ToolTimeout is raised and the call cancelled at its server."""
    return _value(server, tool, _exchange(server, tool, arguments, call_timeout))


async def acall(server, tool, arguments=None, *, call_timeout=None):
    """call() for asyncio (the kernel's loop: top-level await works in a cell)."""
    return _value(server, tool, await _aexchange(server, tool, arguments, call_timeout))


def call_full(server, tool, arguments=None, result_type=None, *, call_timeout=None):
    """Like call(), but returns all of the answer, a ToolResult, also when the tool reports an
    error (is_error); its structured content as result_type (a generated Result class) when it
    is an object and result_type is given. Raises ToolCallError when there is no answer."""
    return _typed(_exchange(server, tool, arguments, call_timeout), result_type)


async def acall_full(server, tool, arguments=None, result_type=None, *, call_timeout=None):
    """call_full() for asyncio."""
    return _typed(await _aexchange(server, tool, arguments, call_timeout), result_type)


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
