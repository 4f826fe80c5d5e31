#include "outq.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

void ipb_outq_init(ipb_outq *q, int fd) {
    *q = (ipb_outq){.fd = fd, .poll_fd = fd};
    struct stat st;
    if (fstat(fd, &st) < 0)
        return;
    if (S_ISSOCK(st.st_mode)) {
        q->sock = true;
        return;
    }
    if (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
        return; /* a regular file: writes do not wait for anyone */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK))
        return;
    /* Our own open file description of the same pipe or terminal, non-blocking, so that the
     * one we share with other processes keeps its mode. */
    char path[32];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    int own = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat st2;
    if (own >= 0 && fstat(own, &st2) == 0 && st2.st_dev == st.st_dev && st2.st_ino == st.st_ino) {
        q->fd = own;
        q->own_fd = true;
        return;
    }
    if (own >= 0)
        close(own);
    /* No /proc: a pipe takes PIPE_BUF bytes without blocking once poll says it is writable. */
    q->small = S_ISFIFO(st.st_mode);
}

size_t ipb_outq_len(const ipb_outq *q) { return q->cur.len - q->off + q->urgent.len + q->bulk.len; }

int ipb_outq_push(ipb_outq *q, const struct iovec *iov, int n, bool urgent) {
    if (q->broken)
        return -1;
    ipb_buf *b = urgent ? &q->urgent : &q->bulk;
    for (int i = 0; i < n; i++)
        if (iov[i].iov_len && ipb_buf_append(b, iov[i].iov_base, iov[i].iov_len) < 0)
            return -1;
    return ipb_outq_flush(q);
}

/* One write without waiting: bytes written, 0 when the client takes nothing now, -1 broken. */
static ssize_t write_some(ipb_outq *q, const char *data, size_t len) {
    for (;;) {
        ssize_t w;
        if (q->sock) {
            w = send(q->fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        } else if (q->small) {
            struct pollfd p = {q->fd, POLLOUT, 0};
            if (poll(&p, 1, 0) < 0 && errno != EINTR)
                return -1;
            if (p.revents & (POLLERR | POLLHUP | POLLNVAL))
                return -1;
            if (!(p.revents & POLLOUT))
                return 0;
            w = write(q->fd, data, len < PIPE_BUF ? len : PIPE_BUF);
        } else {
            w = write(q->fd, data, len);
        }
        if (w >= 0)
            return w;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        return -1;
    }
}

int ipb_outq_flush(ipb_outq *q) {
    while (!q->broken) {
        if (q->off == q->cur.len) {
            /* The next whole lines: urgent ones first. */
            ipb_buf *next = q->urgent.len ? &q->urgent : q->bulk.len ? &q->bulk : NULL;
            /* Keep a small buffer, not the largest one ever needed. */
            if (q->cur.cap > (1u << 20))
                ipb_buf_free(&q->cur);
            else
                ipb_buf_reset(&q->cur);
            q->off = 0;
            if (!next)
                return 0;
            ipb_buf t = q->cur;
            q->cur = *next;
            *next = t;
        }
        ssize_t w = write_some(q, q->cur.data + q->off, q->cur.len - q->off);
        if (w < 0) {
            q->broken = true;
            break;
        }
        if (w == 0)
            return 0;
        q->off += (size_t)w;
    }
    return -1;
}

int ipb_outq_finish(ipb_outq *q, int timeout_ms, volatile sig_atomic_t *stop) {
    long deadline = timeout_ms < 0 ? 0 : ipb_now_ms() + timeout_ms;
    while (ipb_outq_flush(q) == 0 && ipb_outq_len(q) > 0) {
        if (stop && *stop)
            return -1;
        long left = deadline ? deadline - ipb_now_ms() : 1000;
        if (left <= 0)
            return -1;
        struct pollfd p = {q->poll_fd, POLLOUT, 0};
        if (poll(&p, 1, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR)
            return -1;
    }
    return ipb_outq_len(q) == 0 && !q->broken ? 0 : -1;
}

size_t ipb_outq_unread(const ipb_outq *q) {
    struct stat st;
    int n = 0;
    if (fstat(q->fd, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        return 0;
    if (ioctl(q->fd, q->sock ? SIOCOUTQ : FIONREAD, &n) < 0 || n < 0)
        return 0;
    return (size_t)n;
}

void ipb_outq_free(ipb_outq *q) {
    ipb_buf_free(&q->cur);
    ipb_buf_free(&q->urgent);
    ipb_buf_free(&q->bulk);
    if (q->own_fd)
        close(q->fd);
    q->own_fd = false;
    q->fd = q->poll_fd;
}
