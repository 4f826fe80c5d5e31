"""The asynchronous sandbox: one stateful IPython kernel in an ipybox-native sandbox, driven
over MCP, either through `ipybox mcp --embedded` started as a subprocess or through a
running ipyboxd's socket."""
from __future__ import annotations

import asyncio
import collections
import inspect
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Union

from . import __version__
from .dconnect import NotAccepting, open_unix
from .errors import ConnectionLost, OperationError, SandboxError, raise_for
from .locate import daemon_sockets, find_binary
from .options import allowed_dirs, to_args
from .results import ApprovalRequest, ExecutionResult, OutputChunk, _Done
from .rpc import LINE_LIMIT, Connection, RpcError, no_answer

log = logging.getLogger("ipybox_native")

PROTOCOL_VERSION = "2025-06-18"
SESSION_GONE = -32000  # ipyboxd: this connection's session was closed or its worker ended
TRANSPORTS = ("auto", "embedded", "daemon")

# An approval callback gets the request and returns True (accept) or False (reject), or
# decides itself with req.accept() / req.reject() and returns None. It may be a coroutine
# function; a plain function runs in a worker thread, so it may block (ask a person).
ApprovalCallback = Callable[[ApprovalRequest], Any]
StreamItem = Union[OutputChunk, ApprovalRequest, ExecutionResult]

_END = object()


class _Call:
    """The tool call in flight (at most one: calls are serialised)."""

    def __init__(self, queue: Optional[asyncio.Queue]):
        self.queue = queue
        self.rid: Any = None


