#include "egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ipb_egress_free(ipb_egress_policy *p) {
    free(p->rules);
    free(p->pins);
    free(p->host_addrs);
    memset(p, 0, sizeof(*p));
}

/* ---- addresses */

static void set_v4(ipb_addr *a, const uint8_t v4[4]) {
    memset(a, 0, sizeof(*a));
    a->family = AF_INET;
    memcpy(a->b, v4, 4);
}

bool ipb_addr_parse(const char *s, size_t len, ipb_addr *ret) {
    char buf[INET6_ADDRSTRLEN + 2];
    if (len == 0 || len >= sizeof(buf) || memchr(s, '\0', len))
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *t = buf;
    if (t[0] == '[') {
        if (t[len - 1] != ']')
            return false;
        t[len - 1] = '\0';
        t++;
        if (!strchr(t, ':'))
            return false; /* brackets are for IPv6 only */
    }
    if (strchr(t, ':')) {
        struct in6_addr a6;
        if (inet_pton(AF_INET6, t, &a6) != 1)
            return false; /* also refuses zone ids ("fe80::1%eth0") */
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (!memcmp(a6.s6_addr, mapped, 12)) {
            set_v4(ret, a6.s6_addr + 12);
            return true;
        }
        memset(ret, 0, sizeof(*ret));
        ret->family = AF_INET6;
        memcpy(ret->b, a6.s6_addr, 16);
        return true;
    }
    /* inet_aton takes every historical form: a.b.c.d, a.b.c, a.b, a; decimal, octal (0..)
     * and hex (0x..) parts. That is how the C library (and so most clients) read them, so
     * that is how they are judged. It also ignores anything after a space: refuse those. */
    if (strchr(t, ' ') || strchr(t, '\t') || strchr(t, '\n'))
        return false;
    struct in_addr a4;
    if (inet_aton(t, &a4) == 0)
        return false;
    set_v4(ret, (const uint8_t *)&a4.s_addr);
    return true;
}

bool ipb_addr_from_sockaddr(const struct sockaddr *sa, ipb_addr *ret, uint16_t *port) {
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    memset(ret, 0, sizeof(*ret));
    uint16_t p;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        ret->family = AF_INET;
        memcpy(ret->b, &s4->sin_addr, 4);
        p = s4->sin_port;
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        const uint8_t *b = (const uint8_t *)&s6->sin6_addr;
        if (!memcmp(b, mapped, 12)) {
            ret->family = AF_INET;
            memcpy(ret->b, b + 12, 4);
        } else {
            ret->family = AF_INET6;
            memcpy(ret->b, b, 16);
        }
        p = s6->sin6_port;
    } else {
        return false;
    }
    if (port)
        *port = ntohs(p);
    return true;
}

socklen_t ipb_addr_to_sockaddr(const ipb_addr *a, uint16_t port, struct sockaddr_storage *ss) {
    memset(ss, 0, sizeof(*ss));
    if (a->family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        memcpy(&s4->sin_addr, a->b, 4);
        return sizeof(*s4);
    }
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    memcpy(&s6->sin6_addr, a->b, 16);
    return sizeof(*s6);
}

bool ipb_addr_equal(const ipb_addr *a, const ipb_addr *b) {
    return a->family == b->family && !memcmp(a->b, b->b, a->family == AF_INET ? 4 : 16);
}

void ipb_addr_format(const ipb_addr *a, char *buf, size_t len) {
    if (!inet_ntop(a->family, a->b, buf, (socklen_t)len) && len)
        buf[0] = '\0';
}

static bool in_block(const ipb_addr *a, int family, const uint8_t *net, unsigned prefix) {
    if (a->family != family)
        return false;
    unsigned full = prefix / 8, rest = prefix % 8;
    if (memcmp(a->b, net, full))
        return false;
    if (rest) {
        uint8_t mask = (uint8_t)(0xff << (8 - rest));
        if ((a->b[full] & mask) != (net[full] & mask))
            return false;
    }
    return true;
}

typedef struct special_block {
    int family;
    uint8_t net[16];
    unsigned prefix;
    const char *why;
} special_block;

/* Blocks that are never a public destination. Documentation ranges (192.0.2.0/24,
 * 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32) are not here: nothing routes them on the
 * internet, and tests use them for test hosts. */
