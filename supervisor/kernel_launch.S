/* The kernel's launcher as data (kernel_launch.h). Paths are relative to the project root, where
 * make runs; the Makefile makes this object depend on the .py files. */
#include "embed.h"

/* One script of four files: main(), at the end of kernel_launch.py, runs once all are defined. */
EMBED_BEGIN(ipb_kernel_launch_py)
    .incbin "supervisor/kernel_standby.py"
    .incbin "supervisor/kernel_zygote.py"
    .incbin "supervisor/kernel_output.py"
    .incbin "supervisor/kernel_launch.py"
EMBED_END(ipb_kernel_launch_py)

    .section .note.GNU-stack, "", %progbits
