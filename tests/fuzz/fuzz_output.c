/* libFuzzer harness: cell output capping and ANSI stripping (supervisor/output.c).
 *
 * Input: byte 0 = the output limit (0..255; the module raises it to at least 16), byte 1 = seed
 * for chunk sizes, the rest = the text. The text is cut into chunks of 1..32 bytes (moved to
 * character boundaries when the text is valid UTF-8: the kernel's stream chunks are JSON strings),
 * and each chunk goes through ipb_strip_ansi(), loses its NUL bytes, and goes to
 * ipb_output_append(), as execute.c's emit() does (so the finished text's length is its strlen).
 *
 * Invariants:
 *  - strip_ansi never grows its input and leaves no ESC byte;
 *  - strip_ansi keeps a valid UTF-8 chunk valid UTF-8;
 *  - the finished text is the stripped text itself when it fits the limit; otherwise it starts
 *    with a head of the stripped text of at most limit/2 bytes and ends with a tail of at most
 *    limit - limit/2 bytes, both cut at character boundaries for valid UTF-8;
 *  - if the input text is valid UTF-8, the finished text is valid UTF-8.
 *
 * FUZZ_SOURCES: supervisor/output.c common/strbuf.c
 * FUZZ_PKGS:
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_output: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                    \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

/* Strict UTF-8 (RFC 3629): no overlongs, no surrogates, nothing above U+10FFFF. */
static bool utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i - 1 < need)
            return false;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += need + 1;
    }
    return true;
}

static bool is_cont(uint8_t c) { return (c & 0xC0) == 0x80; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2)
        return 0;
    size_t limit_in = data[0];
    uint32_t rng = 0x9e3779b9u ^ ((uint32_t)data[1] * 0x01000193u);
    size_t n = size - 2;
    uint8_t *text = malloc(n ? n : 1);
    uint8_t *stripped = malloc(n ? n : 1); /* concatenation of the stripped chunks */
    if (!text || !stripped)
        abort();
    memcpy(text, data + 2, n);
    bool valid = utf8_valid(text, n);

    ipb_output o;
    ipb_output_init(&o, limit_in);
    size_t limit = limit_in < 16 ? 16 : limit_in;
    CHECK(o.limit == limit);
    size_t slen = 0;
    for (size_t pos = 0; pos < n;) {
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        size_t end = pos + 1 + rng % 32;
        if (end > n)
            end = n;
        while (valid && end < n && is_cont(text[end]))
            end++;
        size_t len = end - pos;
        char *chunk = malloc(len);
        if (!chunk)
            abort();
        memcpy(chunk, text + pos, len);
        size_t sl = ipb_strip_ansi(chunk, len);
        CHECK(sl <= len);
        CHECK(!memchr(chunk, 0x1b, sl));
        if (utf8_valid(text + pos, len) && !utf8_valid((const uint8_t *)chunk, sl)) {
            fprintf(stderr, "fuzz_output: strip_ansi turned valid UTF-8 into invalid UTF-8\n");
            CHECK(!"strip_ansi keeps valid UTF-8 valid");
        }
        size_t w = 0; /* execute.c drops NUL characters after stripping */
        for (size_t i = 0; i < sl; i++)
            if (chunk[i])
                chunk[w++] = chunk[i];
        sl = w;
        memcpy(stripped + slen, chunk, sl);
        slen += sl;
        CHECK(ipb_output_append(&o, chunk, sl) == 0);
        free(chunk);
        pos = end;
    }
    CHECK(o.total == slen);

    char *out = ipb_output_finish(&o);
    CHECK(out);
    size_t ol = strlen(out);
    if (slen <= limit) {
        CHECK(ol == slen && !memcmp(out, stripped, slen));
    } else {
        size_t h = limit / 2, t = limit - limit / 2;
        /* Head: a prefix of at most h bytes, at least h - 5 (at most 4 continuation bytes and
         * their lead are dropped). Tail: a suffix of at most t bytes, at least t - 4. */
        CHECK(ol > (h - 5) + (t - 4));
        CHECK(!memcmp(out, stripped, h - 5));
        CHECK(!memcmp(out + ol - (t - 4), stripped + slen - (t - 4), t - 4));
        if (utf8_valid(stripped, slen)) {
            size_t hl = h;
            while (hl > 0 && is_cont(stripped[hl]))
                hl--;
            size_t ts = slen - t;
            while (ts < slen && is_cont(stripped[ts]))
                ts++;
            size_t tl = slen - ts;
            CHECK(ol > hl + tl);
            CHECK(!memcmp(out, stripped, hl));
            CHECK(out[hl] == '\n'); /* the cut notice follows the head directly */
            CHECK(!memcmp(out + ol - tl, stripped + ts, tl));
            CHECK(out[ol - tl - 1] == '\n'); /* and the tail follows the notice directly */
        }
    }
    if (valid && !utf8_valid((const uint8_t *)out, ol)) {
        fprintf(stderr, "fuzz_output: valid UTF-8 input, invalid UTF-8 output (limit %zu)\n", limit);
        CHECK(!"finished output of valid UTF-8 is valid UTF-8");
    }
    free(out);
    ipb_output_free(&o);
    free(text);
    free(stripped);
    return 0;
}
