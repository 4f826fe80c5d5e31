#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"

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

static int rm_rf_depth(int dirfd, const char *name, int depth);

static int empty_dir_depth(int fd, int depth) {
    int dupfd = dup(fd);
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
        int r = rm_rf_depth(fd, de->d_name, depth + 1);
        if (r < 0 && ret == 0)
            ret = r;
    }
    closedir(d);
    return ret;
}

static int rm_rf_depth(int dirfd, const char *name, int depth) {
    if (depth > 256)
        return -ELOOP;
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -errno;
    cleanup_close int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    /* Make it writable in case sandbox code removed our write bit. */
    (void)fchmod(fd, 0700);
    int r = empty_dir_depth(fd, depth);
    if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return r < 0 ? r : -errno;
    return r;
}

int ipb_rm_rf_at(int dirfd, const char *name) { return rm_rf_depth(dirfd, name, 0); }

int ipb_rm_rf(const char *path) { return rm_rf_depth(AT_FDCWD, path, 0); }

int ipb_empty_dir_at(int dirfd) { return empty_dir_depth(dirfd, 0); }
