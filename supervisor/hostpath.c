#include "hostpath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdio.h"
#include "pathrules.h"
#include "strbuf.h"

#define BENEATH (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)

static int openat2_beneath(int dirfd, const char *path, int flags) {
    struct open_how how = {.flags = (unsigned long long)(flags | O_CLOEXEC), .resolve = BENEATH};
    for (int tries = 0;; tries++) {
        int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        /* EAGAIN: a rename raced with a '..' and the kernel could not be sure it stayed
         * beneath; retrying is what the man page advises. */
        if (fd >= 0 || errno != EAGAIN || tries >= 8)
            return fd;
    }
}

/* ---- the allowed directories ---- */

static size_t trimmed_len(const char *p) {
    size_t l = strlen(p);
    while (l > 1 && p[l - 1] == '/')
        l--;
    return l;
}

int ipb_host_dirs_open(ipb_host_dirs *d, const ipb_strv *allowed, char **ret_missing, ipb_error **err) {
    memset(d, 0, sizeof(*d));
    *ret_missing = NULL;
    d->v = calloc(allowed->n + 1, sizeof(*d->v));
    if (!d->v)
        return ipb_error_set(err, ENOMEM, "allowed directories");
    char *missing = NULL;
    for (size_t i = 0; i < allowed->n; i++) {
        ipb_host_dir *h = &d->v[d->n++];
        h->fd = -1;
        h->given = strndup(allowed->v[i], trimmed_len(allowed->v[i]));
        if (!h->given) {
            ipb_host_dirs_free(d);
            free(missing);
            return ipb_error_set(err, ENOMEM, "allowed directories");
        }
        h->fd = open(h->given, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (h->fd < 0) {
            h->open_errno = errno;
            char *m = ipb_strdupf("%s%s%s (%s)", missing ? missing : "", missing ? ", " : "", h->given,
                                  strerror(h->open_errno));
            free(missing);
            missing = m;
            continue;
        }
        h->canon = realpath(h->given, NULL);
    }
    if (missing) {
        *ret_missing = ipb_strdupf("these allowed directories could not be opened and allow nothing until ipybox "
                                   "is started again: %s",
                                   missing);
        free(missing);
    }
    return 0;
}

int ipb_host_dirs_dup(const ipb_host_dirs *src, ipb_host_dirs *ret, ipb_error **err) {
    ipb_host_dirs d = {calloc(src->n + 1, sizeof(*d.v)), 0};
    if (!d.v)
        return ipb_error_set(err, ENOMEM, "allowed directories");
    for (size_t i = 0; i < src->n; i++) {
        const ipb_host_dir *s = &src->v[i];
        ipb_host_dir *h = &d.v[d.n++];
        h->open_errno = s->open_errno;
        h->fd = s->fd >= 0 ? fcntl(s->fd, F_DUPFD_CLOEXEC, 3) : -1;
        h->given = strdup(s->given);
        h->canon = s->canon ? strdup(s->canon) : NULL;
        if ((s->fd >= 0 && h->fd < 0) || !h->given || (s->canon && !h->canon)) {
            int e = errno;
            ipb_host_dirs_free(&d);
            return ipb_error_set(err, e, "copying the allowed directories");
        }
    }
    *ret = d;
    return 0;
}

void ipb_host_dirs_free(ipb_host_dirs *d) {
    for (size_t i = 0; i < d->n; i++) {
        if (d->v[i].fd >= 0)
            close(d->v[i].fd);
        free(d->v[i].given);
        free(d->v[i].canon);
    }
    free(d->v);
    d->v = NULL;
    d->n = 0;
}

/* ---- from local_path to (allowed directory, path below it) ---- */

typedef struct host_target {
    const ipb_host_dir *dir;
    char rest[PATH_MAX]; /* relative to dir->fd; "" for the directory itself */
} host_target;

/* local_path with '//' and '.' components dropped ('..' kept: only the kernel knows where
 * it leads once symlinks are involved). */
static void lexical_clean(const char *in, char *out, bool *ret_dotdot) {
    size_t o = 0;
    *ret_dotdot = false;
    for (const char *c = in; *c;) {
        while (*c == '/')
            c++;
        const char *e = strchrnul(c, '/');
        size_t l = (size_t)(e - c);
        if (l == 0)
            break;
        if (!(l == 1 && c[0] == '.')) {
            if (l == 2 && c[0] == '.' && c[1] == '.')
                *ret_dotdot = true;
            out[o++] = '/';
            memcpy(out + o, c, l);
            o += l;
        }
        c = e;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
}

/* Length of the part of path that is dir (at a component boundary), or 0. */
static size_t prefix_match(const char *path, const char *dir) {
    if (!dir)
        return 0;
    size_t l = strlen(dir);
    if (l == 1 && dir[0] == '/')
        return 1;
    if (strncmp(path, dir, l) || (path[l] != '/' && path[l] != '\0'))
        return 0;
    return l;
}

/* The longest allowed directory that path is in, judged by the names as given and as
 * canonical at start. Directories that could not be opened count, so that the answer can
 * say so, unless an open one matches too. */
static const ipb_host_dir *match_dir(const ipb_host_dirs *d, const char *path, bool canon_only, size_t *ret_len) {
    const ipb_host_dir *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < d->n; i++) {
        const ipb_host_dir *h = &d->v[i];
        size_t l = prefix_match(path, h->canon);
        if (!canon_only) {
            size_t g = prefix_match(path, h->given);
            if (g > l)
                l = g;
        }
        if (!l)
            continue;
        bool better = !best || (h->fd >= 0 && best->fd < 0) || ((h->fd >= 0) == (best->fd >= 0) && l > best_len);
        if (better) {
            best = h;
            best_len = l;
        }
    }
    *ret_len = best_len;
    return best;
}

static int outside_error(const ipb_host_dirs *d, const char *local_path, ipb_error **err) {
    char list[1024] = "";
    for (size_t i = 0; i < d->n; i++) {
        strncat(list, i ? ", " : "", sizeof(list) - strlen(list) - 1);
        strncat(list, d->v[i].given, sizeof(list) - strlen(list) - 1);
    }
    return ipb_error_set(err, 0, "'%s' is outside the allowed directories (%s); start ipybox with --allowed-dir to "
                                 "allow another", local_path, d->n ? list : "none");
}

/* The canonical form of a path to write: its deepest existing ancestor resolved, then the
 * rest, which may not hold '..' (it does not exist yet, so nothing can say where it leads). */
static int canonical_for_write(const char *local_path, char *out, ipb_error **err) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof(buf), "%s", local_path);
    const char *rest = NULL;
    char *canon = NULL;
    for (;;) {
        canon = realpath(buf, NULL);
        if (canon)
            break;
        if (errno != ENOENT && errno != ENOTDIR)
            return ipb_error_set(err, errno, "%s", local_path);
        char *slash = strrchr(buf, '/');
        if (!slash || slash == buf) {
            canon = strdup("/");
            rest = local_path + 1;
            break;
        }
        *slash = '\0';
        rest = local_path + (slash - buf) + 1;
    }
    if (!canon)
        return ipb_error_set(err, ENOMEM, "%s", local_path);
    for (const char *c = rest; c && *c;) {
        const char *e = strchrnul(c, '/');
        if (e - c == 2 && c[0] == '.' && c[1] == '.') {
            free(canon);
            return ipb_error_set(err, 0, "local_path '%s' has a '..' after a directory that does not exist; "
                                         "give the path without '..'", local_path);
        }
        c = *e ? e + 1 : e;
    }
    int n = snprintf(out, PATH_MAX, "%s%s%s", canon, rest && strcmp(canon, "/") ? "/" : "", rest ? rest : "");
    free(canon);
    return n >= PATH_MAX ? ipb_error_set(err, ENAMETOOLONG, "%s", local_path) : 0;
}

