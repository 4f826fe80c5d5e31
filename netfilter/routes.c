/* `ip route add local default dev lo` for IPv4 and IPv6, through libnl-route-3: every
 * destination becomes local, so connections reach the nftables output hook instead of failing
 * with "network unreachable". */
#include <errno.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <netlink/netlink.h>
#include <netlink/route/route.h>
#include <netlink/route/link.h>
#include <sys/socket.h>

#include "netns.h"

static int add_local_default(struct nl_sock *sk, int family, int lo, ipb_error **err) {
    static const uint8_t zero[16];
    struct rtnl_route *route = rtnl_route_alloc();
    struct nl_addr *dst = nl_addr_build(family, zero, family == AF_INET ? 4 : 16);
    struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
    int r = -NLE_NOMEM;
    if (route && dst && nh) {
        nl_addr_set_prefixlen(dst, 0);
        rtnl_route_set_family(route, (uint8_t)family);
        rtnl_route_set_type(route, RTN_LOCAL);
        rtnl_route_set_table(route, RT_TABLE_LOCAL);
        rtnl_route_set_scope(route, RT_SCOPE_HOST);
        rtnl_route_set_protocol(route, RTPROT_STATIC);
        r = rtnl_route_set_dst(route, dst);
        if (r == 0) {
            rtnl_route_nh_set_ifindex(nh, lo);
            rtnl_route_add_nexthop(route, nh);
            nh = NULL; /* owned by the route now */
            r = rtnl_route_add(sk, route, NLM_F_CREATE | NLM_F_EXCL);
        }
    }
    if (nh)
        rtnl_route_nh_free(nh);
    if (dst)
        nl_addr_put(dst);
    if (route)
        rtnl_route_put(route);
    if (r < 0)
        return ipb_error_set(err, EPERM, "adding the local default route for %s: %s",
                             family == AF_INET ? "IPv4" : "IPv6", nl_geterror(r));
    return 0;
}

int ipb_netns_local_default_routes(bool ipv6, ipb_error **err) {
    struct nl_sock *sk = nl_socket_alloc();
    if (!sk)
        return ipb_error_set(err, ENOMEM, "allocating a netlink socket");
    int r = nl_connect(sk, NETLINK_ROUTE);
    if (r < 0) {
        nl_socket_free(sk);
        return ipb_error_set(err, EPERM, "connecting to rtnetlink: %s", nl_geterror(r));
    }
    /* In a fresh network namespace `lo` is the only link; ask for its index all the same. */
    struct rtnl_link *link = NULL;
    int lo = 1;
    if (rtnl_link_get_kernel(sk, 0, "lo", &link) == 0) {
        lo = rtnl_link_get_ifindex(link);
        rtnl_link_put(link);
    }
    r = add_local_default(sk, AF_INET, lo, err);
    if (r == 0 && ipv6)
        r = add_local_default(sk, AF_INET6, lo, err);
    nl_socket_free(sk);
    return r;
}
