/* Turns the user's options and a session's directories into the shim's configuration:
 * mount plan, environment, seccomp program, program argv. */
#pragma once
#include "error.h"
#include "options.h"
#include "shim_proto.h"
#include "statedir.h"

/* kernel_argv == NULL: run mode with `argv` as the command; else the kernel's argv. */
int ipb_shim_config_build(const ipb_options *o, const ipb_session_dirs *d, uint32_t mode, char *const *argv,
                          shim_config *ret, ipb_error **err);
