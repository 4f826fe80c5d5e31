/* Descriptors in the monitor: what a user sends is never closed by the monitor itself, and
 * no child of the monitor inherits anything it was not given.
 *
 * Why: closing a descriptor runs code the sender chose. close() of a file on the user's own
 * FUSE mount waits for their server to answer FLUSH (the monitor, with its signals blocked,
 * for ever; a closer uninterruptibly once a signal came); the last reference to a TCP socket with SO_LINGER waits out the linger time; the last
 * reference to a unix socket releases whatever descriptors wait in its queue, with the same
 * effects. Any of them would stop the monitor, and with it every user's service. So:
 *   - a user's descriptor that is neither O_PATH nor a FIFO is held, and closed by a short-
 *     lived child that shares the descriptor table (a closer: one per user at a time, so a
 *     stalled one holds up only that user, who is not read while too many wait);
 *   - every child starts with a table of its own that holds only the descriptors it was
 *     given, copied below everything else before the child leaves the shared table, so
 *     nothing held is ever closed by a child's exec or exit. */
#pragma once
#include <stdbool.h>
#include <sys/types.h>

/* The low descriptors kept for children: IPBM_LOW_FD to 63 hold /dev/null until a child is
 * started, so that everything else the monitor holds is at 64 or above. The kernel copies a
 * table in blocks of 64 (a long of bits): when the child takes its own table, it gets 0 to 63
 * (and closes what it was not given there: only /dev/null), never anything above. */
#define IPBM_LOW_FD 3
#define IPBM_LOW_FDS (64 - IPBM_LOW_FD)
/* The least RLIMIT_NOFILE a monitor works with: the held ones, a sandbox's lifted above
 * 64 + IPBM_MAX_BINDS, and its own. */
#define IPBM_MIN_NOFILE 256

/* At start, before anything else is opened: takes the low descriptors (replacing whatever was
 * inherited there) and raises the soft limit on open files to the hard one. 0 or -errno. */
int ipbm_fds_reserve(void);

/* A child (0 returned in it, its pid in the parent, or -errno) whose descriptor table holds
 * only 0, 1, 2 and fds[i] at IPBM_LOW_FD + i (close-on-exec), i < n <= IPBM_LOW_FDS - 1.
 * cgfd >= 0: the child starts in that cgroup (clone3 CLONE_INTO_CGROUP). The parent returns
 * once the child has its own table. Signal handling is the parent's, as after fork(). */
pid_t ipbm_fork_clean(int cgfd, const int *fds, unsigned n);

/* A descriptor whose close runs none of the sender's code: O_PATH, or a FIFO (the type as
 * cached: nothing is asked of the filesystem). */
bool ipbm_fd_inert(int fd);

/* The descriptors one user sent and the monitor is done with, waiting for a closer. */
typedef struct {
    int *fds;
    unsigned n, cap;
    pid_t closer; /* the user's closer while it runs */
} ipbm_held;

/* While this many wait, the user's channels are not read. */
#define IPBM_HELD_PAUSE 256

/* Done with fd, which came from the user of h: closed now if inert, else held. */
void ipbm_release(ipbm_held *h, int fd);
/* Starts h's closer for everything held, unless one is running. */
void ipbm_held_run(ipbm_held *h);
/* Whether pid was h's closer (now reaped). */
bool ipbm_held_reaped(ipbm_held *h, pid_t pid);
static inline bool ipbm_held_paused(const ipbm_held *h) { return h->n >= IPBM_HELD_PAUSE; }
/* At exit: one last closer for everything still held (the monitor does not wait for it). */
void ipbm_held_final(ipbm_held *h);
