"""A blocking wrapper around Sandbox: the same calls, each running the sandbox's private
event loop in the calling thread until it is done (no thread hand-off on the way, so a
call costs what the async one does)."""
from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Coroutine, Dict, Iterator, List, Optional, TypeVar, Union

from .results import ExecutionResult, _Done
from .sandbox import Sandbox, StreamItem

T = TypeVar("T")


class SyncSandbox:
    """Sandbox for code that does not use asyncio. Same arguments and methods, without
    `await`:

        with SyncSandbox() as sb:
            print(sb.execute("1 + 1").text)

    Calls may come from several threads; they run one at a time (a stream holds the sandbox
    until it is consumed or closed). Ctrl-C while a cell runs interrupts the cell (the
    kernel keeps its state) and raises KeyboardInterrupt. cancel() may be called from any
    thread. Inside a running event loop (a notebook) calls run on a helper thread instead.
    """

    def __init__(self, **kwargs: Any):
        self._sandbox = Sandbox(**kwargs)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._lock = threading.RLock()
        self._stream_thread: Optional[int] = None  # the thread whose stream is open

    def __enter__(self) -> "SyncSandbox":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        # Read-only facts: transport, socket_path, session_name, workspace, server_info, started, pid.
        if name in ("transport", "socket_path", "session_name", "workspace", "server_info", "started", "pid"):
            return getattr(self._sandbox, name)
        raise AttributeError(name)

    def _run(self, coro: Coroutine[Any, Any, T], in_stream: bool = False) -> T:
        if not in_stream and self._stream_thread == threading.get_ident():
            coro.close()
            raise RuntimeError("a stream of this sandbox is open in this thread: consume it or close it "
                               "(it.close()) before the next call")
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return self._run_here(self._loop, coro)
            return self._run_on_helper(self._loop, coro)

    def _run_here(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
        task = loop.create_task(coro)
        try:
            return loop.run_until_complete(task)
        except KeyboardInterrupt:
            # Interrupt the cell, let the call end, then pass the interrupt on.
            self._sandbox._cancel_now()
            if not task.done():
                task.cancel()
                try:
                    loop.run_until_complete(task)
                except BaseException:  # noqa: BLE001 (the interrupt is what we raise)
                    pass
            raise

    def _run_on_helper(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
        box: Dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = loop.run_until_complete(coro)
            except BaseException as e:  # noqa: BLE001 (handed to the caller)
                box["error"] = e

        t = threading.Thread(target=target, name="ipybox-sdk-call", daemon=True)
        t.start()
        try:
            t.join()
        except KeyboardInterrupt:
            self._sandbox.cancel()
            t.join()
            raise
        if "error" in box:
            raise box["error"]
        return box["value"]

    def start(self) -> "SyncSandbox":
        try:
            self._run(self._sandbox.start())
        except BaseException:
            self.close()  # `with` does not call __exit__ when __enter__ fails: leave nothing open
            raise
        return self

    def close(self, end_session: bool = False) -> None:
        with self._lock:
            loop = self._loop
            if loop is None:
                return
            try:
                self._run(self._sandbox.close(end_session))
                self._run(loop.shutdown_asyncgens())
                self._run(loop.shutdown_default_executor())
            finally:
                self._loop = None
                loop.close()

    def execute(self, code: str, timeout: Optional[float] = None, *, check: bool = True,
                max_output_chars: Optional[int] = None) -> ExecutionResult:
        return self._run(self._sandbox.execute(code, timeout, check=check, max_output_chars=max_output_chars))

    def stream(self, code: str, timeout: Optional[float] = None, *, check: bool = True,
               max_output_chars: Optional[int] = None) -> Iterator[StreamItem]:
        with self._lock:  # held until the stream ends: other threads wait instead of deadlocking
            agen = self._sandbox.stream(code, timeout, check=check, max_output_chars=max_output_chars)
            self._stream_thread = threading.get_ident()
            try:
                while True:
                    try:
                        item = self._run(agen.__anext__(), in_stream=True)
                    except StopAsyncIteration:
                        return
                    yield item
            finally:
                self._stream_thread = None
                if self._loop is not None:
                    self._run(agen.aclose(), in_stream=True)

    def cancel(self) -> _Done:
        return self._sandbox.cancel()

    def reset(self) -> None:
        self._run(self._sandbox.reset())

    def upload(self, local_path: Union[str, os.PathLike], relpath: str) -> None:
        self._run(self._sandbox.upload(local_path, relpath))

    def download(self, relpath: str, local_path: Union[str, os.PathLike]) -> None:
        self._run(self._sandbox.download(relpath, local_path))

    def upload_bytes(self, data: bytes, relpath: str) -> None:
        self._run(self._sandbox.upload_bytes(data, relpath))

    def download_bytes(self, relpath: str) -> bytes:
        return self._run(self._sandbox.download_bytes(relpath))

    def register_mcp_server(self, name: str, params: Dict[str, Any]) -> List[str]:
        return self._run(self._sandbox.register_mcp_server(name, params))

    def stderr_tail(self, lines: int = 20) -> str:
        return self._sandbox.stderr_tail(lines)
