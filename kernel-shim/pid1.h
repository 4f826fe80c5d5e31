/* PID 1 of the sandbox: starts the program (kernel or command) through the last hardening
 * steps, reaps every process, and obeys the supervisor's commands. */
#pragma once
#include "netns.h"
#include "shim_proto.h"

/* The egress listeners go to the supervisor with the READY record and are closed here. */
/* ctl: the channel to S0 when kernels come from a zygote (zygote_s0.h), else -1. */
__attribute__((noreturn)) void shim_pid1(int fd, shim_config *cfg, ipb_egress_fds *efds, int ctl);
/* The program's hardening and exec (fd < 0: failures go to stderr; keep >= 0: crosses the
 * exec as fd 3; env NULL: the configuration's). */
__attribute__((noreturn)) void shim_exec_program(int fd, shim_config *cfg, uint32_t gen, int keep, char **env,
                                                 int userns);
/* The program's user namespace (user namespace 2, or Z of the zygote and its kernels), mapping
 * uid 1000 to the sandbox's user: entered (userns >= 0) or made. Capabilities are still held. */
int shim_kernel_userns(const shim_config *cfg, int userns, ipb_error **err);