static const special_block special_blocks[] = {
    {AF_INET, {0}, 8, "an unspecified (\"this network\") address"},
    {AF_INET, {10}, 8, "a private address"},
    {AF_INET, {100, 100, 100, 200}, 32, "a cloud metadata address"},
    {AF_INET, {100, 64}, 10, "in the shared address space (carrier-grade NAT)"},
    {AF_INET, {127}, 8, "a loopback address"},
    {AF_INET, {169, 254, 169, 254}, 32, "a cloud metadata address"},
    {AF_INET, {169, 254, 170, 2}, 32, "a cloud metadata address"},
    {AF_INET, {169, 254}, 16, "a link-local address"},
    {AF_INET, {172, 16}, 12, "a private address"},
    {AF_INET, {192, 0, 0}, 24, "an IETF protocol address"},
    {AF_INET, {192, 168}, 16, "a private address"},
    {AF_INET, {198, 18}, 15, "a benchmarking address"},
    {AF_INET, {224}, 4, "a multicast address"},
    {AF_INET, {240}, 4, "a reserved address"},
    {AF_INET6, {0}, 128, "the unspecified address"},
    {AF_INET6, {[15] = 1}, 128, "a loopback address"},
    {AF_INET6, {0}, 96, "an IPv4-compatible address (deprecated)"},
    {AF_INET6, {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, "a local-use NAT64 address"},
    {AF_INET6, {0x01}, 64, "a discard-only address"},
    {AF_INET6, {0x20, 0x01, 0x00, 0x00}, 32, "a Teredo address"},
    {AF_INET6, {0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54}, 128, "a cloud metadata address"}, /* fd00:ec2::254 */
    {AF_INET6, {0xfc}, 7, "a private (unique local) address"},
    {AF_INET6, {0xfe, 0x80}, 10, "a link-local address"},
    {AF_INET6, {0xfe, 0xc0}, 10, "a site-local address"},
    {AF_INET6, {0xff}, 8, "a multicast address"},
};

static const special_block *special_block_of(const ipb_addr *a) {
    for (size_t i = 0; i < sizeof(special_blocks) / sizeof(*special_blocks); i++)
        if (in_block(a, special_blocks[i].family, special_blocks[i].net, special_blocks[i].prefix))
            return &special_blocks[i];
    return NULL;
}

/* IPv6 forms that carry an IPv4 address a packet may end up at: NAT64 (64:ff9b::/96, RFC
 * 6052), 6to4 (2002::/16, the IPv4 address in bits 16-47), IPv4-mapped (::ffff:0:0/96; parsed
 * addresses never keep this form, but one built elsewhere is judged the same) and
 * IPv4-compatible (::/96, deprecated; :: and ::1 excepted). They are judged by that IPv4
 * address as well: against the special blocks and against the host's own addresses. The
 * local-use NAT64 block (64:ff9b:1::/48) has no fixed place for the IPv4 address and is
 * refused as a whole (a special block). */
static bool embedded_v4(const ipb_addr *a, ipb_addr *v4) {
    static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t zero[12] = {0};
    if (a->family != AF_INET6)
        return false;
    if (!memcmp(a->b, nat64, 12) || !memcmp(a->b, mapped, 12)) {
        set_v4(v4, a->b + 12);
        return true;
    }
    if (!memcmp(a->b, zero, 12) && (a->b[12] | a->b[13] | a->b[14] || a->b[15] > 1)) {
        set_v4(v4, a->b + 12);
        return true;
    }
    if (a->b[0] == 0x20 && a->b[1] == 0x02) {
        set_v4(v4, a->b + 2);
        return true;
    }
    return false;
}

const char *ipb_addr_special(const ipb_addr *a) {
    const special_block *b = special_block_of(a);
    if (b)
        return b->why;
    ipb_addr v4;
    if (embedded_v4(a, &v4) && (b = special_block_of(&v4)))
        return b->why;
    return NULL;
}

/* ---- names */

bool ipb_name_normalize(const char *s, size_t len, char *out) {
    if (len > 0 && s[len - 1] == '.')
        len--;
    if (len == 0 || len > IPB_NAME_MAX)
        return false;
    size_t label = 0;
    bool all_numeric_last = true;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c == '.') {
            if (label == 0 || out[i - 1] == '-')
                return false;
            label = 0;
            all_numeric_last = true;
        } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
            if (c == '-' && label == 0)
                return false;
            if (++label > 63)
                return false;
            if (!(c >= '0' && c <= '9'))
                all_numeric_last = false;
        } else {
            return false;
        }
        out[i] = c;
    }
    if (label == 0 || out[len - 1] == '-')
        return false;
    /* A name whose last label is all digits is an address literal in disguise ("1.2.3",
     * "127.1"), or no name at all: top-level domains are never numeric. */
    if (all_numeric_last)
        return false;
    out[len] = '\0';
    /* Hexadecimal forms too ("0x7f.1"): whatever the C library reads as an address is one. */
    struct in_addr a4;
    if (inet_aton(out, &a4))
        return false;
    return true;
}

