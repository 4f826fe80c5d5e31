/* The shim above a kernel sandbox's PID 1 when kernels come from a zygote (architecture.md,
 * "Zygote kernels"): S0, PID 1 of the pid namespace P0, in which zygotes live; S1, PID 1 of
 * P1 (every kernel's namespace), runs today's PID 1 code. */
#pragma once
#include "shim_proto.h"

/* Called where PID 1 of the sandbox would go on. Makes P1 and forks S1, which returns here
 * with *ret_ctl its end of the channel to S0; S0 itself never returns (it mirrors S1's exit).
 * fail_fd: the supervisor's channel, for a failed step. */
void shim_s0_split(int fail_fd, shim_config *cfg, int *ret_ctl);
/* The sandbox's /dev/null on fds 0-2 where the supervisor gave something other than an
 * anonymous pipe or socket (contain.c). */
int shim_own_stdio(ipb_error **err);
