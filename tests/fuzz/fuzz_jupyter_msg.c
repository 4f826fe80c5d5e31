/* libFuzzer harness: Jupyter wire messages from the (untrusted) kernel (supervisor/jupyter_msg.c).
 *
 * The first byte selects a mode; the rest is split into frames on NUL bytes.
 *   0  raw:    the frames as given go to jmsg_parse() (exercises delimiter search, sizes, the
 *              signature check).
 *   1  signed: the pieces are header, parent, metadata, content (missing ones are "{}"), extra
 *              pieces are buffers; the harness signs them with jmsg_sign() and frames them as
 *              [identity, <IDS|MSG>, signature, 4 parts, buffers...], so jmsg_parse() reaches the
 *              JSON. It must succeed exactly when all four parts are JSON objects (NUL
 *              characters allowed, duplicate keys not) and the header has a string msg_type.
 *   2  forged: as 1, then one bit of a part (or of the signature) is flipped at a data-derived
 *              place: jmsg_parse() must refuse the message.
 *   3  build:  msg_type (first piece) and a content object (second piece) go through jmsg_build();
 *              jmsg_parse() of the result must give back the same msg_type and content.
 *
 * FUZZ_SOURCES: supervisor/jupyter_msg.c common/jsonlimit.c supervisor/jsonfast.c common/fdio.c common/strbuf.c common/error.c common/nofile.c
 * FUZZ_PKGS: jansson openssl
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jupyter_msg.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_jupyter_msg: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);               \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

#define MAX_FRAMES 40

static const char key[] = "6d1b4c5e0f2a39871c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b";

/* Splits [p, p+n) on NUL into exact-size heap copies (so ASan sees over-reads). */
static size_t split(const uint8_t *p, size_t n, jmsg_frame *f, size_t max) {
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= n && k < max; i++) {
        if (i == n || p[i] == 0) {
            size_t l = i - start;
            void *c = malloc(l ? l : 1);
            if (!c)
                abort();
            memcpy(c, p + start, l);
            f[k].data = c;
            f[k].len = l;
            k++;
            start = i + 1;
        }
    }
    return k;
}

static void free_frames(jmsg_frame *f, size_t n) {
    for (size_t i = 0; i < n; i++)
        free((void *)f[i].data);
}