static const char *const metadata_names[] = {
    "metadata",                 /* GCE's short name */
    "metadata.google.internal", /* GCE */
    "metadata.goog",            /* GCE */
    "instance-data",            /* EC2 */
    "instance-data.ec2.internal",
    "metadata.azure.internal",
    "metadata.platformequinix.com",
};

bool ipb_name_is_metadata(const char *name) {
    for (size_t i = 0; i < sizeof(metadata_names) / sizeof(*metadata_names); i++)
        if (!strcmp(name, metadata_names[i]))
            return true;
    return false;
}

/* ---- entries */

static int push_rule(ipb_egress_policy *p, const ipb_egress_rule *r) {
    ipb_egress_rule *n = realloc(p->rules, (p->n_rules + 1) * sizeof(*n));
    if (!n)
        return -1;
    p->rules = n;
    p->rules[p->n_rules++] = *r;
    return 0;
}

static int parse_cidr(const char *entry, ipb_egress_rule *r, ipb_error **err) {
    const char *slash = strchr(entry, '/');
    size_t alen = slash ? (size_t)(slash - entry) : strlen(entry);
    if (!ipb_addr_parse(entry, alen, &r->addr))
        return -1; /* not an address: the caller tries a name */
    unsigned max = r->addr.family == AF_INET ? 32 : 128;
    r->kind = IPB_EGRESS_CIDR;
    r->prefix = max;
    if (slash) {
        const char *d = slash + 1;
        char *end;
        errno = 0;
        unsigned long v = strtoul(d, &end, 10);
        if (!*d || *end || errno || *d < '0' || *d > '9' || v > max)
            return ipb_error_set(err, 0, "--allowed-domain '%s': the prefix length must be 0 to %u", entry, max);
        /* An IPv4-mapped IPv6 block was stored as IPv4: its prefix counts from bit 96. */
        if (strchr(entry, ':') && r->addr.family == AF_INET) {
            if (v < 96)
                return ipb_error_set(err, 0, "--allowed-domain '%s': an IPv4-mapped block needs a prefix of 96 or more",
                                     entry);
            v -= 96;
        }
        r->prefix = (unsigned)v;
        ipb_addr net = r->addr;
        for (unsigned bit = r->prefix; bit < (r->addr.family == AF_INET ? 32u : 128u); bit++)
            net.b[bit / 8] &= (uint8_t) ~(0x80 >> (bit % 8));
        if (memcmp(net.b, r->addr.b, 16)) {
            char a[INET6_ADDRSTRLEN];
            ipb_addr_format(&net, a, sizeof(a));
            return ipb_error_set(err, 0, "--allowed-domain '%s': host bits are set; did you mean %s/%u?", entry, a,
                                 r->prefix);
        }
    }
    return 0;
}

