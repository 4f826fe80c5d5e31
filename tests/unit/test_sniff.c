/* proxy/sniff.c: what a TLS ClientHello says (its server name, across records, malformed or
 * too large), and the decision on the name a connection carries. HTTP and CONNECT:
 * test_sniff_http.c; the DNS stub's wire format: test_dnswire.c. */
#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
#include "sniff.h"
#include "sniff_check.h"

/* ---- TLS ClientHello builder ---- */

typedef struct bytes {
    uint8_t b[40000];
    size_t n;
} bytes;

static void put8(bytes *x, unsigned v) { x->b[x->n++] = (uint8_t)v; }
static void put16(bytes *x, unsigned v) {
    put8(x, v >> 8);
    put8(x, v);
}
static void put24(bytes *x, unsigned v) {
    put8(x, v >> 16);
    put16(x, v & 0xffff);
}
static void putmem(bytes *x, const void *p, size_t n) {
    memcpy(x->b + x->n, p, n);
    x->n += n;
}
static void set16(bytes *x, size_t at, unsigned v) {
    x->b[at] = (uint8_t)(v >> 8);
    x->b[at + 1] = (uint8_t)v;
}

/* Where the fields of the last built hello are (offsets into the record bytes). */
typedef struct hello_layout {
    size_t sid;     /* session id length byte */
    size_t ciphers; /* cipher suites length */
    size_t comp;    /* compression methods length byte */
    size_t exts;    /* extensions length (0 without extensions) */
    size_t sni;     /* the first server_name extension's type (0 without one) */
} hello_layout;

enum { HELLO_NO_EXTENSIONS = 1 };

/* A ClientHello body: TLS 1.2 legacy version, a random, a 32-byte session id, three cipher
 * suites, the null compression method and extensions: supported_versions, the given
 * server_name extensions (each naming one host), supported_groups. Offsets are relative to
 * the body. */
static void hello_body(bytes *x, const char *const *snis, size_t n_snis, int flags, hello_layout *lay) {
    memset(lay, 0, sizeof(*lay));
    put16(x, 0x0303);
    for (int i = 0; i < 32; i++)
        put8(x, (unsigned)(i * 7 + 1));
    lay->sid = x->n;
    put8(x, 32);
    for (int i = 0; i < 32; i++)
        put8(x, (unsigned)(0xa0 + i));
    lay->ciphers = x->n;
    put16(x, 6);
    put16(x, 0x1301);
    put16(x, 0x1302);
    put16(x, 0xc02f);
    lay->comp = x->n;
    put8(x, 1);
    put8(x, 0);
    if (flags & HELLO_NO_EXTENSIONS)
        return;
    lay->exts = x->n;
    put16(x, 0); /* patched below */
    size_t start = x->n;
    put16(x, 0x002b); /* supported_versions: TLS 1.3, 1.2 */
    put16(x, 5);
    put8(x, 4);
    put16(x, 0x0304);
    put16(x, 0x0303);
    for (size_t i = 0; i < n_snis; i++) {
        size_t l = strlen(snis[i]);
        if (i == 0)
            lay->sni = x->n;
        put16(x, 0x0000);
        put16(x, (unsigned)(l + 5));
        put16(x, (unsigned)(l + 3));
        put8(x, 0); /* host_name */
        put16(x, (unsigned)l);
        putmem(x, snis[i], l);
    }
    put16(x, 0x000a); /* supported_groups: x25519 */
    put16(x, 4);
    put16(x, 2);
    put16(x, 0x001d);
    set16(x, lay->exts, (unsigned)(x->n - start));
}

/* The hello as TLS records: one record, or two when 0 < split < handshake length (the
 * handshake message cut after `split` bytes). Layout offsets become record offsets (of the
 * one-record form; with a split they are only meaningful before the cut). */
