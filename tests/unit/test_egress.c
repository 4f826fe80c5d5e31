/* policy/egress.c: allowlist entries, address literals in odd forms, names, special ranges
 * and the decisions the proxy and the DNS stub ask for. */
#include <arpa/inet.h>
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
#include "egress.h"

static ipb_addr addr(const char *s) {
    ipb_addr a;
    ck_assert_msg(ipb_addr_parse(s, strlen(s), &a), "not an address: %s", s);
    return a;
}

static const char *canon(const char *s) {
    static char buf[64];
    ipb_addr a;
    if (!ipb_addr_parse(s, strlen(s), &a))
        return "(refused)";
    ipb_addr_format(&a, buf, sizeof(buf));
    return buf;
}

static ipb_egress_policy policy_of(const char *const *entries) {
    ipb_egress_policy p = {0};
    for (; *entries; entries++) {
        ipb_error *err = NULL;
        ck_assert_msg(ipb_egress_add_rule(&p, *entries, &err) == 0, "refused %s: %s", *entries, ipb_error_msg(err));
    }
    return p;
}

static bool name_ok(const ipb_egress_policy *p, const char *name) {
    const char *why;
    char n[IPB_NAME_MAX + 1];
    ck_assert_msg(ipb_name_normalize(name, strlen(name), n), "not a name: %s", name);
    return ipb_egress_name_allowed(p, n, &why);
}

static bool addr_ok(const ipb_egress_policy *p, const char *a, bool by_name) {
    const char *why;
    ipb_addr x = addr(a);
    return ipb_egress_addr_allowed(p, &x, by_name, false, &why);
}

START_TEST(odd_ipv4_forms_are_canonical) {
    ck_assert_str_eq(canon("127.1"), "127.0.0.1");
    ck_assert_str_eq(canon("2130706433"), "127.0.0.1");
    ck_assert_str_eq(canon("0x7f.0.0.1"), "127.0.0.1");
    ck_assert_str_eq(canon("0177.0.0.1"), "127.0.0.1");
    ck_assert_str_eq(canon("10.1"), "10.0.0.1");
    ck_assert_str_eq(canon("::ffff:169.254.169.254"), "169.254.169.254");
    ck_assert_str_eq(canon("[::ffff:7f00:1]"), "127.0.0.1");
    ck_assert_str_eq(canon("[2001:DB8::1]"), "2001:db8::1");
    ck_assert_str_eq(canon("fe80::1%eth0"), "(refused)");
    ck_assert_str_eq(canon("1.2.3.4 extra"), "(refused)");
    ck_assert_str_eq(canon("1.2.3.4.5"), "(refused)");
    ck_assert_str_eq(canon("[1.2.3.4]"), "(refused)");
    ck_assert_str_eq(canon("example.com"), "(refused)");
    ck_assert_str_eq(canon(""), "(refused)");
}
END_TEST