int ipb_egress_add_rule(ipb_egress_policy *p, const char *entry, ipb_error **err) {
    ipb_egress_rule r;
    memset(&r, 0, sizeof(r));
    size_t len = strlen(entry);
    if (len == 0)
        return ipb_error_set(err, 0, "--allowed-domain needs a value");
    if (strstr(entry, "://"))
        return ipb_error_set(err, 0, "--allowed-domain '%s': give a domain, address or CIDR block, not a URL", entry);
    ipb_error *cerr = NULL;
    int c = parse_cidr(entry, &r, &cerr);
    if (c == 0)
        return push_rule(p, &r) < 0 ? ipb_error_set(err, ENOMEM, "--allowed-domain") : 0;
    if (cerr) {
        *err = cerr;
        return -1;
    }
    if (strchr(entry, '/'))
        return ipb_error_set(err, 0, "--allowed-domain '%s': not a valid CIDR block", entry);
    if (!strcmp(entry, "*") || !strcmp(entry, "*."))
        return ipb_error_set(err, 0,
                             "--allowed-domain '%s': a wildcard for everything is refused; give no "
                             "--allowed-domain to allow every public destination",
                             entry);
    bool wild = len > 2 && entry[0] == '*' && entry[1] == '.';
    const char *name = wild ? entry + 2 : entry;
    if (strchr(name, '*'))
        return ipb_error_set(err, 0, "--allowed-domain '%s': a wildcard may only be a leading '*.'", entry);
    if (strchr(name, ':'))
        return ipb_error_set(err, 0,
                             "--allowed-domain '%s': not a domain, address or CIDR block (ports are not "
                             "part of an entry)",
                             entry);
    if (!ipb_name_normalize(name, strlen(name), r.name))
        return ipb_error_set(err, 0, "--allowed-domain '%s': not a valid domain name", entry);
    if (wild && !strchr(r.name, '.'))
        return ipb_error_set(err, 0, "--allowed-domain '%s': a wildcard over a whole top-level domain is refused",
                             entry);
    r.kind = wild ? IPB_EGRESS_WILDCARD : IPB_EGRESS_EXACT;
    return push_rule(p, &r) < 0 ? ipb_error_set(err, ENOMEM, "--allowed-domain") : 0;
}

int ipb_egress_add_pin(ipb_egress_policy *p, const char *spec, ipb_error **err) {
    const char *colon = strchr(spec, ':');
    if (!colon || colon == spec || !colon[1])
        return ipb_error_set(err, 0, "--resolve '%s': expected NAME:ADDRESS", spec);
    ipb_egress_pin pin;
    memset(&pin, 0, sizeof(pin));
    if (!ipb_name_normalize(spec, (size_t)(colon - spec), pin.name))
        return ipb_error_set(err, 0, "--resolve '%s': '%.*s' is not a valid host name", spec, (int)(colon - spec),
                             spec);
    if (!ipb_addr_parse(colon + 1, strlen(colon + 1), &pin.addr))
        return ipb_error_set(err, 0, "--resolve '%s': '%s' is not an IP address", spec, colon + 1);
    ipb_egress_pin *n = realloc(p->pins, (p->n_pins + 1) * sizeof(*n));
    if (!n)
        return ipb_error_set(err, ENOMEM, "--resolve");
    p->pins = n;
    p->pins[p->n_pins++] = pin;
    return 0;
}

int ipb_egress_set_host_addrs(ipb_egress_policy *p, const ipb_addr *a, size_t n) {
    ipb_addr *copy = n ? malloc(n * sizeof(*copy)) : NULL;
    if (n && !copy)
        return -ENOMEM;
    if (n)
        memcpy(copy, a, n * sizeof(*copy));
    free(p->host_addrs);
    p->host_addrs = copy;
    p->n_host_addrs = n;
    return 0;
}

size_t ipb_egress_pins(const ipb_egress_policy *p, const char *name, ipb_addr *out, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < p->n_pins; i++) {
        if (strcmp(p->pins[i].name, name))
            continue;
        if (n < max)
            out[n] = p->pins[i].addr;
        n++;
    }
    return n;
}

/* ---- decisions */

static bool has_cidr(const ipb_egress_policy *p) {
    for (size_t i = 0; i < p->n_rules; i++)
        if (p->rules[i].kind == IPB_EGRESS_CIDR)
            return true;
    return false;
}

bool ipb_egress_name_allowed(const ipb_egress_policy *p, const char *name, const char **reason) {
    const char *unused;
    if (!reason)
        reason = &unused;
    if (ipb_name_is_metadata(name)) {
        *reason = "a cloud metadata name is always refused";
        return false;
    }
    if (p->n_rules == 0) {
        *reason = "no --allowed-domain: every public destination is allowed";
        return true;
    }
    size_t nlen = strlen(name);
    for (size_t i = 0; i < p->n_rules; i++) {
        const ipb_egress_rule *r = &p->rules[i];
        if (r->kind == IPB_EGRESS_EXACT && !strcmp(r->name, name)) {
            *reason = "the name is allowed";
            return true;
        }
        if (r->kind == IPB_EGRESS_WILDCARD) {
            size_t slen = strlen(r->name);
            if (nlen > slen + 1 && name[nlen - slen - 1] == '.' && !strcmp(name + nlen - slen, r->name)) {
                *reason = "the name is allowed by a wildcard";
                return true;
            }
        }
    }
    *reason = "the name is not allowed";
    return false;
}

