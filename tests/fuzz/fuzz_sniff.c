/* libFuzzer harness: the proxy's first-bytes sniffer (proxy/sniff.c).
 *
 * The input, in an exact-size heap buffer (so ASan sees any read past len), goes to
 * ipb_sniff_bytes, and so do a few of its prefixes; it also goes to ipb_sniff_split_authority.
 * Invariants:
 * - the kind is one of the enum and equals out->kind; BAD always says why; host is
 *   NUL-terminated within IPB_NAME_MAX; MORE and OTHER name no host and no port;
 * - TLS has no port and no head_len; HTTP and CONNECT hosts are what split_authority accepts
 *   (no space, control, '/', '@' or DEL bytes), and their heads have no NUL and no CR or LF
 *   outside CRLF pairs (so a lenient server sees the same lines, hence the same Host); CONNECT
 *   has a host, a port and a head_len <= len that ends with the blank line; only CONNECT has
 *   a head_len. The blanks before a request line (LF and what lenient_space names), which
 *   servers skip and so does the sniffer, are not part of the head: they hold no line a
 *   server reads;
 * - a first line that a lenient server reads as a request (Python's http.server: split at any
 *   Latin-1 whitespace into three words, the last starting "HTTP/") is never OTHER, which
 *   would let the dialled address decide and the name pass unread;
 * - a decision is final: when a prefix gives anything but MORE, the whole input gives the same
 *   result (kind, host, port, head_len, why). This holds while the input is shorter than
 *   IPB_SNIFF_MAX (the proxy never passes more): at that size "too large" may replace MORE;
 * - an authority split_authority accepts has a host shorter than host_size and a port of 0 or
 *   1-65535, and formatting it back ("[v6]:port") splits to the same host and port.
 *
 * FUZZ_SOURCES: proxy/sniff.c
 * FUZZ_PKGS:
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sniff.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_sniff: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                     \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool authority_char(char c) { return (uint8_t)c > ' ' && (uint8_t)c < 0x7f && c != '/' && c != '@'; }

/* Whitespace to RFC 9112's lenient request-line parsing and to Python's str.split (Latin-1). */
static bool lenient_space(uint8_t c) {
    return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' || (c >= 0x1c && c <= 0x1f) || c == 0x85 ||
           c == 0xa0;
}