START_TEST(names_are_normalised) {
    char n[IPB_NAME_MAX + 1];
    ck_assert(ipb_name_normalize("Example.COM.", 12, n));
    ck_assert_str_eq(n, "example.com");
    ck_assert(ipb_name_normalize("_srv.a-b.example", 16, n));
    static const char *const bad[] = {"",        ".",       "a..b",        "-a.com",         "a-.com",
                                      "a.com..", "a b.com", "ex*mple.com", "1.2.3",          "127.1",
                                      "a.123",   "0x7f.1",  "0X2",         "caf\xc3\xa9.com"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        ck_assert_msg(!ipb_name_normalize(bad[i], strlen(bad[i]), n), "accepted %s", bad[i]);
    char longlabel[80];
    memset(longlabel, 'a', 64);
    strcpy(longlabel + 64, ".com");
    ck_assert(!ipb_name_normalize(longlabel, strlen(longlabel), n));
}
END_TEST

START_TEST(bad_entries_are_refused_by_name) {
    static const char *const bad[] = {
        "*",
        "*.",
        "*.com",
        "**.example.com",
        "a.*.example.com",
        "https://example.com",
        "example.com:443",
        "10.0.0.1/8",
        "10.0.0.0/33",
        "10.0.0.0/",
        "10.0.0.0/x",
        "2001:db8::1/32",
        "::ffff:10.0.0.0/8",
        "exa mple.com",
        "",
        "1.2.3.4.5",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        ipb_egress_policy p = {0};
        ipb_error *err = NULL;
        ck_assert_msg(ipb_egress_add_rule(&p, bad[i], &err) < 0, "accepted '%s'", bad[i]);
        if (bad[i][0])
            ck_assert_msg(strstr(ipb_error_msg(err), bad[i]) != NULL, "message does not name '%s': %s", bad[i],
                          ipb_error_msg(err));
        ipb_error_free(err);
        ipb_egress_free(&p);
    }
    ipb_egress_policy p = {0};
    ipb_error *err = NULL;
    ck_assert_int_lt(ipb_egress_add_rule(&p, "10.0.0.1/8", &err), 0);
    ck_assert_ptr_nonnull(strstr(ipb_error_msg(err), "10.0.0.0/8"));
    ipb_error_free(err);
    ipb_egress_free(&p);
}
END_TEST

START_TEST(exact_and_wildcard_names) {
    const char *entries[] = {"Example.com.", "*.pythonhosted.org", "*.co.uk", NULL};
    ipb_egress_policy p = policy_of(entries);
    ck_assert(name_ok(&p, "example.com"));
    ck_assert(name_ok(&p, "EXAMPLE.COM."));
    ck_assert(!name_ok(&p, "www.example.com"));
    ck_assert(!name_ok(&p, "example.com.evil.net"));
    ck_assert(!name_ok(&p, "notexample.com"));
    ck_assert(name_ok(&p, "files.pythonhosted.org"));
    ck_assert(name_ok(&p, "a.b.pythonhosted.org"));
    ck_assert(!name_ok(&p, "pythonhosted.org"));
    ck_assert(!name_ok(&p, "evilpythonhosted.org"));
    ck_assert(name_ok(&p, "bbc.co.uk"));
    ipb_egress_free(&p);
}
END_TEST

START_TEST(no_entries_allow_public_only) {
    ipb_egress_policy p = {0};
    ck_assert(name_ok(&p, "anything.example"));
    ck_assert(!name_ok(&p, "metadata.google.internal"));
    ck_assert(!name_ok(&p, "METADATA."));
    ck_assert(addr_ok(&p, "93.184.216.34", false));
    ck_assert(addr_ok(&p, "2606:2800:220:1::1", false));
    ck_assert(addr_ok(&p, "203.0.113.7", false)); /* documentation ranges count as public */
    static const char *const special[] = {
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0.0.0.0",
        "10.1.2.3",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "100.64.0.1",
        "169.254.169.254",
        "169.254.1.1",
        "100.100.100.200",
        "224.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "::ffff:127.0.0.1",
        "fe80::1",
        "fc00::1",
        "fd00:ec2::254",
        "ff02::1",
        "64:ff9b::a00:1",
        "2002:c0a8:101::1",
        "::127.0.0.1",
        "2001::1",
        "198.18.0.1",
        "192.0.0.8",
    };
    for (size_t i = 0; i < sizeof(special) / sizeof(*special); i++) {
        ck_assert_msg(!addr_ok(&p, special[i], false), "allowed %s", special[i]);
        ck_assert_msg(!addr_ok(&p, special[i], true), "allowed %s through a name", special[i]);
    }
    /* The cloud metadata addresses are named as such (AWS's IPv6 one is fd00:ec2::254). */
    static const char *const metadata[] = {"169.254.169.254", "100.100.100.200", "fd00:ec2::254"};
    for (size_t i = 0; i < sizeof(metadata) / sizeof(*metadata); i++) {
        const char *why = NULL;
        ipb_addr x = addr(metadata[i]);
        ck_assert(!ipb_egress_addr_allowed(&p, &x, false, false, &why));
        ck_assert_msg(why && strstr(why, "metadata"), "%s: %s", metadata[i], why ? why : "(none)");
    }
    /* NAT64 and 6to4 of a public IPv4 address are public. */
    ck_assert(addr_ok(&p, "64:ff9b::5db8:d822", false));
    ck_assert(addr_ok(&p, "2002:5db8:d822::1", false));
}
END_TEST

START_TEST(addresses_need_an_entry_when_there_are_entries) {
    const char *entries[] = {"example.com", "93.184.216.0/24", "2001:db8:1::/48", NULL};
    ipb_egress_policy p = policy_of(entries);
    ck_assert(addr_ok(&p, "93.184.216.34", false));
    ck_assert(addr_ok(&p, "93.184.216.34", true));
    ck_assert(!addr_ok(&p, "93.184.217.1", false));
    ck_assert(addr_ok(&p, "93.184.217.1", true)); /* resolved from an allowed name */
    ck_assert(addr_ok(&p, "2001:db8:1::5", false));
    ck_assert(!addr_ok(&p, "2001:db8:2::5", false));
    ipb_egress_free(&p);

    const char *names_only[] = {"example.com", NULL};
    p = policy_of(names_only);
    const char *why;
    ipb_addr a = addr("93.184.216.34");
    ck_assert(!ipb_egress_addr_allowed(&p, &a, false, false, &why));
    ck_assert_ptr_nonnull(strstr(why, "only names"));
    ipb_egress_free(&p);
}
END_TEST

START_TEST(special_ranges_need_an_explicit_block) {
    const char *everything[] = {"0.0.0.0/0", "::/0", NULL};
    ipb_egress_policy p = policy_of(everything);
    ck_assert(addr_ok(&p, "8.8.8.8", false));
    ck_assert(!addr_ok(&p, "10.0.0.1", false));
    ck_assert(!addr_ok(&p, "127.0.0.1", false));
    ck_assert(!addr_ok(&p, "fd00::1", false));
    ipb_egress_free(&p);

    const char *inside[] = {"10.20.0.0/16", "127.0.0.1", "fd12::/16", NULL};
    p = policy_of(inside);
    ck_assert(addr_ok(&p, "10.20.3.4", false));
    ck_assert(addr_ok(&p, "10.20.3.4", true));
    ck_assert(!addr_ok(&p, "10.21.0.1", false));
    ck_assert(addr_ok(&p, "127.1", false));
    ck_assert(!addr_ok(&p, "127.0.0.2", false));
    ck_assert(addr_ok(&p, "fd12:3::1", false));
    ck_assert(addr_ok(&p, "::ffff:10.20.0.9", false));
    ck_assert(addr_ok(&p, "64:ff9b::a14:1", false)); /* NAT64 of 10.20.0.1 */
    ipb_egress_free(&p);

    /* A block wider than the special one does not name it. */
    const char *wide[] = {"10.0.0.0/7", NULL};
    p = policy_of(wide);
    ck_assert(!addr_ok(&p, "10.0.0.1", false));
    ck_assert(addr_ok(&p, "11.0.0.1", false));
    ipb_egress_free(&p);
}
END_TEST

START_TEST(host_addresses_need_an_exact_entry) {
    const char *entries[] = {"203.0.113.0/24", NULL};
    ipb_egress_policy p = policy_of(entries);
    ipb_addr own = addr("203.0.113.1");
    ck_assert_int_eq(ipb_egress_set_host_addrs(&p, &own, 1), 0);
    ck_assert(!addr_ok(&p, "203.0.113.1", false));
    ck_assert(!addr_ok(&p, "203.0.113.1", true));
    ck_assert(addr_ok(&p, "203.0.113.2", false));
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_egress_add_rule(&p, "203.0.113.1", &err), 0);
    ck_assert(addr_ok(&p, "203.0.113.1", false));
    ipb_egress_free(&p);
}
END_TEST

