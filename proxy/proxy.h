/* The egress proxy and DNS stub: one event loop (a thread of the supervisor, epoll) serving
 * every sandbox's listeners. It reads each redirected connection's original destination,
 * sniffs its first bytes (sniff.h), decides by the policy (egress.h), resolves the allowed
 * name itself on the host (resolver.h) and connects only to an address it checked, then
 * relays with splice(). Every decision is logged: refusals as warnings, the rest at info. */
#pragma once
#include <stdint.h>

#include "egress.h"
#include "egress_notes.h"
#include "error.h"
#include "netns.h"

#define IPB_PROXY_DEFAULT_MAX_CONNS 256

typedef struct ipb_proxy ipb_proxy;

/* Starts the loop. The policy must outlive the proxy; the proxy fills in the host's own
 * addresses. max_conns: concurrent connections per sandbox (0: the default). */
int ipb_proxy_start(ipb_egress_policy *policy, unsigned max_conns, ipb_proxy **ret, ipb_error **err);
/* Serves a sandbox's listeners (taken: *fds is emptied). label names it in the log. */
int ipb_proxy_attach(ipb_proxy *p, const char *label, ipb_egress_fds *fds, uint32_t *ret_id, ipb_error **err);
/* Ends everything the sandbox's processes have in the proxy, now: its connections (both
 * sides closed, whatever the remote does), those still queued on its listeners, and its DNS
 * queries waiting for an answer (dropped); none counts against its caps any more. The
 * listeners stay, for the processes that come next. For when the sandbox's kernel ended:
 * its processes are dead, or what survives it belongs to what ended. Logs one line when
 * something was ended; returns how many connections and DNS queries were, once done. */
unsigned ipb_proxy_end_all(ipb_proxy *p, uint32_t id);
/* The refusals of the sandbox's destinations not taken yet (egress_notes.h), into out (emptied
 * first); a destination taken once is not told again until the notes are cleared. Returns -1
 * when the sandbox is not served. */
int ipb_proxy_take_notes(ipb_proxy *p, uint32_t id, ipb_egress_notes *out);
/* Forgets the sandbox's refusals: what comes next is told afresh (a cell begins). */
void ipb_proxy_clear_notes(ipb_proxy *p, uint32_t id);
/* Stops serving a sandbox and closes its connections; returns once done. */
void ipb_proxy_detach(ipb_proxy *p, uint32_t id);
/* Stops the loop and frees everything. */
void ipb_proxy_stop(ipb_proxy *p);
