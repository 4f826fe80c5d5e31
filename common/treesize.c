#include "treesize.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Modification times later than this (sandbox code sets any it likes: touch -d 2100-01-01)
 * are not counted, so that none keeps a workspace "recent" for `prune --older-than` for ever;
 * a day of slack for clocks that differ. Set by ipb_tree_usage_at. */
#define FUTURE_SLACK_S 86400

/* One walk: the totals, the mtime bound, and the inodes with more than one link seen so far
 * (each counted once, as du does: else hard links to one large file, which sandbox code can
 * make freely, would count it again for each name). */
typedef struct walk_ctx {
    ipb_tree_usage *u;
    time_t limit;
    void *seen; /* tsearch tree of struct inode_key */
} walk_ctx;

typedef struct inode_key {
    dev_t dev;
    ino_t ino;
} inode_key;

static int inode_cmp(const void *a, const void *b) {
    const inode_key *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* true when st is an inode with other links that was counted already. */
static bool seen_before(walk_ctx *c, const struct stat *st) {
    if (S_ISDIR(st->st_mode) || st->st_nlink < 2)
        return false;
    inode_key *k = malloc(sizeof(*k));
    if (!k) {
        c->u->partial = true;
        return false;
    }
    k->dev = st->st_dev;
    k->ino = st->st_ino;
    inode_key **found = tsearch(k, &c->seen, inode_cmp);
    if (!found) {
        free(k);
        c->u->partial = true;
        return false;
    }
    if (*found != k) {
        free(k);
        return true;
    }
    return false;
}

static void count(walk_ctx *c, const struct stat *st) {
    if (!seen_before(c, st))
        c->u->bytes += (uint64_t)st->st_blocks * 512;
    if (st->st_mtime > c->u->newest && st->st_mtime <= c->limit)
        c->u->newest = st->st_mtime;
}

/* Adds what the directory open at fd holds (fd is consumed). */
static void walk(int fd, int depth, walk_ctx *c) {
    ipb_tree_usage *u = c->u;
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
        count(c, &st);
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
        walk(sub, depth + 1, c);
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
    walk_ctx c = {.u = ret, .limit = time(NULL) + FUTURE_SLACK_S};
    count(&c, &st);
    walk(fd, 0, &c);
    tdestroy(c.seen, free);
    return 0;
}
