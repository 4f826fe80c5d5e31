/* The kernel's launcher as data (kernel_launch.h). Paths are relative to the project root, where
 * make runs; the Makefile makes this object depend on the .py file. */
#if __SIZEOF_SIZE_T__ == 8
#define SIZE_T .quad
#else
#define SIZE_T .long
#endif

#define EMBED(sym, file)                                                                      \
    .section .rodata;                                                                         \
    .global sym;                                                                              \
    .type sym, %object;                                                                       \
    .balign 16;                                                                               \
sym:                                                                                          \
    .incbin file;                                                                             \
    .byte 0;                                                                                  \
sym##_end:                                                                                    \
    .size sym, sym##_end - sym;                                                               \
    .global sym##_len;                                                                        \
    .type sym##_len, %object;                                                                 \
    .balign __SIZEOF_SIZE_T__;                                                                \
sym##_len:                                                                                    \
    SIZE_T sym##_end - sym - 1;                                                               \
    .size sym##_len, __SIZEOF_SIZE_T__


EMBED(ipb_kernel_launch_py, "supervisor/kernel_launch.py")

    .section .note.GNU-stack, "", %progbits