static int locate(const ipb_host_dirs *d, const char *local_path, bool for_write, host_target *t, ipb_error **err) {
    if (local_path[0] != '/')
        return ipb_error_set(err, 0, "local_path '%s' must be an absolute host path", local_path);
    size_t len = strlen(local_path);
    if (len >= PATH_MAX)
        return ipb_error_set(err, ENAMETOOLONG, "local_path");
    if (for_write && (local_path[len - 1] == '/' || !strcmp(local_path + len - (len >= 2 ? 2 : 1), "/.") ||
                      (len >= 3 && !strcmp(local_path + len - 3, "/.."))))
        return ipb_error_set(err, 0, "local_path '%s' must name a file", local_path);
    char clean[PATH_MAX];
    bool dotdot;
    lexical_clean(local_path, clean, &dotdot);
    size_t ml = 0;
    const ipb_host_dir *dir = dotdot ? NULL : match_dir(d, clean, false, &ml);
    char canon[PATH_MAX];
    const char *path = clean;
    if (!dir || dir->fd < 0) {
        /* Not in an allowed directory by name (or only through '..'): where it leads now is a
         * hint to which directory it is in; the open below is what decides. */
        int r = 0;
        if (for_write) {
            r = canonical_for_write(local_path, canon, err);
        } else {
            char *c = realpath(local_path, NULL);
            if (c) {
                snprintf(canon, sizeof(canon), "%s", c);
                free(c);
            } else if (!dir) {
                r = errno == ENOENT ? ipb_error_set(err, 0, "file not found: %s", local_path)
                                    : ipb_error_set(err, errno, "%s", local_path);
            } else {
                canon[0] = '\0';
            }
        }
        if (r < 0)
            return -1;
        size_t cl = 0;
        const ipb_host_dir *cd = match_dir(d, canon, true, &cl);
        if (cd && (cd->fd >= 0 || !dir)) {
            dir = cd;
            ml = cl;
            path = canon;
        }
    }
    if (!dir)
        return outside_error(d, local_path, err);
    if (dir->fd < 0)
        return ipb_error_set(err, 0, "'%s' is in the allowed directory %s, which could not be opened when the "
                                     "session started (%s); allowed directories are opened once, at start: create "
                                     "it and start ipybox again", local_path, dir->given, strerror(dir->open_errno));
    const char *rest = path + ml;
    while (*rest == '/')
        rest++;
    snprintf(t->rest, sizeof(t->rest), "%s", rest);
    t->dir = dir;
    return 0;
}

