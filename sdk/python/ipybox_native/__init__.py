"""ipybox-native's Python SDK: run model-written code in a sandboxed, stateful IPython
kernel, with tool calls that your application approves. Standard library only.

    import asyncio
    from ipybox_native import Sandbox

    async def main():
        async with Sandbox() as sb:
            print((await sb.execute("1 + 1")).text)

    asyncio.run(main())

SyncSandbox offers the same without asyncio. See README.md beside this package.
"""

__version__ = "0.1.0"

from .errors import (ApprovalRejected, Cancelled, ConnectionLost, ExecutionError, IpyboxError,  # noqa: E402
                     KernelDied, OperationError, SandboxError, TimeoutError)
from .results import ApprovalRequest, ExecutionResult, Image, OutputChunk  # noqa: E402
from .sandbox import Sandbox  # noqa: E402
from .sync import SyncSandbox  # noqa: E402
# ipybox's names, for code ported from it (compat.py): CodeExecutor follows ipybox's shapes.
from .compat import CodeExecutionChunk, CodeExecutionResult, CodeExecutor, generate_mcp_sources  # noqa: E402

CodeExecutionError = ExecutionError

__all__ = [
    "Sandbox", "SyncSandbox", "CodeExecutor",
    "ExecutionResult", "OutputChunk", "Image", "ApprovalRequest",
    "IpyboxError", "SandboxError", "ConnectionLost", "OperationError", "ExecutionError", "ApprovalRejected",
    "TimeoutError", "KernelDied", "Cancelled",
    "CodeExecutionResult", "CodeExecutionChunk", "CodeExecutionError", "generate_mcp_sources",
]
