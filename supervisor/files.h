/* File transfer between the host and the workspace behind /app: the workspace side (the
 * host side is hostpath.h). Every path component is opened with O_NOFOLLOW below the
 * workspace's directory fd (symlinks planted by sandbox code are refused, never followed;
 * `..` never reaches here). Writes go to a temporary file renamed into place, so a failure
 * leaves nothing partial behind. */
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

/* Writes through an O_EXCL temporary file in dirfd renamed over `name` (never replacing a
 * directory). Either src_fd (read to EOF) or data is used; gate may be NULL. */
int ipb_atomic_write_at(int dirfd, const char *name, int src_fd, const void *data, size_t len,
                        const ipb_commit_gate *gate, const char *what, ipb_error **err);
