#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdio.h"

int ipb_mkdir_p(const char *path, int mode) {
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, (mode_t)mode) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, (mode_t)mode) < 0) {
        if (errno != EEXIST)
            return -errno;
        struct stat st;
        if (stat(buf, &st) < 0)
            return -errno;
        if (!S_ISDIR(st.st_mode))
            return -ENOTDIR;
    }
    return 0;
}

/* Deeper than this, directories are moved up instead of descended into (each level holds
 * two fds). */
#define RM_MAX_DEPTH 64
/* A bound on passes over the top directory, only reached if something keeps refilling it. */
#define RM_MAX_PASSES 1000000L

struct rm_walk {
    int topfd;  /* the directory being emptied */
    bool moved; /* this pass moved a directory up into it */
};

/* The walk holds a directory fd for each level it is in and names entries only relative to
 * those fds, one component at a time: an entry is unlinked (a symlink, a FIFO or a hard link
 * goes as a name, its target untouched) or opened O_DIRECTORY|O_NOFOLLOW, so no path is
 * ever resolved again while the walk runs and a symlink or rename swapped in mid-walk leads
 * nowhere outside the tree. Past RM_MAX_DEPTH levels a directory is not descended into but
 * moved up into the tree's top directory and removed on a later pass: depth costs neither
 * fds nor stack, and no depth leaves a tree behind. */
static int rm_entry(struct rm_walk *w, int dirfd, const char *name, int depth);

static int empty_dir_depth(struct rm_walk *w, int fd, int depth) {
    int dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dupfd < 0)
        return -errno;
    DIR *d = fdopendir(dupfd);
    if (!d) {
        int e = errno;
        close(dupfd);
        return -e;
    }
    rewinddir(d);
    int ret = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        int r = rm_entry(w, fd, de->d_name, depth + 1);
        if (r < 0 && ret == 0)
            ret = r;
    }
    closedir(d);
    return ret;
}

/* Moves the directory dirfd/name into the walk's top directory under a fresh hidden name. */
static int move_up(struct rm_walk *w, int dirfd, const char *name) {
    for (int tries = 0; tries < 16; tries++) {
        unsigned char rnd[8];
        char hex[17], tmp[32];
        if (ipb_random(rnd, sizeof(rnd)) < 0)
            return -errno;
        ipb_hex(rnd, sizeof(rnd), hex);
        snprintf(tmp, sizeof(tmp), ".ipybox-rm-%s", hex);
        if (renameat2(dirfd, name, w->topfd, tmp, RENAME_NOREPLACE) == 0) {
            w->moved = true;
            return 0;
        }
        if (errno == ENOENT)
            return 0;
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

static int rm_entry(struct rm_walk *w, int dirfd, const char *name, int depth) {
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -errno;
    if (depth > RM_MAX_DEPTH)
        return move_up(w, dirfd, name);
    cleanup_close int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    /* Make it writable in case sandbox code removed our write bit. */
    (void)fchmod(fd, 0700);
    int r = empty_dir_depth(w, fd, depth);
    if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return r < 0 ? r : -errno;
    return r;
}

/* Empties the directory open at fd, the walk's top: passes until one moves nothing up. */
static int empty_top(int fd) {
    struct rm_walk w = {.topfd = fd};
    int r = 0;
    for (long pass = 0; pass < RM_MAX_PASSES; pass++) {
        w.moved = false;
        r = empty_dir_depth(&w, fd, 0);
        if (!w.moved)
            return r;
    }
    return r < 0 ? r : -ENOTEMPTY;
}

int ipb_rm_rf_at(int dirfd, const char *name) {
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -errno;
    cleanup_close int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    (void)fchmod(fd, 0700);
    int r = empty_top(fd);
    if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return r < 0 ? r : -errno;
    return r;
}

int ipb_rm_rf(const char *path) { return ipb_rm_rf_at(AT_FDCWD, path); }

int ipb_empty_dir_at(int dirfd) { return empty_top(dirfd); }
