#include "fds.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif
#define IPBM_CLONE_FILES 0x00000400ULL
#define IPBM_CLONE_PIDFD 0x00001000ULL
#define IPBM_CLONE_INTO_CGROUP 0x200000000ULL

static int null_fd = -1;

int ipbm_fds_reserve(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    /* 0 to 2 are open (if one were closed, a user's descriptor could land there, and every
     * child would get it). */
    for (int i = 0; i < IPBM_LOW_FD; i++)
        if (fcntl(i, F_GETFD) < 0) {
            int n = open("/dev/null", O_RDWR);
            if (n < 0)
                return -errno;
            if (n != i) {
                dup2(n, i);
                close(n);
            }
        }
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, IPBM_LOW_FD + IPBM_LOW_FDS);
    int e = errno;
    close(fd);
    if (hi < 0)
        return -e;
    for (int i = IPBM_LOW_FD; i < IPBM_LOW_FD + IPBM_LOW_FDS; i++)
        if (dup3(hi, i, O_CLOEXEC) < 0) {
            e = errno;
            close(hi);
            return -e;
        }
    null_fd = hi;
    return 0;
}

static pid_t clone3_raw(uint64_t flags, int cgfd, int *pidfd) {
    struct {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size,
            cgroup;
    } args = {.flags = flags, .pidfd = (uint64_t)(uintptr_t)pidfd, .exit_signal = SIGCHLD};
    if (cgfd >= 0) {
        args.flags |= IPBM_CLONE_INTO_CGROUP;
        args.cgroup = (uint64_t)cgfd;
    }
    /* No fallback to fork(): in a cgroup the child would run outside it, without limits; and
     * fork() would copy the whole table. */
    return (pid_t)syscall(SYS_clone3, &args, sizeof(args));
}

pid_t ipbm_fork_clean(int cgfd, const int *fds, unsigned n) {
    if (null_fd < 0 || n + 1 > IPBM_LOW_FDS)
        return -EINVAL;
    int hs[2];
    if (pipe2(hs, O_CLOEXEC) < 0)
        return -errno;
    int e = 0;
    unsigned placed = 0;
    for (; placed < n + 1; placed++)
        if (dup3(placed < n ? fds[placed] : hs[1], IPBM_LOW_FD + (int)placed, O_CLOEXEC) < 0) {
            e = errno;
            break;
        }
    int pidfd = -1;
    pid_t pid = -1;
    if (!e) {
        /* Born sharing the table (nothing copied, nothing to close), the child then takes a
         * table of its own holding only the low descriptors: the rest are not copied, so none
         * is ever closed by it. */
        pid = clone3_raw(IPBM_CLONE_FILES | IPBM_CLONE_PIDFD, cgfd, &pidfd);
        if (pid == 0) {
            int hw = IPBM_LOW_FD + (int)n;
            if (syscall(SYS_close_range, (unsigned)hw + 1, ~0U, CLOSE_RANGE_UNSHARE) < 0)
                _exit(126);
            if (write(hw, "k", 1) != 1)
                _exit(126);
            close(hw);
            return 0;
        }
        if (pid < 0)
            e = errno;
    }
    close(hs[1]);
    if (pid > 0) {
        /* Until the child says it has its own table, the low descriptors stay as they are. */
        struct pollfd p[2] = {{hs[0], POLLIN, 0}, {pidfd, POLLIN, 0}};
        int r;
        while ((r = poll(p, 2, 10000)) < 0 && errno == EINTR)
            ;
        if (r == 0) {
            /* Not scheduled in 10 s: it must not run on with the shared table (and it is not
             * waited for: whatever holds it up must not hold up the monitor). */
            kill(pid, SIGKILL);
            log_error("a child did not start in 10 s; killed");
            e = ETIMEDOUT;
        }
        close(pidfd);
    }
    close(hs[0]);
    for (unsigned i = 0; i < placed; i++)
        dup3(null_fd, IPBM_LOW_FD + (int)i, O_CLOEXEC);
    return e ? -e : pid;
}

bool ipbm_fd_inert(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_PATH))
        return true;
    /* Cached attributes only: the filesystem is asked nothing. A FIFO's file operations are
     * the pipe's wherever it lives, and a pipe cannot carry descriptors. */
    struct statx st;
    return statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &st) == 0 && (st.stx_mask & STATX_TYPE) &&
           S_ISFIFO(st.stx_mode);
}

void ipbm_release(ipbm_held *h, int fd) {
    if (fd < 0)
        return;
    if (ipbm_fd_inert(fd)) {
        close(fd);
        return;
    }
    if (h->n == h->cap) {
        unsigned cap = h->cap ? h->cap * 2 : 16;
        int *nf = realloc(h->fds, cap * sizeof(int));
        if (!nf) {
            /* Out of memory: no choice left but to close it here. */
            log_error("out of memory holding a descriptor; closing it in the monitor");
            close(fd);
            return;
        }
        h->fds = nf;
        h->cap = cap;
    }
    h->fds[h->n++] = fd;
}

/* A closer: shares the table, closes what it was given (it may wait there, alone) and ends. */
static pid_t closer(const int *fds, unsigned n) {
    pid_t pid = clone3_raw(IPBM_CLONE_FILES, -1, NULL);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (unsigned i = 0; i < n; i++)
            close(fds[i]);
        _exit(0);
    }
    return pid;
}

void ipbm_held_run(ipbm_held *h) {
    if (!h->n || h->closer > 0)
        return;
    pid_t pid = closer(h->fds, h->n);
    if (pid < 0)
        return; /* tried again after the next batch */
    h->closer = pid;
    h->n = 0;
}

bool ipbm_held_reaped(ipbm_held *h, pid_t pid) {
    if (h->closer <= 0 || h->closer != pid)
        return false;
    h->closer = 0;
    return true;
}

void ipbm_held_final(ipbm_held *h) {
    if (h->n && closer(h->fds, h->n) > 0)
        h->n = 0;
    if (h->n)
        log_warn("cannot start a closer for %u descriptors a user sent: %s; they are closed as the monitor "
                 "exits, which waits if one is on a stalled filesystem",
                 h->n, strerror(errno));
    free(h->fds);
    h->fds = NULL;
    h->n = h->cap = 0;
}