/* ---- messages ---- */

static const char *kind_of(mode_t m) {
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "of an unknown kind";
}

/* Where resolving t->rest left the directory (after EXDEV), for the message and for
 * absolute symlinks: the length of the prefix whose last component did it, and what that is:
 * 0 a '..', 1 a symlink (its target in target), -1 not found. */
static int find_escape(const host_target *t, size_t *ret_len, char target[PATH_MAX]) {
    char prefix[PATH_MAX];
    target[0] = '\0';
    for (const char *c = t->rest;;) {
        const char *e = strchrnul(c, '/');
        size_t plen = (size_t)(e - t->rest);
        memcpy(prefix, t->rest, plen);
        prefix[plen] = '\0';
        int fd = openat2_beneath(t->dir->fd, prefix, O_PATH);
        if (fd >= 0) {
            close(fd);
        } else if (errno == EXDEV) {
            *ret_len = plen;
            if (e - c == 2 && c[0] == '.' && c[1] == '.')
                return 0;
            int lfd = openat2_beneath(t->dir->fd, prefix, O_PATH | O_NOFOLLOW);
            if (lfd < 0)
                return -1;
            ssize_t n = readlinkat(lfd, "", target, PATH_MAX - 1);
            close(lfd);
            if (n <= 0)
                return -1;
            target[n] = '\0';
            return 1;
        } else {
            return -1;
        }
        if (!*e)
            return -1;
        c = e + 1;
    }
}

static int escape_error(const host_target *t, const char *local_path, ipb_error **err) {
    size_t plen;
    char target[PATH_MAX];
    int kind = find_escape(t, &plen, target);
    if (kind == 0)
        return ipb_error_set(err, 0, "'%s': a '..' in it leads outside the allowed directory %s", local_path,
                             t->dir->given);
    if (kind == 1)
        return ipb_error_set(err, 0, "'%s': a symlink, %s/%.*s (to '%s'), leads outside the allowed directory %s",
                             local_path, t->dir->given, (int)plen, t->rest, target, t->dir->given);
    return ipb_error_set(err, 0, "'%s': a symlink or '..' in it leads outside the allowed directory %s", local_path,
                         t->dir->given);
}

