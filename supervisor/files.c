#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdio.h"
#include "pathrules.h"
#include "tmpmark.h"

int ipb_ws_open_parent(int basefd, const char *relpath, bool create, int *ret_dirfd, const char **ret_name,
                       ipb_error **err) {
    if (ipb_check_relpath(relpath, strlen(relpath), err) < 0)
        return -1;
    size_t len = strlen(relpath);
    if (relpath[len - 1] == '/')
        return ipb_error_set(err, 0, "'%s' ends with '/': name a file", relpath);
    cleanup_close int dfd = fcntl(basefd, F_DUPFD_CLOEXEC, 3);
    if (dfd < 0)
        return ipb_error_set(err, errno, "opening the workspace");
    const char *p = relpath;
    for (;;) {
        const char *slash = strchr(p, '/');
        if (!slash)
            break;
        size_t clen = (size_t)(slash - p);
        if (clen == 0 || (clen == 1 && p[0] == '.')) {
            p = slash + 1;
            continue;
        }
        char comp[256];
        memcpy(comp, p, clen);
        comp[clen] = '\0';
        int nfd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && errno == ENOENT && create) {
            if (mkdirat(dfd, comp, 0755) < 0 && errno != EEXIST)
                return ipb_error_set(err, errno, "creating directory '%.*s' in /app", (int)(slash - relpath), relpath);
            nfd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (nfd < 0) {
            int e = errno;
            if (e == ELOOP || e == ENOTDIR) {
                struct stat st;
                if (fstatat(dfd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
                    return ipb_error_set(err, 0, "'%.*s' in /app is a symlink; refusing to follow it",
                                         (int)(slash - relpath), relpath);
                return ipb_error_set(err, 0, "'%.*s' in /app is not a directory", (int)(slash - relpath), relpath);
            }
            return ipb_error_set(err, e, "'%.*s' in /app", (int)(slash - relpath), relpath);
        }
        close(dfd);
        dfd = nfd;
        p = slash + 1;
    }
    if (!*p || !strcmp(p, "."))
        return ipb_error_set(err, 0, "'%s' does not name a file", relpath);
    *ret_dirfd = steal_fd(dfd);
    *ret_name = p;
    return 0;
}

/* A random temporary name of ours (tmpmark.h's pattern). */
static int temp_name(char name[64], ipb_error **err) {
    unsigned char rnd[8];
    char hex[17];
    if (ipb_random(rnd, sizeof(rnd)) < 0)
        return ipb_error_set(err, errno, "generating a temporary name");
    ipb_hex(rnd, sizeof(rnd), hex);
    snprintf(name, 64, ".ipybox-tmp-%s", hex);
    return 0;
}

/* A temporary name in dirfd, created exclusively. */
static int open_temp(int dirfd, char name[64], ipb_error **err) {
    for (int tries = 0; tries < 16; tries++) {
        if (temp_name(name, err) < 0)
            return -1;
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return ipb_error_set(err, errno, "creating a temporary file");
    }
    return ipb_error_set(err, EEXIST, "creating a temporary file");
}

bool ipb_files_no_tmpfile; /* tests: always use a named temporary */

/* An unnamed file in dirfd (O_TMPFILE), or -1 when the file system cannot make one or it
 * could not be linked later (no /proc): then a named temporary is used. */
static int open_unnamed(int dirfd) {
    if (ipb_files_no_tmpfile || access("/proc/self/fd", X_OK) < 0)
        return -1;
    return openat(dirfd, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, 0644);
}

/* Gives the unnamed file fd the name `name` in dirfd; fails with EEXIST if anything has it. */
static int link_unnamed(int fd, int dirfd, const char *name) {
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

/* Copies in to EOF; a regular file only as far as it reached when the copy began, so that
 * a file that sandbox code keeps appending to cannot keep the copy going. */
static int copy_fd(int in, int out) {
    char buf[65536];
    struct stat st;
    bool capped = fstat(in, &st) == 0 && S_ISREG(st.st_mode);
    off_t left = capped ? st.st_size : 0;
    for (;;) {
        size_t want = sizeof(buf);
        if (capped && (off_t)want > left)
            want = (size_t)left;
        if (capped && want == 0)
            return 0;
        ssize_t n = read(in, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return 0;
        int r = ipb_write_all(out, buf, (size_t)n);
        if (r < 0)
            return r;
        left -= n;
    }
}

int ipb_atomic_write_at(int dirfd, const char *name, int tree_fd, int src_fd, const void *data, size_t len,
                        const ipb_commit_gate *gate, const char *what, ipb_error **err) {
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        return ipb_error_set(err, EISDIR, "%s", what);
    char tmp[64] = ""; /* the temporary's name, once it has one */
    int fd = open_unnamed(dirfd);
    bool unnamed = fd >= 0, marked = false;
    if (!unnamed) {
        ipb_tmp_mark(tree_fd);
        marked = true;
        fd = open_temp(dirfd, tmp, err);
        if (fd < 0) {
            ipb_tmp_unmark(tree_fd);
            return ipb_error_wrap(err, "%s", what);
        }
    }
    int r = src_fd >= 0 ? copy_fd(src_fd, fd) : ipb_write_all(fd, data, len);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    bool abandoned = r == 0 && gate && !gate->begin_commit(gate->ud);
    if (r == 0 && !abandoned && unnamed) {
        /* Nothing had a name until now: a new file appears whole, at once. */
        r = link_unnamed(fd, dirfd, name);
        if (r == -EEXIST) {
            /* Something is there: a name of ours for the instant before the rename below. */
            ipb_tmp_mark(tree_fd);
            marked = true;
            for (int tries = 0; tries < 16 && r == -EEXIST; tries++)
                r = temp_name(tmp, NULL) < 0 ? -errno : link_unnamed(fd, dirfd, tmp);
            if (r < 0)
                tmp[0] = '\0';
        }
    }
    if (close(fd) < 0 && r == 0 && !unnamed)
        r = -errno;
    /* rename(2) refuses to put a file over a directory (EISDIR): checked by the kernel, also
     * when a directory appeared after the check above. */
    if (r == 0 && !abandoned && tmp[0] && renameat(dirfd, tmp, dirfd, name) < 0)
        r = -errno;
    else if (r == 0 && !abandoned)
        tmp[0] = '\0'; /* renamed (or linked as name): nothing to remove */
    if (tmp[0])
        unlinkat(dirfd, tmp, 0);
    if (marked)
        ipb_tmp_unmark(tree_fd);
    if (abandoned)
        return ipb_error_set(err, 0, "%s: the transfer was abandoned", what);
    if (r < 0)
        return ipb_error_set(err, -r, "%s", what);
    return 0;
}

int ipb_ws_write(int basefd, const char *relpath, const void *data, size_t len, ipb_error **err) {
    cleanup_close int dfd = -1;
    const char *name;
    if (ipb_ws_open_parent(basefd, relpath, true, &dfd, &name, err) < 0)
        return -1;
    return ipb_atomic_write_at(dfd, name, basefd, -1, data, len, NULL, relpath, err);
}

int ipb_ws_copy_in(int basefd, const char *relpath, int src_fd, const ipb_commit_gate *gate, ipb_error **err) {
    cleanup_close int dfd = -1;
    const char *name;
    if (ipb_ws_open_parent(basefd, relpath, true, &dfd, &name, err) < 0)
        return -1;
    char what[PATH_MAX + 32];
    snprintf(what, sizeof(what), "writing /app/%s", relpath);
    return ipb_atomic_write_at(dfd, name, basefd, src_fd, NULL, 0, gate, what, err);
}

int ipb_ws_open_read(int basefd, const char *relpath, int *ret_fd, ipb_error **err) {
    cleanup_close int dfd = -1;
    const char *name;
    if (ipb_ws_open_parent(basefd, relpath, false, &dfd, &name, err) < 0)
        return -1;
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP)
            return ipb_error_set(err, 0, "/app/%s is a symlink; refusing to follow it", relpath);
        if (errno == ENOENT)
            return ipb_error_set(err, 0, "/app/%s does not exist", relpath);
        return ipb_error_set(err, errno, "opening /app/%s", relpath);
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ipb_error_set(err, 0, "/app/%s is not a regular file", relpath);
    }
    if (st.st_nlink > 1) {
        close(fd);
        return ipb_error_set(err, 0, "/app/%s has other hard links; refusing to copy it", relpath);
    }
    ipb_set_nonblock(fd, 0);
    *ret_fd = fd;
    return 0;
}
