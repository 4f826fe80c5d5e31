/* proxy/egress_notes.c: escaping, de-duplication, the cap, takes that tell each destination
 * once, the lines; policy/egress.c ipb_egress_suggest_entry: the entry suggested really
 * allows what was refused, and the host's own, loopback and metadata addresses are never
 * suggested. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "egress.h"
#include "egress_notes.h"
#include "run_suite.h"

static ipb_egress_note *add(ipb_egress_notes *n, const char *host, uint16_t port, const char *why) {
    return ipb_egress_notes_add(n, host, strlen(host), false, port, why);
}

START_TEST(escape_keeps_printable_ascii_only) {
    char out[64];
    ck_assert_str_eq(ipb_egress_escape("pypi.org", 8, false, out, sizeof(out)), "pypi.org");
    const char evil[] = "a\n[ipybox] x\x1b\\\x7f\xc3\xa9";
    ck_assert_str_eq(ipb_egress_escape(evil, sizeof(evil) - 1, false, out, sizeof(out)),
                     "a\\x0a[ipybox]\\x20x\\x1b\\x5c\\x7f\\xc3\\xa9");
    ck_assert_str_eq(ipb_egress_escape("a b", 3, true, out, sizeof(out)), "a b");
    /* A NUL inside is a byte like any other. */
    ck_assert_str_eq(ipb_egress_escape("a\0b", 3, false, out, sizeof(out)), "a\\x00b");
}
END_TEST