/* RESOLVE_BENEATH refuses every absolute symlink, also one that names a place inside an
 * allowed directory (~/data -> /home/me/big/data): such a link is followed here, by mapping
 * its target (and what follows it in the path) to an allowed directory again. Whatever
 * readlink says, the next open is still beneath an allowed directory's fd. Returns 1 when t
 * was redirected, 0 when the escape is real. */
static int follow_absolute_link(const ipb_host_dirs *d, host_target *t) {
    size_t plen;
    char target[PATH_MAX];
    if (find_escape(t, &plen, target) != 1 || target[0] != '/')
        return 0;
    char joined[PATH_MAX], clean[PATH_MAX];
    if (snprintf(joined, sizeof(joined), "%s%s", target, t->rest + plen) >= (int)sizeof(joined))
        return 0;
    bool dotdot;
    lexical_clean(joined, clean, &dotdot);
    size_t ml;
    const ipb_host_dir *dir = dotdot ? NULL : match_dir(d, clean, false, &ml);
    if (!dir || dir->fd < 0)
        return 0;
    const char *rest = clean + ml;
    while (*rest == '/')
        rest++;
    snprintf(t->rest, sizeof(t->rest), "%s", rest);
    t->dir = dir;
    return 1;
}

#define MAX_LINK_HOPS 8

static int open_error(const host_target *t, const char *local_path, int e, const char *what, ipb_error **err) {
    switch (e) {
    case EXDEV:
        return escape_error(t, local_path, err);
    case ENOENT:
        return ipb_error_set(err, 0, "%s not found: %s", what, local_path);
    case ENOTDIR:
        return ipb_error_set(err, 0, "'%s': a part of the path is not a directory", local_path);
    case ELOOP:
        return ipb_error_set(err, 0, "'%s': too many levels of symlinks, or a /proc magic link (refused)", local_path);
    case ENOSYS:
        return ipb_error_set(err, e, "'%s': openat2 is needed (Linux 5.6 or later)", local_path);
    case EAGAIN:
        return ipb_error_set(err, 0, "'%s' kept changing while it was resolved (a rename race); try again",
                             local_path);
    default:
        return ipb_error_set(err, e, "opening %s", local_path);
    }
}

/* ---- reading ---- */