static void hello_records(bytes *out, const char *const *snis, size_t n_snis, int flags, size_t split,
                          hello_layout *lay) {
    static bytes body, hs;
    body.n = hs.n = 0;
    hello_body(&body, snis, n_snis, flags, lay);
    put8(&hs, 1);
    put24(&hs, (unsigned)body.n);
    putmem(&hs, body.b, body.n);
    out->n = 0;
    size_t cut = split && split < hs.n ? split : hs.n;
    put8(out, 0x16);
    put16(out, 0x0301);
    put16(out, (unsigned)cut);
    putmem(out, hs.b, cut);
    if (cut < hs.n) {
        put8(out, 0x16);
        put16(out, 0x0303);
        put16(out, (unsigned)(hs.n - cut));
        putmem(out, hs.b + cut, hs.n - cut);
    }
    size_t shift = 5 + 4; /* record header, handshake header */
    lay->sid += shift;
    lay->ciphers += shift;
    lay->comp += shift;
    if (lay->exts)
        lay->exts += shift;
    if (lay->sni)
        lay->sni += shift;
}

static bytes *hello_for(const char *sni, size_t split, hello_layout *lay) {
    static bytes x;
    const char *snis[1] = {sni};
    hello_records(&x, snis, sni ? 1 : 0, 0, split, lay);
    return &x;
}

/* Debian's openssl s_client 3.0 -servername example.test, as it reached a loopback socket:
 * TLS 1.3 with an x25519 key share, 31 cipher suites, session ticket, ALPN-free. */
static const uint8_t openssl_hello[] = {
    0x16, 0x03, 0x01, 0x01, 0x39, 0x01, 0x00, 0x01, 0x35, 0x03, 0x03, 0x5f, 0x57, 0xbd, 0x57, 0xf2, 0x51, 0x68, 0x68,
    0x72, 0x62, 0xd5, 0x9d, 0x91, 0x69, 0x54, 0xfb, 0x1d, 0x25, 0xb6, 0x1d, 0xd3, 0x5a, 0xe2, 0xce, 0x21, 0x51, 0x1c,
    0x6d, 0xe1, 0x72, 0x75, 0xf9, 0x20, 0xdf, 0xcb, 0xed, 0xa3, 0x0e, 0xc3, 0xb4, 0x78, 0x8c, 0x95, 0xd3, 0x82, 0xe1,
    0xcc, 0x30, 0xff, 0x35, 0x28, 0xca, 0x20, 0x45, 0xef, 0x25, 0x62, 0xe4, 0x02, 0x0b, 0x15, 0xd2, 0xf7, 0x6d, 0xee,
    0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01, 0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc,
    0xaa, 0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b, 0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67,
    0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39, 0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d, 0x00,
    0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xae, 0x00, 0x00, 0x00, 0x11, 0x00, 0x0f, 0x00, 0x00,
    0x0c, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x74, 0x65, 0x73, 0x74, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00,
    0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x01,
    0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17,
    0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08,
    0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03,
    0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02, 0x00, 0x2b, 0x00, 0x09, 0x08, 0x03, 0x04, 0x03, 0x03,
    0x03, 0x02, 0x03, 0x01, 0x00, 0x2d, 0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00,
    0x20, 0x21, 0xef, 0xf8, 0x04, 0x89, 0xc7, 0x2b, 0x0a, 0x80, 0x06, 0xc3, 0xcb, 0x20, 0x07, 0xa5, 0x45, 0xd1, 0xf2,
    0x93, 0x48, 0x91, 0x71, 0xd3, 0xfa, 0xe7, 0x22, 0x65, 0x57, 0xe8, 0x6e, 0xc8, 0x57,
};

START_TEST(tls_sni) {
    hello_layout lay;
    bytes *x = hello_for("a.example.test", 0, &lay);
    ipb_sniff o;
    ck_assert_int_eq(sniff(x->b, x->n, &o), IPB_SNIFF_TLS);
    ck_assert_str_eq(o.host, "a.example.test");
    ck_assert_uint_eq(o.port, 0);
    ck_assert_uint_eq(o.head_len, 0);
    /* Bytes after the hello (a ChangeCipherSpec record, early data) change nothing. */
    static const uint8_t ccs[] = {0x14, 0x03, 0x03, 0x00, 0x01, 0x01, 0x17, 0x03, 0x03, 0x00, 0x02, 0xaa, 0xbb};
    memcpy(x->b + x->n, ccs, sizeof(ccs));
    ck_assert_int_eq(sniff(x->b, x->n + sizeof(ccs), &o), IPB_SNIFF_TLS);
    ck_assert_str_eq(o.host, "a.example.test");
    /* A name of the longest allowed length. */
    char longname[IPB_NAME_MAX + 2];
    memset(longname, 'a', IPB_NAME_MAX);
    longname[IPB_NAME_MAX] = '\0';
    x = hello_for(longname, 0, &lay);
    ck_assert_int_eq(sniff(x->b, x->n, &o), IPB_SNIFF_TLS);
    ck_assert_str_eq(o.host, longname);
    longname[IPB_NAME_MAX] = 'a';
    longname[IPB_NAME_MAX + 1] = '\0';
    x = hello_for(longname, 0, &lay);
    ck_assert_int_eq(sniff(x->b, x->n, &o), IPB_SNIFF_BAD);
}
END_TEST

