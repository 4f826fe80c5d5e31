#include "zygote_proto.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"

void zy_build(uint8_t out[ZY_REC_SIZE], uint32_t type, uint32_t gen, int32_t a) {
    zy_rec r = {type, gen, a, 0};
    memcpy(out, &r, ZY_REC_SIZE);
}

int zy_parse(const void *buf, size_t len, zy_rec *ret) {
    zy_rec r;
    if (len != ZY_REC_SIZE)
        return -EBADMSG;
    memcpy(&r, buf, ZY_REC_SIZE);
    if (r.b != 0)
        return -EBADMSG;
    switch (r.type) {
    case ZY_FORK:
    case ZY_STANDBY:
    case ZY_PREPARED:
    case ZY_ACTIVATE:
    case ZY_ACTIVE:
        if (r.a != 0)
            return -EBADMSG;
        break;
    case ZY_STARTED:
        if (r.a <= 1)
            return -EBADMSG;
        break;
    case ZY_FAILED:
    case ZY_DECLINED:
        if (r.a <= 0)
            return -EBADMSG;
        break;
    case ZY_NOTMADE:
        if (r.gen != 0 || r.a <= 0)
            return -EBADMSG;
        break;
    case ZY_ENDED:
        if (r.gen != 0)
            return -EBADMSG;
        break;
    case ZY_READY:
    case ZY_BOOT:
    case ZY_MAKE:
    case ZY_KILL:
    case ZY_NEW:
    case ZY_GO:
        if (r.gen != 0 || r.a != 0)
            return -EBADMSG;
        break;
    default:
        return -EBADMSG;
    }
    *ret = r;
    return 0;
}

int zy_send(int sock, uint32_t type, uint32_t gen, int32_t a, int fd) {
    uint8_t buf[ZY_REC_SIZE];
    zy_build(buf, type, gen, a);
    struct iovec iov = {buf, sizeof(buf)};
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&u, 0, sizeof(u));
        mh.msg_control = u.b;
        mh.msg_controllen = sizeof(u.b);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    ssize_t n;
    do
        n = sendmsg(sock, &mh, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return n == ZY_REC_SIZE ? 0 : -EIO;
}

int zy_recv(int sock, zy_rec *ret, int *fd, int timeout_ms) {
    if (fd)
        *fd = -1;
    long deadline = timeout_ms >= 0 ? ipb_now_ms() + timeout_ms : 0;
    for (;;) {
        struct pollfd p = {sock, POLLIN, 0};
        int wait = -1;
        if (timeout_ms >= 0) {
            long left = deadline - ipb_now_ms();
            wait = left > 0 ? (int)left : 0;
        }
        int pr = poll(&p, 1, wait);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return -errno;
        if (pr == 0)
            return 0;
        break;
    }
    uint8_t buf[ZY_REC_SIZE + 1];
    struct iovec iov = {buf, sizeof(buf)};
    union {
        char b[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
    ssize_t n;
    do
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EAGAIN ? 0 : -errno;
    int got = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int f;
            memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (got < 0 && fd)
                got = f;
            else
                close(f);
        }
    }
    if (n == 0) {
        if (got >= 0)
            close(got);
        return -EPIPE;
    }
    int r = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? -EBADMSG : zy_parse(buf, (size_t)n, ret);
    if (r < 0 || (got >= 0 && ret->type != ZY_NEW && ret->type != ZY_STARTED) || (ret->type == ZY_NEW && got < 0)) {
        if (got >= 0)
            close(got);
        return r < 0 ? r : -EBADMSG;
    }
    if (fd)
        *fd = got;
    return 1;
}
