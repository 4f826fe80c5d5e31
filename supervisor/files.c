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

/* A temporary name in dirfd, created exclusively. */
static int open_temp(int dirfd, char name[64], ipb_error **err) {
    for (int tries = 0; tries < 16; tries++) {
        unsigned char rnd[8];
        char hex[17];
        if (ipb_random(rnd, sizeof(rnd)) < 0)
            return ipb_error_set(err, errno, "generating a temporary name");
        ipb_hex(rnd, sizeof(rnd), hex);
        snprintf(name, 64, ".ipybox-tmp-%s", hex);
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return ipb_error_set(err, errno, "creating a temporary file");
    }
    return ipb_error_set(err, EEXIST, "creating a temporary file");
}

static int copy_fd(int in, int out) {
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return 0;
        int r = ipb_write_all(out, buf, (size_t)n);
        if (r < 0)
            return r;
    }
}

/* Writes through a temporary file and renames it over `name`, refusing to replace a
 * directory. Either src_fd or data is used. */
static int atomic_write_at(int dirfd, const char *name, int src_fd, const void *data, size_t len, const char *what,
                           ipb_error **err) {
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        return ipb_error_set(err, EISDIR, "%s", what);
    char tmp[64];
    int fd = open_temp(dirfd, tmp, err);
    if (fd < 0)
        return ipb_error_wrap(err, "%s", what);
    int r = src_fd >= 0 ? copy_fd(src_fd, fd) : ipb_write_all(fd, data, len);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
        r = -errno;
    if (r < 0) {
        unlinkat(dirfd, tmp, 0);
        return ipb_error_set(err, -r, "%s", what);
    }
    return 0;
}

int ipb_ws_write(int basefd, const char *relpath, const void *data, size_t len, ipb_error **err) {
    cleanup_close int dfd = -1;
    const char *name;
    if (ipb_ws_open_parent(basefd, relpath, true, &dfd, &name, err) < 0)
        return -1;
    return atomic_write_at(dfd, name, -1, data, len, relpath, err);
}

int ipb_ws_copy_in(int basefd, const char *relpath, int src_fd, ipb_error **err) {
    cleanup_close int dfd = -1;
    const char *name;
    if (ipb_ws_open_parent(basefd, relpath, true, &dfd, &name, err) < 0)
        return -1;
    char what[PATH_MAX + 32];
    snprintf(what, sizeof(what), "writing /app/%s", relpath);
    return atomic_write_at(dfd, name, src_fd, NULL, 0, what, err);
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

static bool under_allowed(const ipb_strv *allowed, const char *canon) {
    for (size_t i = 0; i < allowed->n; i++) {
        char *dir = realpath(allowed->v[i], NULL);
        if (!dir)
            continue;
        bool ok = ipb_path_is_under(canon, dir);
        free(dir);
        if (ok)
            return true;
    }
    return false;
}

static int not_allowed(const ipb_strv *allowed, const char *path, ipb_error **err) {
    char list[1024] = "";
    for (size_t i = 0; i < allowed->n; i++) {
        strncat(list, i ? ", " : "", sizeof(list) - strlen(list) - 1);
        strncat(list, allowed->v[i], sizeof(list) - strlen(list) - 1);
    }
    return ipb_error_set(err, 0, "'%s' is not within the allowed directories (%s); start ipybox with "
                                 "--allowed-dir to allow another", path, list);
}

int ipb_host_resolve_read(const ipb_strv *allowed, const char *local_path, char **ret_path, ipb_error **err) {
    if (local_path[0] != '/')
        return ipb_error_set(err, 0, "local_path '%s' must be an absolute host path", local_path);
    char *canon = realpath(local_path, NULL);
    if (!canon)
        return ipb_error_set(err, errno == ENOENT ? 0 : errno, errno == ENOENT ? "file not found: %s" : "%s", local_path);
    if (!under_allowed(allowed, canon)) {
        free(canon);
        return not_allowed(allowed, local_path, err);
    }
    struct stat st;
    if (stat(canon, &st) < 0 || !S_ISREG(st.st_mode)) {
        free(canon);
        return ipb_error_set(err, 0, "'%s' is not a regular file", local_path);
    }
    *ret_path = canon;
    return 0;
}

int ipb_host_resolve_write(const ipb_strv *allowed, const char *local_path, char **ret_path, ipb_error **err) {
    if (local_path[0] != '/')
        return ipb_error_set(err, 0, "local_path '%s' must be an absolute host path", local_path);
    size_t len = strlen(local_path);
    if (len >= PATH_MAX || local_path[len - 1] == '/')
        return ipb_error_set(err, 0, "local_path '%s' must name a file", local_path);
    /* The deepest existing ancestor decides; what is below it is created, without '..'. */
    char buf[PATH_MAX];
    memcpy(buf, local_path, len + 1);
    char *rest = NULL;
    char *canon = NULL;
    for (;;) {
        canon = realpath(buf, NULL);
        if (canon)
            break;
        if (errno != ENOENT)
            return ipb_error_set(err, errno, "%s", local_path);
        char *slash = strrchr(buf, '/');
        if (!slash || slash == buf) {
            canon = strdup("/");
            rest = (char *)local_path + 1;
            break;
        }
        *slash = '\0';
        rest = (char *)local_path + (slash - buf) + 1;
    }
    if (rest) {
        for (const char *c = rest; *c;) {
            const char *s = strchr(c, '/');
            size_t cl = s ? (size_t)(s - c) : strlen(c);
            if ((cl == 2 && !strncmp(c, "..", 2)) || (cl == 1 && c[0] == '.')) {
                free(canon);
                return ipb_error_set(err, 0, "local_path '%s' contains '.' or '..' components", local_path);
            }
            c += cl + (s ? 1 : 0);
        }
    }
    char full[PATH_MAX];
    if (snprintf(full, sizeof(full), "%s%s%s", canon, (rest && strcmp(canon, "/")) ? "/" : "", rest ? rest : "") >=
        (int)sizeof(full)) {
        free(canon);
        return ipb_error_set(err, ENAMETOOLONG, "%s", local_path);
    }
    free(canon);
    if (!under_allowed(allowed, full))
        return not_allowed(allowed, local_path, err);
    struct stat st;
    if (stat(full, &st) == 0 && S_ISDIR(st.st_mode))
        return ipb_error_set(err, EISDIR, "local_path '%s'", local_path);
    *ret_path = strdup(full);
    return *ret_path ? 0 : ipb_error_set(err, ENOMEM, "%s", local_path);
}

int ipb_host_write_from(const char *path, int src_fd, ipb_error **err) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    const char *name = path + (slash - dir) + 1;
    if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    /* Parent directories were checked to be inside an allowed directory. */
    struct stat st;
    if (stat(dir, &st) < 0) {
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof(tmp), "%s", dir);
        for (char *p = tmp + 1; *p; p++) {
            if (*p == '/') {
                *p = '\0';
                mkdir(tmp, 0755);
                *p = '/';
            }
        }
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return ipb_error_set(err, errno, "creating %s", dir);
    }
    cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return ipb_error_set(err, errno, "opening %s", dir);
    char what[PATH_MAX + 16];
    snprintf(what, sizeof(what), "writing %s", path);
    return atomic_write_at(dfd, name, src_fd, NULL, 0, what, err);
}
