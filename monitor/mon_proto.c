#include "mon_proto.h"

#include <errno.h>
#include <sys/socket.h>

#include "record.h"

int ipbm_send(int fd, const struct ipbm_msg *m, const int *fds, unsigned nfds, int flags) {
    return ipb_record_send(fd, m, sizeof(*m), fds, nfds, flags);
}

int ipbm_recv(int fd, struct ipbm_msg *m, int *fds, unsigned max, unsigned *nfds, int flags) {
    size_t n = 0;
    int r = ipb_record_recv(fd, m, sizeof(*m), fds, max, &n, flags);
    *nfds = (unsigned)n;
    if (r == 1 && m->magic != IPBM_MAGIC)
        return -EBADMSG;
    if (r == 1)
        m->text[IPBM_TEXT - 1] = '\0';
    return r;
}

bool ipbm_is_seqpacket(int fd) {
    int type = 0, domain = 0;
    socklen_t l = sizeof(type), l2 = sizeof(domain);
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) == 0 && type == SOCK_SEQPACKET &&
           getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l2) == 0 && domain == AF_UNIX;
}
