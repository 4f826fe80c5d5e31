#include "hostwalk.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "cleanup.h"
#include "statedir.h"

#define MAX_HOPS 40
/* One component at a time: no symlink is followed by the kernel, none is left behind '..'. */
#define STEP (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
/* How far up a directory is looked at for one of the session's own trees. */
#define MAX_UP 4096

int ipb_hw_openat2(int dirfd, const char *path, int flags, unsigned long long resolve) {
    struct open_how how = {.flags = (unsigned long long)(flags | O_CLOEXEC), .resolve = resolve};
    for (int tries = 0;; tries++) {
        int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        /* EAGAIN: a rename raced with the lookup; retrying is what the man page advises. */
        if (fd >= 0 || errno != EAGAIN || tries >= 8)
            return fd;
    }
}

/* ---- names ---- */

void ipb_hw_lexical_clean(const char *in, char *out, bool *ret_dotdot) {
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
    while (l > 1 && dir[l - 1] == '/')
        l--;
    if (l == 1 && dir[0] == '/')
        return 1;
    if (strncmp(path, dir, l) || (path[l] != '/' && path[l] != '\0'))
        return 0;
    return l;
}

const ipb_host_dir *ipb_hw_match_dir(const ipb_host_dirs *d, const char *path, bool canon_only, size_t *ret_len) {
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

/* ---- the walk ---- */

typedef struct walk {
    const ipb_host_dirs *d;
    const char *local_path;
    const ipb_host_dir *dir; /* NULL: from "/" */
    int rootfd;              /* dir->fd, or slashfd */
    int slashfd;             /* "/", for the hint modes */
    int cur;                 /* the directory reached */
    char path[PATH_MAX];     /* cur below the root, as walked: real directories only */
    char rem[2 * PATH_MAX];  /* what is left to walk */
    size_t orig_len;         /* the tail of rem that is still local_path's own text */
    char link[PATH_MAX];     /* the symlink followed last, and its target (for messages) */
    char target[PATH_MAX];
    int hops;
    ipb_hw_trees *trees;
} walk;

static void disp(const walk *w, const char *name, char out[PATH_MAX]) {
    const char *root = w->dir ? w->dir->given : "";
    if (!strcmp(root, "/"))
        root = "";
    if (snprintf(out, PATH_MAX, "%s/%s%s%s", root, w->path, *w->path && *name ? "/" : "", name) >= PATH_MAX)
        memcpy(out + PATH_MAX - 4, "...", 4);
}

/* The next component of rem: 1, 0 at the end, -1 (too long). from_link: it comes from a
 * symlink's target, not from local_path; last: nothing follows it. */
static int next(walk *w, char comp[NAME_MAX + 1], bool *from_link, bool *last, ipb_error **err) {
    char *p = w->rem;
    while (*p == '/')
        p++;
    if (!*p)
        return 0;
    *from_link = strlen(p) > w->orig_len;
    char *e = strchrnul(p, '/');
    size_t cl = (size_t)(e - p);
    if (cl > NAME_MAX)
        return ipb_error_set(err, ENAMETOOLONG, "%s", w->local_path);
    memcpy(comp, p, cl);
    comp[cl] = '\0';
    while (*e == '/')
        e++;
    *last = !*e;
    memmove(w->rem, e, strlen(e) + 1);
    size_t left = strlen(w->rem);
    if (w->orig_len > left)
        w->orig_len = left;
    return 1;
}

static int prepend(walk *w, const char *text) {
    size_t tl = strlen(text), rl = strlen(w->rem);
    if (tl + 1 + rl + 1 > sizeof(w->rem))
        return -1;
    memmove(w->rem + tl + 1, w->rem, rl + 1);
    memcpy(w->rem, text, tl);
    w->rem[tl] = '/';
    return 0;
}

static int link_outside(const walk *w, ipb_error **err) {
    return ipb_error_set(err, 0, "'%s': a symlink, %s (to '%s'), leads outside the allowed directory %s", w->local_path,
                         w->link, w->target, w->dir ? w->dir->given : "/");
}

static int nowhere(const walk *w, ipb_error **err) {
    return ipb_error_set(err, 0, "'%s': %s is a symlink to nowhere; refusing to create its target", w->local_path,
                         w->link);
}

static bool path_within(const char *p, const char *tree) {
    size_t n = prefix_match(p, tree);
    return n > 0;
}

/* Whether one of this session's own trees (its workspace, its binds: fds held since the start)
 * is cur or above it, by identity: also when reached through another mount or renamed since. */
static bool own_tree_above(const walk *w) {
    if (!w->d->n_roots)
        return false;
    struct stat st;
    if (fstat(w->cur, &st) < 0)
        return true;
    cleanup_close int up = -1;
    for (int i = 0; i < MAX_UP; i++) {
        for (size_t r = 0; r < w->d->n_roots; r++)
            if (w->d->roots[r].dev == st.st_dev && w->d->roots[r].ino == st.st_ino)
                return true;
        int nfd = openat(up >= 0 ? up : w->cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct stat pst;
        if (nfd < 0 || fstat(nfd, &pst) < 0) {
            if (nfd >= 0)
                close(nfd);
            return true; /* cannot tell: as if inside */
        }
        if (up >= 0)
            close(up);
        up = nfd;
        if (pst.st_dev == st.st_dev && pst.st_ino == st.st_ino)
            return false; /* "/" */
        st = pst;
    }
    return true;
}

/* Whether the directory cur (which holds a symlink) lies inside a tree that a sandbox could
 * write: 1 yes (or cannot tell), 0 no, -1 with *err. Two views, either one suffices:
 *   - the kernel's present path of the very directory held (/proc/self/fd/N, not a name
 *     looked up again), prefix-matched against the canonical trees of the state directory
 *     (every workspace and bind ever granted, sessions/, workspaces/), read once per call;
 *   - identity (st_dev, st_ino) with this session's workspace and binds, walking up by '..'.
 * A sandbox cannot move a directory into or out of a tree it was given (the tree is a mount
 * in its namespace: a rename across it fails, and nothing outside it is visible), so the
 * answer cannot change while the walk holds the directory. */
static int in_sandbox_tree(walk *w, const char *link, ipb_error **err) {
    char proc[64], where[PATH_MAX];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", w->cur);
    ssize_t n = readlink(proc, where, sizeof(where) - 1);
    static const char deleted[] = " (deleted)";
    if (n <= 0 || where[0] != '/' ||
        ((size_t)n >= sizeof(deleted) - 1 && !memcmp(where + n - (sizeof(deleted) - 1), deleted, sizeof(deleted) - 1)))
        return 1;
    where[n] = '\0';
    if (!w->trees->loaded) {
        ipb_error *e = NULL;
        if (ipb_sandbox_trees(&w->trees->v, &e) < 0) {
            ipb_error_set(err, 0,
                          "'%s': cannot tell whether the symlink %s was planted by a sandbox (%s); not "
                          "following it",
                          w->local_path, link, ipb_error_msg(e));
            ipb_error_free(e);
            return -1;
        }
        w->trees->loaded = true;
    }
    for (size_t i = 0; i < w->trees->v.n; i++)
        if (path_within(where, w->trees->v.v[i]))
            return 1;
    return own_tree_above(w) ? 1 : 0;
}

/* A symlink (lfd) named comp in cur: judged, then its target put in front of what is left. */
static int follow(walk *w, int lfd, const char *comp, ipb_error **err) {
    char where[PATH_MAX];
    disp(w, comp, where);
    if (++w->hops > MAX_HOPS)
        return ipb_error_set(err, 0, "'%s': too many levels of symlinks (at %s)", w->local_path, where);
    struct statfs sf;
    if (fstatfs(w->cur, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC)
        return ipb_error_set(err, 0, "'%s': the way there passes through %s, a link in /proc (refused)", w->local_path,
                             where);
    int in = in_sandbox_tree(w, where, err);
    if (in < 0)
        return -1;
    if (in)
        return ipb_error_set(err, 0,
                             "'%s': the way there passes through the symlink %s, inside a directory that "
                             "a sandbox could write (a workspace or bind); ipybox does not follow such a "
                             "symlink, since kernel code may have planted it: name the real path",
                             w->local_path, where);
    char target[PATH_MAX];
    ssize_t n = readlinkat(lfd, "", target, sizeof(target) - 1);
    if (n <= 0)
        return ipb_error_set(err, n < 0 ? errno : 0, "reading the symlink %s", where);
    target[n] = '\0';
    memcpy(w->link, where, sizeof(w->link));
    memcpy(w->target, target, sizeof(w->target));
    const char *text = target;
    char clean[PATH_MAX];
    if (target[0] == '/') {
        /* Absolute: from "/" again; beneath an allowed directory only when the target names
         * one (the open that follows is still beneath that directory's fd). */
        int nroot = w->slashfd;
        if (w->dir) {
            bool dotdot;
            size_t ml;
            ipb_hw_lexical_clean(target, clean, &dotdot);
            const ipb_host_dir *nd = ipb_hw_match_dir(w->d, clean, false, &ml);
            if (!nd || nd->fd < 0)
                return link_outside(w, err);
            w->dir = nd;
            nroot = w->rootfd = nd->fd;
            text = clean + ml;
        }
        int fd = fcntl(nroot, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
            return ipb_error_set(err, errno, "%s", w->local_path);
        close(w->cur);
        w->cur = fd;
        w->path[0] = '\0';
    }
    if (prepend(w, text) < 0)
        return ipb_error_set(err, ENAMETOOLONG, "'%s': following %s", w->local_path, where);
    return 0;
}

static int up(walk *w, bool from_link, ipb_error **err) {
    if (!*w->path) {
        if (!w->dir)
            return 0; /* "/.." is "/" */
        if (from_link)
            return link_outside(w, err);
        return ipb_error_set(err, 0, "'%s': a '..' in it leads outside the allowed directory %s", w->local_path,
                             w->dir->given);
    }
    char *s = strrchr(w->path, '/');
    *(s ? s : w->path) = '\0';
    /* The same real directories again, from the root's fd: no symlink is followed. */
    int fd = ipb_hw_openat2(w->rootfd, *w->path ? w->path : ".", O_PATH | O_DIRECTORY, STEP);
    if (fd < 0)
        return ipb_error_set(err, 0, "'%s' kept changing while it was resolved (%s); try again", w->local_path,
                             strerror(errno));
    close(w->cur);
    w->cur = fd;
    return 0;
}

static int step_error(const walk *w, const char *comp, int e, ipb_error **err) {
    char where[PATH_MAX];
    disp(w, comp, where);
    switch (e) {
    case ENOSYS:
        return ipb_error_set(err, e, "'%s': openat2 is needed (Linux 5.6 or later)", w->local_path);
    case ENOTDIR:
        return ipb_error_set(err, 0, "'%s': a part of the path is not a directory", w->local_path);
    case EXDEV:
    case ELOOP:
    case EAGAIN:
        return ipb_error_set(err, 0, "'%s' kept changing while it was resolved (at %s); try again", w->local_path,
                             where);
    default:
        return ipb_error_set(err, e, "opening %s", where);
    }
}

static bool has_dotdot(const char *p) {
    for (const char *c = p; *c;) {
        const char *e = strchrnul(c, '/');
        if (e - c == 2 && c[0] == '.' && c[1] == '.')
            return true;
        c = *e ? e + 1 : e;
    }
    return false;
}

static int run(walk *w, enum ipb_hw_mode mode, ipb_hw_result *ret, ipb_error **err) {
    bool follow_last = mode == IPB_HW_READ || mode == IPB_HW_HINT || mode == IPB_HW_MAKE || mode == IPB_HW_MAKE_LAST;
    for (;;) {
        char comp[NAME_MAX + 1];
        bool from_link = false, last = false;
        int k = next(w, comp, &from_link, &last, err);
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        if (!strcmp(comp, "."))
            continue;
        if (!strcmp(comp, "..")) {
            if (up(w, from_link, err) < 0)
                return -1;
            continue;
        }
        int fd = ipb_hw_openat2(w->cur, comp, O_PATH | O_NOFOLLOW, STEP);
        if (fd < 0 && errno == ENOENT && mode == IPB_HW_MAKE_LAST && !last) {
            char where[PATH_MAX];
            disp(w, comp, where);
            ipb_error_set(err, 0,
                          "'%s': %s does not exist (only the last directory is made: create its parent "
                          "first, or check the path)",
                          w->local_path, where);
            if (err && *err)
                (*err)->errnum = ENOENT;
            return -1;
        }
        if (fd < 0 && errno == ENOENT) {
            if (mode == IPB_HW_PARENT || mode == IPB_HW_HINT_PARENT || mode == IPB_HW_MAKE ||
                mode == IPB_HW_MAKE_LAST) {
                /* A missing directory is made, but never where a symlink points. */
                if (from_link)
                    return nowhere(w, err);
                if (mode == IPB_HW_HINT_PARENT) {
                    int n = snprintf(ret->missing, sizeof(ret->missing), "%s%s%s", comp, *w->rem ? "/" : "", w->rem);
                    if (n >= (int)sizeof(ret->missing))
                        return ipb_error_set(err, ENAMETOOLONG, "%s", w->local_path);
                    if (has_dotdot(ret->missing))
                        return ipb_error_set(err, 0,
                                             "local_path '%s' has a '..' after a directory that does not "
                                             "exist; give the path without '..'",
                                             w->local_path);
                    break;
                }
                char where[PATH_MAX];
                disp(w, comp, where);
                /* mkdirat does not follow a symlink there (one swapped in gives EEXIST, and
                 * the open below then meets it as a symlink). */
                if (mkdirat(w->cur, comp, 0755) < 0 && errno != EEXIST)
                    return ipb_error_set(err, errno, "creating %s", where);
                fd = ipb_hw_openat2(w->cur, comp, O_PATH | O_NOFOLLOW, STEP);
            } else {
                ipb_error_set(err, 0, "file not found: %s", w->local_path);
                if (err && *err)
                    (*err)->errnum = ENOENT; /* for callers that tell why, the sentence as it is */
                return -1;
            }
        }
        if (fd < 0)
            return step_error(w, comp, errno, err);
        struct stat st;
        if (fstat(fd, &st) < 0) {
            int e = errno;
            close(fd);
            return ipb_error_set(err, e, "%s", w->local_path);
        }
        if (S_ISLNK(st.st_mode)) {
            int r = follow(w, fd, comp, err);
            close(fd);
            if (r < 0)
                return -1;
            continue;
        }
        if (last && follow_last) {
            ret->fd = fd;
            snprintf(ret->name, sizeof(ret->name), "%s", comp);
            break;
        }
        if (!S_ISDIR(st.st_mode)) {
            char where[PATH_MAX];
            disp(w, comp, where);
            close(fd);
            return ipb_error_set(err, 0, "'%s': %s is not a directory", w->local_path, where);
        }
        size_t pl = strlen(w->path);
        if (pl + 1 + strlen(comp) >= sizeof(w->path)) {
            close(fd);
            return ipb_error_set(err, ENAMETOOLONG, "%s", w->local_path);
        }
        snprintf(w->path + pl, sizeof(w->path) - pl, "%s%s", pl ? "/" : "", comp);
        close(w->cur);
        w->cur = fd;
    }
    if (follow_last && ret->fd < 0 && (ret->fd = fcntl(w->cur, F_DUPFD_CLOEXEC, 3)) < 0)
        return ipb_error_set(err, errno, "%s", w->local_path);
    ret->dir = w->dir;
    ret->dirfd = steal_fd(w->cur);
    memcpy(ret->path, w->path, sizeof(ret->path));
    return 0;
}

void ipb_hw_trees_free(ipb_hw_trees *t) {
    if (t->loaded)
        ipb_strv_free(&t->v);
    t->loaded = false;
}

int ipb_hw_walk(const ipb_host_dirs *d, ipb_hw_trees *trees, const char *local_path, const ipb_host_dir *dir,
                const char *rel, enum ipb_hw_mode mode, ipb_hw_result *ret, ipb_error **err) {
    memset(ret, 0, sizeof(*ret));
    ret->dirfd = ret->fd = -1;
    walk *w = calloc(1, sizeof(*w));
    if (!w)
        return ipb_error_set(err, ENOMEM, "%s", local_path);
    w->d = d;
    w->trees = trees;
    w->local_path = local_path;
    w->slashfd = w->cur = -1;
    int r = -1;
    if (mode == IPB_HW_HINT || mode == IPB_HW_HINT_PARENT || !dir) {
        w->slashfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        w->rootfd = w->slashfd;
    } else {
        w->dir = dir;
        w->rootfd = dir->fd;
    }
    if (w->rootfd < 0 || (w->cur = fcntl(w->rootfd, F_DUPFD_CLOEXEC, 3)) < 0) {
        ipb_error_set(err, errno, "%s: cannot start resolving it (out of file descriptors?)", local_path);
    } else if (snprintf(w->rem, sizeof(w->rem), "%s", rel) >= (int)sizeof(w->rem)) {
        ipb_error_set(err, ENAMETOOLONG, "%s: the path is too long to resolve", local_path);
    } else {
        w->orig_len = strlen(w->rem);
        r = run(w, mode, ret, err);
    }
    if (r < 0)
        ipb_hw_result_close(ret);
    if (w->cur >= 0)
        close(w->cur);
    if (w->slashfd >= 0)
        close(w->slashfd);
    free(w);
    return r;
}

void ipb_hw_result_close(ipb_hw_result *r) {
    if (r->dirfd >= 0)
        close(r->dirfd);
    if (r->fd >= 0)
        close(r->fd);
    r->dirfd = r->fd = -1;
}
