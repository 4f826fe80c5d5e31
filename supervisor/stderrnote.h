/* What of a dead kernel's last stderr is worth quoting in the note the model gets. */
#pragma once
#include <stddef.h>

/* Copies to out (NUL-terminated, at most size bytes) the last max_lines lines of tail[0..len)
 * that may say why a kernel died: a traceback, an error, "Killed", a signal. Known noise of a
 * kernel's start is left out: ipykernel's "debugpy_stream undefined" warning, pydevd's
 * "Debugger warning" lines, and Python warnings of the Deprecation/PendingDeprecation/Future
 * kinds, or of any kind from ipykernel, traitlets, jupyter_client, jupyter_core, zmq, debugpy,
 * tornado and IPython (with the source line Python prints under each). Empty lines are
 * dropped. A NUL, and a byte that starts no valid UTF-8 character, become '?' (the text goes
 * into JSON). Returns the length written (0: nothing worth quoting). */
size_t ipb_stderr_relevant(const char *tail, size_t len, int max_lines, char *out, size_t size);

/* The mark at the start of a line that a kernel writes on stderr while it starts, to tell the
 * user something about that start (supervisor/kernel_launch.py _start_note): /app could not be
 * entered, the user site could not be made. */
#define IPB_START_NOTE_MARK "ipybox: note: "

/* Copies to out (NUL-terminated, at most size bytes) the text after IPB_START_NOTE_MARK of each
 * line of tail[0..len) that begins with it, the first max_notes of them, each but the first after
 * one space. Control characters, and bytes that start no valid UTF-8 character, become '?'; a
 * note that does not fit whole is left out with every one after it. Returns the length written
 * (0: no note). */
size_t ipb_stderr_start_notes(const char *tail, size_t len, int max_notes, char *out, size_t size);
