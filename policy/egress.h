/* The egress policy: `--allowed-domain` entries and `--resolve NAME:ADDR` pins, parsed once
 * and then asked pure questions by the proxy and the DNS stub. No I/O here: the host's own
 * addresses and name resolution are supplied by the caller.
 *
 * Entries: an exact domain ("example.com"), a wildcard "*.example.com" (subdomains only, never
 * the suffix itself; "*" and single-label suffixes such as "*.com" are refused), an IPv4 or
 * IPv6 address, or a CIDR block ("10.0.0.0/8", "2001:db8::/32"; host bits must be zero).
 * Names are normalised (lower case, one trailing dot dropped). Address literals in any form
 * inet_aton accepts ("127.1", "2130706433", "0x7f.0.0.1") and IPv4-mapped IPv6 are judged as
 * their canonical address.
 *
 * No entries: every public destination is allowed (ipybox's semantics). Special addresses
 * (loopback, private, link-local, shared address space, metadata, multicast, reserved, the
 * host's own) are refused unless an address entry names them explicitly: a CIDR entry that
 * lies inside the special block (so "10.1.0.0/16" allows those, "0.0.0.0/0" does not), or for
 * the host's own addresses, an entry of exactly that address. A --resolve pin is explicit
 * too: the address it gives is used even when special. Cloud metadata names are always
 * refused. An IPv6 address that carries an IPv4 one (NAT64 64:ff9b::/96, 6to4 2002::/16,
 * IPv4-mapped, IPv4-compatible) is judged by that IPv4 address as well, against the special
 * blocks and the host's own addresses. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include "error.h"

#define IPB_NAME_MAX 253

typedef struct ipb_addr {
    int family;    /* AF_INET or AF_INET6; IPv4-mapped IPv6 is stored as AF_INET */
    uint8_t b[16]; /* network order; IPv4 in b[0..3] */
} ipb_addr;

enum ipb_egress_kind { IPB_EGRESS_EXACT, IPB_EGRESS_WILDCARD, IPB_EGRESS_CIDR };

typedef struct ipb_egress_rule {
    enum ipb_egress_kind kind;
    char name[IPB_NAME_MAX + 1]; /* EXACT: the name; WILDCARD: the suffix without "*." */
    ipb_addr addr;               /* CIDR: the network */
    unsigned prefix;             /* CIDR: prefix length (32/128 for one address) */
} ipb_egress_rule;

typedef struct ipb_egress_pin {
    char name[IPB_NAME_MAX + 1];
    ipb_addr addr;
} ipb_egress_pin;

typedef struct ipb_egress_policy {
    ipb_egress_rule *rules;
    size_t n_rules;
    ipb_egress_pin *pins;
    size_t n_pins;
    ipb_addr *host_addrs; /* the host's own addresses, filled by the caller */
    size_t n_host_addrs;
} ipb_egress_policy;

void ipb_egress_free(ipb_egress_policy *p);
/* Adds one --allowed-domain entry; a bad one fails with a message naming it. */
int ipb_egress_add_rule(ipb_egress_policy *p, const char *entry, ipb_error **err);
/* Adds one --resolve NAME:ADDR pin (IPv6 as NAME:ADDR or NAME:[ADDR]). */
int ipb_egress_add_pin(ipb_egress_policy *p, const char *spec, ipb_error **err);
/* Replaces the list of the host's own addresses. */
int ipb_egress_set_host_addrs(ipb_egress_policy *p, const ipb_addr *a, size_t n);

/* Parses an address literal: IPv4 in every inet_aton form, IPv6 (brackets allowed, zone ids
 * refused). IPv4-mapped IPv6 becomes IPv4. Returns true on success. */
bool ipb_addr_parse(const char *s, size_t len, ipb_addr *ret);
/* An AF_INET/AF_INET6 socket address as an address and a port (IPv4-mapped IPv6 becomes
 * IPv4); false for other families. port may be NULL. */
bool ipb_addr_from_sockaddr(const struct sockaddr *sa, ipb_addr *ret, uint16_t *port);
/* The socket address for an address and a port; returns its length. */
socklen_t ipb_addr_to_sockaddr(const ipb_addr *a, uint16_t port, struct sockaddr_storage *ss);
bool ipb_addr_equal(const ipb_addr *a, const ipb_addr *b);
/* The canonical text of an address (INET6_ADDRSTRLEN bytes suffice). */
void ipb_addr_format(const ipb_addr *a, char *buf, size_t len);
/* Normalises a host name into out (IPB_NAME_MAX + 1 bytes): lower case, one trailing dot
 * dropped, labels of letters, digits, '-' and '_' (1-63 bytes, no leading or trailing '-').
 * Returns false for anything else, including address literals. */
