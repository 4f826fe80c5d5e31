/* Host directories of a session under the user's state directory
 * ($XDG_STATE_HOME/ipybox, default ~/.local/state/ipybox):
 *   sessions/<id>/{root,home,run,mcp,pid}  removed when the session ends (mcp: the generated
 *                                       tool package and the tool socket, /opt/ipybox inside)
 *   workspaces/<name>/                  the workspaces (/app): named ones (--workspace NAME),
 *                                       kept; unnamed ones (wsname.h: when and by which session),
 *                                       kept unless empty (also when the session was killed: the
 *                                       next start removes it). `ipybox workspaces` (workspaces.h)
 *   tmp-pending/<dev>-<ino>.<pid>       a tree that may hold a named temporary file of a
 *                                       session (tmpmark.h)
 *   mcp-homes/<name>/                   the home of sandboxed MCP server <name> (0700), kept
 *   granted                             canonical paths of the trees bound read-write into
 *                                       sandboxes (workspaces, binds), NUL-separated */
#pragma once
/* Below the state directory: the private homes of sandboxed MCP servers, one per server name
 * (mcp_sandbox.h), kept. */
#define IPB_MCP_HOMES "mcp-homes"
#include <stdbool.h>

#include "error.h"
#include "mountplan.h"
#include "options.h"
#include "pyhost.h"

typedef struct ipb_session_dirs {
    char id[17];
    char *base, *root, *home, *run, *mcp;
    char *workspace;      /* canonical */
    bool workspace_owned; /* created for this session */
    char *workspace_name; /* its name under <state>/workspaces (wsname.h), or NULL: a host path */
    /* The user-named trees as resolved once (ipb_host_named_open: from "/" on fds, no
     * symlink a sandbox could have planted followed), held from then on: O_PATH fds, their
     * identities (checked again where they are bound) and canonical paths. */
    bool held; /* the fds below are ours to close */
    int workspace_fd;
    int workspace_hold; /* holds the workspace for the session's life (treehold.h), or -1 */
    ipb_file_id workspace_id;
    size_t n_binds;
    int *bind_fds;
    int *bind_holds; /* the same for each bind source */
    /* The workspaces under <state>/workspaces that hold the workspace or a bind source deeper
     * inside (a --container-bind of workspaces/W/sub): held too, since a prune removes W
     * whole (n_tops fds, each held or -1). */
    size_t n_tops;
    int *top_holds;
    ipb_file_id *bind_ids;
    char **bind_canon;
    int rootfs_fd; /* -1 without --rootfs */
    int home_fd;   /* `ipybox run --home`: the directory behind home, held; else -1 */
    ipb_file_id home_id;
    ipb_strv env;          /* the user's variables: --container-env-var, and the
                            * --container-env-file contents as read through the walk, in order */
    ipb_python_env python; /* --python's trees and path inside (pyhost.h); empty with --rootfs */
} ipb_session_dirs;

int ipb_state_dir(char **ret, ipb_error **err);
/* Creates the directories (and missing --container-bind host paths); resolves the paths the
 * user named (above) and reads the env files. */
int ipb_session_dirs_create(const ipb_options *o, bool kernel, ipb_session_dirs *ret, ipb_error **err);
/* Removes the session's private directories; the workspace only if it was created for the
 * session and is empty. Safe to call twice. */
void ipb_session_dirs_remove(ipb_session_dirs *d);
/* Removes the directories of sessions whose supervisor is no longer running (left behind by
 * a SIGKILL), then the empty default workspaces no live session holds. Returns how many
 * session directories were removed. */
int ipb_session_dirs_reap_stale(void);
/* Refuses (with the reason, for what) an MCP server's allowed dir, path, that is in or over the
 * state directory (neither another server's private home nor a session's workspace is lent to
 * a server) or whose way passes through a symlink in a tree a sandbox could write, as path
 * resolves now; `ipybox run --host-dir` checks both again, on fds. */
int ipb_host_dir_check(const char *what, const char *path, ipb_error **err);
/* The trees that sandbox code may have written (and left symlinks in): the recorded
 * workspaces and bind sources, and the state directory's sessions/ and workspaces/. */
int ipb_sandbox_trees(ipb_strv *ret, ipb_error **err);
/* Resolves the absolute path as the kernel would, one component at a time: 1 (and the
 * symlink's path in *ret_link, to free) when that meets a symlink inside one of trees, 0 when
 * not (a missing component ends the walk), -1 when out of memory. */
int ipb_path_planted_symlink(const ipb_strv *trees, const char *path, char **ret_link);
