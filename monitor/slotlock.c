#include "slotlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int ipbm_slot_lock(const ipbm_pool *p, int slot) {
    /* Root's own directory: only root makes, opens or locks a slot file. */
    if (mkdir(IPBM_SLOT_DIR, 0700) < 0 && errno != EEXIST)
        return -errno;
    struct stat st;
    if (lstat(IPBM_SLOT_DIR, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022))
        return -EPERM;
    char path[64];
    snprintf(path, sizeof(path), IPBM_SLOT_DIR "/%u", (unsigned)ipbm_pool_uid(p, slot));
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno == EAGAIN ? EWOULDBLOCK : errno;
        close(fd);
        return -e;
    }
    return fd;
}

int ipbm_slot_take(ipbm_pool *p, int *lock_fd) {
    int *skipped = calloc(p->size ? p->size : 1, sizeof(int));
    if (!skipped)
        return -1;
    unsigned nskipped = 0;
    int slot = -1;
    while (nskipped < p->size) {
        int s = ipbm_pool_take(p);
        if (s < 0)
            break;
        int fd = ipbm_slot_lock(p, s);
        if (fd >= 0) {
            *lock_fd = fd;
            slot = s;
            break;
        }
        /* Another monitor's (or not lockable): left to it, tried again next time. */
        skipped[nskipped++] = s;
    }
    for (unsigned i = 0; i < nskipped; i++)
        ipbm_pool_put(p, skipped[i]);
    free(skipped);
    return slot;
}
