/* The Python runtime as data (runtime.h). Paths are relative to the project root, where make
 * runs; the Makefile makes this object depend on the two .py files. */
#include "embed.h"

EMBED(ipb_mcptools_init_py, "toolgen/mcptools_init.py")
EMBED(ipb_mcptools_runtime_py, "toolgen/mcptools_runtime.py")

    .section .note.GNU-stack, "", %progbits
