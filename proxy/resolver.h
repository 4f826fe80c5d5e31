/* Host-side name resolution for the proxy and the DNS stub: getaddrinfo on a small fixed pool
 * of threads, so the event loop never blocks. Finished requests are collected by the loop
 * when the eventfd is readable. */
#pragma once
#include <stddef.h>

#include "egress.h"
#include "error.h"

#define IPB_RESOLVE_MAX 16

typedef struct ipb_resolve_req {
    char name[IPB_NAME_MAX + 1];
    int family;  /* AF_UNSPEC, AF_INET or AF_INET6 */
    int gai_err; /* 0, or getaddrinfo's error */
    ipb_addr addrs[IPB_RESOLVE_MAX];
    size_t n;
    struct ipb_resolve_req *next; /* the resolver's queues */
} ipb_resolve_req;

typedef struct ipb_resolver ipb_resolver;

int ipb_resolver_start(unsigned threads, ipb_resolver **ret, ipb_error **err);
/* Readable (eventfd) when finished requests wait. */
int ipb_resolver_fd(const ipb_resolver *r);
void ipb_resolver_submit(ipb_resolver *r, ipb_resolve_req *req);
/* A request nobody waits for any more: when it is still queued, it is finished at once
 * (gai_err EAI_CANCELED, no lookup), so that its place goes to others; one already being
 * looked up finishes as usual. Either way it comes back through take_done. */
void ipb_resolver_cancel(ipb_resolver *r, ipb_resolve_req *req);
/* Takes every finished request (a list through next), clearing the eventfd. */
ipb_resolve_req *ipb_resolver_take_done(ipb_resolver *r);
/* Stops the threads (after their current lookup) and frees what is queued. Requests still
 * in a lookup are freed by their thread. */
void ipb_resolver_stop(ipb_resolver *r);
