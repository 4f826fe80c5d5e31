/* Builds the sandbox's root filesystem from a mount plan and pivots into it. */
#pragma once
#include "error.h"
#include "mountplan.h"

/* In a fresh mount namespace: a tmpfs at `root`, the plan's steps below it, the root made
 * read-only, pivot_root into it and the host's tree detached. */
int shim_build_root(const char *root, const ipb_mount_plan *plan, ipb_error **err);
