/* The sandbox recipe, in order (architecture.md, "A session's life", step 3). */
#pragma once
#include "shim_proto.h"

/* Runs in the freshly exec'd, single-threaded shim. Never returns: exits with the program's
 * status (run mode) or when the supervisor goes away (kernel mode). */
__attribute__((noreturn)) void shim_contain(int sync_fd, shim_config *cfg);
