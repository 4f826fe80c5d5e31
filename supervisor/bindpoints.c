#include "bindpoints.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_DEPTH 64

/* The directory at the first n components below wsfd, as an O_PATH fd, or -1. */
static int open_parent(int wsfd, char *const *comp, size_t n) {
    char path[PATH_MAX] = ".";
    size_t len = 1;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(comp[i]);
        if (len + 1 + l >= sizeof(path))
            return -1;
        path[len++] = '/';
        memcpy(path + len, comp[i], l);
        len += l;
        path[len] = '\0';
    }
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
    return (int)syscall(SYS_openat2, wsfd, path, &how, sizeof(how));
}

static void remove_chain(int wsfd, const char *rel) {
    char buf[PATH_MAX];
    if (strlen(rel) >= sizeof(buf))
        return;
    strcpy(buf, rel);
    char *comp[MAX_DEPTH];
    size_t n = 0;
    for (char *save = NULL, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, "."))
            continue;
        if (!strcmp(c, "..") || n == MAX_DEPTH)
            return; /* never accepted by the parser; not ours to guess at */
        comp[n++] = c;
    }
    while (n > 0) {
        int pfd = open_parent(wsfd, comp, n - 1);
        if (pfd < 0)
            return;
        /* rmdir only: a symlink or file by that name fails (ENOTDIR), a directory with
         * anything in it stays (ENOTEMPTY), a mount point stays (EBUSY). */
        int r = unlinkat(pfd, comp[n - 1], AT_REMOVEDIR);
        int e = errno;
        close(pfd);
        /* ENOENT: this one was made elsewhere (inside another bind mounted above it); its
         * parents may still be ours. */
        if (r < 0 && e != ENOENT)
            return;
        n--;
    }
}

void ipb_bind_points_remove(const ipb_session_dirs *d, const ipb_options *o) {
    if (!d->workspace_owned || d->workspace_fd < 0 || !o)
        return;
    for (size_t i = 0; i < o->n_binds; i++)
        if (o->binds[i].rel[0] != '/') /* --host-dir: not in the workspace */
            remove_chain(d->workspace_fd, o->binds[i].rel);
}