bool ipb_name_normalize(const char *s, size_t len, char *out);

/* Why an address is special ("loopback", "private", ...), or NULL when it is public. */
const char *ipb_addr_special(const ipb_addr *a);
/* Whether a (normalised) name is a cloud metadata name. */
bool ipb_name_is_metadata(const char *name);

/* May a connection go to this name? *reason says why not (a static sentence fragment);
 * reason may be NULL here and below. */
bool ipb_egress_name_allowed(const ipb_egress_policy *p, const char *name, const char **reason);
/* May a connection go to this address? `by_name`: the address came from resolving an allowed
 * name (then no address entry is needed, only the special ranges are checked); `pinned`: it
 * came from a --resolve pin (then it is allowed as given). */
bool ipb_egress_addr_allowed(const ipb_egress_policy *p, const ipb_addr *a, bool by_name, bool pinned,
                             const char **reason);

/* ---- the decision on a connection, once its first bytes have been read

 * The name the client uses decides: when the bytes carry a name (a TLS server name, an HTTP
 * Host or absolute URI, a CONNECT authority), that name must be allowed, whatever address was
 * dialled, and the connection then goes only to addresses checked for that name: its
 * --resolve pins, else the dialled address when the DNS stub gave it out for that very name,
 * else what the host resolves it to (through ipb_egress_addr_allowed with by_name). An
 * address literal in those places is judged as an address. Only when no name is
 * visible does the dialled address decide on its own: an address or CIDR entry (or no list
 * and a public address), a --resolve pin of an allowed name, or an address the DNS stub gave
 * out for an allowed name. So an address handed out for an allowed name, or allowed by an
 * entry, never carries a request for another name (domain fronting on a shared CDN). */
enum ipb_egress_route {
    IPB_EGRESS_REFUSE,
    IPB_EGRESS_TO_ADDR, /* connect to verdict.addr (the dialled address, or the literal named) */
    IPB_EGRESS_TO_NAME, /* connect only to addresses checked for verdict.name */
};

typedef struct ipb_egress_verdict {
    enum ipb_egress_route route;
    ipb_addr addr;               /* TO_ADDR: where to go; REFUSE: the address refused (family 0 when a name was) */
    char name[IPB_NAME_MAX + 1]; /* TO_NAME: the normalised name; TO_ADDR: the allowed name the address stands
                                    for, or ""; REFUSE: the name refused, or "" */
    const char *why;             /* how it was allowed, or why not (a static sentence fragment) */
} ipb_egress_verdict;

/* What the DNS stub gave out to this sandbox (recently), each answer checked for its name. */
typedef struct ipb_egress_memo {
    /* An allowed name it gave this address out for, or NULL. */
    const char *(*recall)(void *ctx, const ipb_addr *a);
    /* Whether it gave this address out for this name. */
    bool (*gave)(void *ctx, const ipb_addr *a, const char *name);
    void *ctx;
} ipb_egress_memo;

/* Decides a connection. host: the name or address literal its bytes carry, NULL or "" when
 * they carry none. dialled: its original destination, NULL when it was made to the proxy
 * itself. memo may be NULL. A visible, allowed name dialled at an address the DNS stub gave
 * out for that very name goes there (TO_ADDR: the proxy checked it for the name); otherwise
 * TO_NAME. Returns whether it is allowed (v->route != IPB_EGRESS_REFUSE). */
bool ipb_egress_decide(const ipb_egress_policy *p, const char *host, const ipb_addr *dialled,
                       const ipb_egress_memo *memo, ipb_egress_verdict *v);
/* Whether a connection to this dialled address may go there without its bytes being read:
 * only with no list (every public destination and every name but metadata ones allowed) and a
 * public address, so that server-first protocols need not wait. With a list, every connection
 * is read first, as the name it carries decides. */
bool ipb_egress_unread_ok(const ipb_egress_policy *p, const ipb_addr *dialled);

/* The --allowed-domain entry that would lift a refusal, checked against a copy of the policy
 * with that entry added: for a name (normalised), the name itself; for an address, the
 * address (judged on its own, or with by_name as an answer for an allowed name). The entry
 * goes into out; false when no entry of that kind would allow it (a metadata name), or for an
 * address never suggested although an entry could open it: the host's own, loopback, cloud
 * metadata, unspecified. */
bool ipb_egress_suggest_entry(const ipb_egress_policy *p, const char *name, const ipb_addr *a, bool by_name, char *out,
                              size_t len);

/* The pinned addresses of a name (repeated --resolve for one name adds addresses): up to max
 * into out; returns how many there are. */
size_t ipb_egress_pins(const ipb_egress_policy *p, const char *name, ipb_addr *out, size_t max);
