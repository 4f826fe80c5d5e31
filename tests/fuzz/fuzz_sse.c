/* libFuzzer harness: the text/event-stream parser (mcpclient/sse.c).
 *
 * The input is a stream (after two control bytes). It is parsed
 *  1. all at once, in chunks whose sizes come from a generator seeded by the control bytes, and
 *     byte by byte, with the default cap: the three must give the same events, which must also
 *     equal those of an independent whole-buffer reference parser written here from the WHATWG
 *     rules;
 *  2. with a small cap from the control bytes, at once and in chunks: the same events and the
 *     same final result (0 or -EMSGSIZE), and no event larger than the cap.
 * Every event is checked: a type without CR/LF, data without CR and NUL-terminated, an id
 * without CR/LF/NUL.
 *
 * FUZZ_SOURCES: mcpclient/sse.c common/strbuf.c
 * FUZZ_PKGS:
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sse.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_sse: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                       \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

/* Events as one flat record: type NUL data-length data id NUL, appended to a buffer. */
typedef struct record {
    ipb_buf out;
    size_t n;
    size_t max_data;
} record;

static int on_event(void *ctx, const ipb_sse_event *ev) {
    record *r = ctx;
    size_t tl = strlen(ev->type), il = strlen(ev->id);
    CHECK(!memchr(ev->type, '\r', tl) && !memchr(ev->type, '\n', tl));
    CHECK(!memchr(ev->data, '\r', ev->data_len));
    CHECK(ev->data[ev->data_len] == '\0');
    CHECK(!memchr(ev->id, '\r', il) && !memchr(ev->id, '\n', il));
    if (ev->data_len > r->max_data)
        r->max_data = ev->data_len;
    ipb_buf_append(&r->out, ev->type, tl + 1);
    ipb_buf_append(&r->out, &ev->data_len, sizeof(ev->data_len));
    ipb_buf_append(&r->out, ev->data, ev->data_len);
    ipb_buf_append(&r->out, ev->id, il + 1);
    r->n++;
    return 0;
}

static uint32_t next_rand(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Feeds data in chunks: mode 0 all at once, 1 generated sizes, 2 byte by byte. */
static int run(const uint8_t *data, size_t size, size_t max, int mode, uint32_t seed, record *r) {
    ipb_sse p;
    ipb_sse_init(&p, max);
    memset(r, 0, sizeof(*r));
    int res = 0;
    size_t at = 0;
    uint32_t s = seed | 1;
    while (at < size && res == 0) {
        size_t n = size - at;
        if (mode == 1) {
            size_t want = 1 + next_rand(&s) % 24;
            n = want < n ? want : n;
        } else if (mode == 2) {
            n = 1;
        }
        res = ipb_sse_feed(&p, (const char *)data + at, n, on_event, r);
        at += n;
    }
    if (res == 0) /* an empty feed changes nothing */
        CHECK(ipb_sse_feed(&p, "", 0, on_event, r) == 0);
    ipb_sse_free(&p);
    return res;
}

/* The reference: the WHATWG steps over the whole buffer, without caps. */
static void reference(const uint8_t *d, size_t size, record *r) {
    memset(r, 0, sizeof(*r));
    size_t i = 0;
    if (size >= 3 && d[0] == 0xef && d[1] == 0xbb && d[2] == 0xbf)
        i = 3;
    ipb_buf data = {0}, type = {0}, id = {0};
    ipb_buf_append(&id, "", 0);
    while (i < size) {
        size_t j = i;
        while (j < size && d[j] != '\r' && d[j] != '\n')
            j++;
        if (j == size)
            break; /* a line without its end is never processed */
        const uint8_t *line = d + i;
        size_t len = j - i;
        i = j + 1;
        if (d[j] == '\r' && i < size && d[i] == '\n')
            i++;
        if (len == 0) {
            if (data.len) {
                data.len--; /* the last '\n' */
                ipb_sse_event ev = {type.len ? ipb_buf_cstr(&type) : "message", ipb_buf_cstr(&data), data.len,
                                    ipb_buf_cstr(&id)};
                on_event(r, &ev);
            }
            ipb_buf_reset(&data);
            ipb_buf_reset(&type);
            continue;
        }
        if (line[0] == ':')
            continue;
        size_t f = 0;
        while (f < len && line[f] != ':')
            f++;
        const uint8_t *v = line + f;
        size_t vl = 0;
        if (f < len) {
            v = line + f + 1;
            vl = len - f - 1;
            if (vl && v[0] == ' ') {
                v++;
                vl--;
            }
        }
        if (f == 5 && memcmp(line, "event", 5) == 0) {
            ipb_buf_reset(&type);
            ipb_buf_append(&type, v, vl);
        } else if (f == 4 && memcmp(line, "data", 4) == 0) {
            ipb_buf_append(&data, v, vl);
            ipb_buf_append(&data, "\n", 1);
        } else if (f == 2 && memcmp(line, "id", 2) == 0 && !memchr(v, '\0', vl)) {
            ipb_buf_reset(&id);
            ipb_buf_append(&id, v, vl);
        }
    }
    ipb_buf_free(&data);
    ipb_buf_free(&type);
    ipb_buf_free(&id);
}

static void same(const record *a, const record *b) {
    CHECK(a->n == b->n);
    CHECK(a->out.len == b->out.len);
    CHECK(a->out.len == 0 || memcmp(a->out.data, b->out.data, a->out.len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2)
        return 0;
    uint32_t seed = (uint32_t)data[0] << 8 | data[1];
    size_t cap = 1 + (size_t)data[0] % 64;
    data += 2;
    size -= 2;

    record whole, chunked, bytes, ref;
    CHECK(run(data, size, 0, 0, seed, &whole) == 0);
    CHECK(run(data, size, 0, 1, seed, &chunked) == 0);
    CHECK(run(data, size, 0, 2, seed, &bytes) == 0);
    reference(data, size, &ref);
    same(&whole, &chunked);
    same(&whole, &bytes);
    same(&whole, &ref);
    ipb_buf_free(&chunked.out);
    ipb_buf_free(&bytes.out);
    ipb_buf_free(&ref.out);

    record small_whole, small_chunked;
    int r1 = run(data, size, cap, 0, seed, &small_whole);
    int r2 = run(data, size, cap, 1, seed, &small_chunked);
    CHECK(r1 == 0 || r1 == -EMSGSIZE);
    CHECK(r1 == r2);
    same(&small_whole, &small_chunked);
    CHECK(small_whole.max_data <= cap);
    /* Under a cap, the events are those of the uncapped parse, up to where the cap stopped it. */
    CHECK(small_whole.out.len <= whole.out.len);
    CHECK(small_whole.out.len == 0 || memcmp(small_whole.out.data, whole.out.data, small_whole.out.len) == 0);
    if (r1 == 0)
        same(&small_whole, &whole);
    ipb_buf_free(&small_whole.out);
    ipb_buf_free(&small_chunked.out);
    ipb_buf_free(&whole.out);
    return 0;
}
