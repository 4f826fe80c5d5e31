/* Host paths of upload_file and download_file, resolved by the kernel below the allowed
 * directories. Each allowed directory is opened once, when the session starts; a local_path
 * is mapped to one of them and the rest of it is opened with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS) from that directory's fd, never by name after a check. Symlinks
 * that stay inside the directory work; one that leads outside (or a '..' that does) is
 * refused (EXDEV), so swapping a directory for a symlink between calls gains nothing. */
#pragma once
#include <stddef.h>

#include "error.h"
#include "files.h"
#include "options.h"

typedef struct ipb_host_dir {
    char *given;    /* as given (no trailing '/') */
    char *canon;    /* its realpath when it was opened, or NULL */
    int fd;         /* O_PATH directory fd, or -1: it could not be opened at start */
    int open_errno; /* why not */
} ipb_host_dir;

typedef struct ipb_host_dirs {
    ipb_host_dir *v;
    size_t n;
} ipb_host_dirs;

/* Opens every allowed directory. One that cannot be opened is kept (with why) and allows
 * nothing, ever: *ret_missing (NULL when all opened) says which, as a sentence. */
int ipb_host_dirs_open(ipb_host_dirs *d, const ipb_strv *allowed, char **ret_missing, ipb_error **err);
/* A copy with fds of its own (for a transfer that may outlive the call). */
int ipb_host_dirs_dup(const ipb_host_dirs *src, ipb_host_dirs *ret, ipb_error **err);
void ipb_host_dirs_free(ipb_host_dirs *d);

/* Opens local_path for reading: a regular file below an allowed directory. The open never
 * blocks (O_NONBLOCK | O_NOCTTY; FIFOs, devices and sockets are refused after fstat). The fd
 * is returned blocking. */
int ipb_host_open_read(const ipb_host_dirs *d, const char *local_path, int *ret_fd, ipb_error **err);
/* Writes the content of src_fd (read to EOF) as local_path: missing parent directories are
 * created below the allowed directory (mkdirat, each re-resolved from its fd), the data goes
 * to an O_EXCL temporary file in the same directory, renamed over local_path (a symlink
 * there is replaced, never followed; a directory is never replaced). gate: see files.h. */
int ipb_host_write_from(const ipb_host_dirs *d, const char *local_path, int src_fd, const ipb_commit_gate *gate,
                        ipb_error **err);