START_TEST(embedded_ipv4_of_the_hosts_own_address) {
    /* 198.51.100.7 stands for the host's own public address: public in every form, so only
     * the host-own comparison can refuse it. */
    ipb_egress_policy p = {0};
    ipb_addr own = addr("198.51.100.7");
    ck_assert_int_eq(ipb_egress_set_host_addrs(&p, &own, 1), 0);
    static const char *const forms[] = {
        "198.51.100.7",          "64:ff9b::c633:6407",  /* NAT64 */
        "64:ff9b::198.51.100.7",                        /* the same, written with the dotted quad */
        "2002:c633:6407::1",                            /* 6to4 */
        "2002:c633:6407:42::9",  "::ffff:198.51.100.7", /* IPv4-mapped */
        "::198.51.100.7",                               /* IPv4-compatible */
    };
    for (size_t i = 0; i < sizeof(forms) / sizeof(*forms); i++) {
        ck_assert_msg(!addr_ok(&p, forms[i], false), "allowed %s with no list", forms[i]);
        ck_assert_msg(!addr_ok(&p, forms[i], true), "allowed %s as an allowed name's answer", forms[i]);
    }
    const char *why = NULL;
    ipb_addr x = addr("64:ff9b::c633:6407");
    ck_assert(!ipb_egress_addr_allowed(&p, &x, false, false, &why));
    ck_assert_str_eq(why, "the address carries one of the host's own IPv4 addresses");
    /* A mapped address built by hand (never parsed into IPv4) is judged the same. */
    memset(&x, 0, sizeof(x));
    x.family = AF_INET6;
    x.b[10] = x.b[11] = 0xff;
    memcpy(x.b + 12, own.b, 4);
    ck_assert(!ipb_egress_addr_allowed(&p, &x, true, false, &why));
    /* The same forms of another public address stay allowed. */
    ck_assert(addr_ok(&p, "64:ff9b::c633:6408", false));
    ck_assert(addr_ok(&p, "2002:c633:6408::1", false));
    /* An exact entry of the address names it, in either form. */
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_egress_add_rule(&p, "198.51.100.7", &err), 0);
    ck_assert(addr_ok(&p, "64:ff9b::c633:6407", false));
    ck_assert(addr_ok(&p, "2002:c633:6407::1", false));
    ipb_egress_free(&p);
    const char *entries[] = {"64:ff9b::c633:6407", NULL};
    p = policy_of(entries);
    ck_assert_int_eq(ipb_egress_set_host_addrs(&p, &own, 1), 0);
    ck_assert(addr_ok(&p, "64:ff9b::c633:6407", false));
    ck_assert(!addr_ok(&p, "2002:c633:6407::1", false));
    ipb_egress_free(&p);
}
END_TEST

