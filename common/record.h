/* Fixed-size records on SOCK_SEQPACKET sockets, with descriptors (SCM_RIGHTS) attached: the
 * framing under the shim's and the monitor's channels. */
#pragma once
#include <stddef.h>

#define IPB_RECORD_MAX_FDS 64

/* Sends one record of len bytes with nfds (at most IPB_RECORD_MAX_FDS) descriptors. flags
 * go to sendmsg (MSG_DONTWAIT: -EAGAIN instead of waiting for room). Returns 0 or -errno. */
int ipb_record_send(int fd, const void *rec, size_t len, const int *fds, size_t nfds, int flags);
/* Receives one record of exactly len bytes. Descriptors that came with it (close-on-exec)
 * go to fds, up to max (*nfds says how many); any beyond max are closed. Returns 1, 0 on EOF,
 * or -errno: -EBADMSG for a record of another size or with truncated descriptors (then no
 * descriptor is kept), -EAGAIN with MSG_DONTWAIT in flags when no record waits. */
int ipb_record_recv(int fd, void *rec, size_t len, int *fds, size_t max, size_t *nfds, int flags);
