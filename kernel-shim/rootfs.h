/* Builds the sandbox's root filesystem from a mount plan and pivots into it. */
#pragma once
#include <stdbool.h>

#include "error.h"
#include "mountplan.h"

/* In a fresh mount namespace: a tmpfs at `root`, the plan's steps below it, the root made
 * read-only, pivot_root into it and the host's tree detached. system: IPB_MNT_FD steps take
 * the monitor's mounts (SHIM_MOUNT_FD0 on, closed afterwards) and path binds are read-only. */
int shim_build_root(const char *root, const ipb_mount_plan *plan, bool system, unsigned mount_fds, ipb_error **err);
/* Whether fd (a cloned tree, or the monitor's mount) is the file want names; if not, an
 * error that says src changed while the sandbox was built. 0 or -1. */
int shim_check_same(int fd, const char *src, const ipb_file_id *want, ipb_error **err);