static bool tchar(uint8_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The first line, up to its LF, as Python's http.server reads it: three words split at
 * whitespace, a token method and a version starting "HTTP/". */
static bool lenient_request_line(const uint8_t *data, size_t n) {
    const uint8_t *nl = memchr(data, '\n', n);
    if (!nl)
        return false;
    const uint8_t *w[4], *we[4];
    size_t nw = 0;
    for (const uint8_t *p = data; p < nl;) {
        while (p < nl && lenient_space(*p))
            p++;
        if (p == nl)
            break;
        if (nw == 4)
            return false;
        w[nw] = p;
        while (p < nl && !lenient_space(*p))
            p++;
        we[nw++] = p;
    }
    if (nw != 3 || we[2] - w[2] < 5 || memcmp(w[2], "HTTP/", 5))
        return false;
    for (const uint8_t *p = w[0]; p < we[0]; p++)
        if (!tchar(*p))
            return false;
    return true;
}

static enum ipb_sniff_kind sniff_exact(const uint8_t *data, size_t n, ipb_sniff *o) {
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact)
        abort();
    memcpy(exact, data, n);
    /* Garbage in the result must not survive: every field is set by ipb_sniff_bytes. */
    memset(o, 0xa5, sizeof(*o));
    enum ipb_sniff_kind k = ipb_sniff_bytes(exact, n, o);
    free(exact);

    CHECK(k >= IPB_SNIFF_MORE && k <= IPB_SNIFF_BAD);
    CHECK(o->kind == k);
    size_t hl = strnlen(o->host, sizeof(o->host));
    CHECK(hl <= IPB_NAME_MAX);
    if (k == IPB_SNIFF_BAD)
        CHECK(o->why && o->why[0]);
    if (k == IPB_SNIFF_MORE || k == IPB_SNIFF_OTHER)
        CHECK(hl == 0 && o->port == 0);
    if (k != IPB_SNIFF_CONNECT)
        CHECK(o->head_len == 0);
    if (k == IPB_SNIFF_TLS)
        CHECK(o->port == 0);
    if (k == IPB_SNIFF_HTTP || k == IPB_SNIFF_CONNECT)
        for (size_t i = 0; i < hl; i++)
            CHECK(authority_char(o->host[i]));
    if (k == IPB_SNIFF_HTTP || k == IPB_SNIFF_CONNECT) {
        /* Lines are unambiguous: a parser that splits at a bare LF or CR, or stops at a NUL,
         * sees the same head. */
        const uint8_t *start = data;
        while (start < data + n && (*start == '\n' || lenient_space(*start)))
            start++;
        CHECK(start - data <= 64);
        const uint8_t *end = memmem(start, n - (size_t)(start - data), "\r\n\r\n", 4);
        CHECK(end != NULL);
        for (const uint8_t *p = start; p < end; p++) {
            CHECK(*p != '\0');
            CHECK(*p != '\r' || p[1] == '\n');
            CHECK(*p != '\n' || (p > start && p[-1] == '\r'));
        }
        if (k == IPB_SNIFF_CONNECT) /* the head the tunnel's bytes follow: blanks, then lines */
            CHECK(o->head_len == (size_t)(end + 4 - data));
    }
    if (lenient_request_line(data, n))
        CHECK(k != IPB_SNIFF_OTHER);
    if (k == IPB_SNIFF_CONNECT) {
        CHECK(hl > 0 && o->port != 0);
        CHECK(o->head_len >= 4 && o->head_len <= n);
        CHECK(!memcmp(data + o->head_len - 4, "\r\n\r\n", 4));
    }
    return k;
}

static void check_authority(const uint8_t *data, size_t size) {
    /* The host buffer exactly host_size bytes, from 1 to IPB_NAME_MAX + 1. */
    size_t host_size = size ? 1 + data[0] % (IPB_NAME_MAX + 1) : IPB_NAME_MAX + 1;
    const uint8_t *s = size ? data + 1 : data;
    size_t len = size ? size - 1 : 0;
    char *exact = malloc(len ? len : 1);
    char *host = malloc(host_size);
    if (!exact || !host)
        abort();
    memcpy(exact, s, len);
    uint16_t port = 1;
    if (ipb_sniff_split_authority(exact, len, host, host_size, &port)) {
        size_t hl = strnlen(host, host_size);
        CHECK(hl > 0 && hl < host_size);
        for (size_t i = 0; i < hl; i++)
            CHECK(authority_char(host[i]));
        char text[IPB_NAME_MAX + 16];
        bool brackets = strchr(host, ':') || host[0] == '[';
        int tl = snprintf(text, sizeof(text), brackets ? "[%s]" : "%s", host);
        if (port)
            tl += snprintf(text + tl, sizeof(text) - (size_t)tl, ":%u", port);
        char again[IPB_NAME_MAX + 1];
        uint16_t port2 = 7;
        CHECK(ipb_sniff_split_authority(text, (size_t)tl, again, sizeof(again), &port2));
        CHECK(!strcmp(host, again) && port == port2);
    }
    free(exact);
    free(host);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ipb_sniff full, part;
    enum ipb_sniff_kind k = sniff_exact(data, size, &full);

    if (size > 0 && size < IPB_SNIFF_MAX) {
        size_t cuts[4] = {size - 1, size / 2, data[0] % size, size > 1 ? (size_t)data[size - 1] % size : 0};
        for (size_t i = 0; i < 4; i++) {
            if (sniff_exact(data, cuts[i], &part) == IPB_SNIFF_MORE)
                continue;
            CHECK(part.kind == k);
            CHECK(!strcmp(part.host, full.host));
            CHECK(part.port == full.port);
            CHECK(part.head_len == full.head_len);
            CHECK(part.why == full.why || (part.why && full.why && !strcmp(part.why, full.why)));
        }
    }

    check_authority(data, size);
    return 0;
}
