"""JSON-RPC 2.0 over newline-delimited JSON (MCP's stdio framing, which ipyboxd's socket
speaks too), on asyncio streams. One reader task routes responses to their requests,
progress notifications to their calls and server requests to a handler."""
from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any, Awaitable, Callable, Dict, Optional

from .errors import ConnectionLost

# Messages are one JSON text per line; a cell's result with images can be large.
LINE_LIMIT = 1 << 30
# What the supervisor and ipyboxd take in one message (jsonrpc.h's limit).
MAX_MESSAGE = 16 << 20


class RpcError(Exception):
    def __init__(self, error: Dict[str, Any]):
        self.code = error.get("code")
        self.data = error.get("data")
        super().__init__(str(error.get("message", "error %s" % self.code)))


ServerRequestHandler = Callable[[Any, str, Dict[str, Any]], Awaitable[Any]]
NotificationHandler = Callable[[str, Dict[str, Any]], None]


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 on_request: ServerRequestHandler, on_notification: NotificationHandler):
        self._reader = reader
        self._writer = writer
        self._on_request = on_request
        self._on_notification = on_notification
        self._ids = itertools.count(1)
        self._pending: Dict[Any, asyncio.Future] = {}
        self._progress: Dict[str, Callable[[Dict[str, Any]], None]] = {}
        self._tasks: set = set()
        self.lost: Optional[ConnectionLost] = None
        self._read_task = asyncio.ensure_future(self._read_loop())

    # --- sending -----------------------------------------------------------------------

    def _send(self, msg: Dict[str, Any]) -> None:
        if self.lost:
            raise self.lost
        try:
            data = json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"
        except UnicodeEncodeError as e:
            raise ValueError("the request is not valid Unicode text (%s)" % e.reason) from None
        if len(data) > MAX_MESSAGE:
            # ipybox drops a longer line and answers without an id: refuse it here instead.
            raise ValueError("the request is %d bytes; ipybox takes messages of at most %d MiB"
                             % (len(data), MAX_MESSAGE >> 20))
        self._writer.write(data)

    async def request(self, method: str, params: Optional[Dict[str, Any]] = None,
                      on_progress: Optional[Callable[[Dict[str, Any]], None]] = None,
                      on_sent: Optional[Callable[[Any], None]] = None) -> Any:
        """Sends a request and returns its result; RpcError for an error response,
        ConnectionLost when the peer goes away first. on_sent gets the request id."""
        rid = next(self._ids)
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        token = None
        if on_progress is not None:
            token = "sdk-%d" % rid
            msg.setdefault("params", {}).setdefault("_meta", {})["progressToken"] = token
            self._progress[token] = on_progress
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            self._send(msg)
            if on_sent:
                on_sent(rid)
            await self._drain()
            return await fut
        finally:
            self._pending.pop(rid, None)
            if token:
                self._progress.pop(token, None)

    def fail(self, rid: Any, exc: BaseException) -> None:
        """Ends the wait for request `rid` with `exc` (a late response is then dropped)."""
        fut = self._pending.get(rid)
        if fut is not None and not fut.done():
            fut.set_exception(exc)

    def notify(self, method: str, params: Optional[Dict[str, Any]] = None) -> None:
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)

    def respond(self, rid: Any, result: Any = None, error: Optional[Dict[str, Any]] = None) -> None:
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
        if error is not None:
            msg["error"] = error
        else:
            msg["result"] = result
        if not self.lost:
            self._send(msg)

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, OSError):
            pass  # the reader sees the end and says why

    # --- receiving ---------------------------------------------------------------------

    async def _read_loop(self) -> None:
        why = None
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                if not line.strip():
                    continue
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue  # not a message (a stray log line, say): skipped
                if isinstance(msg, dict):
                    self._dispatch(msg)
        except (ConnectionError, OSError, ValueError) as e:  # ValueError: a line over LINE_LIMIT
            why = str(e)
        except asyncio.CancelledError:
            why = "the connection was closed"
        self._lose(why)

    def _lose(self, why: Optional[str]) -> None:
        if self.lost:
            return
        self.lost = ConnectionLost(why or "the supervisor closed the connection")
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(self.lost)
        self._on_notification("$lost", {})

    def _dispatch(self, msg: Dict[str, Any]) -> None:
        method = msg.get("method")
        if method is None:
            fut = self._pending.get(msg.get("id"))
            if fut is not None and not fut.done():
                if "error" in msg:
                    fut.set_exception(RpcError(msg.get("error") or {}))
                else:
                    fut.set_result(msg.get("result"))
            return
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        if "id" in msg:
            task = asyncio.ensure_future(self._serve(msg["id"], method, params))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        if method == "notifications/progress":
            cb = self._progress.get(params.get("progressToken"))
            if cb:
                cb(params)
            return
        self._on_notification(method, params)

    async def _serve(self, rid: Any, method: str, params: Dict[str, Any]) -> None:
        if method == "ping":
            self.respond(rid, {})
            return
        try:
            result = await self._on_request(rid, method, params)
        except RpcError as e:
            self.respond(rid, error={"code": e.code, "message": str(e)})
        except Exception as e:  # noqa: BLE001 (the peer must get an answer)
            self.respond(rid, error={"code": -32603, "message": "the SDK failed: %s" % e})
        else:
            if result is not _NO_ANSWER:
                self.respond(rid, result)
        await self._drain()

    async def close(self) -> None:
        try:
            self._writer.close()
        except (ConnectionError, OSError, RuntimeError):
            pass
        await self._closed()
        self._read_task.cancel()
        for t in list(self._tasks):
            t.cancel()
        try:
            await self._read_task
        except asyncio.CancelledError:
            pass
        self._lose("the connection was closed")


    async def _closed(self) -> None:
        """Waits until the writing side has closed and takes the exception it closed with.
        A supervisor that ended first (a bad option) leaves a BrokenPipeError there, which
        asyncio would otherwise print as "Future exception was never retrieved" when the
        future is collected. A peer that reads nothing gets its transport aborted after 5 s."""
        try:
            waiter = asyncio.ensure_future(self._writer.wait_closed())
        except RuntimeError:  # the loop is closing
            return
        # asyncio.wait, not wait_for: cancelling wait_closed() would cancel the transport's
        # own future, which it then fails to set.
        done, _ = await asyncio.wait({waiter}, timeout=5)
        if not done:
            self._writer.transport.abort()
            done, _ = await asyncio.wait({waiter}, timeout=5)
        if done:
            _retrieve(waiter)
        else:
            waiter.add_done_callback(_retrieve)


def _retrieve(fut: "asyncio.Future") -> None:
    if not fut.cancelled():
        fut.exception()


_NO_ANSWER = object()


def no_answer() -> Any:
    """Returned by a request handler for a request that must get no response (withdrawn)."""
    return _NO_ANSWER
