"""The exceptions the SDK raises. Every one derives from IpyboxError."""
from __future__ import annotations

import asyncio
import builtins
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .results import ExecutionResult


class IpyboxError(Exception):
    """Base of every error this package raises."""


class SandboxError(IpyboxError):
    """The sandbox could not be started or reached, or the supervisor failed.

    `str(e)` is the supervisor's own explanation when it gave one; `stderr` holds the last
    lines it printed, for a log.
    """

    def __init__(self, message: str, stderr: str = ""):
        super().__init__(message)
        self.stderr = stderr


class ConnectionLost(SandboxError):
    """The supervisor went away (it exited, or the daemon closed the connection).

    The kernel's state is gone with it. Call `start()` again (or leave and re-enter the
    `async with`) for a fresh sandbox.
    """


class OperationError(IpyboxError):
    """A sandbox operation (upload, download, reset, register_mcp_server, or a cell the
    supervisor could not run: bad arguments, no kernel) was refused or failed; the message
    is the supervisor's sentence, e.g. a path outside the allowed directories."""


class ExecutionError(IpyboxError):
    """The cell raised an exception. The kernel and its state are still there.

    Attributes: `ename`, `evalue`, `traceback` (text, ANSI codes removed), `output` (what the
    cell printed before the error) and `result` (the whole ExecutionResult, images included).
    """

    def __init__(self, result: "ExecutionResult"):
        self.result = result
        self.ename = result.ename or "Error"
        self.evalue = result.evalue or ""
        self.traceback = result.traceback or ""
        self.output = result.output_before_error()
        super().__init__(self._message())

    def __reduce__(self):  # picklable (process pools, log handlers): rebuilt from the result
        return (self.__class__, (self.result,))

    def _message(self) -> str:
        if self.result.note and not self.result.ename:
            return self.result.note
        return self.traceback.rstrip("\n") or "%s: %s" % (self.ename, self.evalue)


class ApprovalRejected(ExecutionError):
    """The cell called an MCP tool through `mcptools`, or ran a shell command with
    `approve_shell_cmds=True`, the call was rejected (by the approval callback, by `reject()`,
    or by policy), and the code did not catch `mcptools.ToolRejected` (ename "ToolRejected",
    or "ShellCommandRejected" for a shell command, which did not run)."""


# asyncio.TimeoutError is the built-in one from Python 3.11 on; before, a class of its own
# (what ipybox's CodeExecutor raises, so ported code catches that).
_TIMEOUT_BASES = (IpyboxError, builtins.TimeoutError) + (
    (asyncio.TimeoutError,) if asyncio.TimeoutError is not builtins.TimeoutError else ())


class TimeoutError(*_TIMEOUT_BASES):  # type: ignore[misc]
    """The cell ran past its timeout and was interrupted.

    `restarted` is True when the interrupt did not stop it and the kernel was restarted
    (variables lost); otherwise the kernel's state is kept. `result` holds the output
    produced before the interrupt.
    """

    def __init__(self, result: "ExecutionResult"):
        self.result = result
        self.restarted = result.status == "timeout_restarted"
        super().__init__(result.note or "the cell timed out")

    def __reduce__(self):  # picklable (process pools, log handlers): rebuilt from the result
        return (self.__class__, (self.result,))


class KernelDied(IpyboxError):
    """The kernel process died during the cell (os._exit, a crash, out of memory). A fresh
    kernel has been started for the next call; variables are lost, /app is kept.
    `result` holds the output produced before; the message says how it died."""

    def __init__(self, result: "ExecutionResult"):
        self.result = result
        super().__init__(result.note or "the kernel died")

    def __reduce__(self):  # picklable (process pools, log handlers): rebuilt from the result
        return (self.__class__, (self.result,))


class Cancelled(IpyboxError):
    """The cell was cancelled with `cancel()` (or the task awaiting it was cancelled); the
    kernel was interrupted and keeps its state."""


def raise_for(result: "ExecutionResult") -> None:
    """Raises the exception that matches a finished cell's status, if any."""
    status = result.status
    if status == "ok":
        return
    if status in ("timeout", "timeout_restarted"):
        raise TimeoutError(result)
    if status == "kernel_died":
        raise KernelDied(result)
    if status == "cancelled":
        raise Cancelled(result.note or "the cell was cancelled")
    if status == "failed":
        raise OperationError(result.note or result.text or "the cell could not be run")
    if result.ename in ("ToolRejected", "ShellCommandRejected"):
        raise ApprovalRejected(result)
    raise ExecutionError(result)

