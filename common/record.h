/* Fixed-size records on SOCK_SEQPACKET sockets, with descriptors (SCM_RIGHTS) attached: the
 * framing under the shim's and the monitor's channels. */
#pragma once
#include <stddef.h>

/* The kernel's limit on descriptors in one message (SCM_MAX_FD). */
#define IPB_RECORD_MAX_FDS 253

/* Sends one record of len bytes with nfds (at most IPB_RECORD_MAX_FDS) descriptors. flags
 * go to sendmsg (MSG_DONTWAIT: -EAGAIN instead of waiting for room). Returns 0 or -errno. */
int ipb_record_send(int fd, const void *rec, size_t len, const int *fds, size_t nfds, int flags);
/* Receives one record of exactly len bytes. Descriptors that came with it (close-on-exec)
 * go to fds, up to max (at most IPB_RECORD_MAX_FDS; *nfds says how many); the caller owns
 * them whatever the result. Any beyond max are dropped by the kernel, which then runs their
 * release in this process: a receiver that must not run code a sender chose passes
 * IPB_RECORD_MAX_FDS. Returns 1, 0 on EOF, or -errno: -EBADMSG for a record of another size or
 * with descriptors beyond max, -EAGAIN with MSG_DONTWAIT in flags when no record waits. */
int ipb_record_recv(int fd, void *rec, size_t len, int *fds, size_t max, size_t *nfds, int flags);
/* Closes n descriptors (for receivers whose senders are trusted). */
void ipb_record_close_fds(const int *fds, size_t n);