static bool rule_contains(const ipb_egress_rule *r, const ipb_addr *a) {
    return r->kind == IPB_EGRESS_CIDR && in_block(a, r->addr.family, r->addr.b, r->prefix);
}

/* Whether an address entry names this special address explicitly: it lies inside the
 * special block (a host-own address: it is exactly that address). */
static bool explicitly_allowed(const ipb_egress_policy *p, const ipb_addr *a, const special_block *b, bool host_own) {
    for (size_t i = 0; i < p->n_rules; i++) {
        const ipb_egress_rule *r = &p->rules[i];
        if (!rule_contains(r, a))
            continue;
        unsigned max = a->family == AF_INET ? 32 : 128;
        if (host_own ? r->prefix == max : (b && r->prefix >= b->prefix))
            return true;
    }
    return false;
}

bool ipb_egress_addr_allowed(const ipb_egress_policy *p, const ipb_addr *a, bool by_name, bool pinned,
                             const char **reason) {
    const char *unused;
    if (!reason)
        reason = &unused;
    if (pinned) {
        *reason = "the address is pinned with --resolve";
        return true;
    }
    ipb_addr v4;
    bool has_v4 = embedded_v4(a, &v4);
    for (size_t i = 0; i < p->n_host_addrs; i++) {
        const ipb_addr *h = &p->host_addrs[i];
        bool direct = h->family == a->family && !memcmp(h->b, a->b, 16);
        if (direct || (has_v4 && h->family == AF_INET && !memcmp(h->b, v4.b, 16))) {
            /* An exact entry of that address (for an embedded one: of the IPv6 form, or of
             * the IPv4 address it carries, which an entry then names). */
            if (explicitly_allowed(p, a, NULL, true) || (!direct && explicitly_allowed(p, &v4, NULL, true))) {
                *reason = "the host's own address is named by an entry";
                return true;
            }
            *reason = direct ? "the address is one of the host's own"
                             : "the address carries one of the host's own IPv4 addresses";
            return false;
        }
    }
    const special_block *b = special_block_of(a);
    const special_block *eb = !b && has_v4 ? special_block_of(&v4) : NULL;
    if (eb) {
        /* Judged as the IPv4 address it carries. */
        if (explicitly_allowed(p, &v4, eb, false)) {
            *reason = "the address is in a block named by an entry";
            return true;
        }
        *reason = eb->why;
        return false;
    }
    if (b) {
        if (explicitly_allowed(p, a, b, false)) {
            *reason = "the address is in a block named by an entry";
            return true;
        }
        *reason = b->why;
        return false;
    }
    if (by_name || p->n_rules == 0) {
        *reason = by_name ? "a public address of an allowed name" : "a public address, and no --allowed-domain";
        return true;
    }
    for (size_t i = 0; i < p->n_rules; i++) {
        if (rule_contains(&p->rules[i], a)) {
            *reason = "the address is allowed";
            return true;
        }
    }
    *reason = has_cidr(p) ? "the address is not allowed" : "only names are allowed, and this address is not one";
    return false;
}

/* Whether an address may be reached on its own, when no name is visible: an address entry
 * (or no list and a public address), a --resolve pin of an allowed name, or an answer the DNS
 * stub gave out for an allowed name. */
static bool addr_on_its_own(const ipb_egress_policy *p, const ipb_addr *a, const ipb_egress_memo *memo,
                            ipb_egress_verdict *v) {
    const char *why = NULL;
    v->addr = *a;
    if (ipb_egress_addr_allowed(p, a, false, false, &why)) {
        v->why = p->n_rules ? "address allowed" : "public address";
        return true;
    }
    for (size_t i = 0; i < p->n_pins; i++)
        if (ipb_addr_equal(&p->pins[i].addr, a) && ipb_egress_name_allowed(p, p->pins[i].name, NULL)) {
            snprintf(v->name, sizeof(v->name), "%s", p->pins[i].name);
            v->why = "pinned address of an allowed name";
            return true;
        }
    const char *name = memo && memo->recall ? memo->recall(memo->ctx, a) : NULL;
    if (name && ipb_egress_name_allowed(p, name, NULL)) {
        snprintf(v->name, sizeof(v->name), "%s", name);
        v->why = "address the DNS stub gave for an allowed name";
        return true;
    }
    v->why = why ? why : "not allowed";
    return false;
}

