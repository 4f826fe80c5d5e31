/* File transfer between the host and the workspace behind /app: the workspace side (the
 * host side is hostpath.h). Every path component is opened with O_NOFOLLOW below the
 * workspace's directory fd (symlinks planted by sandbox code are refused, never followed;
 * `..` never reaches here). Writes go to an unnamed file linked into place when complete, so
 * neither a failure nor a killed supervisor leaves anything partial behind. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* Asked just before a written temporary file is renamed into place: false means the
 * transfer was abandoned, and the temporary file is removed instead. */
typedef struct ipb_commit_gate {
    bool (*begin_commit)(void *ud);
    void *ud;
} ipb_commit_gate;

/* Opens the directory that will hold relpath's last component (creating missing
 * directories when create is set). *ret_name points into relpath. */
int ipb_ws_open_parent(int basefd, const char *relpath, bool create, int *ret_dirfd, const char **ret_name,
                       ipb_error **err);
/* Atomically writes data as relpath below basefd. */
int ipb_ws_write(int basefd, const char *relpath, const void *data, size_t len, ipb_error **err);
/* Atomically copies the content of src_fd (read to EOF; a regular file as far as it reached
 * when the copy began) to relpath below basefd. */
int ipb_ws_copy_in(int basefd, const char *relpath, int src_fd, const ipb_commit_gate *gate, ipb_error **err);
/* Opens relpath below basefd for reading: a regular file with a single link, no symlinks. */
int ipb_ws_open_read(int basefd, const char *relpath, int *ret_fd, ipb_error **err);

/* Writes `name` in dirfd whole or not at all: the data goes to an unnamed O_TMPFILE file in
 * dirfd, fsynced, then linked as `name` (or, when something has that name, linked under a
 * temporary name of ours and renamed over it, never replacing a directory). Where O_TMPFILE
 * cannot be used, to an O_EXCL temporary file renamed the same way. A killed process leaves
 * no file behind, but for a named temporary (tmpmark.h: tree_fd, the root of the sandbox's
 * tree that dirfd lies in, or -1, is marked for the next start to sweep). Either src_fd
 * (read to EOF) or data is used; gate may be NULL. */
int ipb_atomic_write_at(int dirfd, const char *name, int tree_fd, int src_fd, const void *data, size_t len,
                        const ipb_commit_gate *gate, const char *what, ipb_error **err);
/* Tests: never use O_TMPFILE (the fallback of file systems without it). */
extern bool ipb_files_no_tmpfile;
