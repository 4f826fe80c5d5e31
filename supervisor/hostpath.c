#include "hostpath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdio.h"
#include "hostwalk.h"
#include "strbuf.h"

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
        /* From "/" on fds, as any path named on the command line: not through a symlink that
         * a sandbox could have planted; the canonical path is that of the fd held. */
        ipb_error *e = NULL;
        if (ipb_host_named_open("--allowed-dir", h->given, IPB_NAMED_DIR, &h->fd, &h->canon, &e) < 0) {
            h->fd = -1;
            h->open_errno = e && e->errnum ? e->errnum : 0;
            h->why = e && !e->errnum ? strdup(ipb_error_msg(e)) : NULL;
            char *m = ipb_strdupf("%s%s%s (%s)", missing ? missing : "", missing ? ", " : "", h->given,
                                  h->open_errno ? strerror(h->open_errno) : ipb_error_msg(e));
            ipb_error_free(e);
            free(missing);
            missing = m;
            continue;
        }
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
    ipb_host_dirs d = {calloc(src->n + 1, sizeof(*d.v)), 0, NULL, 0};
    if (!d.v)
        return ipb_error_set(err, ENOMEM, "allowed directories");
    if (src->n_roots) {
        d.roots = calloc(src->n_roots, sizeof(*d.roots));
        if (!d.roots) {
            free(d.v);
            return ipb_error_set(err, ENOMEM, "allowed directories");
        }
        memcpy(d.roots, src->roots, src->n_roots * sizeof(*d.roots));
        d.n_roots = src->n_roots;
    }
    for (size_t i = 0; i < src->n; i++) {
        const ipb_host_dir *s = &src->v[i];
        ipb_host_dir *h = &d.v[d.n++];
        h->open_errno = s->open_errno;
        h->fd = s->fd >= 0 ? fcntl(s->fd, F_DUPFD_CLOEXEC, 3) : -1;
        h->given = strdup(s->given);
        h->canon = s->canon ? strdup(s->canon) : NULL;
        h->why = s->why ? strdup(s->why) : NULL;
        if ((s->fd >= 0 && h->fd < 0) || !h->given || (s->canon && !h->canon) || (s->why && !h->why)) {
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
        free(d->v[i].why);
    }
    free(d->v);
    free(d->roots);
    d->v = NULL;
    d->roots = NULL;
    d->n = d->n_roots = 0;
}

int ipb_host_dirs_add_sandbox_root(ipb_host_dirs *d, int fd, ipb_error **err) {
    struct stat st;
    if (fstat(fd, &st) < 0)
        return ipb_error_set(err, errno, "a directory given to the sandbox");
    struct ipb_host_root *r = realloc(d->roots, (d->n_roots + 1) * sizeof(*r));
    if (!r)
        return ipb_error_set(err, ENOMEM, "a directory given to the sandbox");
    d->roots = r;
    d->roots[d->n_roots++] = (struct ipb_host_root){st.st_dev, st.st_ino};
    return 0;
}

/* ---- from local_path to (allowed directory, path below it) ---- */

typedef struct host_target {
    const ipb_host_dir *dir;
    char rest[PATH_MAX]; /* relative to dir->fd; "" for the directory itself */
} host_target;

static int outside_error(const ipb_host_dirs *d, const char *local_path, ipb_error **err) {
    char list[1024] = "";
    for (size_t i = 0; i < d->n; i++) {
        strncat(list, i ? ", " : "", sizeof(list) - strlen(list) - 1);
        strncat(list, d->v[i].given, sizeof(list) - strlen(list) - 1);
    }
    return ipb_error_set(err, 0,
                         "'%s' is outside the allowed directories (%s); start ipybox with --allowed-dir to "
                         "allow another",
                         local_path, d->n ? list : "none");
}

/* Where the path leads, for a path that names no allowed directory (or does so only through
 * '..'): walked from "/" with the same rules (no symlink inside a sandbox's tree followed),
 * giving a path of real directories. Only a hint to the directory: the walk beneath it
 * decides. For a write, the parent is walked as far as it exists; the rest is appended and
 * may not hold '..'. */
static int hint(const ipb_host_dirs *d, ipb_hw_trees *trees, const char *local_path, const char *clean, bool for_write,
                char *out, ipb_error **err) {
    char parent[PATH_MAX];
    const char *name = "";
    snprintf(parent, sizeof(parent), "%s", clean);
    if (for_write) {
        char *slash = strrchr(parent, '/');
        name = clean + (slash - parent) + 1;
        *slash = '\0';
    }
    ipb_hw_result r;
    if (ipb_hw_walk(d, trees, local_path, NULL, parent, for_write ? IPB_HW_HINT_PARENT : IPB_HW_HINT, &r, err) < 0)
        return -1;
    ipb_hw_result_close(&r);
    const char *tail = for_write ? r.missing : r.name;
    int n = snprintf(out, PATH_MAX, "/%s%s%s%s%s", r.path, *r.path && *tail ? "/" : "", tail,
                     (*r.path || *tail) && *name ? "/" : "", name);
    return n >= PATH_MAX ? ipb_error_set(err, ENAMETOOLONG, "%s", local_path) : 0;
}

