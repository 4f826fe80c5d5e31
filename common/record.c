#include "record.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif
/* Room for other control messages ahead of the descriptors (credentials, a pidfd, a
 * timestamp), should the receiving socket have an option that adds them. */
#define CMSG_SLACK 512

union fdbuf {
    char buf[CMSG_SPACE(sizeof(int) * IPB_RECORD_MAX_FDS) + CMSG_SLACK];
    struct cmsghdr align;
};

int ipb_record_send(int fd, const void *rec, size_t len, const int *fds, size_t nfds, int flags) {
    struct iovec iov = {(void *)rec, len};
    union fdbuf u;
    memset(&u, 0, sizeof(u));
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > IPB_RECORD_MAX_FDS)
        return -EINVAL;
    if (nfds) {
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    for (;;) {
        ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL | flags);
        if (n == (ssize_t)len)
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 ? -errno : -EIO;
    }
}

int ipb_record_recv(int fd, void *rec, size_t len, int *fds, size_t max, size_t *nfds, int flags) {
    *nfds = 0;
    if (max > IPB_RECORD_MAX_FDS)
        max = IPB_RECORD_MAX_FDS;
    for (;;) {
        struct iovec iov = {rec, len};
        union fdbuf u;
        /* Room for exactly max descriptors: any more are dropped by the kernel (MSG_CTRUNC). With
         * max at the kernel's own limit there can be no more, and the slack is room for other
         * messages, which would otherwise take the place of descriptors. */
        size_t room = max ? CMSG_LEN(sizeof(int) * max) : 0;
        if (max == IPB_RECORD_MAX_FDS)
            room = sizeof(u.buf);
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = max ? u.buf : NULL, .msg_controllen = room};
        ssize_t n = recvmsg(fd, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC | flags);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        bool extra = false;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level != SOL_SOCKET)
                continue;
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            if (c->cmsg_type == SCM_PIDFD && k == 1) {
                int pidfd;
                memcpy(&pidfd, CMSG_DATA(c), sizeof(int));
                close(pidfd); /* a pidfd's close runs nothing of anyone's */
                extra = true;
            }
            if (c->cmsg_type != SCM_RIGHTS)
                continue;
            for (size_t i = 0; i < k && *nfds < max; i++)
                memcpy(&fds[(*nfds)++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        }
        bool bad = (mh.msg_flags & MSG_CTRUNC) || n != (ssize_t)len || extra;
        if (n == 0 && !*nfds) {
            /* recv() says 0 both for EOF and for an empty record; only EOF hangs up. */
            struct pollfd p = {fd, POLLRDHUP, 0};
            if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP)))
                return 0;
        }
        return bad ? -EBADMSG : 1;
    }
}

void ipb_record_close_fds(const int *fds, size_t n) {
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
}