static bool is_object(const jmsg_frame *f) {
    json_error_t e;
    json_t *j = json_loadb(f->data, f->len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
    bool ok = j && json_is_object(j);
    json_decref(j);
    return ok;
}

static bool has_msg_type(const jmsg_frame *f) {
    json_error_t e;
    json_t *j = json_loadb(f->data, f->len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
    bool ok = j && json_is_string(json_object_get(j, "msg_type"));
    json_decref(j);
    return ok;
}

static void check_ok(const jmsg *m) {
    CHECK(m->header && m->parent && m->metadata && m->content);
    CHECK(json_is_object(m->header) && json_is_object(m->parent) && json_is_object(m->metadata) &&
          json_is_object(m->content));
    CHECK(m->msg_type && m->parent_id);
}

static void mode_raw(const uint8_t *data, size_t size) {
    jmsg_frame f[MAX_FRAMES];
    size_t n = split(data, size, f, MAX_FRAMES);
    jmsg m;
    ipb_error *err = NULL;
    int r = jmsg_parse(key, f, n, &m, &err);
    if (r == 0) {
        check_ok(&m);
        jmsg_free(&m);
    } else {
        CHECK(err && err->msg);
    }
    ipb_error_free(err);
    free_frames(f, n);
}

static void mode_signed(const uint8_t *data, size_t size, bool forge) {
    uint8_t sel = size ? data[0] : 0;
    if (size) {
        data++;
        size--;
    }
    jmsg_frame pieces[MAX_FRAMES];
    size_t np = split(data, size, pieces, MAX_FRAMES - 3);
    /* Missing parts default to "{}". */
    while (np < 4) {
        char *c = malloc(2);
        if (!c)
            abort();
        memcpy(c, "{}", 2);
        pieces[np].data = c;
        pieces[np].len = 2;
        np++;
    }
    jmsg_frame f[MAX_FRAMES];
    char ident[] = "00112233-4455-6677-8899-aabbccddeeff";
    char delim[] = "<IDS|MSG>";
    char sig[65];
    CHECK(jmsg_sign(key, pieces, sig) == 0);
    CHECK(strlen(sig) == 64);
    f[0] = (jmsg_frame){ident, strlen(ident)};
    f[1] = (jmsg_frame){delim, strlen(delim)};
    f[2] = (jmsg_frame){sig, 64};
    for (size_t i = 0; i < np; i++)
        f[3 + i] = pieces[i];
    size_t n = 3 + np;

    if (forge) {
        size_t total = 0;
        for (int i = 0; i < 4; i++)
            total += pieces[i].len;
        size_t at = total ? (size_t)sel * 131u % (total + 64) : (size_t)sel % 64;
        uint8_t bit = (uint8_t)(1u << (sel & 7));
        if (at < total) {
            for (int i = 0; i < 4; i++) {
                if (at < pieces[i].len) {
                    ((uint8_t *)pieces[i].data)[at] ^= bit;
                    break;
                }
                at -= pieces[i].len;
            }
        } else {
            sig[at - total] ^= bit;
        }
    }

    jmsg m;
    ipb_error *err = NULL;
    int r = jmsg_parse(key, f, n, &m, &err);
    if (forge) {
        CHECK(r < 0);
        CHECK(err && err->msg);
    } else {
        bool want = is_object(&pieces[0]) && is_object(&pieces[1]) && is_object(&pieces[2]) && is_object(&pieces[3]) &&
                    has_msg_type(&pieces[0]);
        CHECK((r == 0) == want);
        if (r == 0) {
            check_ok(&m);
            CHECK(!strcmp(m.msg_type, json_string_value(json_object_get(m.header, "msg_type"))));
            jmsg_free(&m);
        } else {
            CHECK(err && err->msg);
        }
    }
    ipb_error_free(err);
    free_frames(pieces, np);
}

static void mode_build(const uint8_t *data, size_t size) {
    jmsg_frame pieces[2];
    size_t np = split(data, size, pieces, 2);
    if (np < 2) {
        free_frames(pieces, np);
        return;
    }
    char *msg_type = strndup(pieces[0].data, pieces[0].len);
    json_error_t e;
    json_t *content = json_loadb(pieces[1].data, pieces[1].len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
    if (msg_type && content && json_is_object(content)) {
        char msg_id[33];
        jmsg_frame f[6];
        char *storage = NULL;
        ipb_error *err = NULL;
        if (jmsg_build(key, "fuzz-session", msg_type, content, msg_id, f, &storage, &err) == 0) {
            CHECK(strlen(msg_id) == 32);
            jmsg m;
            ipb_error *err2 = NULL;
            int r = jmsg_parse(key, f, 6, &m, &err2);
            if (r < 0)
                fprintf(stderr, "jmsg_parse: %s\n", ipb_error_msg(err2));
            CHECK(r == 0);
            check_ok(&m);
            CHECK(!strcmp(m.msg_type, msg_type));
            CHECK(json_equal(m.content, content));
            CHECK(!strcmp(json_string_value(json_object_get(m.header, "msg_id")), msg_id));
            jmsg_free(&m);
            ipb_error_free(err2);
            free(storage);
        } else {
            CHECK(err && err->msg);
        }
        ipb_error_free(err);
    }
    json_decref(content);
    free(msg_type);
    free_frames(pieces, np);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    switch (data[0] & 3) {
    case 0:
        mode_raw(data + 1, size - 1);
        break;
    case 1:
        mode_signed(data + 1, size - 1, false);
        break;
    case 2:
        mode_signed(data + 1, size - 1, true);
        break;
    case 3:
        mode_build(data + 1, size - 1);
        break;
    }
    return 0;
}
