#include "netns.h"

#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"

void ipb_egress_fds_init(ipb_egress_fds *f) {
    for (int i = 0; i < IPB_EGRESS_NFDS; i++)
        f->fd[i] = -1;
}

void ipb_egress_fds_close(ipb_egress_fds *f) {
    for (int i = 0; i < IPB_EGRESS_NFDS; i++)
        if (f->fd[i] >= 0) {
            close(f->fd[i]);
            f->fd[i] = -1;
        }
}

int ipb_netns_loopback_up(ipb_error **err) {
    cleanup_close int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ipb_error_set(err, errno, "bringing up loopback: socket");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
        return ipb_error_set(err, errno, "bringing up loopback: reading flags");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
        return ipb_error_set(err, errno, "bringing up loopback");
    return 0;
}

/* One listening (TCP) or bound (UDP) socket on the loopback address of a family. */
static int loopback_socket(int family, int type, int port, ipb_error **err) {
    cleanup_close int fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ipb_error_set(err, errno, "creating an egress listener");
    int one = 1;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t len;
    if (family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof(*s4);
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        s6->sin6_addr = in6addr_loopback;
        len = sizeof(*s6);
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, len) < 0)
        return ipb_error_set(err, errno, "binding the egress listener on port %d", port);
    /* The sandbox's side of a relayed connection never leaves loopback: no loss, no queue. A
     * pacing congestion control inherited from the host (BBR) arms a timer per burst, and on a
     * 2-core host it halved bulk throughput through the proxy (bench/egress.md); reno paces
     * nothing and is always permitted. Accepted connections inherit it. Best effort. */
    if (type == SOCK_STREAM)
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "reno", sizeof("reno") - 1);
    if (type == SOCK_STREAM && listen(fd, 1024) < 0)
        return ipb_error_set(err, errno, "listening on port %d", port);
    return steal_fd(fd);
}

static bool have_ipv6(void) {
    int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    /* With ipv6.disable=0 but no ::1 on lo (disable_ipv6=1), binding fails: treat as none. */
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool ok = bind(fd, (struct sockaddr *)&s6, sizeof(s6)) == 0;
    close(fd);
    return ok;
}

int ipb_netns_egress_setup(ipb_egress_fds *ret, ipb_error **err) {
    ipb_egress_fds f;
    ipb_egress_fds_init(&f);
    if (ipb_netns_loopback_up(err) < 0)
        return -1;
    bool v6 = have_ipv6();
    if (ipb_netns_local_default_routes(v6, err) < 0 || ipb_netns_install_ruleset(err) < 0)
        return -1;
    static const struct {
        int idx, family, type, port;
    } want[] = {
        {IPB_EGRESS_PROXY4, AF_INET, SOCK_STREAM, IPB_EGRESS_PROXY_PORT},
        {IPB_EGRESS_PROXY6, AF_INET6, SOCK_STREAM, IPB_EGRESS_PROXY_PORT},
        {IPB_EGRESS_DNS_TCP4, AF_INET, SOCK_STREAM, IPB_EGRESS_DNS_PORT},
        {IPB_EGRESS_DNS_TCP6, AF_INET6, SOCK_STREAM, IPB_EGRESS_DNS_PORT},
        {IPB_EGRESS_DNS_UDP4, AF_INET, SOCK_DGRAM, IPB_EGRESS_DNS_PORT},
        {IPB_EGRESS_DNS_UDP6, AF_INET6, SOCK_DGRAM, IPB_EGRESS_DNS_PORT},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (want[i].family == AF_INET6 && !v6)
            continue;
        int fd = loopback_socket(want[i].family, want[i].type, want[i].port, err);
        if (fd < 0) {
            ipb_egress_fds_close(&f);
            return -1;
        }
        f.fd[want[i].idx] = fd;
    }
    *ret = f;
    return 0;
}