START_TEST(tls_without_server_name) {
    hello_layout lay;
    static bytes x;
    ipb_sniff o;
    hello_records(&x, NULL, 0, HELLO_NO_EXTENSIONS, 0, &lay);
    ck_assert_int_eq(sniff(x.b, x.n, &o), IPB_SNIFF_TLS);
    ck_assert_str_eq(o.host, "");
    hello_records(&x, NULL, 0, 0, 0, &lay);
    ck_assert_int_eq(lay.sni, 0);
    ck_assert_uint_ne(lay.exts, 0);
    ck_assert_int_eq(sniff(x.b, x.n, &o), IPB_SNIFF_TLS);
    ck_assert_str_eq(o.host, "");
}
END_TEST

START_TEST(tls_hello_across_records) {
    hello_layout lay;
    ipb_sniff o;
    /* Cut inside the handshake header, inside the random, inside the server name. */
    static const size_t cuts[] = {1, 2, 3, 4, 20, 100, 110, 126};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(*cuts); i++) {
        bytes *x = hello_for("split.example.test", cuts[i], &lay);
        ck_assert_msg(sniff(x->b, x->n, &o) == IPB_SNIFF_TLS, "cut %zu: kind %d", cuts[i], o.kind);
        ck_assert_str_eq(o.host, "split.example.test");
        /* The second record not a handshake: refused, not passed through. */
        size_t second = 5 + cuts[i];
        x->b[second] = 0x17;
        ck_assert_int_eq(sniff(x->b, x->n, &o), IPB_SNIFF_BAD);
        /* The first record alone: waits for the rest. */
        ck_assert_int_eq(sniff(x->b, second, &o), IPB_SNIFF_MORE);
    }
}
END_TEST

START_TEST(tls_every_prefix_is_more) {
    hello_layout lay;
    ipb_sniff o;
    bytes *x = hello_for("prefix.example.test", 0, &lay);
    for (size_t n = 0; n < x->n; n++)
        ck_assert_msg(sniff(x->b, n, &o) == IPB_SNIFF_MORE, "prefix %zu of %zu: kind %d", n, x->n, o.kind);
    x = hello_for("prefix.example.test", 77, &lay);
    for (size_t n = 0; n < x->n; n++)
        ck_assert_msg(sniff(x->b, n, &o) == IPB_SNIFF_MORE, "split, prefix %zu of %zu: kind %d", n, x->n, o.kind);
    for (size_t n = 0; n < sizeof(openssl_hello); n++)
        ck_assert_msg(sniff(openssl_hello, n, &o) == IPB_SNIFF_MORE, "openssl prefix %zu: kind %d", n, o.kind);
}
END_TEST

START_TEST(tls_real_openssl_hello) {
    ipb_sniff o;
    ck_assert_int_eq(sniff(openssl_hello, sizeof(openssl_hello), &o), IPB_SNIFF_TLS);
    ck_assert_str_eq(o.host, "example.test");
    /* The same hello re-cut into two records. */
    static uint8_t two[sizeof(openssl_hello) + 5];
    size_t hs = sizeof(openssl_hello) - 5, cut = 200;
    memcpy(two, openssl_hello, 5 + cut);
    two[3] = (uint8_t)(cut >> 8);
    two[4] = (uint8_t)cut;
    two[5 + cut] = 0x16;
    two[6 + cut] = 0x03;
    two[7 + cut] = 0x03;
    two[8 + cut] = (uint8_t)((hs - cut) >> 8);
    two[9 + cut] = (uint8_t)(hs - cut);
    memcpy(two + 10 + cut, openssl_hello + 5 + cut, hs - cut);
    ck_assert_int_eq(sniff(two, sizeof(two), &o), IPB_SNIFF_TLS);
    ck_assert_str_eq(o.host, "example.test");
}
END_TEST

