/* Host paths of upload_file and download_file, resolved below the allowed directories. Each
 * allowed directory is opened once, when the session starts; a local_path is mapped to one of
 * them and the rest of it is walked one component at a time from that directory's fd
 * (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS on each, hostwalk.c), never by name after a
 * check. Symlinks that stay beneath an allowed directory are followed, except one inside a
 * tree that a sandbox could write (a workspace, a bind source): kernel code may have planted
 * it, so it is refused. One that leads outside (or a '..' that does) is refused too. */
#pragma once
#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "files.h"
#include "options.h"

typedef struct ipb_host_dir {
    char *given;    /* as given (no trailing '/') */
    char *canon;    /* its realpath when it was opened, or NULL */
    int fd;         /* O_PATH directory fd, or -1: it could not be opened at start */
    int open_errno; /* why not */
    char *why;      /* or why not, as a sentence (a refused symlink), or NULL */
} ipb_host_dir;

typedef struct ipb_host_dirs {
    ipb_host_dir *v;
    size_t n;
    /* this session's own sandbox-writable trees (workspace, binds), by identity */
    struct ipb_host_root {
        dev_t dev;
        ino_t ino;
    } * roots;
    size_t n_roots;
} ipb_host_dirs;

/* Opens every allowed directory. One that cannot be opened is kept (with why) and allows
 * nothing, ever: *ret_missing (NULL when all opened) says which, as a sentence. */
int ipb_host_dirs_open(ipb_host_dirs *d, const ipb_strv *allowed, char **ret_missing, ipb_error **err);
/* Notes the directory fd (a workspace or bind of this session) as a tree that the sandbox
 * writes: no symlink inside it is followed, also where the list of trees in the state
 * directory does not know it (see hostwalk.c). */
int ipb_host_dirs_add_sandbox_root(ipb_host_dirs *d, int fd, ipb_error **err);
/* A copy with fds of its own (for a transfer that may outlive the call). */
int ipb_host_dirs_dup(const ipb_host_dirs *src, ipb_host_dirs *ret, ipb_error **err);
void ipb_host_dirs_free(ipb_host_dirs *d);

/* Opens local_path for reading: a regular file below an allowed directory, reached through
 * no symlink that lies inside a tree a sandbox could write. The open never
 * blocks (O_NONBLOCK | O_NOCTTY; FIFOs, devices and sockets are refused after fstat). The fd
 * is returned blocking. */
int ipb_host_open_read(const ipb_host_dirs *d, const char *local_path, int *ret_fd, ipb_error **err);
/* Writes the content of src_fd (read to EOF) as local_path: missing parent directories are
 * created below the allowed directory (mkdirat in the parent's fd, then opened from it without
 * following a symlink; no symlink inside a sandbox's tree is followed on the way), the data goes
 * to an O_EXCL temporary file in the same directory, renamed over local_path (a symlink
 * there is replaced, never followed; a directory is never replaced). gate: see files.h. */
int ipb_host_write_from(const ipb_host_dirs *d, const char *local_path, int src_fd, const ipb_commit_gate *gate,
                        ipb_error **err);

/* ---- paths the user names on the command line ----
 * A --workspace, --container-bind source, --rootfs, --allowed-dir, --container-env-file or
 * --mcp-config is resolved once, from "/", one component at a time on fds (hostwalk.c): a
 * symlink inside a tree that a sandbox could write is never followed (kernel code of a
 * running session may swap one in at any moment), any other is. What is used afterwards is
 * the fd held, never the name again. */
enum ipb_named_kind {
    IPB_NAMED_DIR,      /* an existing directory */
    IPB_NAMED_MAKE_DIR, /* a directory, made (with its missing parents) where missing */
    IPB_NAMED_MAKE,     /* anything; when missing, made as a directory */
    IPB_NAMED_NEW_DIR,  /* a directory, made where missing; its parent must exist */
    IPB_NAMED_FILE,     /* an existing regular file */
};
/* what: the option, for messages. *ret_fd: an O_PATH fd of what the path names.
 * ret_canon (may be NULL): its path as the kernel has it now (from /proc/self/fd). */
int ipb_host_named_open(const char *what, const char *path, enum ipb_named_kind kind, int *ret_fd, char **ret_canon,
                        ipb_error **err);
/* The content of a named regular file (at most max bytes), read through the fd the walk
 * gave (opened without following a symlink and without blocking on a FIFO). */
int ipb_host_named_read(const char *what, const char *path, size_t max, char **ret_text, size_t *ret_len,
                        ipb_error **err);
/* fd's path as the kernel has it (readlink of /proc/self/fd/N), or NULL. */
char *ipb_fd_path(int fd);