/* ---- the decision: the name the client uses decides */

/* A fake DNS stub memo: it gave out 192.0.2.10 for a.test (the allowed name) and 192.0.2.66
 * for nothing. */
static const char *fake_recall(void *ctx, const ipb_addr *a) {
    (void)ctx;
    ipb_addr given = addr("192.0.2.10");
    return ipb_addr_equal(a, &given) ? "a.test" : NULL;
}
static bool fake_gave(void *ctx, const ipb_addr *a, const char *name) {
    const char *n = fake_recall(ctx, a);
    return n && !strcmp(n, name);
}
static const ipb_egress_memo fake_memo = {fake_recall, fake_gave, NULL};

static enum ipb_egress_route decide(const ipb_egress_policy *p, const char *host, const char *dialled,
                                    ipb_egress_verdict *v) {
    ipb_addr d;
    if (dialled)
        d = addr(dialled);
    bool ok = ipb_egress_decide(p, host, dialled ? &d : NULL, &fake_memo, v);
    ck_assert_int_eq(ok, v->route != IPB_EGRESS_REFUSE);
    ck_assert_msg(v->why && v->why[0], "a verdict without a reason");
    return v->route;
}

START_TEST(a_visible_name_decides_whatever_address_was_dialled) {
    const char *entries[] = {"a.test", "192.0.2.64/27", NULL};
    ipb_egress_policy p = policy_of(entries);
    ipb_egress_verdict v;
    char t[64];
    /* TLS SNI or Host of a name that is not allowed, dialled at the address the DNS stub gave
     * out for the allowed name: refused (domain fronting on a shared CDN). */
    ck_assert_int_eq(decide(&p, "other.test", "192.0.2.10", &v), IPB_EGRESS_REFUSE);
    ck_assert_str_eq(v.name, "other.test");
    ck_assert_str_eq(v.why, "the name is not allowed");
    ck_assert_int_eq(v.addr.family, 0);
    /* ... dialled at an address an address entry allows: refused as well. */
    ck_assert_int_eq(decide(&p, "other.test", "192.0.2.66", &v), IPB_EGRESS_REFUSE);
    ck_assert_str_eq(v.name, "other.test");
    /* In another case or with a trailing dot it is the same name. */
    ck_assert_int_eq(decide(&p, "OTHER.test.", "192.0.2.10", &v), IPB_EGRESS_REFUSE);
    ck_assert_int_eq(decide(&p, "metadata.google.internal", "192.0.2.10", &v), IPB_EGRESS_REFUSE);
    ck_assert_int_eq(decide(&p, "bad name", "192.0.2.10", &v), IPB_EGRESS_REFUSE);
    ck_assert_str_eq(v.why, "malformed host name");
    /* The allowed name at the address the stub gave for it: there, checked for it. */
    ck_assert_int_eq(decide(&p, "A.test", "192.0.2.10", &v), IPB_EGRESS_TO_ADDR);
    ck_assert_str_eq(v.name, "a.test");
    ipb_addr_format(&v.addr, t, sizeof(t));
    ck_assert_str_eq(t, "192.0.2.10");
    /* The allowed name anywhere else (an address entry's, or none the stub gave): resolved and
     * checked by the proxy, never the dialled address on its own say-so. */
    ck_assert_int_eq(decide(&p, "a.test", "192.0.2.66", &v), IPB_EGRESS_TO_NAME);
    ck_assert_str_eq(v.name, "a.test");
    ck_assert_int_eq(decide(&p, "a.test", "198.51.100.1", &v), IPB_EGRESS_TO_NAME);
    ck_assert_int_eq(decide(&p, "a.test", NULL, &v), IPB_EGRESS_TO_NAME);
    ipb_egress_free(&p);
}
END_TEST