bool ipb_egress_decide(const ipb_egress_policy *p, const char *host, const ipb_addr *dialled,
                       const ipb_egress_memo *memo, ipb_egress_verdict *v) {
    memset(v, 0, sizeof(*v));
    v->route = IPB_EGRESS_REFUSE;
    if (!host || !host[0]) {
        /* No name visible: the dialled address alone decides. */
        if (!dialled) {
            v->why = "no destination: neither a name nor an original address";
            return false;
        }
        if (!addr_on_its_own(p, dialled, memo, v))
            return false;
        v->route = IPB_EGRESS_TO_ADDR;
        return true;
    }
    ipb_addr lit;
    if (ipb_addr_parse(host, strlen(host), &lit)) {
        /* An address literal is judged as an address, and is where the connection goes. */
        if (!addr_on_its_own(p, &lit, memo, v))
            return false;
        v->route = IPB_EGRESS_TO_ADDR;
        return true;
    }
    if (!ipb_name_normalize(host, strlen(host), v->name)) {
        v->name[0] = '\0';
        v->why = "malformed host name";
        return false;
    }
    /* A visible name decides, whatever address was dialled: an address allowed on its own
     * (an entry, a pin, a DNS stub answer) never carries a name that is not allowed. */
    if (!ipb_egress_name_allowed(p, v->name, &v->why))
        return false;
    /* Dialled at an answer the DNS stub gave for this very name (so checked for it): there,
     * without resolving again. A name with --resolve pins goes to its pins only. */
    ipb_addr pin;
    if (dialled && memo && memo->gave && !ipb_egress_pins(p, v->name, &pin, 1) &&
        memo->gave(memo->ctx, dialled, v->name)) {
        v->addr = *dialled;
        v->route = IPB_EGRESS_TO_ADDR;
        v->why = "address the DNS stub gave for this name";
        return true;
    }
    v->route = IPB_EGRESS_TO_NAME;
    v->why = "allowed name";
    return true;
}

bool ipb_egress_unread_ok(const ipb_egress_policy *p, const ipb_addr *dialled) {
    return p->n_rules == 0 && ipb_egress_addr_allowed(p, dialled, false, false, NULL);
}

/* An address an entry can open, but that a suggestion must not invite: the host's own, its
 * loopback and cloud metadata (also as carried inside an IPv6 address). */
static bool never_suggested(const ipb_egress_policy *p, const ipb_addr *a) {
    ipb_addr v4;
    bool has_v4 = embedded_v4(a, &v4);
    for (int k = 0; k < (has_v4 ? 2 : 1); k++) {
        const ipb_addr *x = k ? &v4 : a;
        for (size_t i = 0; i < p->n_host_addrs; i++)
            if (ipb_addr_equal(&p->host_addrs[i], x))
                return true;
        const special_block *b = special_block_of(x);
        if (b && (strstr(b->why, "loopback") || strstr(b->why, "metadata") || strstr(b->why, "unspecified")))
            return true;
    }
    return false;
}

bool ipb_egress_suggest_entry(const ipb_egress_policy *p, const char *name, const ipb_addr *a, bool by_name, char *out,
                              size_t len) {
    char entry[IPB_NAME_MAX + 1];
    if (name)
        snprintf(entry, sizeof(entry), "%s", name);
    else if (a && !never_suggested(p, a))
        ipb_addr_format(a, entry, sizeof(entry));
    else
        return false;
    ipb_egress_policy scratch = *p;
    scratch.rules = malloc((p->n_rules + 1) * sizeof(*scratch.rules));
    if (!scratch.rules)
        return false;
    if (p->n_rules)
        memcpy(scratch.rules, p->rules, p->n_rules * sizeof(*p->rules));
    ipb_error *err = NULL;
    bool ok = ipb_egress_add_rule(&scratch, entry, &err) == 0 &&
              (name ? ipb_egress_name_allowed(&scratch, name, NULL)
                    : ipb_egress_addr_allowed(&scratch, a, by_name, false, NULL));
    ipb_error_free(err);
    free(scratch.rules);
    if (ok)
        snprintf(out, len, "--allowed-domain %s", entry);
    return ok;
}
