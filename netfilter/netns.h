/* Network namespace plumbing, run by the shim (PID 1 of the sandbox, root in user namespace 1,
 * which owns the network namespace) before the program starts. The program runs in a nested
 * user namespace without capabilities, so it cannot change any of this.
 *
 * The namespace has only `lo`. `local default` routes for IPv4 and IPv6 make every destination
 * local; an nftables table (libnftables) then sends DNS (UDP and TCP port 53, to any address)
 * to the DNS stub's listeners, redirects every other TCP connection not addressed to the
 * sandbox's own loopback to the proxy listener, and drops everything else. The listeners are
 * created here, inside the namespace, and handed to the supervisor, whose proxy decides. */
#pragma once
#include <stdbool.h>

#include "error.h"

/* Ports inside the sandbox's namespace: below 1024, so the program (without
 * CAP_NET_BIND_SERVICE in the namespace) can never bind them itself. */
#define IPB_EGRESS_PROXY_PORT 1023
#define IPB_EGRESS_DNS_PORT 53

/* The listeners, in the order they travel to the supervisor. IPv6 ones are -1 where the host
 * has no IPv6. */
enum ipb_egress_fd {
    IPB_EGRESS_PROXY4, /* TCP 127.0.0.1:1023 */
    IPB_EGRESS_PROXY6, /* TCP [::1]:1023 */
    IPB_EGRESS_DNS_TCP4,
    IPB_EGRESS_DNS_TCP6,
    IPB_EGRESS_DNS_UDP4,
    IPB_EGRESS_DNS_UDP6,
    IPB_EGRESS_NFDS
};

typedef struct ipb_egress_fds {
    int fd[IPB_EGRESS_NFDS];
} ipb_egress_fds;

void ipb_egress_fds_init(ipb_egress_fds *f);
void ipb_egress_fds_close(ipb_egress_fds *f);

/* Brings `lo` up in the caller's network namespace. */
int ipb_netns_loopback_up(ipb_error **err);
/* Adds `local default dev lo` routes (IPv4, and IPv6 when ipv6 is true). */
int ipb_netns_local_default_routes(bool ipv6, ipb_error **err);
/* Installs the egress ruleset (table inet ipybox). */
int ipb_netns_install_ruleset(ipb_error **err);
/* The whole recipe: loopback, routes, ruleset and listeners (non-blocking, close-on-exec). */
int ipb_netns_egress_setup(ipb_egress_fds *ret, ipb_error **err);