START_TEST(no_visible_name_the_address_decides) {
    const char *entries[] = {"a.test", "192.0.2.64/27", NULL};
    ipb_egress_policy p = policy_of(entries);
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_egress_add_pin(&p, "a.test:192.0.2.20", &err), 0);
    ck_assert_int_eq(ipb_egress_add_pin(&p, "other.test:192.0.2.30", &err), 0);
    ipb_egress_verdict v;
    char t[64];
    /* TLS without a server name, HTTP/1.0 without Host, other protocols. */
    ck_assert_int_eq(decide(&p, NULL, "192.0.2.10", &v), IPB_EGRESS_TO_ADDR);
    ck_assert_str_eq(v.name, "a.test");
    ck_assert_str_eq(v.why, "address the DNS stub gave for an allowed name");
    ck_assert_int_eq(decide(&p, "", "192.0.2.66", &v), IPB_EGRESS_TO_ADDR);
    ck_assert_str_eq(v.why, "address allowed");
    ck_assert_int_eq(decide(&p, "", "192.0.2.20", &v), IPB_EGRESS_TO_ADDR);
    ck_assert_str_eq(v.name, "a.test");
    ck_assert_str_eq(v.why, "pinned address of an allowed name");
    /* A pin of a name that is not allowed allows nothing; nor does an unknown address. */
    ck_assert_int_eq(decide(&p, "", "192.0.2.30", &v), IPB_EGRESS_REFUSE);
    ipb_addr_format(&v.addr, t, sizeof(t));
    ck_assert_str_eq(t, "192.0.2.30");
    ck_assert_int_eq(decide(&p, "", "198.51.100.1", &v), IPB_EGRESS_REFUSE);
    ck_assert_int_eq(decide(&p, "", NULL, &v), IPB_EGRESS_REFUSE);
    /* A pinned address carries its own name only. */
    ck_assert_int_eq(decide(&p, "other.test", "192.0.2.20", &v), IPB_EGRESS_REFUSE);
    ck_assert_int_eq(decide(&p, "other.test", "192.0.2.30", &v), IPB_EGRESS_REFUSE);
    /* A pinned allowed name goes to its pins (TO_NAME), even where the stub answered. */
    ck_assert_int_eq(decide(&p, "a.test", "192.0.2.10", &v), IPB_EGRESS_TO_NAME);
    ipb_egress_free(&p);
}
END_TEST

