/* How a live session holds the trees it lends its sandbox (the workspace, each directory
 * bound with --container-bind): flock(LOCK_SH) on a directory fd kept open, close-on-exec,
 * for the session's life (in ipyboxd, by the session's worker). A start that gets a tree
 * exclusively knows that no live session, and so no sandbox, uses it: only then does it sweep
 * the tree for temporary files a killed supervisor left (tmpmark.h), and only then is an
 * empty default workspace removed. Sandbox code can flock /app too, but only shared while its
 * session holds it, which keeps a sweep off a tree in use and nothing more. A tree someone
 * else keeps exclusively (any reader can flock it) is used without a hold. A file system
 * without flock (some NFS setups) holds nothing and is never swept. */
#pragma once

#include "error.h"

/* Holds the directory that fd (O_PATH will do) opens, sweeping it first when it can be had
 * exclusively. *ret_fd: the fd that holds it (close it at the end), or -1: not a directory,
 * no flock there, or another process keeps it exclusively for seconds (any reader of the
 * directory can: the session then starts without holding it, with a warning). Fails only when
 * it was removed meanwhile. what, path: for messages. */
int ipb_tree_hold(int fd, const char *what, const char *path, int *ret_fd, ipb_error **err);

/* The same for a workspace under the state directory, except that a tree kept exclusively
 * past the wait fails the start: only ipybox can lock one there (workspaces/ is 0700), and
 * the one that does is a prune (or a start's sweep), which may rename it aside and remove it
 * as soon as its size walk ends; started without a hold, the session would lose its files
 * to it. A file system without flock still holds nothing (no prune can remove it there). */
int ipb_tree_hold_state_workspace(int fd, const char *what, const char *path, int *ret_fd, ipb_error **err);

/* Removes the unnamed workspaces (<state>/workspaces/<name>, wsname.h) that are empty, have no
 * session directory of their session's id (being made, running or not yet reaped) and that no session holds;
 * never follows a symlink. Returns how many were removed. */
int ipb_default_workspaces_sweep(const char *state);
