/* The resolver behind hostpath.c: a host path walked one component at a time on fds, so that
 * each symlink met can be judged before it is followed. A symlink whose directory lies inside
 * a tree that a sandbox could write (a workspace, a bind source, the state directory's
 * sessions/ and workspaces/) is never followed: kernel code may have planted it. Every other
 * symlink is followed (at most 40), as long as the walk stays beneath an allowed directory.
 * Internal to hostpath.c. */
#pragma once
#include <limits.h>
#include <stdbool.h>

#include "error.h"
#include "hostpath.h"

enum ipb_hw_mode {
    IPB_HW_READ,        /* every component; the last one (a file) may be a symlink to follow */
    IPB_HW_PARENT,      /* every component is a directory, made (mkdirat) where missing */
    IPB_HW_HINT,        /* from "/", not beneath an allowed directory: where does the path lead?
                    * every component, the last one followed; nothing is made */
    IPB_HW_HINT_PARENT, /* the same for directories: the walk stops at the first missing one */
    IPB_HW_MAKE,        /* like IPB_HW_READ (the last one may be anything), but a missing
                         * component is made (mkdirat) as a directory */
    IPB_HW_MAKE_LAST,   /* like IPB_HW_MAKE, but only the last component is made: a missing
                         * parent is an error */
};

typedef struct ipb_hw_result {
    const ipb_host_dir *dir; /* the allowed directory reached (absolute links may change it) */
    int dirfd;               /* O_PATH: the directory that holds `name` (or the last one reached) */
    int fd;                  /* O_PATH: what the path names, never a symlink (IPB_HW_READ, HINT) */
    char name[NAME_MAX + 1]; /* its name in dirfd; "" when the walk ended at dirfd itself */
    char path[PATH_MAX];     /* dirfd's path below the allowed directory (or "/"), no symlinks */
    char missing[PATH_MAX];  /* IPB_HW_HINT_PARENT: the components from the first missing one */
} ipb_hw_result;

/* The trees that sandboxes could write (ipb_sandbox_trees), read when the first symlink is
 * met and kept for the rest of the call; zero-initialised, freed with ipb_hw_trees_free. */
typedef struct ipb_hw_trees {
    ipb_strv v;
    bool loaded;
} ipb_hw_trees;
void ipb_hw_trees_free(ipb_hw_trees *t);

/* Walks rel beneath dir (NULL: from "/"; always so for the IPB_HW_HINT modes). local_path is for
 * messages. On success the result's fds are to be released with ipb_hw_result_close. */
int ipb_hw_walk(const ipb_host_dirs *d, ipb_hw_trees *trees, const char *local_path, const ipb_host_dir *dir,
                const char *rel, enum ipb_hw_mode mode, ipb_hw_result *ret, ipb_error **err);
void ipb_hw_result_close(ipb_hw_result *r);
/* openat2 with these resolve flags, retried on EAGAIN; O_CLOEXEC added. */
int ipb_hw_openat2(int dirfd, const char *path, int flags, unsigned long long resolve);
/* local_path with '//' and '.' components dropped ('..' kept, *ret_dotdot says so). */
void ipb_hw_lexical_clean(const char *in, char *out, bool *ret_dotdot);
/* The longest allowed directory that the absolute, clean path is in by name (as given, or
 * canonical at start; canon_only: canonical only); *ret_len: the length of that prefix.
 * Directories that could not be opened count unless an open one matches too. */
const ipb_host_dir *ipb_hw_match_dir(const ipb_host_dirs *d, const char *path, bool canon_only, size_t *ret_len);
