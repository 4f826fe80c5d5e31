/* proxy/sniff.c: what an HTTP/1.x request or a CONNECT says (the Host, an absolute form, an
 * authority), and what is malformed, ambiguous or too large. TLS: test_sniff.c. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
#include "sniff.h"
#include "sniff_check.h"

/* Empty lines before a request line are skipped by HTTP servers: the request after them is
 * what is judged, never "no name". */
START_TEST(http_after_empty_lines) {
    ipb_sniff o;
    ck_assert_int_eq(sniff_str("\r\n\r\nGET / HTTP/1.1\r\nHost: b.example\r\n\r\n", &o), IPB_SNIFF_HTTP);
    ck_assert_str_eq(o.host, "b.example");
    ck_assert_int_eq(sniff_str("\nGET / HTTP/1.1\r\nHost: a.example\r\n\r\n", &o), IPB_SNIFF_HTTP);
    ck_assert_str_eq(o.host, "a.example");
    ck_assert_int_eq(sniff_str("\r\n", &o), IPB_SNIFF_MORE);
    ck_assert_int_eq(sniff_str("\r\nGE", &o), IPB_SNIFF_MORE);
    ck_assert_int_eq(sniff_str("\r\nCONNECT b.example:443 HTTP/1.1\r\nHost: b.example:443\r\n\r\nrest", &o),
                     IPB_SNIFF_CONNECT);
    ck_assert_uint_eq(o.head_len, strlen("\r\nCONNECT b.example:443 HTTP/1.1\r\nHost: b.example:443\r\n\r\n"));
    char many[80];
    memset(many, '\n', 70);
    memcpy(many + 70, "GET / ", 7);
    ck_assert_int_eq(sniff_str(many, &o), IPB_SNIFF_BAD);
}
END_TEST

/* Forms servers accept that once read as "no name": each is judged by its Host, or refused. */
START_TEST(http_lenient_forms_are_judged) {
    ipb_sniff o;
    static const char *const named[] = {
        "PROPFIND / HTTP/1.1\r\nHost: b.example\r\n\r\n", "get / HTTP/1.1\r\nHost: b.example\r\n\r\n",
        "\tGET / HTTP/1.1\r\nHost: b.example\r\n\r\n", " \r\nGET / HTTP/1.1\r\nHost: b.example\r\n\r\n",
        "\v\f\x1c\x85\xa0GET / HTTP/1.1\r\nHost: b.example\r\n\r\n"};
    for (size_t i = 0; i < sizeof(named) / sizeof(*named); i++) {
        ck_assert_msg(sniff_str(named[i], &o) == IPB_SNIFF_HTTP, "kind %d for %s", o.kind, named[i]);
        ck_assert_str_eq(o.host, "b.example");
    }
    static const char *const bare_lf[] = {"GET / HTTP/1.1\nHost: b.example\n\n",
                                          "GET / HTTP/1.1\r\nHost: b.example\r\n\n",
                                          "GET / HTTP/1.1\nHost: b.example\r\n\r\n", "GET / HTTP/1.1\n"};
    for (size_t i = 0; i < sizeof(bare_lf) / sizeof(*bare_lf); i++)
        ck_assert_msg(sniff_str(bare_lf[i], &o) == IPB_SNIFF_BAD, "kind %d for %s", o.kind, bare_lf[i]);
}
END_TEST

/* ---- HTTP ---- */

