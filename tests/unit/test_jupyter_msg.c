/* Unit tests for supervisor/jupyter_msg: HMAC-SHA256 signatures against vectors computed
 * independently, and building and parsing multipart messages. */
#include <check.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
#include "jupyter_msg.h"

#define KEY "b7e2c1d0-kernel-key"

static jmsg_frame frame(const char *s) { return (jmsg_frame){s, strlen(s)}; }

/* `openssl dgst -sha256 -hmac b7e2c1d0-kernel-key` (and Python's hmac) over the
 * concatenation of these four parts. */
static const char *const vec_parts[4] = {"{\"msg_id\":\"a1\",\"msg_type\":\"status\"}", "{\"msg_id\":\"p0\"}", "{}",
                                         "{\"execution_state\":\"idle\"}"};
static const char vec_sig[] = "19a6924199f4c913e3aab58a9eeff7d092bfb7cce85f0f324dbe9624cf0abbd1";

START_TEST(sign_known_vector) {
    jmsg_frame parts[4];
    for (int i = 0; i < 4; i++)
        parts[i] = frame(vec_parts[i]);
    char out[65];
    memset(out, 'X', sizeof(out));
    ck_assert_int_eq(jmsg_sign(KEY, parts, out), 0);
    ck_assert_str_eq(out, vec_sig);
}
END_TEST

