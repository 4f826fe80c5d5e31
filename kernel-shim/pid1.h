/* PID 1 of the sandbox: starts the program (kernel or command) through the last hardening
 * steps, reaps every process, and obeys the supervisor's commands. */
#pragma once
#include "netns.h"
#include "shim_proto.h"

/* The egress listeners go to the supervisor with the READY record and are closed here. */
__attribute__((noreturn)) void shim_pid1(int fd, shim_config *cfg, ipb_egress_fds *efds);
