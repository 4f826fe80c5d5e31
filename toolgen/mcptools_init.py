"""Python APIs of the MCP servers registered with this ipybox session.

Each server is a package, mcptools.<server>, with one module per tool::

    from mcptools.everything import get_sum
    get_sum.run(a=1, b=2)                      # or get_sum.run(get_sum.Params(a=1, b=2))
    await get_sum.run_async(a=1, b=2)

Every call is checked by the application first. Failures raise ToolCallError or one of its
subclasses: ToolRejected (the application refused the call), ToolError (the tool answered
with an error), ToolTimeout (the call took too long; also a TimeoutError).
"""
from mcptools._runtime import ToolCallError, ToolError, ToolRejected, ToolTimeout

__all__ = ["ToolCallError", "ToolRejected", "ToolError", "ToolTimeout"]