START_TEST(escape_is_bounded_and_marks_the_cut) {
    char big[1000], out[16];
    memset(big, 'x', sizeof(big));
    ipb_egress_escape(big, sizeof(big), false, out, sizeof(out));
    ck_assert_uint_eq(strlen(out), 15);
    ck_assert_str_eq(out, "xxxxxxxxxxxx...");
    /* Exactly full: no mark. */
    ipb_egress_escape(big, 15, false, out, sizeof(out));
    ck_assert_str_eq(out, "xxxxxxxxxxxxxxx");
    /* An escape is never cut in half. */
    char ctl[20];
    memset(ctl, '\n', sizeof(ctl));
    ipb_egress_escape(ctl, sizeof(ctl), false, out, sizeof(out));
    ck_assert_str_eq(out, "\\x0a\\x0a\\x0a...");
    ipb_egress_escape(big, sizeof(big), false, out, 3);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(same_destination_is_counted_once) {
    static ipb_egress_notes n;
    ipb_egress_notes_clear(&n);
    ck_assert_ptr_nonnull(add(&n, "pypi.org", 443, "the name is not allowed"));
    ck_assert_ptr_null(add(&n, "pypi.org", 443, "the name is not allowed"));
    ck_assert_ptr_null(add(&n, "pypi.org", 443, "the name is not allowed"));
    ck_assert_ptr_nonnull(add(&n, "pypi.org", 80, "the name is not allowed"));
    ck_assert_ptr_nonnull(add(&n, "pypi.org", 443, "another reason"));
    /* A DNS lookup has no port: the one given is ignored. */
    ck_assert_ptr_nonnull(ipb_egress_notes_add(&n, "pypi.org", 8, true, 53, "the name is not allowed"));
    ck_assert_ptr_null(ipb_egress_notes_add(&n, "pypi.org", 8, true, 5353, "the name is not allowed"));
    ck_assert_uint_eq(n.n, 4);
    ck_assert_uint_eq(n.list[0].count, 3);
    ck_assert_uint_eq(n.list[3].count, 2);
    ck_assert_uint_eq(n.list[3].port, 0);
    ck_assert_uint_eq(n.more, 0);
}
END_TEST

START_TEST(fifty_refusals_of_thirty_names_are_capped) {
    static ipb_egress_notes n, out;
    ipb_egress_notes_clear(&n);
    char name[32];
    for (int k = 0; k < 50; k++) {
        snprintf(name, sizeof(name), "n%02d.test", k % 30);
        add(&n, name, 443, "the name is not allowed");
    }
    ck_assert_uint_eq(n.n, IPB_EGRESS_NOTES_MAX);
    ck_assert_uint_eq(n.more, 20);
    ck_assert(!n.more_at_least);
    ipb_egress_notes_take(&n, &out);
    ck_assert_uint_eq(out.n, 10);
    ck_assert_uint_eq(out.list[0].count, 2);
    ck_assert_str_eq(out.list[9].host, "n09.test");
    char line[IPB_EGRESS_NOTE_LINE];
    ipb_egress_notes_more_line(&out, line, sizeof(line));
    ck_assert_str_eq(line, "[ipybox] egress refused: ... and 20 more destinations (the host's log has them)");
}
END_TEST

START_TEST(past_the_seen_set_the_count_is_a_bound) {
    static ipb_egress_notes n;
    ipb_egress_notes_clear(&n);
    char name[32];
    unsigned total = IPB_EGRESS_NOTES_MAX + IPB_EGRESS_NOTES_SEEN + 5;
    for (unsigned k = 0; k < total; k++) {
        snprintf(name, sizeof(name), "n%u.test", k);
        add(&n, name, 443, "x");
    }
    ck_assert_uint_eq(n.more, IPB_EGRESS_NOTES_SEEN + 5);
    ck_assert(n.more_at_least);
    /* A repeat of one told apart is not counted again. */
    add(&n, "n20.test", 443, "x");
    ck_assert_uint_eq(n.more, IPB_EGRESS_NOTES_SEEN + 5);
    char line[IPB_EGRESS_NOTE_LINE];
    ipb_egress_notes_more_line(&n, line, sizeof(line));
    ck_assert_ptr_nonnull(strstr(line, "and at least 261 more destinations"));
}
END_TEST

START_TEST(a_take_tells_each_destination_once) {
    static ipb_egress_notes n, out;
    ipb_egress_notes_clear(&n);
    add(&n, "a.test", 443, "x");
    ipb_egress_notes_take(&n, &out);
    ck_assert_uint_eq(out.n, 1);
    add(&n, "a.test", 443, "x");
    add(&n, "b.test", 443, "x");
    ipb_egress_notes_take(&n, &out);
    ck_assert_uint_eq(out.n, 1);
    ck_assert_str_eq(out.list[0].host, "b.test");
    ipb_egress_notes_take(&n, &out);
    ck_assert(!ipb_egress_notes_any(&out));
    /* Cleared (a cell begins): told afresh. */
    ipb_egress_notes_clear(&n);
    add(&n, "a.test", 443, "x");
    ipb_egress_notes_take(&n, &out);
    ck_assert_uint_eq(out.n, 1);
}
END_TEST

START_TEST(lines) {
    static ipb_egress_notes n;
    ipb_egress_notes_clear(&n);
    char line[IPB_EGRESS_NOTE_LINE];
    ipb_egress_note *e = add(&n, "pypi.org", 443, "the name is not allowed");
    snprintf(e->allow, sizeof(e->allow), "--allowed-domain pypi.org");
    ipb_egress_note_line(e, line, sizeof(line));
    ck_assert_str_eq(line, "[ipybox] egress refused: pypi.org:443 \xe2\x80\x94 the name is not allowed; allow it "
                           "with --allowed-domain pypi.org");
    add(&n, "pypi.org", 443, "the name is not allowed");
    ipb_egress_note_line(e, line, sizeof(line));
    ck_assert_ptr_nonnull(strstr(line, "pypi.org:443 (2 times) \xe2\x80\x94"));
    e = ipb_egress_notes_add(&n, "metadata.google.internal", 24, true, 0, "a cloud metadata name is always refused");
    e->no_option = true;
    ipb_egress_note_line(e, line, sizeof(line));
    ck_assert_str_eq(line, "[ipybox] egress refused: DNS lookup of metadata.google.internal \xe2\x80\x94 a cloud "
                           "metadata name is always refused; no option allows it");
    e = add(&n, "2001:db8::5", 8080, "the address is not allowed");
    e->is_addr = true;
    snprintf(e->allow, sizeof(e->allow), "--allowed-domain 2001:db8::5");
    e->starts_list = true;
    ipb_egress_note_line(e, line, sizeof(line));
    ck_assert_str_eq(line, "[ipybox] egress refused: [2001:db8::5]:8080 \xe2\x80\x94 the address is not allowed; "
                           "allow it with --allowed-domain 2001:db8::5 (with no list now, that starts one: list "
                           "every destination needed)");
    /* No destination: the connection cap. */
    e = add(&n, "", 0, "2 connections are open, the most a sandbox may have (--max-connections)");
    ipb_egress_note_line(e, line, sizeof(line));
    ck_assert_str_eq(line, "[ipybox] egress refused: a connection \xe2\x80\x94 2 connections are open, the most a "
                           "sandbox may have (--max-connections)");
    /* The longest note still fits a line, and a line is one line. */
    char big[400];
    memset(big, '\n', sizeof(big));
    e = ipb_egress_notes_add(&n, big, sizeof(big), false, 65535, big);
    memset(e->allow, 'x', sizeof(e->allow) - 1);
    ipb_egress_note_line(e, line, sizeof(line));
    ck_assert_ptr_null(strchr(line, '\n'));
    ck_assert_uint_lt(strlen(line), sizeof(line) - 1);
}
END_TEST

static ipb_egress_policy policy_of(const char *const *entries) {
    ipb_egress_policy p = {0};
    for (; *entries; entries++) {
        ipb_error *err = NULL;
        ck_assert_msg(ipb_egress_add_rule(&p, *entries, &err) == 0, "refused %s: %s", *entries, ipb_error_msg(err));
    }
    return p;
}

static ipb_addr addr(const char *s) {
    ipb_addr a;
    ck_assert(ipb_addr_parse(s, strlen(s), &a));
    return a;
}

START_TEST(the_entry_suggested_allows_it) {
    static const char *const entries[] = {"example.com", NULL};
    ipb_egress_policy p = policy_of(entries);
    char out[128];
    ck_assert(!ipb_egress_name_allowed(&p, "pypi.org", NULL));
    ck_assert(ipb_egress_suggest_entry(&p, "pypi.org", NULL, false, out, sizeof(out)));
    ck_assert_str_eq(out, "--allowed-domain pypi.org");
    /* And it does, once added. */
    ipb_egress_add_rule(&p, out + strlen("--allowed-domain "), NULL);
    ck_assert(ipb_egress_name_allowed(&p, "pypi.org", NULL));
    ck_assert(!ipb_egress_suggest_entry(&p, "metadata.google.internal", NULL, false, out, sizeof(out)));
    ipb_addr pub = addr("203.0.113.5"), priv = addr("10.1.2.3"), v6 = addr("2001:db8::5");
    ck_assert(!ipb_egress_addr_allowed(&p, &pub, false, false, NULL));
    ck_assert(ipb_egress_suggest_entry(&p, NULL, &pub, false, out, sizeof(out)));
    ck_assert_str_eq(out, "--allowed-domain 203.0.113.5");
    ck_assert(ipb_egress_suggest_entry(&p, NULL, &priv, false, out, sizeof(out)));
    ck_assert_str_eq(out, "--allowed-domain 10.1.2.3");
    ck_assert(ipb_egress_suggest_entry(&p, NULL, &v6, true, out, sizeof(out)));
    ck_assert_str_eq(out, "--allowed-domain 2001:db8::5");
    ipb_egress_add_rule(&p, "10.1.2.3", NULL);
    ck_assert(ipb_egress_addr_allowed(&p, &priv, false, false, NULL));
    /* The policy asked is not changed by asking. */
    ck_assert_uint_eq(p.n_rules, 3);
    ipb_egress_free(&p);
}
END_TEST

START_TEST(host_loopback_and_metadata_addresses_are_never_suggested) {
    static const char *const entries[] = {"example.com", NULL};
    ipb_egress_policy p = policy_of(entries);
    ipb_addr own = addr("192.0.2.10");
    ipb_egress_set_host_addrs(&p, &own, 1);
    char out[128] = "";
    const char *never[] = {"192.0.2.10",       "127.0.0.1",         "169.254.169.254", "::1",
                           "::ffff:127.0.0.1", "64:ff9b::c000:20a", "0.0.0.0"};
    for (size_t i = 0; i < sizeof(never) / sizeof(*never); i++) {
        ipb_addr a = addr(never[i]);
        ck_assert_msg(!ipb_egress_suggest_entry(&p, NULL, &a, false, out, sizeof(out)), "suggested %s", never[i]);
    }
    ipb_egress_free(&p);
}
END_TEST

int main(void) {
    Suite *s = suite_create("egress_notes");
    TCase *c = tcase_create("egress_notes");
    tcase_add_test(c, escape_keeps_printable_ascii_only);
    tcase_add_test(c, escape_is_bounded_and_marks_the_cut);
    tcase_add_test(c, same_destination_is_counted_once);
    tcase_add_test(c, fifty_refusals_of_thirty_names_are_capped);
    tcase_add_test(c, past_the_seen_set_the_count_is_a_bound);
    tcase_add_test(c, a_take_tells_each_destination_once);
    tcase_add_test(c, lines);
    tcase_add_test(c, the_entry_suggested_allows_it);
    tcase_add_test(c, host_loopback_and_metadata_addresses_are_never_suggested);
    suite_add_tcase(s, c);
    return ipb_run_suite(s);
}