static int locate(const ipb_host_dirs *d, ipb_hw_trees *trees, const char *local_path, bool for_write, host_target *t,
                  ipb_error **err) {
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
    ipb_hw_lexical_clean(local_path, clean, &dotdot);
    size_t ml = 0;
    const ipb_host_dir *dir = dotdot ? NULL : ipb_hw_match_dir(d, clean, false, &ml);
    char canon[PATH_MAX];
    const char *path = clean;
    if (!dir || dir->fd < 0) {
        /* Not in an allowed directory by name (or only through '..'). */
        ipb_error *herr = NULL;
        if (hint(d, trees, local_path, clean, for_write, canon, &herr) < 0) {
            if (!dir || for_write) {
                *err = herr;
                return -1;
            }
            ipb_error_free(herr); /* the message below says more */
            canon[0] = '\0';
        }
        size_t cl = 0;
        const ipb_host_dir *cd = ipb_hw_match_dir(d, canon, true, &cl);
        if (cd && (cd->fd >= 0 || !dir)) {
            dir = cd;
            ml = cl;
            path = canon;
        }
    }
    if (!dir)
        return outside_error(d, local_path, err);
    if (dir->fd < 0)
        return ipb_error_set(err, 0,
                             "'%s' is in the allowed directory %s, which could not be opened when the "
                             "session started (%s); allowed directories are opened once, at start: create "
                             "it and start ipybox again",
                             local_path, dir->given, dir->why ? dir->why : strerror(dir->open_errno));
    const char *rest = path + ml;
    while (*rest == '/')
        rest++;
    snprintf(t->rest, sizeof(t->rest), "%s", rest);
    t->dir = dir;
    return 0;
}

static const char *kind_of(mode_t m) {
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "of an unknown kind";
}

/* ---- reading ---- */

/* The regular file the walk reached, opened for reading (returned blocking). */
static int open_regular(const ipb_hw_result *r, const char *local_path, int *ret_fd, ipb_error **err) {
    struct stat st, st2;
    cleanup_close int fd = -1;
    if (fstat(r->fd, &st) < 0)
        return ipb_error_set(err, errno, "looking at %s", local_path);
    if (!S_ISREG(st.st_mode))
        return ipb_error_set(err, 0, "'%s' is not a regular file (it is %s)", local_path, kind_of(st.st_mode));
    /* The name in the directory held, following nothing. O_NONBLOCK: a FIFO swapped in
     * after the look opens at once (and is refused below) instead of waiting for a writer. */
    fd = ipb_hw_openat2(r->dirfd, r->name, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW,
                        RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (fd < 0) {
        if (errno == ELOOP || errno == ENOENT)
            return ipb_error_set(err, 0, "'%s' kept changing while it was opened; try again", local_path);
        return ipb_error_set(err, errno, "opening %s", local_path);
    }
    if (fstat(fd, &st2) < 0)
        return ipb_error_set(err, errno, "looking at %s once opened", local_path);
    if (!S_ISREG(st2.st_mode))
        return ipb_error_set(err, 0, "'%s' is not a regular file (it is %s)", local_path, kind_of(st2.st_mode));
    if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino)
        return ipb_error_set(err, 0, "'%s' kept changing while it was opened; try again", local_path);
    ipb_set_nonblock(fd, 0);
    *ret_fd = steal_fd(fd);
    return 0;
}

int ipb_host_open_read(const ipb_host_dirs *d, const char *local_path, int *ret_fd, ipb_error **err) {
    host_target t;
    ipb_hw_trees trees = {0};
    /* Walked with O_PATH: a device or FIFO is looked at, not opened. */
    ipb_hw_result r;
    int w = locate(d, &trees, local_path, false, &t, err);
    if (w == 0)
        w = ipb_hw_walk(d, &trees, local_path, t.dir, t.rest, IPB_HW_READ, &r, err);
    ipb_hw_trees_free(&trees);
    if (w < 0)
        return -1;
    int ret = open_regular(&r, local_path, ret_fd, err);
    ipb_hw_result_close(&r);
    return ret;
}

/* ---- paths named on the command line ---- */

char *ipb_fd_path(int fd) {
    char proc[64], buf[PATH_MAX];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, buf, sizeof(buf) - 1);
    if (n <= 0 || buf[0] != '/')
        return NULL;
    buf[n] = '\0';
    return strdup(buf);
}

