#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cleanup.h"

int ipb_writev_all(int fd, struct iovec *iov, int n) {
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        /* Skip what was written; the arrays are the caller's and are advanced in place. */
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

int ipb_write_all(int fd, const void *buf, size_t len) {
    struct iovec v = {(void *)buf, len};
    return ipb_writev_all(fd, &v, 1);
}

int ipb_read_all(int fd, void *buf, size_t max, size_t *ret_len) {
    char *p = buf;
    size_t got = 0;
    for (;;) {
        if (got == max) {
            char c;
            ssize_t n = read(fd, &c, 1);
            if (n > 0)
                return -EFBIG;
            break;
        }
        ssize_t n = read(fd, p + got, max - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    *ret_len = got;
    return 0;
}

int ipb_read_file(const char *path, size_t max, char **ret_buf, size_t *ret_len) {
    /* Non-blocking, so that a FIFO (say, an env file that sandbox code replaced in a workspace)
     * is refused below instead of stalling the open; it changes nothing for regular files. */
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    cleanup_free char *buf = malloc(max + 1);
    if (!buf)
        return -ENOMEM;
    size_t len = 0;
    int r = ipb_read_all(fd, buf, max, &len);
    if (r < 0)
        return r;
    buf[len] = '\0';
    *ret_buf = steal_ptr(buf);
    if (ret_len)
        *ret_len = len;
    return 0;
}

ssize_t ipb_read_small(const char *path, char *buf, size_t size) {
    if (size < 2)
        return -EINVAL;
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    ssize_t n;
    do
        n = read(fd, buf, size - 1);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    if (n == 0)
        return -ENODATA;
    buf[n] = '\0';
    return n;
}

int ipb_write_file(const char *path, const void *buf, size_t len, int mode) {
    cleanup_close int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    return ipb_write_all(fd, buf, len);
}

int ipb_cloexec_from(int first) {
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
    if (syscall(SYS_close_range, (unsigned)first, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
        return 0;
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = first; fd < max && fd < 65536; fd++) {
        int fl = fcntl((int)fd, F_GETFD);
        if (fl >= 0)
            fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC);
    }
    return 0;
}

int ipb_set_nonblock(int fd, int on) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -errno;
    fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
    return fcntl(fd, F_SETFL, fl) < 0 ? -errno : 0;
}

int ipb_random(void *buf, size_t len) {
    char *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

void ipb_hex(const unsigned char *in, size_t len, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * len] = '\0';
}
