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
    static const char *const bad[] = {"", ".", "a..b", "-a.com", "a-.com", "a.com..", "a b.com", "ex*mple.com",
                                      "1.2.3", "127.1", "a.123", "0x7f.1", "0X2", "caf\xc3\xa9.com"};
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
        "*", "*.", "*.com", "**.example.com", "a.*.example.com", "https://example.com", "example.com:443",
        "10.0.0.1/8", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/x", "2001:db8::1/32", "::ffff:10.0.0.0/8", "exa mple.com",
        "", "1.2.3.4.5",
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
        "127.0.0.1", "127.1", "2130706433", "0.0.0.0", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
        "100.64.0.1", "169.254.169.254", "169.254.1.1", "100.100.100.200", "224.0.0.1", "255.255.255.255", "::1",
        "::", "::ffff:127.0.0.1", "fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1", "64:ff9b::a00:1",
        "2002:c0a8:101::1", "::127.0.0.1", "2001::1", "198.18.0.1", "192.0.0.8",
    };
    for (size_t i = 0; i < sizeof(special) / sizeof(*special); i++) {
        ck_assert_msg(!addr_ok(&p, special[i], false), "allowed %s", special[i]);
        ck_assert_msg(!addr_ok(&p, special[i], true), "allowed %s through a name", special[i]);
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
        "198.51.100.7",
        "64:ff9b::c633:6407",    /* NAT64 */
        "64:ff9b::198.51.100.7", /* the same, written with the dotted quad */
        "2002:c633:6407::1",     /* 6to4 */
        "2002:c633:6407:42::9",
        "::ffff:198.51.100.7",   /* IPv4-mapped */
        "::198.51.100.7",        /* IPv4-compatible */
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
    tcase_add_test(c, pins);
    tcase_add_test(c, sockaddr_round_trip);
    suite_add_tcase(s, c);
    return ipb_run_suite(s);
}
