/* supervisor/jsonfast.c: the stream-content decoder (a strict subset of what jansson
 * accepts) and the JSON string encoder. */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "jsonfast.h"

static int decode(const char *json, char **name, char **text, size_t *len) {
    return ipb_stream_content_decode(json, strlen(json), name, text, len);
}

START_TEST(accepts_stream_content) {
    char *n, *t;
    size_t l;
    ck_assert_int_eq(decode("{\"name\": \"stdout\", \"text\": \"hello\\nworld\"}", &n, &t, &l), 1);
    ck_assert_str_eq(n, "stdout");
    ck_assert_uint_eq(l, 11);
    ck_assert_str_eq(t, "hello\nworld");
    free(n);
    free(t);
    ck_assert_int_eq(decode(" {\"text\":\"x\",\"name\":\"stderr\"}\r\n", &n, &t, &l), 1);
    ck_assert_str_eq(n, "stderr");
    ck_assert_str_eq(t, "x");
    free(n);
    free(t);
}
END_TEST

START_TEST(decodes_escapes_and_utf8) {
    char *n, *t;
    size_t l;
    ck_assert_int_eq(decode("{\"name\":\"o\",\"text\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00h\xc3\xa9\\u0000z\"}", &n,
                            &t, &l),
                     1);
    const char want[] = "\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80h\xc3\xa9\0z";
    ck_assert_uint_eq(l, sizeof(want) - 1);
    ck_assert_int_eq(memcmp(t, want, l), 0);
    free(n);
    free(t);
}
END_TEST

START_TEST(refuses_everything_else) {
    static const char *const bad[] = {
        "",
        "[]",
        "{}",
        "{\"name\":\"o\"}",
        "{\"name\":\"o\",\"text\":\"a\",\"text\":\"b\"}", /* duplicate: jansson decides (and refuses) */
        "{\"name\":\"o\",\"text\":\"a\",\"other\":\"b\"}",
        "{\"name\":\"o\",\"text\":5}",
        "{\"name\":\"o\",\"text\":\"\\ud800\"}",          /* lone high surrogate */
        "{\"name\":\"o\",\"text\":\"\\udc00\"}",          /* lone low surrogate */
        "{\"name\":\"o\",\"text\":\"\\ud800\\u0041\"}",
        "{\"name\":\"o\",\"text\":\"\xc0\xaf\"}",         /* overlong */
        "{\"name\":\"o\",\"text\":\"\xed\xa0\x80\"}",     /* encoded surrogate */
        "{\"name\":\"o\",\"text\":\"\xf4\x90\x80\x80\"}", /* above U+10FFFF */
        "{\"name\":\"o\",\"text\":\"\xc3\"}",             /* truncated */
        "{\"name\":\"o\",\"text\":\"a\nb\"}",             /* raw control character */
        "{\"name\":\"o\",\"text\":\"\\x\"}",
        "{\"name\":\"o\",\"text\":\"\\u12\"}",
        "{\"name\":\"o\",\"text\":\"a\"} x",
        "{\"name\":\"o\",\"text\":\"a\",}",
        "{\"name\":\"\\u0000\",\"text\":\"a\"}",          /* NUL in the name */
        "{\"name\":\"o\",\"text\":\"unterminated}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        char *n = NULL, *t = NULL;
        size_t l = 0;
        ck_assert_msg(decode(bad[i], &n, &t, &l) == 0, "accepted: %s", bad[i]);
        ck_assert_ptr_null(n);
        ck_assert_ptr_null(t);
    }
}
END_TEST

START_TEST(escape_round_trips_through_jansson) {
    const char in[] = "plain \"quoted\" back\\slash \n\r\t\b\f \x01\x1f\x7f h\xc3\xa9 \xf0\x9f\x98\x80 \0 end";
    size_t len = sizeof(in) - 1;
    ipb_buf out = {0};
    ck_assert_int_eq(ipb_json_escape_append(&out, in, len), 0);
    json_error_t e;
    json_t *s = json_loadb(out.data, out.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    ck_assert_msg(s != NULL, "not JSON: %s (%s)", out.data, e.text);
    ck_assert_uint_eq(json_string_length(s), len);
    ck_assert_int_eq(memcmp(json_string_value(s), in, len), 0);
    ck_assert_ptr_null(memchr(out.data, '\n', out.len)); /* one line, always */
    json_decref(s);
    ipb_buf_free(&out);
}
END_TEST

int main(void) {
    Suite *s = suite_create("jsonfast");
    TCase *c = tcase_create("jsonfast");
    tcase_add_test(c, accepts_stream_content);
    tcase_add_test(c, decodes_escapes_and_utf8);
    tcase_add_test(c, refuses_everything_else);
    tcase_add_test(c, escape_round_trips_through_jansson);
    suite_add_tcase(s, c);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