START_TEST(http_host) {
    ipb_sniff o;
    ck_assert_int_eq(
        sniff_str("GET /index.html HTTP/1.1\r\nUser-Agent: t\r\nHost: Example.Test\r\nAccept: */*\r\n\r\n", &o),
        IPB_SNIFF_HTTP);
    ck_assert_str_eq(o.host, "Example.Test");
    ck_assert_uint_eq(o.port, 0);
    ck_assert_uint_eq(o.head_len, 0);
    ck_assert_int_eq(sniff_str("POST /x HTTP/1.1\r\nhost:\ta.test:8080 \t\r\nContent-Length: 3\r\n\r\nabc", &o),
                     IPB_SNIFF_HTTP);
    ck_assert_str_eq(o.host, "a.test");
    ck_assert_uint_eq(o.port, 8080);
    ck_assert_int_eq(sniff_str("GET / HTTP/1.1\r\nHost: [2001:db8::1]:8080\r\n\r\n", &o), IPB_SNIFF_HTTP);
    ck_assert_str_eq(o.host, "2001:db8::1");
    ck_assert_uint_eq(o.port, 8080);
    ck_assert_int_eq(sniff_str("OPTIONS * HTTP/1.1\r\nHost: 192.0.2.1\r\n\r\n", &o), IPB_SNIFF_HTTP);
    ck_assert_str_eq(o.host, "192.0.2.1");
    ck_assert_int_eq(sniff_str("HEAD /?q=1 HTTP/1.0\r\n\r\n", &o), IPB_SNIFF_HTTP);
    ck_assert_str_eq(o.host, "");
    ck_assert_uint_eq(o.port, 0);
}
END_TEST

START_TEST(http_absolute_form) {
    ipb_sniff o;
    ck_assert_int_eq(sniff_str("GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n", &o), IPB_SNIFF_HTTP);
    ck_assert_str_eq(o.host, "a.test");
    ck_assert_uint_eq(o.port, 0);
    ck_assert_int_eq(sniff_str("GET HTTP://A.test:8081?x HTTP/1.1\r\nHost: a.TEST:8081\r\n\r\n", &o), IPB_SNIFF_HTTP);
    ck_assert_str_eq(o.host, "A.test");
    ck_assert_uint_eq(o.port, 8081);
    ck_assert_int_eq(sniff_str("GET http://a.test HTTP/1.1\r\n\r\n", &o), IPB_SNIFF_HTTP);
    ck_assert_str_eq(o.host, "a.test");
    ck_assert_int_eq(sniff_str("GET http://a.test/x HTTP/1.1\r\nHost: b.test\r\n\r\n", &o), IPB_SNIFF_BAD);
    ck_assert_ptr_nonnull(strstr(o.why, "does not match"));
    ck_assert_int_eq(sniff_str("GET http://user@a.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n", &o), IPB_SNIFF_BAD);
    ck_assert_int_eq(sniff_str("GET http:///x HTTP/1.1\r\nHost: a.test\r\n\r\n", &o), IPB_SNIFF_BAD);
    ck_assert_int_eq(sniff_str("GET https://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", &o), IPB_SNIFF_BAD);
    ck_assert_int_eq(sniff_str("GET a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", &o), IPB_SNIFF_BAD);
}
END_TEST

