/* What a directory tree that sandbox code may have written holds: its disk usage and its
 * newest modification time. The walk names entries only relative to directory fds it holds
 * (fstatat AT_SYMLINK_NOFOLLOW, openat O_NOFOLLOW): a symlink counts as itself, never as its
 * target, and one swapped in mid-walk leads nowhere outside the tree. Bounded in depth and
 * in entries; past either, the result is partial. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define IPB_TREESIZE_MAX_DEPTH 64
#define IPB_TREESIZE_MAX_ENTRIES 1000000L

typedef struct ipb_tree_usage {
    uint64_t bytes; /* allocated bytes (st_blocks * 512, as du counts: an inode with several
                     * links once), the top included */
    time_t newest;  /* the newest mtime of the top or anything below it (none more than a
                     * day ahead of now: sandbox code can set any); 0 when none counts */
    long entries;   /* entries seen below the top */
    bool partial;   /* a bound was reached or a directory could not be read */
} ipb_tree_usage;

/* Walks the directory open at dirfd (any fd of it, O_PATH will do): 0, or -errno when the
 * top itself cannot be read. */
int ipb_tree_usage_at(int dirfd, ipb_tree_usage *ret);
