/* libFuzzer harness: carriage returns collapsed as a terminal shows them (supervisor/crlines.c).
 *
 * Input: byte 0 = seed for piece sizes, the rest = the text. The text is fed whole to one
 * collapser and in pieces of 1..16 bytes (cut anywhere, inside characters too) to another.
 *
 * Invariants:
 *  - both give the same output (a '\r' or a character at a piece boundary changes nothing);
 *  - the output is never longer than the input and has no '\r';
 *  - it has as many '\n' as the input;
 *  - the plain prefix of a fresh collapser goes out unchanged;
 *  - valid UTF-8 in gives valid UTF-8 out (columns are whole characters).
 *
 * FUZZ_SOURCES: supervisor/crlines.c common/strbuf.c
 * FUZZ_PKGS:
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crlines.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_crlines: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                   \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

/* Well-formed in the sense crlines uses: leads C2-F4, each with its continuation bytes. */
static bool utf8_valid(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t need = c < 0x80                   ? 0
                      : (c >= 0xC2 && c <= 0xDF) ? 1
                      : (c >= 0xE0 && c <= 0xEF) ? 2
                      : (c >= 0xF0 && c <= 0xF4) ? 3
                                                 : 9;
        if (need == 9 || n - i - 1 < need)
            return false;
        for (size_t k = 1; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
        i += need + 1;
    }
    return true;
}

static size_t count(const char *s, size_t n, char ch) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == ch;
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    uint32_t rng = 0x9e3779b9u ^ ((uint32_t)data[0] * 0x01000193u);
    const char *text = (const char *)data + 1;
    size_t n = size - 1;

    ipb_crlines whole = {0}, pieces = {0};
    ipb_buf a = {0}, b = {0};
    size_t plain = ipb_crlines_plain_prefix(&whole, text, n);
    CHECK(plain <= n);
    CHECK(ipb_crlines_feed(&whole, text, n, &a) == 0);
    CHECK(ipb_crlines_finish(&whole, &a) == 0);
    CHECK(a.len >= plain && (plain == 0 || !memcmp(a.data, text, plain)));
    for (size_t pos = 0; pos < n;) {
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        size_t len = 1 + rng % 16;
        if (len > n - pos)
            len = n - pos;
        CHECK(ipb_crlines_feed(&pieces, text + pos, len, &b) == 0);
        pos += len;
    }
    CHECK(ipb_crlines_finish(&pieces, &b) == 0);
    CHECK(a.len == b.len && (a.len == 0 || !memcmp(a.data, b.data, a.len)));
    CHECK(a.len <= n);
    CHECK(count(a.data, a.len, '\r') == 0);
    CHECK(count(a.data, a.len, '\n') == count(text, n, '\n'));
    if (utf8_valid(data + 1, n))
        CHECK(utf8_valid((const uint8_t *)a.data, a.len));
    ipb_crlines_free(&whole);
    ipb_crlines_free(&pieces);
    ipb_buf_free(&a);
    ipb_buf_free(&b);
    return 0;
}