START_TEST(http_ambiguous_or_malformed) {
    ipb_sniff o;
    static const char *const bad[] = {
        "GET / HTTP/1.1\r\nHost: a.test\r\nHost: a.test\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.test\r\nhost: b.test\r\n\r\n",
        "GET / HTTP/1.1\r\nHOST: a.test\r\nX: y\r\nhOsT: a.test\r\n\r\n",
        "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.test\r\nX-Long: a\r\n  continued\r\n\r\n",
        "GET / HTTP/1.1\r\n Host: b.test\r\nHost: a.test\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : b.test\r\nHost: a.test\r\n\r\n",
        "GET / HTTP/1.1\r\nHo(st: a.test\r\n\r\n",
        "GET / HTTP/1.1\r\n: a.test\r\n\r\n",
        "GET / HTTP/1.1\r\nHost a.test\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.test\r\nX: a\nHost: b.test\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.test\rX: b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost:\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.test:0\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.test:http\r\n\r\n",
        "GET / HTTP/2.0\r\nHost: a.test\r\n\r\n",
        "GET / HTTP/1.1 \r\nHost: a.test\r\n\r\n",
        "GET  / HTTP/1.1\r\nHost: a.test\r\n\r\n",
        "GET /\r\nHost: a.test\r\n\r\n",
        "GET \r\n\r\n",
        /* A bare LF, tab or NUL in the request line: a lenient server would see the Host
         * hidden in it. */
        "GET /\tHTTP/1.1\nHost:evil.test\nX: HTTP/1.1\r\nHost: good.test\r\n\r\n",
        "GET /a\rb HTTP/1.1\r\nHost: a.test\r\n\r\n",
        "GET /a\x7f HTTP/1.1\r\nHost: a.test\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        ck_assert_msg(sniff_str(bad[i], &o) == IPB_SNIFF_BAD, "kind %d for %s", o.kind, bad[i]);
    static const char nul[] = "GET /a\0b HTTP/1.1\r\nHost: a.test\r\n\r\n";
    ck_assert_int_eq(sniff(nul, sizeof(nul) - 1, &o), IPB_SNIFF_BAD);
    ck_assert_int_eq(sniff_str("GET / HTTP/1.1\r\nHost: a.test\r\nX-Long: a\r\n  continued\r\n\r\n", &o),
                     IPB_SNIFF_BAD);
    ck_assert_ptr_nonnull(strstr(o.why, "folded"));
}
END_TEST

START_TEST(http_incomplete_and_other) {
    ipb_sniff o;
    /* A token may still become a request line ("GETX / HTTP/1.1"): more, until its line ends. */
    static const char *const more[] = {"G",
                                       "GE",
                                       "GET",
                                       "CONN",
                                       "CONNECT",
                                       "OPTIONS",
                                       "DELE",
                                       "GET ",
                                       "GET / HTTP/1.1\r\nHost: a.test\r\n",
                                       "GET / HTTP/1.1\r\nHost: a.test\r\n\r",
                                       "GETX",
                                       "X",
                                       "CONNECTX",
                                       "ABCDEFGHIJ",
                                       "get / HTTP/1.1",
                                       "EHLO mail.example"};
    for (size_t i = 0; i < sizeof(more) / sizeof(*more); i++)
        ck_assert_msg(sniff_str(more[i], &o) == IPB_SNIFF_MORE, "kind %d for %s", o.kind, more[i]);
    static const char *const other[] = {"GET/",        "SSH-2.0-OpenSSH_9.2p1\r\n", "EHLO mail.example\r\n", "PING\r\n",
                                        "get foo\r\n", "*1\r\n$4\r\nPING\r\n"};
    for (size_t i = 0; i < sizeof(other) / sizeof(*other); i++)
        ck_assert_msg(sniff_str(other[i], &o) == IPB_SNIFF_OTHER, "kind %d for %s", o.kind, other[i]);
    /* Request lines of any method and case, after blanks: requests, judged (here: no Host);
     * cleartext HTTP/2's preface names nothing that can be read: refused, not waved through. */
    static const char *const bad[] = {"GETS / HTTP/1.1\r\n\r\n", "get / HTTP/1.1\r\n\r\n", " GET / HTTP/1.1\r\n\r\n",
                                      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        ck_assert_msg(sniff_str(bad[i], &o) == IPB_SNIFF_BAD, "kind %d for %s", o.kind, bad[i]);
    static const uint8_t binary[] = {0x00, 0xff, 0x16};
    ck_assert_int_eq(sniff(binary, sizeof(binary), &o), IPB_SNIFF_OTHER);
    ck_assert_int_eq(sniff("", 0, &o), IPB_SNIFF_MORE);
}
END_TEST

/* A method has no length limit in servers (nginx, Apache and Go take any token), nor has a
 * request line below their own limits: a long one is judged by its Host, never read as "not
 * HTTP" (then the dialled address would decide, and the name pass unread). Found by
 * fuzz_sniff: a 32-byte method was OTHER while the first 32 bytes were all that had come. */
START_TEST(http_long_method_or_line_is_judged) {
    static char buf[IPB_SNIFF_MAX + 1];
    ipb_sniff o;
    for (size_t ml = 31; ml <= 40; ml++) {
        memset(buf, 'X', ml);
        strcpy(buf + ml, " / HTTP/1.1\r\nHost: b.example\r\n\r\n");
        size_t n = strlen(buf);
        for (size_t cut = 1; cut < n; cut++) /* never a decision before the head is whole */
            ck_assert_msg(sniff(buf, cut, &o) == IPB_SNIFF_MORE, "kind %d for a %zu-byte method cut at %zu", o.kind, ml,
                          cut);
        ck_assert_msg(sniff(buf, n, &o) == IPB_SNIFF_HTTP, "kind %d for a %zu-byte method", o.kind, ml);
        ck_assert_str_eq(o.host, "b.example");
    }
    /* A request line longer than 8 KiB, with a method the sniffer does not know by name. */
    const char *tail = " HTTP/1.1\r\nHost: b.example\r\n\r\n";
    memset(buf, 'a', 9000);
    memcpy(buf, "PROPFIND /", 10);
    strcpy(buf + 9000, tail);
    ck_assert_int_eq(sniff(buf, 8192, &o), IPB_SNIFF_MORE);
    ck_assert_int_eq(sniff_str(buf, &o), IPB_SNIFF_HTTP);
    ck_assert_str_eq(o.host, "b.example");
    /* At the limit, a line still unfinished is refused like a head too large. */
    memset(buf, 'a', IPB_SNIFF_MAX);
    memcpy(buf, "PROPFIND /", 10);
    ck_assert_int_eq(sniff(buf, IPB_SNIFF_MAX - 1, &o), IPB_SNIFF_MORE);
    ck_assert_int_eq(sniff(buf, IPB_SNIFF_MAX, &o), IPB_SNIFF_BAD);
    ck_assert_ptr_nonnull(strstr(o.why, "too large"));
    memset(buf, 'X', IPB_SNIFF_MAX); /* a token that never ends */
    ck_assert_int_eq(sniff(buf, IPB_SNIFF_MAX - 1, &o), IPB_SNIFF_MORE);
    ck_assert_int_eq(sniff(buf, IPB_SNIFF_MAX, &o), IPB_SNIFF_BAD);
    /* A long token ended by anything but a space is still not HTTP. */
    memset(buf, 'X', 100);
    strcpy(buf + 100, "\r\n");
    ck_assert_int_eq(sniff_str(buf, &o), IPB_SNIFF_OTHER);
}
END_TEST

/* A recipient may take HTAB, VT, FF or a bare CR for the SP of a request line (RFC 9112, 3;
 * Python's http.server splits it at any Latin-1 whitespace, 0x1c-0x1f, 0x85 and 0xa0 too):
 * such a line is refused, never read as "not HTTP" (then the dialled address decided and the
 * Host passed unread). */
START_TEST(http_other_whitespace_in_request_line) {
    ipb_sniff o;
    static const char *const bad[] = {
        "GET\t/\tHTTP/1.1\r\nHost: b.example\r\n\r\n",     "GET\t/ HTTP/1.1\r\nHost: b.example\r\n\r\n",
        "GET\v/ HTTP/1.1\r\nHost: b.example\r\n\r\n",      "PROPFIND\f/\fhttp/1.1\r\nHost: b.example\r\n\r\n",
        "FOO /\tHTTP/1.1\r\nHost: b.example\r\n\r\n",      "GET\r/ HTTP/1.1\r\nHost: b.example\r\n\r\n",
        "GET\x1c/\x1fHTTP/1.1\r\nHost: b.example\r\n\r\n", "GET\xa0/ HTTP/1.1\r\nHost: b.example\r\n\r\n",
        "GET /\x85HTTP/1.1\r\nHost: b.example\r\n\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        ck_assert_msg(sniff_str(bad[i], &o) == IPB_SNIFF_BAD, "kind %d for %s", o.kind, bad[i]);
        for (size_t cut = 1; cut < strlen(bad[i]); cut++)
            ck_assert_msg(sniff(bad[i], cut, &o) == IPB_SNIFF_MORE, "kind %d for %s cut at %zu", o.kind, bad[i], cut);
    }
    static const char *const other[] = {"PING\r\n", "EHLO\tmail.example\r\n", "A\tB\tC\r\n"};
    for (size_t i = 0; i < sizeof(other) / sizeof(*other); i++)
        ck_assert_msg(sniff_str(other[i], &o) == IPB_SNIFF_OTHER, "kind %d for %s", o.kind, other[i]);
}
END_TEST

START_TEST(http_head_too_large) {
    static char buf[IPB_SNIFF_MAX + 1];
    const char *start = "GET / HTTP/1.1\r\nHost: a.test\r\nX-Pad: ";
    memset(buf, 'a', sizeof(buf));
    memcpy(buf, start, strlen(start));
    ipb_sniff o;
    ck_assert_int_eq(sniff(buf, IPB_SNIFF_MAX - 1, &o), IPB_SNIFF_MORE);
    ck_assert_int_eq(sniff(buf, IPB_SNIFF_MAX, &o), IPB_SNIFF_BAD);
    ck_assert_ptr_nonnull(strstr(o.why, "too large"));
    /* A head that ends within the limit is fine. */
    memcpy(buf + IPB_SNIFF_MAX - 4, "\r\n\r\n", 4);
    ck_assert_int_eq(sniff(buf, IPB_SNIFF_MAX, &o), IPB_SNIFF_HTTP);
    ck_assert_str_eq(o.host, "a.test");
}
END_TEST

/* ---- CONNECT ---- */

START_TEST(connect_authority) {
    ipb_sniff o;
    const char *head = "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n";
    ck_assert_int_eq(sniff_str(head, &o), IPB_SNIFF_CONNECT);
    ck_assert_str_eq(o.host, "a.test");
    ck_assert_uint_eq(o.port, 443);
    ck_assert_uint_eq(o.head_len, strlen(head));
    char with_tls[256];
    snprintf(with_tls, sizeof(with_tls),
             "%s\x16\x03\x01\x01\x05"
             "trailing bytes",
             head);
    ck_assert_int_eq(sniff_str(with_tls, &o), IPB_SNIFF_CONNECT);
    ck_assert_uint_eq(o.head_len, strlen(head));
    ck_assert_uint_eq(o.port, 443);
    ck_assert_int_eq(sniff_str("CONNECT [2001:db8::2]:8443 HTTP/1.0\r\n\r\n", &o), IPB_SNIFF_CONNECT);
    ck_assert_str_eq(o.host, "2001:db8::2");
    ck_assert_uint_eq(o.port, 8443);
    ck_assert_uint_eq(o.head_len, strlen("CONNECT [2001:db8::2]:8443 HTTP/1.0\r\n\r\n"));
    /* Without a Host, and with a Host naming the same host in another case. */
    ck_assert_int_eq(sniff_str("CONNECT a.test:65535 HTTP/1.1\r\n\r\n", &o), IPB_SNIFF_CONNECT);
    ck_assert_uint_eq(o.port, 65535);
    ck_assert_int_eq(sniff_str("CONNECT a.test:443 HTTP/1.1\r\nHost: A.Test:443\r\n\r\n", &o), IPB_SNIFF_CONNECT);
    ck_assert_int_eq(sniff_str("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n", &o), IPB_SNIFF_MORE);
}
END_TEST

START_TEST(connect_bad_authority) {
    ipb_sniff o;
    static const char *const bad[] = {
        "CONNECT a.test HTTP/1.1\r\nHost: a.test\r\n\r\n",
        "CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n",
        "CONNECT a.test:443 HTTP/1.1\r\nHost: b.test\r\n\r\n",
        "CONNECT a.test:0 HTTP/1.1\r\n\r\n",
        "CONNECT a.test:65536 HTTP/1.1\r\n\r\n",
        "CONNECT a.test:44x HTTP/1.1\r\n\r\n",
        "CONNECT a.test: HTTP/1.1\r\n\r\n",
        "CONNECT a.test:+443 HTTP/1.1\r\n\r\n",
        "CONNECT :443 HTTP/1.1\r\n\r\n",
        "CONNECT [::1 HTTP/1.1\r\n\r\n",
        "CONNECT [::1]443 HTTP/1.1\r\n\r\n",
        "CONNECT u@a.test:443 HTTP/1.1\r\n\r\n",
        "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\nHost: a.test:443\r\n\r\n",
        "CONNECT a.test:443 HTTP/3.0\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        ck_assert_msg(sniff_str(bad[i], &o) == IPB_SNIFF_BAD, "kind %d for %s", o.kind, bad[i]);
    ck_assert_int_eq(sniff_str("CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n", &o), IPB_SNIFF_BAD);
    ck_assert_ptr_nonnull(strstr(o.why, "CONNECT"));
}
END_TEST

START_TEST(split_authority) {
    char host[IPB_NAME_MAX + 1];
    uint16_t port = 7;
#define SPLIT(s) ipb_sniff_split_authority(s, strlen(s), host, sizeof(host), &port)
    ck_assert(SPLIT("a.test"));
    ck_assert_str_eq(host, "a.test");
    ck_assert_uint_eq(port, 0);
    ck_assert(SPLIT("a.test:1"));
    ck_assert_uint_eq(port, 1);
    ck_assert(SPLIT("a.test:65535"));
    ck_assert_uint_eq(port, 65535);
    ck_assert(SPLIT("a.test:00080"));
    ck_assert_uint_eq(port, 80);
    ck_assert(SPLIT("[::1]"));
    ck_assert_str_eq(host, "::1");
    ck_assert_uint_eq(port, 0);
    ck_assert(SPLIT("[fe80::1]:22"));
    ck_assert_str_eq(host, "fe80::1");
    ck_assert_uint_eq(port, 22);
    ck_assert(SPLIT("192.0.2.1:8080"));
    ck_assert_str_eq(host, "192.0.2.1");
    static const char *const bad[] = {
        "",        ":80",      "[]",           "[]:80",         "[::1",      "[::1]80",   "[::1]:",      "::1",
        "a.test:", "a.test:0", "a.test:65536", "a.test:000080", "a.test:8o", "a.test:-1", "a.test: 80",  "a b",
        "a/b",     "u@a.test", "a\x7f",        "a\x80.test",    "a:1:2",     "[::1]:1:2", "a.test:99999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        ck_assert_msg(!SPLIT(bad[i]), "accepted \"%s\"", bad[i]);
#undef SPLIT
    /* Only len bytes count; the host must fit host_size with its NUL. */
    ck_assert(ipb_sniff_split_authority("a.test:443junk", 10, host, sizeof(host), &port));
    ck_assert_str_eq(host, "a.test");
    ck_assert_uint_eq(port, 443);
    ck_assert(!ipb_sniff_split_authority("a\0b", 3, host, sizeof(host), &port));
    ck_assert(ipb_sniff_split_authority("abc", 3, host, 4, &port));
    ck_assert(!ipb_sniff_split_authority("abcd", 4, host, 4, &port));
    ck_assert(!ipb_sniff_split_authority("[abcd]:1", 8, host, 4, &port));
}
END_TEST

int main(void) {
    Suite *s = suite_create("sniff_http");
    TCase *c = tcase_create("sniff_http");
    tcase_add_test(c, http_after_empty_lines);
    tcase_add_test(c, http_lenient_forms_are_judged);
    tcase_add_test(c, http_long_method_or_line_is_judged);
    tcase_add_test(c, http_other_whitespace_in_request_line);
    tcase_add_test(c, http_host);
    tcase_add_test(c, http_absolute_form);
    tcase_add_test(c, http_ambiguous_or_malformed);
    tcase_add_test(c, http_incomplete_and_other);
    tcase_add_test(c, http_head_too_large);
    tcase_add_test(c, connect_authority);
    tcase_add_test(c, connect_bad_authority);
    tcase_add_test(c, split_authority);
    suite_add_tcase(s, c);
    return ipb_run_suite(s);
}