START_TEST(tls_two_server_names) {
    hello_layout lay;
    static bytes x;
    ipb_sniff o;
    const char *snis[2] = {"good.test", "evil.test"};
    hello_records(&x, snis, 2, 0, 0, &lay);
    ck_assert_int_eq(sniff(x.b, x.n, &o), IPB_SNIFF_BAD);
    ck_assert_ptr_nonnull(strstr(o.why, "two"));
}
END_TEST

START_TEST(tls_lengths_that_overrun) {
    hello_layout lay;
    ipb_sniff o;
    bytes *x;
    const char *name = "overrun.example.test";
    size_t l = strlen(name);
#define EXPECT_BAD(mutation)                                                                                           \
    do {                                                                                                               \
        x = hello_for(name, 0, &lay);                                                                                  \
        mutation;                                                                                                      \
        ck_assert_msg(sniff(x->b, x->n, &o) == IPB_SNIFF_BAD, "%s: kind %d", #mutation, o.kind);                       \
    } while (0)
    EXPECT_BAD(x->b[lay.sid] = 33);            /* session id longer than 32 */
    EXPECT_BAD(x->b[lay.sid] = 0xff);          /* session id past the end */
    EXPECT_BAD(set16(x, lay.ciphers, 0xfffe)); /* cipher suites past the end */
    EXPECT_BAD(set16(x, lay.ciphers, 7));      /* odd cipher suites length */
    EXPECT_BAD(set16(x, lay.ciphers, 0));      /* no cipher suites */
    EXPECT_BAD(x->b[lay.comp] = 0);            /* no compression method */
    EXPECT_BAD(x->b[lay.comp] = 0xff);         /* compression past the end */
    EXPECT_BAD(set16(x, lay.exts, (unsigned)(x->b[lay.exts] << 8 | x->b[lay.exts + 1]) + 1)); /* one too many */
    EXPECT_BAD(set16(x, lay.exts, 0xffff));                        /* extensions past the end */
    EXPECT_BAD(set16(x, lay.sni + 2, 0xffff));                     /* server_name past the extensions */
    EXPECT_BAD(set16(x, lay.sni + 4, (unsigned)l + 4));            /* name list longer than the extension */
    EXPECT_BAD(set16(x, lay.sni + 7, (unsigned)l + 1));            /* name past the list */
    EXPECT_BAD(set16(x, lay.sni + 7, 0));                          /* empty name */
    EXPECT_BAD(x->b[lay.sni + 9] = 0);                             /* NUL in the name */
    EXPECT_BAD((x->b[3] = 0, x->b[4] = 0));                        /* empty record */
    EXPECT_BAD((x->b[3] = 0x48, x->b[4] = 0x01));                  /* record longer than TLS allows */
    EXPECT_BAD((x->b[6] = 0x01, x->b[7] = 0x00, x->b[8] = 0x00));  /* a 64 KiB handshake */
    EXPECT_BAD((x->b[6] = 0, x->b[7] = 0, x->b[8] = 0, x->n = 9)); /* empty ClientHello */
#undef EXPECT_BAD
    /* A handshake length beyond the record is a hello still arriving. */
    x = hello_for(name, 0, &lay);
    x->b[8] = (uint8_t)(x->b[8] + 1);
    ck_assert_int_eq(sniff(x->b, x->n, &o), IPB_SNIFF_MORE);
}
END_TEST

START_TEST(tls_other_handshake_or_record) {
    hello_layout lay;
    ipb_sniff o;
    bytes *x = hello_for("a.test", 0, &lay);
    x->b[5] = 2; /* a ServerHello */
    ck_assert_int_eq(sniff(x->b, x->n, &o), IPB_SNIFF_BAD);
    ck_assert_ptr_nonnull(strstr(o.why, "ClientHello"));
    ck_assert_int_eq(sniff(x->b, 9, &o), IPB_SNIFF_BAD); /* decided from the handshake header */
    /* 0x16 then not 3: not TLS at all. */
    static const uint8_t not_tls[] = {0x16, 0x02, 0x00, 0x00};
    ck_assert_int_eq(sniff(not_tls, sizeof(not_tls), &o), IPB_SNIFF_OTHER);
    ck_assert_int_eq(sniff(not_tls, 1, &o), IPB_SNIFF_MORE);
    /* Application data first: not a handshake, so only the address decides. */
    static const uint8_t appdata[] = {0x17, 0x03, 0x03, 0x00, 0x02, 0x01, 0x02};
    ck_assert_int_eq(sniff(appdata, sizeof(appdata), &o), IPB_SNIFF_OTHER);
}
END_TEST

START_TEST(tls_too_large) {
    /* A hello announced at 30000 bytes sent in 1-byte records never completes within
     * IPB_SNIFF_MAX bytes. */
    static uint8_t buf[IPB_SNIFF_MAX];
    static const uint8_t hs_header[] = {1, 0x00, 0x75, 0x30};
    size_t n = 0, i = 0;
    while (n + 6 <= sizeof(buf)) {
        buf[n] = 0x16;
        buf[n + 1] = 3;
        buf[n + 2] = 1;
        buf[n + 3] = 0;
        buf[n + 4] = 1;
        buf[n + 5] = i < 4 ? hs_header[i] : 0x42;
        n += 6;
        i++;
    }
    ipb_sniff o;
    ck_assert_int_eq(sniff(buf, n, &o), IPB_SNIFF_MORE);
    memset(buf + n, 0x16, sizeof(buf) - n);
    ck_assert_int_eq(sniff(buf, sizeof(buf), &o), IPB_SNIFF_BAD);
    ck_assert_ptr_nonnull(strstr(o.why, "too large"));
}
END_TEST

/* ---- sniffed names and the decision (policy/egress.c): the name the client uses decides */

/* The DNS stub gave 192.0.2.10 out for a.test, the one allowed name. */
static const char *stub_recall(void *ctx, const ipb_addr *a) {
    (void)ctx;
    ipb_addr given;
    ck_assert(ipb_addr_parse("192.0.2.10", 10, &given));
    return ipb_addr_equal(a, &given) ? "a.test" : NULL;
}
static bool stub_gave(void *ctx, const ipb_addr *a, const char *name) {
    const char *n = stub_recall(ctx, a);
    return n && !strcmp(n, name);
}

/* Sniffs bytes dialled at the stub's address for a.test and decides them. */
static enum ipb_egress_route judge(const void *p, size_t n, const ipb_addr *dialled, ipb_sniff *o,
                                   ipb_egress_verdict *v) {
    static const char *const entries[] = {"a.test", NULL};
    static ipb_egress_policy pol;
    if (!pol.n_rules)
        for (const char *const *e = entries; *e; e++) {
            ipb_error *err = NULL;
            ck_assert_int_eq(ipb_egress_add_rule(&pol, *e, &err), 0);
        }
    enum ipb_sniff_kind k = sniff(p, n, o);
    ck_assert_msg(k != IPB_SNIFF_MORE && k != IPB_SNIFF_BAD, "sniffed %d", k);
    const ipb_egress_memo memo = {stub_recall, stub_gave, NULL};
    ipb_egress_decide(&pol, o->host, dialled, &memo, v);
    return v->route;
}

START_TEST(sniffed_names_decide) {
    ipb_addr stub;
    ck_assert(ipb_addr_parse("192.0.2.10", 10, &stub));
    ipb_sniff o;
    ipb_egress_verdict v;
    hello_layout lay;
    /* TLS: a server name that is not allowed, at the allowed name's address. */
    bytes *x = hello_for("other.test", 0, &lay);
    ck_assert_int_eq(judge(x->b, x->n, &stub, &o, &v), IPB_EGRESS_REFUSE);
    ck_assert_str_eq(v.name, "other.test");
    x = hello_for("a.test", 0, &lay);
    ck_assert_int_eq(judge(x->b, x->n, &stub, &o, &v), IPB_EGRESS_TO_ADDR);
    /* TLS without a server name: the address decides. */
    static bytes y;
    hello_records(&y, NULL, 0, 0, 0, &lay);
    ck_assert_int_eq(judge(y.b, y.n, &stub, &o, &v), IPB_EGRESS_TO_ADDR);
    ck_assert_str_eq(v.name, "a.test");
    /* HTTP: the Host (or absolute URI) likewise; HTTP/1.0 without Host: the address. */
    const char *h = "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n";
    ck_assert_int_eq(judge(h, strlen(h), &stub, &o, &v), IPB_EGRESS_REFUSE);
    h = "GET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n";
    ck_assert_int_eq(judge(h, strlen(h), &stub, &o, &v), IPB_EGRESS_REFUSE);
    h = "GET / HTTP/1.1\r\nHost: a.test:80\r\n\r\n";
    ck_assert_int_eq(judge(h, strlen(h), &stub, &o, &v), IPB_EGRESS_TO_ADDR);
    h = "GET / HTTP/1.0\r\n\r\n";
    ck_assert_int_eq(judge(h, strlen(h), &stub, &o, &v), IPB_EGRESS_TO_ADDR);
    /* An address literal as the Host: judged as that address. */
    h = "GET / HTTP/1.1\r\nHost: 198.51.100.1\r\n\r\n";
    ck_assert_int_eq(judge(h, strlen(h), &stub, &o, &v), IPB_EGRESS_REFUSE);
    ck_assert_int_ne(v.addr.family, 0);
    /* Two Host headers never get as far as a decision. */
    ck_assert_int_eq(sniff_str("GET / HTTP/1.1\r\nHost: a.test\r\nHost: other.test\r\n\r\n", &o), IPB_SNIFF_BAD);
}
END_TEST

START_TEST(connect_tunnel_is_judged_again) {
    /* An allowed CONNECT authority, then a ClientHello for another name through the tunnel:
     * the proxy sniffs the tunnel's first bytes as a connection of their own (no dialled
     * address: it goes to the authority's checked address), and refuses. */
    ipb_sniff o;
    ipb_egress_verdict v;
    hello_layout lay;
    const char *head = "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n";
    static bytes all;
    all.n = 0;
    putmem(&all, head, strlen(head));
    bytes *x = hello_for("other.test", 0, &lay);
    putmem(&all, x->b, x->n);
    ck_assert_int_eq(judge(all.b, all.n, NULL, &o, &v), IPB_EGRESS_TO_NAME);
    ck_assert_str_eq(v.name, "a.test");
    ck_assert_uint_eq(o.head_len, strlen(head));
    size_t head_len = o.head_len;
    ck_assert_int_eq(judge(all.b + head_len, all.n - head_len, NULL, &o, &v), IPB_EGRESS_REFUSE);
    ck_assert_int_eq(o.kind, IPB_SNIFF_TLS);
    ck_assert_str_eq(v.name, "other.test");
    /* The same name inside: allowed; plain HTTP inside: its Host is judged. */
    x = hello_for("a.test", 0, &lay);
    ck_assert_int_eq(judge(x->b, x->n, NULL, &o, &v), IPB_EGRESS_TO_NAME);
    const char *h = "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n";
    ck_assert_int_eq(judge(h, strlen(h), NULL, &o, &v), IPB_EGRESS_REFUSE);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sniff");
    TCase *c = tcase_create("sniff");
    tcase_add_test(c, tls_sni);
    tcase_add_test(c, tls_without_server_name);
    tcase_add_test(c, tls_hello_across_records);
    tcase_add_test(c, tls_every_prefix_is_more);
    tcase_add_test(c, tls_real_openssl_hello);
    tcase_add_test(c, tls_two_server_names);
    tcase_add_test(c, tls_lengths_that_overrun);
    tcase_add_test(c, tls_other_handshake_or_record);
    tcase_add_test(c, tls_too_large);
    tcase_add_test(c, sniffed_names_decide);
    tcase_add_test(c, connect_tunnel_is_judged_again);
    suite_add_tcase(s, c);
    return ipb_run_suite(s);
}
