/* libFuzzer harness: JSON-RPC framing and classification (supervisor/jsonrpc.c).
 *
 * 1. jrpc_parse() on the raw bytes (not NUL-terminated), with consistency checks on the result
 *    and a round trip through the response builders.
 * 2. The same bytes through jrpc_reader over a non-blocking pipe, written in two pieces split at a
 *    data-derived point; every line it returns is checked against an independent splitter
 *    (lines end at '\n', one trailing '\r' is dropped, a last unterminated line counts) and then
 *    fed to jrpc_parse() exactly as mcp_server.c does.
 * 3. jrpc_peek_id() on the whole input and on a data-derived prefix (a message cut short): an id it
 *    reads is a string or an integer, and when jansson parses the whole input as an object
 *    without duplicate keys, it is that object's "id".
 *
 * FUZZ_SOURCES: supervisor/jsonrpc.c common/jsonlimit.c common/strbuf.c common/error.c common/nofile.c
 * FUZZ_PKGS: jansson
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonrpc.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_jsonrpc: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                   \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static void check_parse(const char *line, size_t len) {
    jrpc_msg m;
    jrpc_parse(line, len, &m);
    switch (m.kind) {
    case JRPC_REQUEST:
        CHECK(m.root && m.method && m.id);
        CHECK(json_is_string(m.id) || json_is_integer(m.id));
        CHECK(!m.params || json_is_object(m.params) || json_is_array(m.params));
        break;
    case JRPC_NOTIFICATION:
        CHECK(m.root && m.method && !m.id);
        CHECK(!m.params || json_is_object(m.params) || json_is_array(m.params));
        break;
    case JRPC_RESPONSE:
        CHECK(m.root && m.id && !m.method);
        break;
    case JRPC_INVALID:
        CHECK(m.error_code <= -32600 && m.error_code >= -32700 && m.error_msg);
        break;
    default:
        CHECK(!"unknown kind");
    }
    /* What the server answers with: build, serialise, and re-read it. */
    json_t *reply = m.kind == JRPC_INVALID ? jrpc_error(m.id, m.error_code, m.error_msg)
                                           : jrpc_result(m.id, m.params ? json_deep_copy(m.params) : json_object());
    CHECK(reply);
    size_t dl = 0;
    char *d = jrpc_dump(reply, &dl);
    CHECK(d && dl > 0 && d[dl - 1] == '\n' && !memchr(d, '\n', dl - 1));
    jrpc_msg back;
    jrpc_parse(d, dl - 1, &back);
    CHECK(back.kind == (m.id ? JRPC_RESPONSE : JRPC_INVALID));
    jrpc_msg_free(&back);
    free(d);
    json_decref(reply);
    jrpc_msg_free(&m);
}

/* The expected n-th line from an independent splitter: returns 1 and sets *ret and *ret_len, or 0. */
static int expected_line(const uint8_t *data, size_t size, size_t *pos, const uint8_t **ret, size_t *ret_len) {
    if (*pos >= size)
        return 0;
    const uint8_t *s = data + *pos;
    const uint8_t *nl = memchr(s, '\n', size - *pos);
    size_t l = nl ? (size_t)(nl - s) : size - *pos;
    *pos += l + (nl ? 1 : 0);
    if (nl && l && s[l - 1] == '\r')
        l--;
    *ret = s;
    *ret_len = l;
    return 1;
}

static void drain(jrpc_reader *r, const uint8_t *data, size_t size, size_t *exp_pos) {
    for (;;) {
        char *line = NULL;
        size_t len = 0;
        int n = jrpc_reader_next(r, &line, &len);
        CHECK(n == 0 || n == 1); /* -E2BIG needs 16 MiB lines; -ENOMEM is not expected */
        if (n == 0)
            return;
        const uint8_t *want;
        size_t want_len;
        CHECK(expected_line(data, size, exp_pos, &want, &want_len));
        CHECK(line != NULL);
        CHECK(len == want_len);
        CHECK(memcmp(line, want, len) == 0);
        check_parse(line, len);
    }
}

static void check_reader(const uint8_t *data, size_t size) {
    int p[2];
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0)
        abort();
    jrpc_reader r;
    memset(&r, 0, sizeof(r));
    size_t exp_pos = 0;
    size_t split = size ? (size_t)data[0] * size / 256 : 0;
    const size_t ends[2] = {split, size};
    size_t off = 0;
    for (int part = 0; part < 2; part++) {
        while (off < ends[part]) {
            ssize_t w = write(p[1], data + off, ends[part] - off);
            if (w < 0 && errno != EAGAIN)
                abort();
            if (w > 0)
                off += (size_t)w;
            CHECK(jrpc_reader_fill(&r, p[0]) == 0);
            CHECK(!r.eof);
            drain(&r, data, size, &exp_pos);
        }
    }
    close(p[1]);
    CHECK(jrpc_reader_fill(&r, p[0]) == 0);
    CHECK(r.eof);
    drain(&r, data, size, &exp_pos);
    /* Every byte was delivered as a line. */
    const uint8_t *want;
    size_t want_len;
    CHECK(!expected_line(data, size, &exp_pos, &want, &want_len));
    close(p[0]);
    jrpc_reader_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void check_peek(const char *text, size_t size) {
    json_t *whole = json_loadb(text, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
    json_t *truth = json_is_object(whole) ? json_object_get(whole, "id") : NULL;
    size_t cut = size ? (size_t)(unsigned char)text[size - 1] * size / 256 : 0;
    const size_t lens[2] = {size, cut};
    for (int k = 0; k < 2; k++) {
        json_t *id = jrpc_peek_id(text, lens[k]);
        CHECK(!id || json_is_string(id) || json_is_integer(id));
        if (id && whole)
            CHECK(truth && json_equal(id, truth));
        json_decref(id);
    }
    json_decref(whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* An exact-size copy so that any read past `size` is caught by ASan. */
    char *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    check_parse(copy, size);
    check_peek(copy, size);
    free(copy);
    check_reader(data, size);
    return 0;
}