START_TEST(an_address_literal_as_name_is_judged_as_an_address) {
    const char *entries[] = {"a.test", "192.0.2.64/27", NULL};
    ipb_egress_policy p = policy_of(entries);
    ipb_egress_verdict v;
    char t[64];
    /* Where the literal says, not where it was dialled. */
    ck_assert_int_eq(decide(&p, "192.0.2.66", "198.51.100.1", &v), IPB_EGRESS_TO_ADDR);
    ipb_addr_format(&v.addr, t, sizeof(t));
    ck_assert_str_eq(t, "192.0.2.66");
    ck_assert_int_eq(decide(&p, "192.0.2.10", "198.51.100.1", &v), IPB_EGRESS_TO_ADDR);
    ck_assert_str_eq(v.name, "a.test");
    /* A literal that is not allowed, dialled at an allowed address: refused. */
    ck_assert_int_eq(decide(&p, "198.51.100.1", "192.0.2.10", &v), IPB_EGRESS_REFUSE);
    ipb_addr_format(&v.addr, t, sizeof(t));
    ck_assert_str_eq(t, "198.51.100.1");
    ck_assert_int_eq(decide(&p, "127.1", "192.0.2.66", &v), IPB_EGRESS_REFUSE);
    ck_assert_str_eq(v.why, "a loopback address");
    ck_assert_int_eq(decide(&p, "::ffff:169.254.169.254", "192.0.2.66", &v), IPB_EGRESS_REFUSE);
    ipb_egress_free(&p);
}
END_TEST

START_TEST(no_list_reads_nothing_from_public_addresses) {
    ipb_egress_policy p = {0};
    ipb_addr a = addr("198.51.100.1"), lo = addr("127.0.0.1");
    ck_assert(ipb_egress_unread_ok(&p, &a));
    ck_assert(!ipb_egress_unread_ok(&p, &lo));
    ipb_egress_verdict v;
    ck_assert_int_eq(decide(&p, "anything.example", "127.0.0.1", &v), IPB_EGRESS_TO_NAME);
    ck_assert_int_eq(decide(&p, "metadata.google.internal", NULL, &v), IPB_EGRESS_REFUSE);
    const char *entries[] = {"198.51.100.0/24", NULL};
    ipb_egress_policy q = policy_of(entries);
    ck_assert(!ipb_egress_unread_ok(&q, &a)); /* with a list, every connection is read */
    ipb_egress_free(&q);
    /* Nor an embedded form of the host's own address. */
    ipb_addr own = addr("198.51.100.7"), nat64 = addr("64:ff9b::c633:6407");
    ck_assert_int_eq(ipb_egress_set_host_addrs(&p, &own, 1), 0);
    ck_assert(!ipb_egress_unread_ok(&p, &nat64));
    ipb_egress_free(&p);
}
END_TEST

