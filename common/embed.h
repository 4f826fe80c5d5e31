/* EMBED(sym, file) for assembly sources (.S): `file` (a path from the project root, where make
 * runs) as the NUL-terminated data `sym`, and its length without the NUL as the size_t
 * `sym##_len`; EMBED_BEGIN(sym), .incbin lines, EMBED_END(sym) for several files joined. Used by
 * toolgen/runtime.S and supervisor/kernel_launch.S. */
#pragma once
#if __SIZEOF_SIZE_T__ == 8
#define SIZE_T .quad
#else
#define SIZE_T .long
#endif

/* Assembler, not C: */
/* clang-format off */
#define EMBED_BEGIN(sym)                                                                      \
    .section .rodata;                                                                         \
    .global sym;                                                                              \
    .type sym, %object;                                                                       \
    .balign 16;                                                                               \
sym:

#define EMBED_END(sym)                                                                        \
    .byte 0;                                                                                  \
sym##_end:                                                                                    \
    .size sym, sym##_end - sym;                                                               \
    .global sym##_len;                                                                        \
    .type sym##_len, %object;                                                                 \
    .balign __SIZEOF_SIZE_T__;                                                                \
sym##_len:                                                                                    \
    SIZE_T sym##_end - sym - 1;                                                               \
    .size sym##_len, __SIZEOF_SIZE_T__

#define EMBED(sym, file)                                                                      \
    EMBED_BEGIN(sym)                                                                          \
    .incbin file;                                                                             \
    EMBED_END(sym)
/* clang-format on */
