/* Whole reads and writes on fds, retrying on EINTR and short transfers. Return 0 or -errno. */
#pragma once
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

int ipb_write_all(int fd, const void *buf, size_t len);
/* writev() until all of iov[0..n) is written; advances the entries in place. */
int ipb_writev_all(int fd, struct iovec *iov, int n);
/* Reads until EOF or max bytes; *ret_len gets the count. Returns -EFBIG if more remained. */
int ipb_read_all(int fd, void *buf, size_t max, size_t *ret_len);
/* Reads a whole regular file (at most max bytes) into a NUL-terminated malloc'd buffer. */
int ipb_read_file(const char *path, size_t max, char **ret_buf, size_t *ret_len);
/* One read of a small file (a /proc one, whose content comes whole from one read) into buf,
 * at most size - 1 bytes, NUL-terminated: the count read, or -errno (-ENODATA when empty). */
ssize_t ipb_read_small(const char *path, char *buf, size_t size);
int ipb_write_file(const char *path, const void *buf, size_t len, int mode);
/* Makes every fd >= first close-on-exec (close_range with a fallback). */
int ipb_cloexec_from(int first);
int ipb_set_nonblock(int fd, int on);
/* Fills buf with random bytes from getrandom(). */
int ipb_random(void *buf, size_t len);
/* Writes 2*len lowercase hex digits plus NUL into out. */
void ipb_hex(const unsigned char *in, size_t len, char *out);
