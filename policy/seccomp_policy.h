/* The kernel's seccomp filter: a deny-list compiled to BPF here, outside the sandbox, and only
 * loaded by the shim (last step before exec). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Compiles the filter for the native architecture; *ret_bpf holds struct sock_filter[]
 * (*ret_len bytes). Foreign architectures (i386 int 0x80, x32) kill the process. */
int ipb_seccomp_compile(uint8_t **ret_bpf, size_t *ret_len, ipb_error **err);