START_TEST(sign_rfc4231_vector) {
    /* RFC 4231 test case 2 (key "Jefe"), with the data split over the four parts: the
     * signature covers their concatenation. */
    jmsg_frame parts[4] = {frame("what do ya"), frame(" want "), frame("for "), frame("nothing?")};
    char out[65];
    ck_assert_int_eq(jmsg_sign("Jefe", parts, out), 0);
    ck_assert_str_eq(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* the same bytes split differently give the same signature */
    jmsg_frame other[4] = {frame("what do ya want for nothing?"), frame(""), frame(""), frame("")};
    char out2[65];
    ck_assert_int_eq(jmsg_sign("Jefe", other, out2), 0);
    ck_assert_str_eq(out2, out);
    /* another key gives another signature */
    ck_assert_int_eq(jmsg_sign("jefe", parts, out2), 0);
    ck_assert_str_ne(out2, out);
}
END_TEST

/* Owns the frames of a message under construction. */
typedef struct msg_frames {
    jmsg_frame f[16];
    size_t n;
    char sig[65];
} msg_frames;

/* [identities..., "<IDS|MSG>", signature of parts, parts[0..3], extras...] */
static void frames_for(msg_frames *m, const char *const *ids, size_t nids, const char *const parts[4],
                       const char *const *extra, size_t nextra) {
    m->n = 0;
    for (size_t i = 0; i < nids; i++)
        m->f[m->n++] = frame(ids[i]);
    m->f[m->n++] = frame("<IDS|MSG>");
    jmsg_frame p[4];
    for (int i = 0; i < 4; i++)
        p[i] = frame(parts[i]);
    ck_assert_int_eq(jmsg_sign(KEY, p, m->sig), 0);
    m->f[m->n++] = (jmsg_frame){m->sig, 64};
    for (int i = 0; i < 4; i++)
        m->f[m->n++] = p[i];
    for (size_t i = 0; i < nextra; i++)
        m->f[m->n++] = frame(extra[i]);
}

static int parse_msg(const msg_frames *m, jmsg *out, char **msg) {
    ipb_error *err = NULL;
    int r = jmsg_parse(KEY, m->f, m->n, out, &err);
    ck_assert_msg((r < 0) == (err != NULL), "return value and error disagree");
    *msg = err ? strdup(ipb_error_msg(err)) : NULL;
    ipb_error_free(err);
    return r;
}

static void expect_refused(const msg_frames *m, const char *needle) {
    jmsg out;
    char *msg = NULL;
    ck_assert_msg(parse_msg(m, &out, &msg) < 0, "accepted a message that should fail with '%s'", needle);
    ck_assert_msg(strstr(msg, needle) != NULL, "message lacks '%s': %s", needle, msg);
    free(msg);
}

START_TEST(build_then_parse) {
    json_t *content = json_pack("{s:s, s:b}", "code", "print('é')", "silent", 0);
    char msg_id[33];
    jmsg_frame f[6];
    char *storage = NULL;
    ipb_error *err = NULL;
    ck_assert_int_eq(jmsg_build(KEY, "session-1", "execute_request", content, msg_id, f, &storage, &err), 0);
    json_decref(content);
    ck_assert_uint_eq(strlen(msg_id), 32);
    for (int i = 0; i < 32; i++)
        ck_assert(isxdigit((unsigned char)msg_id[i]) && !isupper((unsigned char)msg_id[i]));
    ck_assert_uint_eq(f[0].len, 9);
    ck_assert_int_eq(memcmp(f[0].data, "<IDS|MSG>", 9), 0);
    ck_assert_uint_eq(f[1].len, 64);
    /* the signature matches an independent signing of the four parts */
    char expect[65];
    ck_assert_int_eq(jmsg_sign(KEY, &f[2], expect), 0);
    ck_assert_int_eq(memcmp(f[1].data, expect, 64), 0);
    ck_assert_uint_eq(f[3].len, 2);
    ck_assert_int_eq(memcmp(f[3].data, "{}", 2), 0);

    /* as a kernel would receive it: routing identities first, a buffer after */
    jmsg_frame rx[10] = {frame("identity-1"),   frame("identity-2"), f[0], f[1], f[2], f[3], f[4], f[5],
                         frame("binary buffer")};
    jmsg m;
    ck_assert_int_eq(jmsg_parse(KEY, rx, 9, &m, &err), 0);
    ck_assert_str_eq(m.msg_type, "execute_request");
    ck_assert_str_eq(m.parent_id, "");
    ck_assert_str_eq(json_string_value(json_object_get(m.header, "msg_id")), msg_id);
    ck_assert_str_eq(json_string_value(json_object_get(m.header, "session")), "session-1");
    ck_assert_str_eq(json_string_value(json_object_get(m.header, "version")), "5.3");
    const char *date = json_string_value(json_object_get(m.header, "date"));
    ck_assert_ptr_nonnull(date);
    ck_assert_uint_eq(strlen(date), 27); /* 2026-01-02T03:04:05.123456Z */
    ck_assert_int_eq(date[26], 'Z');
    ck_assert_str_eq(json_string_value(json_object_get(m.content, "code")), "print('é')");
    ck_assert(json_is_false(json_object_get(m.content, "silent")));
    ck_assert_uint_eq(json_object_size(m.metadata), 0);
    jmsg_free(&m);
    ck_assert_ptr_null(m.header);
    jmsg_free(&m); /* twice is harmless */

    /* without identities too */
    ck_assert_int_eq(jmsg_parse(KEY, f, 6, &m, &err), 0);
    jmsg_free(&m);

    /* a second message gets another id */
    char msg_id2[33];
    char *storage2 = NULL;
    content = json_object();
    ck_assert_int_eq(jmsg_build(KEY, "session-1", "kernel_info_request", content, msg_id2, f, &storage2, &err), 0);
    json_decref(content);
    ck_assert_str_ne(msg_id, msg_id2);
    free(storage);
    free(storage2);
}
END_TEST

START_TEST(parse_reply_with_parent) {
    const char *parts[4] = {"{\"msg_id\":\"r1\",\"msg_type\":\"execute_reply\"}", "{\"msg_id\":\"req-7\"}",
                            "{\"started\":\"x\"}", "{\"status\":\"ok\",\"execution_count\":3}"};
    msg_frames mf;
    const char *ids[] = {"<IDS|MSG>x", "<IDS|MS"}; /* near-misses of the delimiter are identities */
    frames_for(&mf, ids, 2, parts, NULL, 0);
    jmsg m;
    char *msg = NULL;
    ck_assert_msg(parse_msg(&mf, &m, &msg) == 0, "%s", msg ? msg : "");
    ck_assert_str_eq(m.msg_type, "execute_reply");
    ck_assert_str_eq(m.parent_id, "req-7");
    ck_assert_int_eq(json_integer_value(json_object_get(m.content, "execution_count")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(m.metadata, "started")), "x");
    jmsg_free(&m);
}
END_TEST

START_TEST(parse_known_vector_message) {
    msg_frames mf;
    frames_for(&mf, NULL, 0, vec_parts, NULL, 0);
    ck_assert_int_eq(memcmp(mf.sig, vec_sig, 64), 0);
    jmsg m;
    char *msg = NULL;
    ck_assert_int_eq(parse_msg(&mf, &m, &msg), 0);
    ck_assert_str_eq(m.msg_type, "status");
    ck_assert_str_eq(m.parent_id, "p0");
    ck_assert_str_eq(json_string_value(json_object_get(m.content, "execution_state")), "idle");
    jmsg_free(&m);
}
END_TEST

START_TEST(parse_refuses_bad_signature) {
    msg_frames mf;
    frames_for(&mf, NULL, 0, vec_parts, NULL, 0);
    mf.sig[10] = mf.sig[10] == '0' ? '1' : '0';
    expect_refused(&mf, "bad signature");

    frames_for(&mf, NULL, 0, vec_parts, NULL, 0);
    for (int i = 0; i < 64; i++)
        mf.sig[i] = (char)toupper((unsigned char)mf.sig[i]); /* hex case matters: compared as bytes */
    expect_refused(&mf, "bad signature");

    frames_for(&mf, NULL, 0, vec_parts, NULL, 0);
    mf.f[1].len = 63;
    expect_refused(&mf, "bad signature");

    frames_for(&mf, NULL, 0, vec_parts, NULL, 0);
    mf.f[1] = frame("");
    expect_refused(&mf, "bad signature");

    /* a changed part (here the content) no longer matches */
    frames_for(&mf, NULL, 0, vec_parts, NULL, 0);
    mf.f[5] = frame("{\"execution_state\":\"busy\"}");
    expect_refused(&mf, "bad signature");

    /* signed with another key */
    frames_for(&mf, NULL, 0, vec_parts, NULL, 0);
    jmsg m;
    ipb_error *err = NULL;
    ck_assert_int_lt(jmsg_parse("another-key", mf.f, mf.n, &m, &err), 0);
    ck_assert_ptr_nonnull(strstr(ipb_error_msg(err), "bad signature"));
    ipb_error_free(err);
}
END_TEST

START_TEST(parse_refuses_bad_framing) {
    msg_frames mf;
    frames_for(&mf, NULL, 0, vec_parts, NULL, 0);
    mf.f[0] = frame("<IDS|MSG "); /* no delimiter */
    expect_refused(&mf, "delimiter");

    frames_for(&mf, NULL, 0, vec_parts, NULL, 0);
    mf.n = 5; /* delimiter, signature and only three parts */
    expect_refused(&mf, "delimiter or parts");

    frames_for(&mf, NULL, 0, vec_parts, NULL, 0);
    mf.n = 1;
    expect_refused(&mf, "delimiter or parts");

    jmsg m;
    ipb_error *err = NULL;
    ck_assert_int_lt(jmsg_parse(KEY, NULL, 0, &m, &err), 0);
    ipb_error_free(err);
}
END_TEST

START_TEST(parse_refuses_non_objects) {
    static const int which[] = {0, 1, 2, 3};
    static const char *const bad[] = {"[1]", "\"s\"", "not json", "", "{\"a\":1,\"a\":2}"};
    for (size_t w = 0; w < 4; w++) {
        for (size_t b = 0; b < sizeof(bad) / sizeof(*bad); b++) {
            const char *parts[4] = {vec_parts[0], vec_parts[1], vec_parts[2], vec_parts[3]};
            parts[which[w]] = bad[b];
            msg_frames mf;
            frames_for(&mf, NULL, 0, parts, NULL, 0);
            expect_refused(&mf, "malformed JSON"); /* signed correctly, so the JSON is what fails */
        }
    }
}
END_TEST

START_TEST(parse_refuses_missing_msg_type) {
    static const char *const headers[] = {"{\"msg_id\":\"x\"}", "{\"msg_type\":5}", "{\"msg_type\":null}",
                                          "{\"MSG_TYPE\":\"status\"}"};
    for (size_t i = 0; i < sizeof(headers) / sizeof(*headers); i++) {
        const char *parts[4] = {headers[i], "{}", "{}", "{}"};
        msg_frames mf;
        frames_for(&mf, NULL, 0, parts, NULL, 0);
        expect_refused(&mf, "without msg_type");
    }
    /* parent msg_id that is not a string reads as no parent */
    const char *parts[4] = {"{\"msg_type\":\"status\"}", "{\"msg_id\":12}", "{}", "{}"};
    msg_frames mf;
    frames_for(&mf, NULL, 0, parts, NULL, 0);
    jmsg m;
    char *msg = NULL;
    ck_assert_int_eq(parse_msg(&mf, &m, &msg), 0);
    ck_assert_str_eq(m.parent_id, "");
    jmsg_free(&m);
}
END_TEST

START_TEST(parse_refuses_oversized_part) {
    /* a part over JMSG_MAX_FRAME is refused before anything reads it */
    char *big = calloc(1, (size_t)JMSG_MAX_FRAME + 1);
    ck_assert_ptr_nonnull(big);
    msg_frames mf;
    frames_for(&mf, NULL, 0, vec_parts, NULL, 0);
    mf.f[5] = (jmsg_frame){big, (size_t)JMSG_MAX_FRAME + 1};
    expect_refused(&mf, "oversized");
    free(big);
}
END_TEST

static Suite *jupyter_msg_suite(void) {
    Suite *s = suite_create("jupyter_msg");
    TCase *t = tcase_create("sign");
    tcase_add_test(t, sign_known_vector);
    tcase_add_test(t, sign_rfc4231_vector);
    suite_add_tcase(s, t);
    TCase *m = tcase_create("messages");
    tcase_set_timeout(m, 60);
    tcase_add_test(m, build_then_parse);
    tcase_add_test(m, parse_reply_with_parent);
    tcase_add_test(m, parse_known_vector_message);
    tcase_add_test(m, parse_refuses_bad_signature);
    tcase_add_test(m, parse_refuses_bad_framing);
    tcase_add_test(m, parse_refuses_non_objects);
    tcase_add_test(m, parse_refuses_missing_msg_type);
    tcase_add_test(m, parse_refuses_oversized_part);
    suite_add_tcase(s, m);
    return s;
}

int main(void) { return ipb_run_suite(jupyter_msg_suite()); }
