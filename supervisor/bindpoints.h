/* The mount points of --container-bind destinations inside /app. The sandbox's setup makes
 * them (mkdir -p in the workspace, kernel-shim/rootfs.c); in a workspace made for the session
 * they are ipybox's, not the user's, and must not keep it from being removed when the session
 * ends with nothing else in it. */
#pragma once
#include "options.h"
#include "statedir.h"

/* In a workspace made for this session (d->workspace_owned), removes each bind's mount-point
 * directory and then the directories made for it, deepest first, each only when empty:
 * rmdir on a parent directory fd reached from the workspace's fd without following any
 * symlink (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV), so what sandbox
 * code left there can only keep a directory, never redirect a removal. Stops for a bind at
 * the first directory that is not empty. Call once the sandbox is gone, before
 * ipb_session_dirs_remove (which removes the workspace when empty). Does nothing otherwise. */
void ipb_bind_points_remove(const ipb_session_dirs *d, const ipb_options *o);