/* The walk from "/" of a named path (made absolute against the working directory). */
static int named_walk(const char *what, const char *path, enum ipb_hw_mode mode, ipb_hw_result *r, ipb_error **err) {
    static const ipb_host_dirs none = {0};
    cleanup_free char *abs = NULL;
    if (path[0] != '/') {
        cleanup_free char *cwd = getcwd(NULL, 0);
        if (!cwd || !(abs = ipb_strdupf("%s/%s", cwd, path)))
            return ipb_error_set(err, errno ? errno : ENOMEM, "%s %s", what, path);
    }
    ipb_hw_trees trees = {0};
    int w = ipb_hw_walk(&none, &trees, path, NULL, abs ? abs : path, mode, r, err);
    ipb_hw_trees_free(&trees);
    return w < 0 ? ipb_error_wrap(err, "%s", what) : 0;
}

int ipb_host_named_open(const char *what, const char *path, enum ipb_named_kind kind, int *ret_fd, char **ret_canon,
                        ipb_error **err) {
    ipb_hw_result r;
    enum ipb_hw_mode mode = kind == IPB_NAMED_MAKE_DIR || kind == IPB_NAMED_MAKE ? IPB_HW_MAKE
                            : kind == IPB_NAMED_NEW_DIR                          ? IPB_HW_MAKE_LAST
                                                                                 : IPB_HW_READ;
    if (named_walk(what, path, mode, &r, err) < 0)
        return -1;
    struct stat st;
    int ret = -1;
    if (fstat(r.fd, &st) < 0) {
        ipb_error_set(err, errno, "%s %s", what, path);
    } else if ((kind == IPB_NAMED_DIR || kind == IPB_NAMED_MAKE_DIR || kind == IPB_NAMED_NEW_DIR) &&
               !S_ISDIR(st.st_mode)) {
        ipb_error_set(err, ENOTDIR, "%s %s", what, path);
    } else if (kind == IPB_NAMED_FILE && !S_ISREG(st.st_mode)) {
        ipb_error_set(err, 0, "%s '%s' is not a regular file (it is %s)", what, path, kind_of(st.st_mode));
    } else if (ret_canon && !(*ret_canon = ipb_fd_path(r.fd))) {
        ipb_error_set(err, 0, "%s %s: cannot tell where it is (removed?)", what, path);
    } else {
        *ret_fd = steal_fd(r.fd);
        ret = 0;
    }
    ipb_hw_result_close(&r);
    return ret;
}

int ipb_host_named_read(const char *what, const char *path, size_t max, char **ret_text, size_t *ret_len,
                        ipb_error **err) {
    ipb_hw_result r;
    if (named_walk(what, path, IPB_HW_READ, &r, err) < 0)
        return -1;
    cleanup_close int fd = -1;
    int ret = open_regular(&r, path, &fd, err);
    ipb_hw_result_close(&r);
    if (ret < 0)
        return ipb_error_wrap(err, "%s", what);
    cleanup_free char *buf = malloc(max + 1);
    size_t len = 0;
    if (!buf)
        return ipb_error_set(err, ENOMEM, "%s %s", what, path);
    int rr = ipb_read_all(fd, buf, max, &len);
    if (rr < 0)
        return ipb_error_set(err, -rr, "%s: cannot read '%s'", what, path);
    buf[len] = '\0';
    *ret_text = steal_ptr(buf);
    if (ret_len)
        *ret_len = len;
    return 0;
}

/* ---- writing ---- */

int ipb_host_write_from(const ipb_host_dirs *d, const char *local_path, int src_fd, const ipb_commit_gate *gate,
                        ipb_error **err) {
    host_target t;
    ipb_hw_trees trees = {0};
    int ret = locate(d, &trees, local_path, true, &t, err);
    if (ret < 0) {
        ipb_hw_trees_free(&trees);
        return -1;
    }
    if (!*t.rest) {
        ipb_hw_trees_free(&trees);
        return ipb_error_set(err, 0, "local_path '%s' is an allowed directory itself; name a file in it", local_path);
    }
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", t.rest);
    char *slash = strrchr(parent, '/');
    const char *name = slash ? t.rest + (slash - parent) + 1 : t.rest;
    if (slash)
        *slash = '\0';
    else
        parent[0] = '\0';
    /* The parent: each component a real directory (made where missing), symlinks judged. */
    ipb_hw_result r;
    if (!strcmp(name, "..") || !strcmp(name, "."))
        ret = ipb_error_set(err, 0, "local_path '%s' must name a file", local_path);
    else
        ret = ipb_hw_walk(d, &trees, local_path, t.dir, parent, IPB_HW_PARENT, &r, err);
    ipb_hw_trees_free(&trees);
    if (ret < 0)
        return -1;
    struct stat st;
    if (fstatat(r.dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
        ret = ipb_error_set(err, 0, "local_path '%s' is a directory; name a file", local_path);
    } else {
        char what[PATH_MAX + 16];
        snprintf(what, sizeof(what), "writing %s", local_path);
        /* A temporary in that directory's fd, renamed over the name: a symlink there is
         * replaced, never followed. */
        ret = ipb_atomic_write_at(r.dirfd, name, -1, src_fd, NULL, 0, gate, what, err);
    }
    ipb_hw_result_close(&r);
    return ret;
}