class Sandbox:
    """A sandboxed, stateful IPython kernel.

        async with Sandbox(allowed_domain=["pypi.org"]) as sb:
            r = await sb.execute("1 + 1")
            print(r.text)

    Sandbox options are the CLI's, with `_` for `-`: allowed_dir, allowed_domain, resolve,
    max_connections, container_env_var (a dict or "K=V" strings), container_env_file,
    container_bind (a dict {host: rel} or "HOST:REL" strings), rootfs, workspace, python,
    tmp_size, shm_size, memory, max_processes, cpu_weight, max_output_chars, mcp_config,
    approve_tools, mcp_timeout, sandbox_mcp_servers, approve_shell_cmds, require_shell_escape,
    zygote, standby, verbose. Repeatable ones take a string or a list; zygote and standby take
    True or False (--zygote/--no-zygote, --standby/--no-standby; None: ipybox's default).
    approve_shell_cmds=True (ipybox's name; --approve-shell) puts every shell command of the
    kernel (!cmd, %%bash, ...) to approval as an ApprovalRequest with server_name "ipybox",
    tool_name "shell" or "shell_magic" and tool_args {"cmd": ...}; require_shell_escape=True
    also refuses subprocess, os.system & co. in Python.

    transport: "auto" (a running ipyboxd if one answers at its usual sockets, else an
    embedded supervisor, as `ipybox mcp` chooses), "embedded" or "daemon". socket: the
    daemon's socket (implies the daemon). session: a name for the daemon session (it then
    outlives this object; None: a private session closed with the connection). ipybox: the
    `ipybox` binary (default: $IPYBOX_BIN, the checkout's build, PATH, /usr/local/bin).
    approval: the callback for tool-call approvals (see ApprovalCallback); without one,
    `stream()` yields ApprovalRequest items and `execute()` rejects. start_timeout: seconds
    to wait for the kernel. cwd and env: for the supervisor process (env: the variables
    `${VAR}` in MCP server params are filled from; the kernel never sees them).

    Calls on one sandbox run one at a time, in the order they were made.
    """

    def __init__(self, *, transport: str = "auto", socket: Optional[str] = None, session: Optional[str] = None,
                 ipybox: Optional[str] = None, approval: Optional[ApprovalCallback] = None,
                 start_timeout: float = 120.0, cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                 **options: Any):
        if transport not in TRANSPORTS:
            raise ValueError("transport must be one of %s, not %r" % (", ".join(TRANSPORTS), transport))
        if transport == "embedded" and socket:
            raise ValueError("socket names a daemon; it cannot go with transport='embedded'")
        if session is not None and transport == "embedded":
            raise ValueError("session names a daemon session; it cannot go with transport='embedded'")
        if env is not None and (transport == "daemon" or socket):
            raise ValueError("env is for an embedded supervisor (ipyboxd has its own environment); with a daemon, "
                             "put ${VAR} values in the daemon's environment")
        self._args = to_args(options)  # unknown or malformed options fail here, named
        self._allowed_dirs = allowed_dirs(options)
        self._transport = transport
        self._socket = socket
        self._session = session
        self._ipybox = ipybox
        self._approval = approval
        self._start_timeout = start_timeout
        self._cwd = os.path.abspath(cwd) if cwd else None
        # Added to ours (PATH, HOME, ...), for the supervisor and the MCP servers it starts.
        self._env = {**os.environ, **env} if env is not None else None
        self._conn: Optional[Connection] = None
        self._proc: Optional[asyncio.subprocess.Process] = None
        self._stderr: collections.deque = collections.deque(maxlen=200)
        self._stderr_thread: Optional[threading.Thread] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._lock: Optional[asyncio.Lock] = None
        self._start_lock: Optional[asyncio.Lock] = None
        self._start_lock_loop: Optional[asyncio.AbstractEventLoop] = None
        self._withdrawn: "collections.deque" = collections.deque(maxlen=64)
        self._current: Optional[_Call] = None
        self._approvals: Dict[Any, ApprovalRequest] = {}
        self._scratch: Optional[str] = None
        #: "embedded" or "daemon" once started.
        self.transport: Optional[str] = None
        #: The daemon's socket, with the daemon transport.
        self.socket_path: Optional[str] = None
        #: The daemon's name for the session, with the daemon transport.
        self.session_name: Optional[str] = None
        #: The host directory behind /app, when the supervisor said (embedded).
        self.workspace: Optional[str] = None
        # Set once the stderr reader has seen the supervisor's ready line (or stderr's end).
        self._ready_line = threading.Event()
        #: What the server said of itself in initialize.
        self.server_info: Dict[str, Any] = {}

    # --- life ----------------------------------------------------------------------------

    async def __aenter__(self) -> "Sandbox":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def pid(self) -> Optional[int]:
        """The supervisor's process id (embedded transport), else None."""
        return self._proc.pid if self._proc is not None else None

    @property
    def started(self) -> bool:
        return self._conn is not None and self._conn.lost is None

    async def start(self) -> "Sandbox":
        """Starts the sandbox and its kernel (or reopens one whose connection was lost).
        Raises SandboxError with the supervisor's explanation when it cannot start."""
        async with self._start_guard():
            if not self.started:
                await self._start()
        return self

    def _start_guard(self) -> asyncio.Lock:
        """The lock that keeps start() and close() apart (made on the running loop: a
        SyncSandbox may get a new loop after close())."""
        loop = asyncio.get_running_loop()
        if self._start_lock is None or self._start_lock_loop is not loop:
            self._start_lock, self._start_lock_loop = asyncio.Lock(), loop
        return self._start_lock

    async def _start(self) -> None:
        await self._teardown()
        self._loop = asyncio.get_running_loop()
        self._lock = asyncio.Lock()
        try:
            if self._transport == "daemon" or self._socket:
                await self._connect_daemon(required=True)
            elif self._transport == "auto" and self._env is None and await self._connect_daemon(required=False):
                pass
            else:
                await self._spawn()
            await asyncio.wait_for(self._initialize(), self._start_timeout)
            if self.transport == "embedded":
                await self._await_ready_line(5)
        except asyncio.TimeoutError:
            tail = self.stderr_tail()
            await self._teardown()
            raise SandboxError("the sandbox did not start within %g s" % self._start_timeout, tail) from None
        except ConnectionLost as e:
            err = await self._start_failure(e)
            await self._teardown()
            raise err from None
        except BaseException:
            await self._teardown()
            raise

    async def close(self, end_session: bool = False) -> None:
        """Stops the sandbox: the kernel and everything it started. A running cell is
        cancelled. A daemon session named with `session=` stays for a later Sandbox with
        the same name unless end_session is true (else ipyboxd closes it when idle)."""
        async with self._start_guard():
            if end_session and self._session is not None and self.started and self._conn is not None:
                self._cancel_now()
                try:
                    await asyncio.wait_for(self._conn.request("ipybox/closeSession", {"name": self._session}), 60)
                except (RpcError, ConnectionLost, asyncio.TimeoutError) as e:
                    log.warning("closing session %s: %s", self._session, e)
            await self._teardown()

    async def _teardown(self) -> None:
        self._cancel_now()  # a running cell would keep the supervisor busy after its input ends
        conn, proc = self._conn, self._proc
        self._conn = self._proc = None
        if conn is not None:
            await conn.close()
        if proc is not None:
            # The supervisor ends when its input does; SIGTERM if it takes long, then SIGKILL.
            for sig, wait in ((None, 5), ("terminate", 20), ("kill", None)):
                if sig:
                    log.warning("ipybox mcp (pid %d) did not stop; sending it %s", proc.pid, sig.upper())
                    try:
                        getattr(proc, sig)()
                    except ProcessLookupError:
                        pass
                try:
                    await asyncio.wait_for(proc.wait(), wait)
                    break
                except asyncio.TimeoutError:
                    pass
        if self._stderr_thread is not None:
            await self._join_stderr(5)
            self._stderr_thread = None
        for req in list(self._approvals.values()):
            req._withdraw()
        self._approvals.clear()
        self._stderr.clear()
        self.transport = self.socket_path = self.session_name = None
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    async def _spawn(self) -> None:
        path, tried = find_binary(self._ipybox)
        if path is None:
            raise SandboxError("cannot find the ipybox binary (tried %s): build it with `make` in the checkout, "
                               "install it with `make install`, or pass ipybox=PATH or set IPYBOX_BIN"
                               % ", ".join(tried))
        # stderr is read by a thread of its own, so that it is drained even while no event
        # loop runs (SyncSandbox runs one only during calls).
        err_r, err_w = os.pipe()
        try:
            # A session of its own: a Ctrl-C meant for this program does not stop the sandbox;
            # the supervisor ends when its stdin closes (with us, at the latest).
            self._proc = await asyncio.create_subprocess_exec(
                path, "mcp", "--embedded", *self._args, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=err_w, limit=LINE_LIMIT,
                cwd=self._cwd, env=self._env, start_new_session=True)
        except OSError as e:
            os.close(err_r)
            raise SandboxError("cannot run %s: %s" % (path, e.strerror or e)) from None
        finally:
            os.close(err_w)
        self._stderr.clear()
        self._ready_line.clear()
        self._stderr_thread = threading.Thread(target=self._read_stderr, args=(err_r,), name="ipybox-sdk-stderr",
                                               daemon=True)
        self._stderr_thread.start()
        assert self._proc.stdout is not None and self._proc.stdin is not None
        self._conn = Connection(self._proc.stdout, self._proc.stdin, self._on_request, self._on_notification)
        self.transport = "embedded"

    def _read_stderr(self, fd: int) -> None:
        try:
            with open(fd, "rb") as f:
                for line in f:
                    text = line.decode("utf-8", "replace").rstrip("\n")
                    self._stderr.append(text)
                    log.debug("ipybox: %s", text)
                    if text.startswith("ipybox mcp: ready") and "/app = " in text:
                        self.workspace = text.split("/app = ", 1)[1].strip()
                        self._ready_line.set()
        finally:
            self._ready_line.set()

    async def _await_ready_line(self, timeout: float) -> None:
        """The supervisor writes its ready line (with the workspace) to stderr before it
        answers initialize, but this thread may not have read it yet: wait for it, briefly."""
        deadline = time.monotonic() + timeout
        while not self._ready_line.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    async def _join_stderr(self, timeout: float) -> None:
        """Waits (up to timeout) until the supervisor's stderr has ended and been read."""
        t = self._stderr_thread
        deadline = time.monotonic() + timeout
        while t is not None and t.is_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    def stderr_tail(self, lines: int = 20) -> str:
        """The supervisor's last lines on stderr (embedded transport)."""
        return "\n".join(list(self._stderr)[-lines:])

    async def _connect_daemon(self, required: bool) -> bool:
        paths = [self._socket] if self._socket else daemon_sockets()
        tried = []
        for path in paths:
            try:
                reader, writer = await open_unix(path, LINE_LIMIT)
            except NotAccepting as e:
                # A daemon is there but stuck: as one that does not answer createSession.
                raise SandboxError(e.strerror) from None
            except OSError as e:
                tried.append("%s (%s)" % (path, "no socket" if isinstance(e, FileNotFoundError) else e.strerror or e))
                continue
            self._conn = Connection(reader, writer, self._on_request, self._on_notification)
            self.transport = "daemon"
            self.socket_path = path
            params: Dict[str, Any] = {"args": self._args, "cwd": self._cwd or os.getcwd()}
            if self._session is not None:
                params["name"] = self._session
            try:
                try:
                    res = await asyncio.wait_for(self._conn.request("ipybox/createSession", params),
                                                 self._start_timeout)
                except RpcError as e:
                    if self._session is None or "exists" not in str(e):
                        raise
                    # A named session from before (this object's or another's): join it. Its
                    # options are those it was made with.
                    res = await self._conn.request("ipybox/attachSession", {"name": self._session})
            except RpcError as e:
                raise SandboxError("ipyboxd at %s could not start a session: %s" % (path, e)) from None
            self.session_name = (res or {}).get("name")
            return True
        if required:
            raise SandboxError("cannot reach ipyboxd at %s; start it with `ipyboxd --user`, or use "
                               "transport='embedded'" % (", ".join(tried) or "its usual sockets ($XDG_RUNTIME_DIR "
                                                                           "is not set)"))
        return False

    async def _initialize(self) -> None:
        assert self._conn is not None
        res = await self._conn.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "ipybox-native-python", "version": __version__},
        })
        self.server_info = (res or {}).get("serverInfo") or {}
        self._conn.notify("notifications/initialized")

    async def _start_failure(self, e: ConnectionLost) -> SandboxError:
        """The supervisor ended before it was ready: its own sentence from stderr."""
        if self.transport == "daemon":
            return SandboxError("ipyboxd at %s closed the connection before the session started (%s); see the "
                                "daemon's log" % (self.socket_path, e))
        await self._wait_exit(10)
        status = self._proc.returncode if self._proc else None
        lines = [ln for ln in self._stderr if ln.strip()]
        # `ipybox mcp: cannot start: ...` or `ipybox: error: ...`; else its last line.
        said = [ln for ln in lines if ": cannot start: " in ln or ": error: " in ln] or lines[-1:]
        sentence = None
        if said:
            sentence = said[0]
            for prefix in ("ipybox mcp: ", "ipybox: error: "):
                if sentence.startswith(prefix):
                    sentence = sentence[len(prefix):]
        if sentence is None:
            sentence = str(e)
        if status is not None and status != 0:
            sentence += " (ipybox mcp exited with status %d)" % status
        return SandboxError(sentence, "\n".join(lines[-20:]))

    async def _wait_exit(self, timeout: float) -> None:
        if self._proc is not None:
            try:
                await asyncio.wait_for(self._proc.wait(), timeout)
            except asyncio.TimeoutError:
                pass
        await self._join_stderr(2)

    async def _lost(self, e: ConnectionLost) -> ConnectionLost:
        """A ConnectionLost that says what happened to the supervisor."""
        if self.transport == "daemon" or self._proc is None:
            return ConnectionLost("ipyboxd closed the connection: the session is gone (%s); call start() for a "
                                  "new one" % e)
        await self._wait_exit(5)
        rc = self._proc.returncode
        how = ("it was killed by signal %d" % -rc if rc is not None and rc < 0 else
               "it exited with status %d" % rc if rc is not None else "it closed its output")
        tail = self.stderr_tail(5)
        return ConnectionLost("the sandbox's supervisor (ipybox mcp, pid %d) is gone: %s%s; the kernel's state is "
                              "lost; call start() or reset() for a new sandbox"
                              % (self._proc.pid, how, ("; its last words: " + tail) if tail else ""), tail)

    # --- what the server asks of us ----------------------------------------------------

    async def _on_request(self, rid: Any, method: str, params: Dict[str, Any]) -> Any:
        if method == "elicitation/create":
            return await self._on_elicitation(rid, params)
        raise RpcError({"code": -32601, "message": "the ipybox SDK does not take %s" % method})

    async def _on_elicitation(self, rid: Any, params: Dict[str, Any]) -> Any:
        if rid in self._withdrawn:  # withdrawn before we got to it
            self._withdrawn.remove(rid)
            return no_answer()
        call = ((params.get("_meta") or {}).get("ipybox/toolCall"))
        if not isinstance(call, dict):
            return {"action": "decline"}  # not a tool-call approval: nothing else is asked of us
        assert self._loop is not None
        args = call.get("arguments")
        req = ApprovalRequest(self._loop, str(call.get("server", "")), str(call.get("tool", "")),
                              args if isinstance(args, dict) else {}, str(params.get("message", "")))
        self._approvals[rid] = req
        self._approval_created(req)
        try:
            current = self._current
            if self._approval is not None:
                asyncio.ensure_future(self._ask_callback(req))
            elif current is not None and current.queue is not None:
                current.queue.put_nowait(req)
            else:
                log.warning("rejected a call of %s/%s from the sandbox: no approval callback was given (pass "
                            "approval=... or use stream())", req.server_name, req.tool_name)
                req.reject()
            decision = await req._wait()
        finally:
            self._approvals.pop(rid, None)
        if decision is None:
            return no_answer()  # withdrawn: the supervisor expects no answer
        return {"action": "accept", "content": {}} if decision else {"action": "decline"}

    def _approval_created(self, req: ApprovalRequest) -> None:
        """Called for each new approval request (CodeExecutor starts approval_timeout here)."""

    async def _ask_callback(self, req: ApprovalRequest) -> None:
        cb = self._approval
        assert cb is not None
        try:
            if inspect.iscoroutinefunction(cb):
                answer = await cb(req)
            else:
                answer = await asyncio.get_running_loop().run_in_executor(None, cb, req)
                if inspect.isawaitable(answer):
                    answer = await answer
        except Exception:  # noqa: BLE001 (a failing callback must still decide)
            log.exception("the approval callback failed; rejecting %s/%s", req.server_name, req.tool_name)
            answer = False
        if isinstance(answer, bool):
            req._decide(answer)
        elif not req.decided:
            log.warning("the approval callback neither returned True/False nor decided; rejecting %s/%s",
                        req.server_name, req.tool_name)
            req.reject()

    def _on_notification(self, method: str, params: Dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            rid = params.get("requestId")
            req = self._approvals.get(rid)
            if req is not None:
                req._withdraw()
            elif isinstance(rid, (str, int)):
                self._withdrawn.append(rid)  # its request may still be on its way to _on_elicitation
        elif method == "$lost":
            for req in list(self._approvals.values()):
                req._withdraw()
            if self._current is not None and self._current.queue is not None:
                self._current.queue.put_nowait(_END)

    # --- calls ---------------------------------------------------------------------------

    async def _require(self) -> Connection:
        if self._conn is None:
            raise SandboxError("the sandbox is not started: use `async with Sandbox(...)` or await start()")
        if self._conn.lost is not None:
            raise await self._lost(self._conn.lost)
        return self._conn

    async def _call_tool(self, name: str, arguments: Dict[str, Any]) -> Dict[str, Any]:
        conn = await self._require()
        assert self._lock is not None
        async with self._lock:
            call = _Call(None)
            self._current = call
            try:
                return await self._request_call(conn, call, name, arguments)
            finally:
                self._current = None

    async def _request_call(self, conn: Connection, call: _Call, name: str, arguments: Dict[str, Any],
                            on_progress: Optional[Callable[[Dict[str, Any]], None]] = None) -> Dict[str, Any]:
        def sent(rid: Any) -> None:
            call.rid = rid

        try:
            res = await conn.request("tools/call", {"name": name, "arguments": arguments}, on_progress=on_progress,
                                     on_sent=sent)
        except (asyncio.CancelledError, KeyboardInterrupt):
            self._send_cancel(call, "the caller was cancelled")
            raise
        except ConnectionLost as e:
            raise await self._lost(e) from None
        except RpcError as e:
            if e.code == SESSION_GONE and self.transport == "daemon":
                conn._lose("ipyboxd: %s" % e)  # the connection is of no use any more
                raise ConnectionLost("ipyboxd closed the session: %s; call start() or reset() for a new one" % e) \
                    from None
            raise OperationError("%s: %s" % (name, e)) from None
        return res if isinstance(res, dict) else {}

    def _send_cancel(self, call: _Call, reason: str) -> None:
        if call.rid is None or self._conn is None or self._conn.lost is not None:
            return
        try:
            self._conn.notify("notifications/cancelled", {"requestId": call.rid, "reason": reason})
        except ConnectionLost:
            pass

    def _cancel_now(self) -> None:
        call = self._current
        if call is None or call.rid is None or self._conn is None:
            return
        from .errors import Cancelled

        self._send_cancel(call, "cancelled by the application")
        self._conn.fail(call.rid, Cancelled("the cell was cancelled; the kernel was interrupted and keeps its state"))

    def cancel(self) -> _Done:
        """Interrupts the running cell, if any: its execute() or stream() raises Cancelled
        and the kernel keeps its state. Callable from any thread; awaiting it is optional."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                self._cancel_now()
            else:
                loop.call_soon_threadsafe(self._cancel_now)
        return _Done()

    @staticmethod
    def _cell_args(code: str, timeout: Optional[float], max_output_chars: Optional[int]) -> Dict[str, Any]:
        if not isinstance(code, str):
            raise TypeError("code must be a string, not %s" % type(code).__name__)
        args: Dict[str, Any] = {"code": code}
        if timeout is not None:
            args["timeout"] = timeout
        if max_output_chars is not None:
            args["max_output_chars"] = max_output_chars
        return args

    async def execute(self, code: str, timeout: Optional[float] = None, *, check: bool = True,
                      max_output_chars: Optional[int] = None) -> ExecutionResult:
        """Runs code in the kernel and returns its ExecutionResult (text and images).

        timeout: seconds (default: the supervisor's, 120); time waiting for a tool-call
        approval is not counted. With check (the default) a failed cell raises:
        ExecutionError (ApprovalRejected for an uncaught mcptools.ToolRejected),
        TimeoutError, KernelDied or Cancelled. With check=False the result comes back
        either way and `result.error` is that exception.
        """
        res = await self._call_tool("execute_ipython_cell", self._cell_args(code, timeout, max_output_chars))
        result = ExecutionResult.from_call_result(res)
        if check:
            raise_for(result)
        return result

    async def stream(self, code: str, timeout: Optional[float] = None, *, check: bool = True,
                     max_output_chars: Optional[int] = None) -> AsyncIterator[StreamItem]:
        """Runs code and yields OutputChunk items as output arrives, ApprovalRequest items
        for tool calls (when no approval callback was given: accept() or reject() each),
        and last the ExecutionResult. With check, a failed cell raises as execute() does,
        after its output. Consume it to the end or close it (`await agen.aclose()`): an
        abandoned stream cancels its cell when it is closed."""
        args = self._cell_args(code, timeout, max_output_chars)
        conn = await self._require()
        assert self._lock is not None
        queue: asyncio.Queue = asyncio.Queue()
        async with self._lock:
            call = _Call(queue)
            self._current = call

            def progress(p: Dict[str, Any]) -> None:
                meta = p.get("_meta")
                if isinstance(meta, dict) and "ipybox/heartbeat" in meta:
                    return  # "still running, N s": not the cell's output
                msg = p.get("message")
                if isinstance(msg, str) and msg:
                    queue.put_nowait(OutputChunk(msg))

            task = asyncio.ensure_future(self._request_call(conn, call, "execute_ipython_cell", args, progress))
            task.add_done_callback(lambda _t: queue.put_nowait(_END))
            try:
                while True:
                    item = await queue.get()
                    if item is _END:
                        if task.done():
                            break
                        continue
                    yield item
                result = ExecutionResult.from_call_result(task.result())
                if check:
                    raise_for(result)
                yield result
            finally:
                if not task.done():  # closed early: the task's cancellation cancels the cell
                    task.cancel()
                    try:
                        await task
                    except BaseException:  # noqa: BLE001 (only its end matters here)
                        pass
                self._current = None

    async def reset(self) -> None:
        """A fresh kernel: variables, imports and definitions are gone; /app and packages
        installed with pip stay. After a lost connection, starts a new sandbox instead."""
        if self._conn is not None and self._conn.lost is not None:
            await self.start()
            return
        self._check(await self._call_tool("reset", {}), "reset")

    async def upload(self, local_path: Union[str, os.PathLike], relpath: str) -> None:
        """Copies a host file (inside an allowed directory) to /app/relpath."""
        self._check(await self._call_tool("upload_file", {
            "relpath": relpath, "local_path": os.path.abspath(os.fspath(local_path))}), "upload")

    async def download(self, relpath: str, local_path: Union[str, os.PathLike]) -> None:
        """Copies /app/relpath to a host path inside an allowed directory (parents created)."""
        self._check(await self._call_tool("download_file", {
            "relpath": relpath, "local_path": os.path.abspath(os.fspath(local_path))}), "download")

    async def upload_bytes(self, data: bytes, relpath: str) -> None:
        """Writes data to /app/relpath (through a private file in an allowed directory)."""
        await self._require()
        path = self._scratch_file()
        try:
            with open(path, "wb") as f:
                f.write(data)
            await self.upload(path, relpath)
        finally:
            _unlink(path)

    async def download_bytes(self, relpath: str) -> bytes:
        """The contents of /app/relpath."""
        await self._require()
        path = self._scratch_file()
        try:
            await self.download(relpath, path)
            with open(path, "rb") as f:
                return f.read()
        finally:
            _unlink(path)

    async def register_mcp_server(self, name: str, params: Dict[str, Any]) -> List[str]:
        """Registers an MCP server on the host (stdio {command, args, env, cwd} or HTTP
        {url, headers, type}) and returns the tool modules generated for the kernel under
        mcptools.<name>. Every call from the kernel then waits for approval."""
        res = self._check(await self._call_tool("register_mcp_server", {"server_name": name, "server_params": params}),
                          "register_mcp_server")
        blocks = [b.get("text", "") for b in res.get("content") or [] if b.get("type") == "text"]
        try:
            modules = json.loads(blocks[0]) if blocks else []
        except ValueError:
            modules = []
        return [m for m in modules if isinstance(m, str)]

    @staticmethod
    def _check(res: Dict[str, Any], what: str) -> Dict[str, Any]:
        if res.get("isError"):
            text = "\n".join(b.get("text", "") for b in res.get("content") or [] if b.get("type") == "text")
            raise OperationError(text or "%s failed" % what)
        return res

    def _scratch_file(self) -> str:
        if self._scratch is None or not os.path.isdir(self._scratch):
            base = next((d for d in self._allowed_dirs if os.path.isdir(d) and os.access(d, os.W_OK)), None)
            if base is None:
                raise OperationError("no writable allowed directory for a temporary file (allowed: %s)"
                                     % ", ".join(self._allowed_dirs))
            self._scratch = tempfile.mkdtemp(prefix="ipybox-sdk-", dir=base)
        fd, path = tempfile.mkstemp(dir=self._scratch)
        os.close(fd)
        return path


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass

