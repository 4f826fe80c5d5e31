/* What of a dead kernel's last stderr is worth quoting in the note the model gets. */
#pragma once
#include <stddef.h>

/* Copies to out (NUL-terminated, at most size bytes) the last max_lines lines of tail[0..len)
 * that may say why a kernel died: a traceback, an error, "Killed", a signal. Known noise of a
 * kernel's start is left out: ipykernel's "debugpy_stream undefined" warning, pydevd's
 * "Debugger warning" lines, and Python warnings of the Deprecation/PendingDeprecation/Future
 * kinds, or of any kind from ipykernel, traitlets, jupyter_client, jupyter_core, zmq, debugpy,
 * tornado and IPython (with the source line Python prints under each). Empty lines are
 * dropped. Returns the length written (0: nothing worth quoting). */
size_t ipb_stderr_relevant(const char *tail, size_t len, int max_lines, char *out, size_t size);
