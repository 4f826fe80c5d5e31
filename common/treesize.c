#include "treesize.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Modification times later than this (sandbox code sets any it likes: touch -d 2100-01-01)
 * are not counted, so that none keeps a workspace "recent" for `prune --older-than` for ever;
 * a day of slack for clocks that differ. Set by ipb_tree_usage_at. */
#define FUTURE_SLACK_S 86400

static void count(ipb_tree_usage *u, const struct stat *st, time_t limit) {
    u->bytes += (uint64_t)st->st_blocks * 512;
    if (st->st_mtime > u->newest && st->st_mtime <= limit)
        u->newest = st->st_mtime;
}

/* Adds what the directory open at fd holds (fd is consumed). */
static void walk(int fd, int depth, ipb_tree_usage *u, time_t limit) {
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        u->partial = true;
        return;
    }
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (u->entries >= IPB_TREESIZE_MAX_ENTRIES) {
            u->partial = true;
            break;
        }
        u->entries++;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                u->partial = true;
            continue;
        }
        count(u, &st, limit);
        if (!S_ISDIR(st.st_mode))
            continue;
        if (depth + 1 >= IPB_TREESIZE_MAX_DEPTH) {
            u->partial = true;
            continue;
        }
        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (sub < 0) {
            if (errno != ENOENT)
                u->partial = true;
            continue;
        }
        walk(sub, depth + 1, u, limit);
        if (u->entries >= IPB_TREESIZE_MAX_ENTRIES)
            break;
    }
    closedir(d);
}

int ipb_tree_usage_at(int dirfd, ipb_tree_usage *ret) {
    memset(ret, 0, sizeof(*ret));
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    time_t limit = time(NULL) + FUTURE_SLACK_S;
    count(ret, &st, limit);
    walk(fd, 0, ret, limit);
    return 0;
}
