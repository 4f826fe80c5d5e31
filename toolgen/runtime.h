/* The Python runtime of the generated packages, embedded from toolgen/mcptools_init.py and
 * toolgen/mcptools_runtime.py by runtime.S (.incbin). Each is NUL-terminated; the lengths do
 * not count the NUL. */
#pragma once
#include <stddef.h>

extern const char ipb_mcptools_init_py[];
extern const size_t ipb_mcptools_init_py_len;
extern const char ipb_mcptools_runtime_py[];
extern const size_t ipb_mcptools_runtime_py_len;
