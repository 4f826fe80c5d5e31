/* File transfer between the host and the workspace behind /app.
 * Workspace side: every path component is opened with O_NOFOLLOW below the workspace's
 * directory fd (symlinks planted by sandbox code are refused, never followed; `..` never
 * reaches here). Host side: paths must lie inside the allowed directories after symlinks
 * are resolved. Writes go to a temporary file renamed into place, so a failure leaves
 * nothing partial behind. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "options.h"

/* Opens the directory that will hold relpath's last component (creating missing
 * directories when create is set). *ret_name points into relpath. */
int ipb_ws_open_parent(int basefd, const char *relpath, bool create, int *ret_dirfd, const char **ret_name,
                       ipb_error **err);
/* Atomically writes data as relpath below basefd. */
int ipb_ws_write(int basefd, const char *relpath, const void *data, size_t len, ipb_error **err);
/* Atomically copies the content of src_fd (read to EOF) to relpath below basefd. */
int ipb_ws_copy_in(int basefd, const char *relpath, int src_fd, ipb_error **err);
/* Opens relpath below basefd for reading: a regular file with a single link, no symlinks. */
int ipb_ws_open_read(int basefd, const char *relpath, int *ret_fd, ipb_error **err);

/* Checks an existing host file for reading; returns its canonical path. */
int ipb_host_resolve_read(const ipb_strv *allowed, const char *local_path, char **ret_path, ipb_error **err);
/* Checks a host destination (its parent directories are created inside the allowed
 * directory); returns the canonical destination path. */
int ipb_host_resolve_write(const ipb_strv *allowed, const char *local_path, char **ret_path, ipb_error **err);
/* Atomically writes the content of src_fd to the canonical host path. */
int ipb_host_write_from(const char *path, int src_fd, ipb_error **err);
