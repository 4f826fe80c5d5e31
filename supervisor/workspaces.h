/* `ipybox workspaces`: the workspaces under <state>/workspaces (statedir.h, wsname.h), listed
 * and pruned. A live session holds its workspace with flock(LOCK_SH) (treehold.h); the prune
 * takes each one with flock(LOCK_EX|LOCK_NB) and skips it when that fails, so a workspace in
 * use is never removed. Holding the lock, it renames the workspace to a hidden name (a session
 * starting with that name then fails, statedir.c, rather than use it) and removes the tree
 * with ipb_empty_dir_at: on fds, symlinks removed as names, never followed. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "treesize.h"

typedef struct ipb_ws_entry {
    char *name;
    bool unnamed;         /* made for a session without --workspace (wsname.h) */
    bool in_use;          /* a live session holds it (or one is being made with it) */
    ipb_tree_usage usage; /* size; usage.newest: when it was last used */
} ipb_ws_entry;

typedef struct ipb_ws_list {
    char *root; /* <state>/workspaces */
    ipb_ws_entry *v;
    size_t n;
} ipb_ws_list;

/* Every workspace, sorted by name (unnamed ones so by time). */
int ipb_workspaces_list(ipb_ws_list *ret, ipb_error **err);
void ipb_ws_list_free(ipb_ws_list *l);

enum ipb_prune_outcome {
    IPB_PRUNE_REMOVED,
    IPB_PRUNE_IN_USE, /* kept: a live session holds it */
    IPB_PRUNE_RECENT, /* kept: used within older_than */
    IPB_PRUNE_FAILED, /* why says why (not there, not a directory, a removal that failed) */
};
typedef void (*ipb_prune_report)(void *ctx, const char *name, enum ipb_prune_outcome outcome,
                                 const ipb_tree_usage *usage, const char *why);

/* Removes the unnamed workspaces (names NULL), or the ones named (n_names of them, named or
 * unnamed), that no session uses and that were last used at least older_than seconds ago
 * (0: any). report gets each candidate. Returns how many failed (0: all went as asked, in-use
 * and recent ones included), or -1 when the workspaces cannot be read at all. */
int ipb_workspaces_prune(long older_than, char *const *names, size_t n_names, ipb_prune_report report, void *ctx,
                         ipb_error **err);