int ipb_host_open_read(const ipb_host_dirs *d, const char *local_path, int *ret_fd, ipb_error **err) {
    host_target t;
    if (locate(d, local_path, false, &t, err) < 0)
        return -1;
    /* Look first without opening: a device is not opened at all unless it was swapped in
     * after this look (then the fstat below refuses it). */
    cleanup_close int pfd = -1;
    for (int hops = 0;; hops++) {
        pfd = openat2_beneath(t.dir->fd, *t.rest ? t.rest : ".", O_PATH);
        if (pfd >= 0 || errno != EXDEV || hops >= MAX_LINK_HOPS || !follow_absolute_link(d, &t))
            break;
    }
    if (pfd < 0)
        return open_error(&t, local_path, errno, "file", err);
    const char *rest = *t.rest ? t.rest : ".";
    struct stat st;
    if (fstat(pfd, &st) < 0)
        return ipb_error_set(err, errno, "%s", local_path);
    if (!S_ISREG(st.st_mode))
        return ipb_error_set(err, 0, "'%s' is not a regular file (it is %s)", local_path, kind_of(st.st_mode));
    /* O_NONBLOCK: a FIFO swapped in after the look opens at once (and is refused below)
     * instead of waiting for a writer. */
    cleanup_close int fd = openat2_beneath(t.dir->fd, rest, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return open_error(&t, local_path, errno, "file", err);
    if (fstat(fd, &st) < 0)
        return ipb_error_set(err, errno, "%s", local_path);
    if (!S_ISREG(st.st_mode))
        return ipb_error_set(err, 0, "'%s' is not a regular file (it is %s)", local_path, kind_of(st.st_mode));
    ipb_set_nonblock(fd, 0);
    *ret_fd = steal_fd(fd);
    return 0;
}

/* ---- writing ---- */

/* The directory `parent` (relative to the allowed directory), created where missing: each
 * created component is made with mkdirat() in its parent's fd and then opened again from
 * the allowed directory's fd with RESOLVE_BENEATH, never by name from anywhere else.
 * Returns -EXDEV (no error set) when the path leads outside, else -1 with *err. */
static int open_parent(const host_target *t, const char *local_path, const char *parent, int *ret_fd,
                       ipb_error **err) {
    int fd = openat2_beneath(t->dir->fd, parent, O_PATH | O_DIRECTORY);
    if (fd >= 0) {
        *ret_fd = fd;
        return 0;
    }
    if (errno == EXDEV)
        return -EXDEV;
    if (errno != ENOENT)
        return open_error(t, local_path, errno, "directory", err);
    cleanup_close int cur = fcntl(t->dir->fd, F_DUPFD_CLOEXEC, 3);
    if (cur < 0)
        return ipb_error_set(err, errno, "%s", local_path);
    char prefix[PATH_MAX];
    for (const char *c = parent;;) {
        const char *e = strchrnul(c, '/');
        size_t plen = (size_t)(e - parent);
        memcpy(prefix, parent, plen);
        prefix[plen] = '\0';
        int nfd = openat2_beneath(t->dir->fd, prefix, O_PATH | O_DIRECTORY);
        if (nfd < 0 && errno == ENOENT) {
            char comp[NAME_MAX + 1];
            size_t cl = (size_t)(e - c);
            if (cl > NAME_MAX)
                return ipb_error_set(err, ENAMETOOLONG, "%s", local_path);
            memcpy(comp, c, cl);
            comp[cl] = '\0';
            /* mkdirat does not follow a symlink in the last place (a dangling one gives EEXIST
             * and the open below then fails): nothing is created where a link points. */
            if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST)
                return ipb_error_set(err, errno, "creating %s/%s", t->dir->given, prefix);
            nfd = openat2_beneath(t->dir->fd, prefix, O_PATH | O_DIRECTORY);
        }
        if (nfd < 0) {
            int e2 = errno;
            if (e2 == ENOENT) /* there now, yet not found: a dangling symlink */
                return ipb_error_set(err, 0, "'%s': %s/%s is a symlink to nowhere; refusing to create its target",
                                     local_path, t->dir->given, prefix);
            if (e2 == ENOTDIR)
                return ipb_error_set(err, 0, "'%s': %s/%s is not a directory", local_path, t->dir->given, prefix);
            if (e2 == EXDEV)
                return -EXDEV;
            return open_error(t, local_path, e2, "directory", err);
        }
        close(cur);
        cur = nfd;
        if (!*e)
            break;
        c = e + 1;
    }
    *ret_fd = steal_fd(cur);
    return 0;
}

int ipb_host_write_from(const ipb_host_dirs *d, const char *local_path, int src_fd, const ipb_commit_gate *gate,
                        ipb_error **err) {
    host_target t;
    if (locate(d, local_path, true, &t, err) < 0)
        return -1;
    if (!*t.rest)
        return ipb_error_set(err, 0, "local_path '%s' is an allowed directory itself; name a file in it",
                             local_path);
    char parent[PATH_MAX];
    const char *name;
    cleanup_close int pfd = -1;
    for (int hops = 0;; hops++) {
        snprintf(parent, sizeof(parent), "%s", t.rest);
        char *slash = strrchr(parent, '/');
        name = slash ? t.rest + (slash - parent) + 1 : t.rest;
        if (!slash) {
            if ((pfd = fcntl(t.dir->fd, F_DUPFD_CLOEXEC, 3)) < 0)
                return ipb_error_set(err, errno, "%s", local_path);
            break;
        }
        *slash = '\0';
        int e = open_parent(&t, local_path, parent, &pfd, err);
        if (e == 0)
            break;
        if (e != -EXDEV || hops >= MAX_LINK_HOPS || !follow_absolute_link(d, &t))
            return e == -EXDEV ? escape_error(&t, local_path, err) : -1;
    }
    if (!strcmp(name, "..") || !strcmp(name, "."))
        return ipb_error_set(err, 0, "local_path '%s' must name a file", local_path);
    struct stat st;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        return ipb_error_set(err, 0, "local_path '%s' is a directory; name a file", local_path);
    char what[PATH_MAX + 16];
    snprintf(what, sizeof(what), "writing %s", local_path);
    return ipb_atomic_write_at(pfd, name, src_fd, NULL, 0, gate, what, err);
}