START_TEST(pins) {
    ipb_egress_policy p = {0};
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_egress_add_pin(&p, "Internal.Example:10.0.0.5", &err), 0);
    ck_assert_int_eq(ipb_egress_add_pin(&p, "internal.example:[fd00::5]", &err), 0);
    ck_assert_int_eq(ipb_egress_add_pin(&p, "v6.example:2001:db8::7", &err), 0);
    ipb_addr out[4];
    ck_assert_uint_eq(ipb_egress_pins(&p, "internal.example", out, 4), 2);
    char buf[64];
    ipb_addr_format(&out[1], buf, sizeof(buf));
    ck_assert_str_eq(buf, "fd00::5");
    ck_assert_uint_eq(ipb_egress_pins(&p, "v6.example", out, 4), 1);
    ck_assert_uint_eq(ipb_egress_pins(&p, "other.example", out, 4), 0);
    const char *why;
    ck_assert(ipb_egress_addr_allowed(&p, &out[0], true, true, &why));
    static const char *const bad[] = {"noaddr", ":1.2.3.4", "name:", "name:notanaddress", "bad name:1.2.3.4"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        ipb_error *e = NULL;
        ck_assert_msg(ipb_egress_add_pin(&p, bad[i], &e) < 0, "accepted %s", bad[i]);
        ck_assert_ptr_nonnull(strstr(ipb_error_msg(e), "--resolve"));
        ipb_error_free(e);
    }
    ipb_egress_free(&p);
}
END_TEST

START_TEST(sockaddr_round_trip) {
    struct sockaddr_storage ss;
    ipb_addr a = addr("203.0.113.7"), b;
    uint16_t port = 0;
    socklen_t l = ipb_addr_to_sockaddr(&a, 8080, &ss);
    ck_assert_uint_eq(l, sizeof(struct sockaddr_in));
    ck_assert(ipb_addr_from_sockaddr((struct sockaddr *)&ss, &b, &port));
    ck_assert(ipb_addr_equal(&a, &b));
    ck_assert_uint_eq(port, 8080);
    /* IPv4-mapped IPv6, as a dual-stack socket reports it, is the IPv4 address */
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_port = htons(53)};
    inet_pton(AF_INET6, "::ffff:203.0.113.7", &s6.sin6_addr);
    ck_assert(ipb_addr_from_sockaddr((struct sockaddr *)&s6, &b, NULL));
    ck_assert(ipb_addr_equal(&a, &b));
    a = addr("2001:db8::1");
    l = ipb_addr_to_sockaddr(&a, 443, &ss);
    ck_assert_uint_eq(l, sizeof(struct sockaddr_in6));
    ck_assert(ipb_addr_from_sockaddr((struct sockaddr *)&ss, &b, &port));
    ck_assert(ipb_addr_equal(&a, &b) && port == 443);
    ck_assert(!ipb_addr_equal(&a, &(ipb_addr){0}));
    struct sockaddr un = {.sa_family = AF_UNIX};
    ck_assert(!ipb_addr_from_sockaddr(&un, &b, NULL));
}
END_TEST

int main(void) {
    Suite *s = suite_create("egress");
    TCase *c = tcase_create("egress");
    tcase_add_test(c, odd_ipv4_forms_are_canonical);
    tcase_add_test(c, names_are_normalised);
    tcase_add_test(c, bad_entries_are_refused_by_name);
    tcase_add_test(c, exact_and_wildcard_names);
    tcase_add_test(c, no_entries_allow_public_only);
    tcase_add_test(c, addresses_need_an_entry_when_there_are_entries);
    tcase_add_test(c, special_ranges_need_an_explicit_block);
    tcase_add_test(c, host_addresses_need_an_exact_entry);
    tcase_add_test(c, embedded_ipv4_of_the_hosts_own_address);
    tcase_add_test(c, a_visible_name_decides_whatever_address_was_dialled);
    tcase_add_test(c, no_visible_name_the_address_decides);
    tcase_add_test(c, an_address_literal_as_name_is_judged_as_an_address);
    tcase_add_test(c, no_list_reads_nothing_from_public_addresses);
    tcase_add_test(c, pins);
    tcase_add_test(c, sockaddr_round_trip);
    suite_add_tcase(s, c);
    return ipb_run_suite(s);
}
