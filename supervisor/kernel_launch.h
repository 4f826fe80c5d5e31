/* The kernel's launcher (supervisor/kernel_standby.py, kernel_zygote.py and kernel_launch.py, one
 * script), embedded by kernel_launch.S (.incbin):
 * NUL-terminated; the length does not count the NUL. It expects MCPDIR and SHELL_GATE to be
 * defined before it (session.c puts `MCPDIR = '/opt/ipybox'` and `SHELL_GATE = 0|1|2` first). */
#pragma once
#include <stddef.h>

extern const char ipb_kernel_launch_py[];
extern const size_t ipb_kernel_launch_py_len;
