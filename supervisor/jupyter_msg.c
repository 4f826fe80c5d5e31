#include "jupyter_msg.h"
#include "jsonlimit.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fdio.h"
#include "jsonfast.h"
#include "strbuf.h"

static const char delimiter[] = "<IDS|MSG>";

int jmsg_sign(const char *key, const jmsg_frame parts[4], char out[65]) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    /* Fetching the algorithm is costly; once per process is enough. */
    static EVP_MAC *hmac;
    if (!hmac && !(hmac = EVP_MAC_fetch(NULL, "HMAC", NULL)))
        return -EIO;
    EVP_MAC_CTX *c = EVP_MAC_CTX_new(hmac);
    if (!c)
        return -ENOMEM;
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", (char *)"SHA256", 0), OSSL_PARAM_construct_end()};
    int ok = EVP_MAC_init(c, (const unsigned char *)key, strlen(key), params);
    for (int i = 0; ok && i < 4; i++)
        ok = EVP_MAC_update(c, parts[i].data, parts[i].len);
    size_t outl = 0;
    if (ok)
        ok = EVP_MAC_final(c, mac, &outl, sizeof(mac));
    EVP_MAC_CTX_free(c);
    if (!ok || outl != 32)
        return -EIO;
    maclen = (unsigned)outl;
    ipb_hex(mac, maclen, out);
    return 0;
}

static void iso_now(char *buf, size_t len) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%06ldZ", base, ts.tv_nsec / 1000);
}

int jmsg_build(const char *key, const char *session, const char *msg_type, json_t *content, char msg_id[33],
               jmsg_frame ret_frames[6], char **ret_storage, ipb_error **err) {
    unsigned char rnd[16];
    if (ipb_random(rnd, sizeof(rnd)) < 0)
        return ipb_error_set(err, errno, "generating a message id");
    ipb_hex(rnd, sizeof(rnd), msg_id);
    char date[64];
    iso_now(date, sizeof(date));
    json_t *header = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "msg_id", msg_id, "session", session, "username",
                               "ipybox", "date", date, "msg_type", msg_type, "version", "5.3");
    char *h = header ? json_dumps(header, JSON_COMPACT) : NULL;
    char *c = json_dumps(content, JSON_COMPACT);
    json_decref(header);
    if (!h || !c) {
        free(h);
        free(c);
        return ipb_error_set(err, ENOMEM, "building a kernel message");
    }
    size_t hl = strlen(h), cl = strlen(c);
    /* storage: signature (65) + header + "{}" + "{}" + content */
    char *st = malloc(65 + hl + 2 + 2 + cl);
    if (!st) {
        free(h);
        free(c);
        return ipb_error_set(err, ENOMEM, "building a kernel message");
    }
    char *p = st + 65;
    memcpy(p, h, hl);
    memcpy(p + hl, "{}{}", 4);
    memcpy(p + hl + 4, c, cl);
    free(h);
    free(c);
    jmsg_frame parts[4] = {{p, hl}, {p + hl, 2}, {p + hl + 2, 2}, {p + hl + 4, cl}};
    if (jmsg_sign(key, parts, st) < 0) {
        free(st);
        return ipb_error_set(err, EIO, "signing a kernel message");
    }
    ret_frames[0] = (jmsg_frame){delimiter, sizeof(delimiter) - 1};
    ret_frames[1] = (jmsg_frame){st, 64};
    for (int i = 0; i < 4; i++)
        ret_frames[2 + i] = parts[i];
    *ret_storage = st;
    return 0;
}

static json_t *load_object(const jmsg_frame *f) {
    json_error_t e;
    /* A kernel's message of tiny values would cost tens of times its size once parsed. */
    if (!ipb_json_values_ok(f->data, f->len, IPB_JSON_MAX_VALUES))
        return NULL;
    /* Output may legitimately contain NUL characters; callers work with lengths. */
    json_t *j = json_loadb(f->data, f->len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

int jmsg_parse(const char *key, const jmsg_frame *frames, size_t n, jmsg *ret, ipb_error **err) {
    size_t i = 0;
    while (i < n && !(frames[i].len == sizeof(delimiter) - 1 && !memcmp(frames[i].data, delimiter, frames[i].len)))
        i++;
    if (i == n || n - i < 6)
        return ipb_error_set(err, EBADMSG, "kernel message without the <IDS|MSG> delimiter or parts");
    const jmsg_frame *sig = &frames[i + 1];
    const jmsg_frame *parts = &frames[i + 2];
    for (int k = 0; k < 4; k++)
        if (parts[k].len > JMSG_MAX_FRAME)
            return ipb_error_set(err, EMSGSIZE, "oversized kernel message");
    char expect[65];
    if (jmsg_sign(key, parts, expect) < 0)
        return ipb_error_set(err, EIO, "checking a kernel message's signature");
    if (sig->len != 64 || CRYPTO_memcmp(expect, sig->data, 64) != 0)
        return ipb_error_set(err, EBADMSG, "kernel message with a bad signature");
    jmsg m;
    memset(&m, 0, sizeof(m));
    m.header = load_object(&parts[0]);
    m.parent = load_object(&parts[1]);
    m.metadata = load_object(&parts[2]);
    /* Stream output can be megabytes: check its plain shape directly and leave the text where
     * it is; anything else goes to jansson. */
    const char *type = json_string_value(json_object_get(m.header, "msg_type"));
    ipb_stream_view v;
    if (type && !strcmp(type, "stream") && ipb_stream_content_scan(parts[3].data, parts[3].len, &v)) {
        m.content = json_pack("{s:s}", "name", v.name);
        free(v.name);
        m.text_body = v.text;
        m.text_body_len = v.text_len;
        m.text_clean = v.text_clean;
    } else {
        m.content = load_object(&parts[3]);
    }
    if (!m.header || !m.parent || !m.metadata || !m.content) {
        jmsg_free(&m);
        return ipb_error_set(err, EBADMSG, "kernel message with malformed JSON");
    }
    m.msg_type = json_string_value(json_object_get(m.header, "msg_type"));
    m.parent_id = json_string_value(json_object_get(m.parent, "msg_id"));
    if (!m.msg_type) {
        jmsg_free(&m);
        return ipb_error_set(err, EBADMSG, "kernel message without msg_type");
    }
    if (!m.parent_id)
        m.parent_id = "";
    *ret = m;
    return 0;
}

void jmsg_free(jmsg *m) {
    if (m->keep_free)
        m->keep_free(m->keep);
    json_decref(m->header);
    json_decref(m->parent);
    json_decref(m->metadata);
    json_decref(m->content);
    memset(m, 0, sizeof(*m));
}
