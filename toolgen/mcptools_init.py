"""Python APIs of the MCP servers registered with this ipybox session.

Each server is a package, mcptools.<server>, with one module per tool::

    from mcptools.everything import get_sum
    get_sum.run(a=1, b=2)                      # or get_sum.run(get_sum.Params(a=1, b=2))
    await get_sum.run_async(a=1, b=2)

run() returns the tool's structured content (a Result when the tool declares an output
schema), else the text of its answer (str), else, when the answer has more than text, its
blocks in order: a list of str (text), Image, Audio (bytes and a MIME type), Resource and
ResourceLink. run_full() (and run_full_async()) returns all of the answer as a ToolResult.

Every call is checked by the application first. Failures raise ToolCallError or one of its
subclasses: ToolRejected (the application refused the call), ToolError (the tool answered
with an error), ToolTimeout (the call took too long; also a TimeoutError).
"""
from mcptools._runtime import (Audio, Image, Resource, ResourceLink, ToolCallError, ToolError, ToolRejected,
                               ToolResult, ToolTimeout)

__all__ = ["ToolCallError", "ToolRejected", "ToolError", "ToolTimeout", "ToolResult", "Image", "Audio", "Resource",
           "ResourceLink"]
