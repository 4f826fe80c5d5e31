/* libFuzzer harness: the egress policy's parsers (policy/egress.c).
 *
 * The input, in an exact-size buffer, goes to ipb_addr_parse and ipb_name_normalize, and as a
 * NUL-terminated string to ipb_egress_add_rule and ipb_egress_add_pin. Invariants:
 * - an accepted address formats to text that parses back to the same address, and never to
 *   an IPv4-mapped IPv6 address;
 * - an accepted name is 1-253 bytes of [a-z0-9._-], is not an address, and normalising it
 *   again gives itself;
 * - a refused entry or pin leaves the policy unchanged and says why; an accepted name rule
 *   allows its own name, an accepted address rule holds a network with no host bits;
 * - the decision (ipb_egress_decide) on the input as the name a connection carries, dialled
 *   at the address the DNS stub gave out for the one allowed name (a.test): it is allowed
 *   only as that name (normalised) or as an address literal allowed on its own, never
 *   because of the dialled address; with no name, the dialled address decides.
 *
 * FUZZ_SOURCES: policy/egress.c common/error.c common/nofile.c
 * FUZZ_PKGS:
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_egress: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                    \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *stub_recall(void *ctx, const ipb_addr *a) {
    (void)ctx;
    static const uint8_t given[4] = {192, 0, 2, 10};
    return a->family == AF_INET && !memcmp(a->b, given, 4) ? "a.test" : NULL;
}
static bool stub_gave(void *ctx, const ipb_addr *a, const char *name) {
    const char *n = stub_recall(ctx, a);
    return n && !strcmp(n, name);
}

static void decide_invariants(const char *host) {
    static ipb_egress_policy pol;
    if (!pol.n_rules) {
        ipb_error *e = NULL;
        CHECK(ipb_egress_add_rule(&pol, "a.test", &e) == 0);
    }
    const ipb_egress_memo memo = {stub_recall, stub_gave, NULL};
    ipb_addr dialled, lit;
    CHECK(ipb_addr_parse("192.0.2.10", 10, &dialled));
    ipb_egress_verdict v;
    bool ok = ipb_egress_decide(&pol, host, &dialled, &memo, &v);
    CHECK(ok == (v.route != IPB_EGRESS_REFUSE) && v.why && v.why[0]);
    if (!host[0]) {
        CHECK(ok && v.route == IPB_EGRESS_TO_ADDR && ipb_addr_equal(&v.addr, &dialled));
        return;
    }
    if (ipb_addr_parse(host, strlen(host), &lit)) {
        /* A literal goes where it says, when that address is allowed on its own. */
        CHECK(!ok || (v.route == IPB_EGRESS_TO_ADDR && ipb_addr_equal(&v.addr, &lit)));
        CHECK(ok == ipb_addr_equal(&lit, &dialled));
        return;
    }
    char n[IPB_NAME_MAX + 1];
    bool is_name = ipb_name_normalize(host, strlen(host), n);
    CHECK(ok == (is_name && !strcmp(n, "a.test")));
    if (ok)
        CHECK(v.route == IPB_EGRESS_TO_ADDR && !strcmp(v.name, "a.test") && ipb_addr_equal(&v.addr, &dialled));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *exact = malloc(size ? size : 1);
    char *str = malloc(size + 1);
    if (!exact || !str)
        abort();
    memcpy(exact, data, size);
    memcpy(str, data, size);
    str[size] = '\0';

    ipb_addr a, b;
    if (ipb_addr_parse(exact, size, &a)) {
        char text[INET6_ADDRSTRLEN];
        ipb_addr_format(&a, text, sizeof(text));
        CHECK(ipb_addr_parse(text, strlen(text), &b));
        CHECK(a.family == b.family && !memcmp(a.b, b.b, 16));
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        CHECK(a.family == AF_INET || memcmp(a.b, mapped, 12));
        (void)ipb_addr_special(&a);
    }

    char name[IPB_NAME_MAX + 1], again[IPB_NAME_MAX + 1];
    if (ipb_name_normalize(exact, size, name)) {
        size_t n = strlen(name);
        CHECK(n >= 1 && n <= IPB_NAME_MAX);
        for (size_t i = 0; i < n; i++)
            CHECK((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '.' ||
                  name[i] == '-' || name[i] == '_');
        CHECK(!ipb_addr_parse(name, n, &b));
        CHECK(ipb_name_normalize(name, n, again) && !strcmp(name, again));
    }

    decide_invariants(str);

    ipb_egress_policy p = {0};
    ipb_error *err = NULL;
    if (ipb_egress_add_rule(&p, str, &err) == 0) {
        CHECK(p.n_rules == 1);
        const ipb_egress_rule *r = &p.rules[0];
        const char *why;
        if (r->kind == IPB_EGRESS_EXACT) {
            CHECK(ipb_egress_name_allowed(&p, r->name, &why) || ipb_name_is_metadata(r->name));
        } else if (r->kind == IPB_EGRESS_WILDCARD) {
            CHECK(strchr(r->name, '.') != NULL);
            CHECK(!ipb_egress_name_allowed(&p, r->name, &why));
        } else {
            unsigned max = r->addr.family == AF_INET ? 32 : 128;
            CHECK(r->prefix <= max);
            for (unsigned bit = r->prefix; bit < max; bit++)
                CHECK(!(r->addr.b[bit / 8] & (0x80 >> (bit % 8))));
        }
    } else {
        CHECK(p.n_rules == 0 && err && ipb_error_msg(err)[0]);
    }
    ipb_error_free(err);
    err = NULL;
    if (ipb_egress_add_pin(&p, str, &err) == 0)
        CHECK(p.n_pins == 1 && ipb_egress_pins(&p, p.pins[0].name, &a, 1) == 1);
    else
        CHECK(p.n_pins == 0 && err);
    ipb_error_free(err);
    ipb_egress_free(&p);
    free(exact);
    free(str);
    return 0;
}
