/* proxy/sniff.c and proxy/dnswire.c: what a connection's first bytes say (TLS ClientHello,
 * HTTP/1.x request, CONNECT) and the DNS stub's wire format. Every input is copied into a
 * heap buffer of exactly its size, so a sanitizer build catches a read past the end. */
#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
#include "dnswire.h"
#include "sniff.h"

static enum ipb_sniff_kind sniff(const void *p, size_t n, ipb_sniff *o) {
    uint8_t *copy = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, p, n);
    enum ipb_sniff_kind k = ipb_sniff_bytes(copy, n, o);
    free(copy);
    ck_assert_int_eq(o->kind, k);
    if (k == IPB_SNIFF_BAD)
        ck_assert_msg(o->why && o->why[0], "BAD without a why");
    return k;
}

static enum ipb_sniff_kind sniff_str(const char *s, ipb_sniff *o) { return sniff(s, strlen(s), o); }

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
    0x16, 0x03, 0x01, 0x01, 0x39, 0x01, 0x00, 0x01, 0x35, 0x03, 0x03, 0x5f, 0x57, 0xbd, 0x57, 0xf2,
    0x51, 0x68, 0x68, 0x72, 0x62, 0xd5, 0x9d, 0x91, 0x69, 0x54, 0xfb, 0x1d, 0x25, 0xb6, 0x1d, 0xd3,
    0x5a, 0xe2, 0xce, 0x21, 0x51, 0x1c, 0x6d, 0xe1, 0x72, 0x75, 0xf9, 0x20, 0xdf, 0xcb, 0xed, 0xa3,
    0x0e, 0xc3, 0xb4, 0x78, 0x8c, 0x95, 0xd3, 0x82, 0xe1, 0xcc, 0x30, 0xff, 0x35, 0x28, 0xca, 0x20,
    0x45, 0xef, 0x25, 0x62, 0xe4, 0x02, 0x0b, 0x15, 0xd2, 0xf7, 0x6d, 0xee, 0x00, 0x3e, 0x13, 0x02,
    0x13, 0x03, 0x13, 0x01, 0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
    0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b, 0xc0, 0x23, 0xc0, 0x27,
    0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39, 0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d,
    0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xae,
    0x00, 0x00, 0x00, 0x11, 0x00, 0x0f, 0x00, 0x00, 0x0c, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65,
    0x2e, 0x74, 0x65, 0x73, 0x74, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00,
    0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x01, 0x00, 0x01,
    0x01, 0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00,
    0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08,
    0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04,
    0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06,
    0x02, 0x00, 0x2b, 0x00, 0x09, 0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01, 0x00, 0x2d,
    0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20, 0x21, 0xef,
    0xf8, 0x04, 0x89, 0xc7, 0x2b, 0x0a, 0x80, 0x06, 0xc3, 0xcb, 0x20, 0x07, 0xa5, 0x45, 0xd1, 0xf2,
    0x93, 0x48, 0x91, 0x71, 0xd3, 0xfa, 0xe7, 0x22, 0x65, 0x57, 0xe8, 0x6e, 0xc8, 0x57,
};

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
    static const char *const named[] = {"PROPFIND / HTTP/1.1\r\nHost: b.example\r\n\r\n",
                                        "get / HTTP/1.1\r\nHost: b.example\r\n\r\n",
                                        "\tGET / HTTP/1.1\r\nHost: b.example\r\n\r\n",
                                        " \r\nGET / HTTP/1.1\r\nHost: b.example\r\n\r\n",
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
#define EXPECT_BAD(mutation)                                                                        \
    do {                                                                                            \
        x = hello_for(name, 0, &lay);                                                               \
        mutation;                                                                                   \
        ck_assert_msg(sniff(x->b, x->n, &o) == IPB_SNIFF_BAD, "%s: kind %d", #mutation, o.kind); \
    } while (0)
    EXPECT_BAD(x->b[lay.sid] = 33);                         /* session id longer than 32 */
    EXPECT_BAD(x->b[lay.sid] = 0xff);                       /* session id past the end */
    EXPECT_BAD(set16(x, lay.ciphers, 0xfffe));              /* cipher suites past the end */
    EXPECT_BAD(set16(x, lay.ciphers, 7));                   /* odd cipher suites length */
    EXPECT_BAD(set16(x, lay.ciphers, 0));                   /* no cipher suites */
    EXPECT_BAD(x->b[lay.comp] = 0);                         /* no compression method */
    EXPECT_BAD(x->b[lay.comp] = 0xff);                      /* compression past the end */
    EXPECT_BAD(set16(x, lay.exts, (unsigned)(x->b[lay.exts] << 8 | x->b[lay.exts + 1]) + 1)); /* one too many */
    EXPECT_BAD(set16(x, lay.exts, 0xffff));                 /* extensions past the end */
    EXPECT_BAD(set16(x, lay.sni + 2, 0xffff));              /* server_name past the extensions */
    EXPECT_BAD(set16(x, lay.sni + 4, (unsigned)l + 4));     /* name list longer than the extension */
    EXPECT_BAD(set16(x, lay.sni + 7, (unsigned)l + 1));     /* name past the list */
    EXPECT_BAD(set16(x, lay.sni + 7, 0));                   /* empty name */
    EXPECT_BAD(x->b[lay.sni + 9] = 0);                      /* NUL in the name */
    EXPECT_BAD((x->b[3] = 0, x->b[4] = 0));                 /* empty record */
    EXPECT_BAD((x->b[3] = 0x48, x->b[4] = 0x01));           /* record longer than TLS allows */
    EXPECT_BAD((x->b[6] = 0x01, x->b[7] = 0x00, x->b[8] = 0x00)); /* a 64 KiB handshake */
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

/* ---- HTTP ---- */

START_TEST(http_host) {
    ipb_sniff o;
    ck_assert_int_eq(sniff_str("GET /index.html HTTP/1.1\r\nUser-Agent: t\r\nHost: Example.Test\r\nAccept: */*\r\n\r\n", &o),
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
    static const char *const more[] = {"G", "GE", "GET", "CONN", "CONNECT", "OPTIONS", "DELE", "GET ",
                                       "GET / HTTP/1.1\r\nHost: a.test\r\n",
                                       "GET / HTTP/1.1\r\nHost: a.test\r\n\r", "GETX", "X", "CONNECTX",
                                       "ABCDEFGHIJ", "get / HTTP/1.1", "EHLO mail.example"};
    for (size_t i = 0; i < sizeof(more) / sizeof(*more); i++)
        ck_assert_msg(sniff_str(more[i], &o) == IPB_SNIFF_MORE, "kind %d for %s", o.kind, more[i]);
    static const char *const other[] = {"GET/", "SSH-2.0-OpenSSH_9.2p1\r\n", "EHLO mail.example\r\n",
                                        "PING\r\n", "get foo\r\n", "*1\r\n$4\r\nPING\r\n"};
    for (size_t i = 0; i < sizeof(other) / sizeof(*other); i++)
        ck_assert_msg(sniff_str(other[i], &o) == IPB_SNIFF_OTHER, "kind %d for %s", o.kind, other[i]);
    /* Request lines of any method and case, after blanks: requests, judged (here: no Host);
     * cleartext HTTP/2's preface names nothing that can be read: refused, not waved through. */
    static const char *const bad[] = {"GETS / HTTP/1.1\r\n\r\n", "get / HTTP/1.1\r\n\r\n",
                                      " GET / HTTP/1.1\r\n\r\n", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"};
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
            ck_assert_msg(sniff(buf, cut, &o) == IPB_SNIFF_MORE, "kind %d for a %zu-byte method cut at %zu",
                          o.kind, ml, cut);
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
    static const char *const bad[] = {"GET\t/\tHTTP/1.1\r\nHost: b.example\r\n\r\n",
                                      "GET\t/ HTTP/1.1\r\nHost: b.example\r\n\r\n",
                                      "GET\v/ HTTP/1.1\r\nHost: b.example\r\n\r\n",
                                      "PROPFIND\f/\fhttp/1.1\r\nHost: b.example\r\n\r\n",
                                      "FOO /\tHTTP/1.1\r\nHost: b.example\r\n\r\n",
                                      "GET\r/ HTTP/1.1\r\nHost: b.example\r\n\r\n",
                                      "GET\x1c/\x1fHTTP/1.1\r\nHost: b.example\r\n\r\n",
                                      "GET\xa0/ HTTP/1.1\r\nHost: b.example\r\n\r\n",
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
    snprintf(with_tls, sizeof(with_tls), "%s\x16\x03\x01\x01\x05" "trailing bytes", head);
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
    static const char *const bad[] = {"",           ":80",         "[]",          "[]:80",     "[::1",
                                      "[::1]80",     "[::1]:",      "::1",         "a.test:",   "a.test:0",
                                      "a.test:65536", "a.test:000080", "a.test:8o",   "a.test:-1", "a.test: 80",
                                      "a b",         "a/b",         "u@a.test",    "a\x7f",     "a\x80.test",
                                      "a:1:2",       "[::1]:1:2",   "a.test:99999"};
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

/* ---- DNS ---- */

typedef struct msg {
    uint8_t b[600];
    size_t n;
} msg;

static void m8(msg *m, unsigned v) { m->b[m->n++] = (uint8_t)v; }
static void m16(msg *m, unsigned v) {
    m8(m, v >> 8);
    m8(m, v & 0xff);
}

static void dns_header(msg *m, unsigned id, unsigned flags, unsigned qd, unsigned an, unsigned ns, unsigned ar) {
    m->n = 0;
    m16(m, id);
    m16(m, flags);
    m16(m, qd);
    m16(m, an);
    m16(m, ns);
    m16(m, ar);
}

/* A dotted name as labels (no escapes), then the root. */
static void dns_name(msg *m, const char *name) {
    while (*name) {
        size_t l = strcspn(name, ".");
        m8(m, (unsigned)l);
        memcpy(m->b + m->n, name, l);
        m->n += l;
        name += l;
        if (*name == '.')
            name++;
    }
    m8(m, 0);
}

static msg query(unsigned id, const char *name, unsigned qtype) {
    msg m;
    dns_header(&m, id, 0x0100, 1, 0, 0, 0);
    dns_name(&m, name);
    m16(&m, qtype);
    m16(&m, IPB_DNS_CLASS_IN);
    return m;
}

static int parse(const msg *m, ipb_dns_query *q, int *rcode) {
    uint8_t *copy = malloc(m->n ? m->n : 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, m->b, m->n);
    int r = ipb_dns_parse_query(copy, m->n, q, rcode);
    free(copy);
    return r;
}

static ipb_addr addr(const char *s) {
    ipb_addr a;
    ck_assert_msg(ipb_addr_parse(s, strlen(s), &a), "not an address: %s", s);
    return a;
}

static unsigned get16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }

START_TEST(dns_parse_query) {
    msg m = query(0xbeef, "Example.TEST.", IPB_DNS_A);
    ipb_dns_query q;
    int rcode = -1;
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ck_assert_int_eq(rcode, IPB_DNS_NOERROR);
    ck_assert_uint_eq(q.id, 0xbeef);
    ck_assert_uint_eq(q.flags, 0x0100);
    ck_assert(q.name_ok);
    ck_assert_str_eq(q.name, "example.test");
    ck_assert_uint_eq(q.qtype, IPB_DNS_A);
    ck_assert_uint_eq(q.qclass, IPB_DNS_CLASS_IN);
    ck_assert_uint_eq(q.question_len, m.n - 12);
    ck_assert_mem_eq(q.question, m.b + 12, q.question_len);
    /* An EDNS OPT record in the additional section is fine. */
    m = query(1, "a.test", IPB_DNS_AAAA);
    m.b[11] = 1;
    static const uint8_t opt[] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0};
    memcpy(m.b + m.n, opt, sizeof(opt));
    m.n += sizeof(opt);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ck_assert_str_eq(q.name, "a.test");
    ck_assert_uint_eq(q.qtype, IPB_DNS_AAAA);
    ck_assert_uint_eq(q.question_len, strlen("a.test") + 2 + 4);
}
END_TEST

START_TEST(dns_dropped_and_refused) {
    ipb_dns_query q;
    int rcode;
    msg m = query(7, "a.test", IPB_DNS_A);
    m.b[2] |= 0x80; /* a response */
    ck_assert_int_eq(parse(&m, &q, &rcode), -1);
    for (size_t n = 0; n < 12; n++) {
        msg s = m;
        s.n = n;
        ck_assert_int_eq(parse(&s, &q, &rcode), -1);
    }
    /* Two questions. */
    m = query(7, "a.test", IPB_DNS_A);
    m.b[5] = 2;
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    ck_assert_uint_eq(q.id, 7);
    ck_assert_uint_eq(q.question_len, 0);
    /* No question; answers or authorities in a query. */
    m.b[5] = 0;
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    m = query(7, "a.test", IPB_DNS_A);
    m.b[7] = 1;
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    m = query(7, "a.test", IPB_DNS_A);
    m.b[9] = 1;
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    /* Opcodes other than QUERY (IQUERY, STATUS, NOTIFY, UPDATE). */
    static const unsigned opcodes[] = {1, 2, 4, 5, 15};
    for (size_t i = 0; i < sizeof(opcodes) / sizeof(*opcodes); i++) {
        m = query(9, "a.test", IPB_DNS_A);
        m.b[2] = (uint8_t)(m.b[2] | opcodes[i] << 3);
        ck_assert_int_eq(parse(&m, &q, &rcode), 1);
        ck_assert_int_eq(rcode, IPB_DNS_NOTIMP);
        ck_assert_uint_eq(q.id, 9);
    }
}
END_TEST

START_TEST(dns_bad_names) {
    ipb_dns_query q;
    int rcode;
    msg m;
    /* A label longer than 63. */
    char label[70];
    memset(label, 'a', 64);
    strcpy(label + 64, ".t");
    m = query(1, label, IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    /* The name runs past the end; the question stops short. */
    m = query(1, "abc.test", IPB_DNS_A);
    for (size_t n = 12; n < m.n; n++) {
        msg s = m;
        s.n = n;
        ck_assert_msg(parse(&s, &q, &rcode) == 1 && rcode == IPB_DNS_FORMERR, "length %zu", n);
    }
    /* A compression pointer (and the reserved label types). */
    static const unsigned tops[] = {0xc0, 0x80, 0x40};
    for (size_t i = 0; i < sizeof(tops) / sizeof(*tops); i++) {
        dns_header(&m, 1, 0, 1, 0, 0, 0);
        m8(&m, 1);
        m8(&m, 'a');
        m8(&m, tops[i]);
        m8(&m, 12);
        m16(&m, IPB_DNS_A);
        m16(&m, IPB_DNS_CLASS_IN);
        ck_assert_int_eq(parse(&m, &q, &rcode), 1);
        ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    }
    /* Labels with a space or a dot byte, non-ASCII: parsed, but not a host name. */
    static const char *const odd[] = {"\003a b\004test", "\003a.b\004test", "\003a\200b\004test", "\001*\004test"};
    for (size_t i = 0; i < sizeof(odd) / sizeof(*odd); i++) {
        dns_header(&m, 1, 0, 1, 0, 0, 0);
        memcpy(m.b + m.n, odd[i], strlen(odd[i]) + 1);
        m.n += strlen(odd[i]) + 1;
        m16(&m, IPB_DNS_A);
        m16(&m, IPB_DNS_CLASS_IN);
        ck_assert_int_eq(parse(&m, &q, &rcode), 0);
        ck_assert_msg(!q.name_ok, "name_ok for %zu", i);
        ck_assert_uint_eq(q.question_len, strlen(odd[i]) + 1 + 4);
    }
    /* The root, and an address in disguise. */
    m = query(1, "", IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ck_assert(!q.name_ok);
    ck_assert_uint_eq(q.question_len, 5);
    m = query(1, "1.2.3.4", IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ck_assert(!q.name_ok);
}
END_TEST

/* labels of 63, 63, 63 and `last` bytes: a name of 192 + last characters. */
static msg long_query(size_t last, unsigned qtype) {
    char name[300];
    size_t n = 0;
    size_t ls[4] = {63, 63, 63, last};
    for (size_t i = 0; i < 4; i++) {
        if (i)
            name[n++] = '.';
        memset(name + n, 'a' + (int)i, ls[i]);
        n += ls[i];
    }
    name[n] = '\0';
    return query(0x1234, name, qtype);
}

START_TEST(dns_longest_name) {
    ipb_dns_query q;
    int rcode;
    /* 253 characters: 255 bytes on the wire, the most RFC 1035 allows. */
    msg m = long_query(61, IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ck_assert(q.name_ok);
    ck_assert_uint_eq(strlen(q.name), IPB_NAME_MAX);
    ck_assert_uint_eq(q.question_len, 255 + 4);
    ck_assert_uint_le(q.question_len, sizeof(q.question));
    ck_assert_mem_eq(q.question, m.b + 12, q.question_len);
    /* 254 characters (256 bytes on the wire) is too long, and must not overflow question. */
    m = long_query(62, IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    ck_assert_uint_eq(q.question_len, 0);
    m = long_query(63, IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
}
END_TEST

START_TEST(dns_answer_a) {
    msg m = query(0xabcd, "a.test", IPB_DNS_A);
    ipb_dns_query q;
    int rcode;
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ipb_addr addrs[3] = {addr("192.0.2.1"), addr("2001:db8::1"), addr("198.51.100.7")};
    uint8_t out[512];
    size_t n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 0x01020304, out, sizeof(out));
    size_t qend = 12 + q.question_len;
    ck_assert_uint_eq(n, qend + 2 * 16);
    ck_assert_uint_eq(get16(out), 0xabcd);
    ck_assert_uint_eq(get16(out + 2), 0x8180); /* QR, RD copied, RA, NOERROR */
    ck_assert_uint_eq(get16(out + 4), 1);
    ck_assert_uint_eq(get16(out + 6), 2);
    ck_assert_uint_eq(get16(out + 8), 0);
    ck_assert_uint_eq(get16(out + 10), 0);
    ck_assert_mem_eq(out + 12, m.b + 12, q.question_len);
    static const uint8_t rr1[] = {0xc0, 0x0c, 0, 1, 0, 1, 1, 2, 3, 4, 0, 4, 192, 0, 2, 1};
    static const uint8_t rr2[] = {0xc0, 0x0c, 0, 1, 0, 1, 1, 2, 3, 4, 0, 4, 198, 51, 100, 7};
    ck_assert_mem_eq(out + qend, rr1, sizeof(rr1));
    ck_assert_mem_eq(out + qend + 16, rr2, sizeof(rr2));
    /* RD not asked: not set. */
    m.b[2] = 0;
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 60, out, sizeof(out));
    ck_assert_uint_eq(get16(out + 2), 0x8080);
    ck_assert_uint_eq(get16(out + 6), 2);
    /* Too small for the question: nothing. Too small for the answers: fewer. */
    ck_assert_uint_eq(ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 60, out, qend - 1), 0);
    n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 60, out, qend + 16 + 15);
    ck_assert_uint_eq(n, qend + 16);
    ck_assert_uint_eq(get16(out + 6), 1);
}
END_TEST

START_TEST(dns_answer_aaaa_nxdomain_and_others) {
    msg m = query(0x0102, "v6.test", IPB_DNS_AAAA);
    ipb_dns_query q;
    int rcode;
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ipb_addr addrs[3] = {addr("192.0.2.1"), addr("2001:db8::1"), addr("::ffff:192.0.2.9")};
    uint8_t out[512];
    size_t qend = 12 + q.question_len;
    size_t n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 300, out, sizeof(out));
    ck_assert_uint_eq(n, qend + 28);
    ck_assert_uint_eq(get16(out + 6), 1);
    static const uint8_t rr[] = {0xc0, 0x0c, 0, 28, 0, 1, 0, 0, 1, 44, 0, 16};
    ck_assert_mem_eq(out + qend, rr, sizeof(rr));
    ck_assert_mem_eq(out + qend + 12, addrs[1].b, 16);
    /* NXDOMAIN: the question, no answers. */
    n = ipb_dns_build_answer(&q, IPB_DNS_NXDOMAIN, addrs, 3, 300, out, sizeof(out));
    ck_assert_uint_eq(n, qend);
    ck_assert_uint_eq(get16(out + 2), 0x8183);
    ck_assert_uint_eq(get16(out + 4), 1);
    ck_assert_uint_eq(get16(out + 6), 0);
    /* No address of the family: NOERROR, no answers. */
    n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 1, 300, out, sizeof(out));
    ck_assert_uint_eq(n, qend);
    ck_assert_uint_eq(get16(out + 6), 0);
    /* Other types (MX) and classes (CH): no answers. */
    m = query(3, "v6.test", 15);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 300, out, sizeof(out));
    ck_assert_uint_eq(get16(out + 6), 0);
    ck_assert_uint_eq(n, 12 + q.question_len);
    m = query(3, "v6.test", IPB_DNS_A);
    m.b[m.n - 1] = 3;
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 300, out, sizeof(out));
    ck_assert_uint_eq(get16(out + 6), 0);
    /* FORMERR for a message with two questions: the header alone. */
    m = query(0x4242, "v6.test", IPB_DNS_A);
    m.b[5] = 2;
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    n = ipb_dns_build_answer(&q, rcode, addrs, 3, 300, out, sizeof(out));
    ck_assert_uint_eq(n, 12);
    ck_assert_uint_eq(get16(out), 0x4242);
    ck_assert_uint_eq(get16(out + 2), 0x8181);
    ck_assert_uint_eq(get16(out + 4), 0);
}
END_TEST

START_TEST(dns_answers_capped) {
    ipb_addr addrs[40];
    char text[32];
    for (int i = 0; i < 20; i++) {
        snprintf(text, sizeof(text), "192.0.2.%d", i + 1);
        addrs[i] = addr(text);
        snprintf(text, sizeof(text), "2001:db8::%d", i + 1);
        addrs[20 + i] = addr(text);
    }
    ipb_dns_query q;
    int rcode;
    uint8_t out[1024];
    msg m = query(5, "a.test", IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    size_t n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 40, 60, out, sizeof(out));
    ck_assert_uint_eq(get16(out + 6), IPB_DNS_MAX_ANSWERS);
    ck_assert_uint_eq(n, 12 + q.question_len + IPB_DNS_MAX_ANSWERS * 16);
    ck_assert_uint_le(n, 512);
    m = query(5, "a.test", IPB_DNS_AAAA);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 40, 60, out, sizeof(out));
    ck_assert_uint_le(n, 512);
    ck_assert_uint_eq(get16(out + 6), IPB_DNS_MAX_ANSWERS);
    ck_assert_uint_eq(n, 12 + q.question_len + IPB_DNS_MAX_ANSWERS * 28);
    /* The longest name: 512 bytes still bound the answer even with a larger buffer. */
    for (unsigned t = 0; t < 2; t++) {
        m = long_query(61, t ? IPB_DNS_AAAA : IPB_DNS_A);
        ck_assert_int_eq(parse(&m, &q, &rcode), 0);
        n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 40, 60, out, sizeof(out));
        ck_assert_uint_le(n, 512);
        size_t rr = t ? 28 : 16, fit = (512 - 12 - q.question_len) / rr;
        ck_assert_uint_lt(fit, IPB_DNS_MAX_ANSWERS);
        ck_assert_uint_eq(get16(out + 6), fit);
        ck_assert_uint_eq(n, 12 + q.question_len + get16(out + 6) * rr);
    }
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
    tcase_add_test(c, http_after_empty_lines);
    tcase_add_test(c, http_lenient_forms_are_judged);
    tcase_add_test(c, http_long_method_or_line_is_judged);
    tcase_add_test(c, http_other_whitespace_in_request_line);
    tcase_add_test(c, tls_without_server_name);
    tcase_add_test(c, tls_hello_across_records);
    tcase_add_test(c, tls_every_prefix_is_more);
    tcase_add_test(c, tls_real_openssl_hello);
    tcase_add_test(c, tls_two_server_names);
    tcase_add_test(c, tls_lengths_that_overrun);
    tcase_add_test(c, tls_other_handshake_or_record);
    tcase_add_test(c, tls_too_large);
    tcase_add_test(c, http_host);
    tcase_add_test(c, http_absolute_form);
    tcase_add_test(c, http_ambiguous_or_malformed);
    tcase_add_test(c, http_incomplete_and_other);
    tcase_add_test(c, http_head_too_large);
    tcase_add_test(c, connect_authority);
    tcase_add_test(c, connect_bad_authority);
    tcase_add_test(c, split_authority);
    tcase_add_test(c, sniffed_names_decide);
    tcase_add_test(c, connect_tunnel_is_judged_again);
    suite_add_tcase(s, c);
    TCase *d = tcase_create("dnswire");
    tcase_add_test(d, dns_parse_query);
    tcase_add_test(d, dns_dropped_and_refused);
    tcase_add_test(d, dns_bad_names);
    tcase_add_test(d, dns_longest_name);
    tcase_add_test(d, dns_answer_a);
    tcase_add_test(d, dns_answer_aaaa_nxdomain_and_others);
    tcase_add_test(d, dns_answers_capped);
    suite_add_tcase(s, d);
    return ipb_run_suite(s);
}
