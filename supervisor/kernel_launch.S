/* The kernel's launcher as data (kernel_launch.h). Paths are relative to the project root, where
 * make runs; the Makefile makes this object depend on the .py file. */
#include "embed.h"

EMBED(ipb_kernel_launch_py, "supervisor/kernel_launch.py")

    .section .note.GNU-stack, "", %progbits
