/* Differential fuzzing of supervisor/jsonfast.c against jansson, the reference.
 * FUZZ_SOURCES: supervisor/jsonfast.c common/strbuf.c
 * FUZZ_PKGS: jansson
 * 1. ipb_stream_content_decode: whenever it accepts, jansson (with the flags jmsg_parse uses)
 *    must accept too and yield an object of exactly "name" and "text" with the same values.
 *    The scanner must agree, and decoding its body in small chunks (a cap taken from the
 *    input) must give the same text, every chunk valid UTF-8 on its own, and the clean flag
 *    must be false exactly when the text holds NUL or ESC. ipb_json_body_prefix, at a few
 *    text offsets (each newline's end among them, which always has one): the body prefix it
 *    gives decodes to exactly that much of the text.
 * 2. ipb_json_escape_body_append: for input that is valid UTF-8 (as jansson judges), the
 *    escaped body in quotes must decode back to the same bytes. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jsonfast.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_chunks(const char *json, size_t size, const char *text, size_t tlen, size_t cap) {
    ipb_stream_view v;
    if (!ipb_stream_content_scan(json, size, &v))
        abort();
    bool dirty = memchr(text, 0, tlen) || memchr(text, 0x1b, tlen);
    if (v.text_clean == dirty)
        abort();
    char chunk[64];
    size_t at = 0, got = 0;
    while (at < v.text_len) {
        size_t n = 0;
        size_t used = ipb_json_unescape_chunk(v.text + at, v.text_len - at, chunk, cap, &n);
        if (used == 0 || n == 0 || n > cap || got + n > tlen || memcmp(text + got, chunk, n))
            abort();
        json_t *j = json_stringn(chunk, n);
        if (!j)
            abort();
        json_decref(j);
        at += used;
        got += n;
    }
    if (got != tlen)
        abort();
    char *whole = malloc(tlen + 16);
    if (!whole)
        abort();
    for (size_t k = 0; k <= tlen; k += 1 + tlen / 7) {
        const char *nl = memchr(text + k, '\n', tlen - k);
        size_t offs[2] = {k, nl ? (size_t)(nl - text) + 1 : k};
        for (int w = 0; w < 2; w++) {
            size_t bp = ipb_json_body_prefix(v.text, v.text_len, offs[w]);
            if (w == 1 && nl && !bp)
                abort();
            size_t n = 0;
            if (bp && (ipb_json_unescape_chunk(v.text, bp, whole, tlen + 16, &n) != bp || n != offs[w] ||
                       memcmp(whole, text, n)))
                abort();
        }
    }
    free(whole);
    free(v.name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    char *name = NULL, *text = NULL;
    size_t tlen = 0;
    int fast = ipb_stream_content_decode(buf, size, &name, &text, &tlen);
    json_error_t e;
    json_t *ref = json_loadb(buf, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
    if (fast) {
        if (!ref || !json_is_object(ref) || json_object_size(ref) != 2)
            abort();
        json_t *n = json_object_get(ref, "name"), *t = json_object_get(ref, "text");
        if (!json_is_string(n) || !json_is_string(t))
            abort();
        if (strlen(name) != json_string_length(n) || memcmp(name, json_string_value(n), strlen(name)))
            abort();
        if (tlen != json_string_length(t) || memcmp(text, json_string_value(t), tlen))
            abort();
        check_chunks(buf, size, text, tlen, size ? 16 + data[0] % 48 : 16);
        free(name);
        free(text);
    }
    json_decref(ref);

    /* 2: escape round trip of the raw bytes, when they are a valid UTF-8 string. */
    json_t *s = json_stringn(buf, size);
    if (s) {
        ipb_buf out = {0};
        if (ipb_buf_append(&out, "\"", 1) == 0 && ipb_json_escape_body_append(&out, buf, size) == 0 &&
            ipb_buf_append(&out, "\"", 1) == 0) {
            json_t *back = json_loadb(out.data, out.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
            if (!back || !json_is_string(back) || json_string_length(back) != size ||
                memcmp(json_string_value(back), buf, size))
                abort();
            json_decref(back);
        }
        ipb_buf_free(&out);
        json_decref(s);
    }
    free(buf);
    return 0;
}
