/* supervisor/jsonfast.c: the stream-content decoder (a strict subset of what jansson
 * accepts) and the JSON string encoder. */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
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
    ck_assert_int_eq(
        decode("{\"name\":\"o\",\"text\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00h\xc3\xa9\\u0000z\"}", &n, &t,
               &l),
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
        "{\"name\":\"o\",\"text\":\"\\ud800\"}", /* lone high surrogate */
        "{\"name\":\"o\",\"text\":\"\\udc00\"}", /* lone low surrogate */
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
        "{\"name\":\"\\u0000\",\"text\":\"a\"}", /* NUL in the name */
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
    ck_assert_int_eq(ipb_buf_append(&out, "\"", 1), 0);
    ck_assert_int_eq(ipb_json_escape_body_append(&out, in, len), 0);
    ck_assert_int_eq(ipb_buf_append(&out, "\"", 1), 0);
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

START_TEST(scan_leaves_the_body_in_place) {
    const char *json = "{\"name\":\"stdout\",\"text\":\"a\\nb\\u00e9\"}";
    ipb_stream_view v;
    ck_assert_int_eq(ipb_stream_content_scan(json, strlen(json), &v), 1);
    ck_assert_str_eq(v.name, "stdout");
    ck_assert_uint_eq(v.text_len, 10);
    ck_assert_int_eq(memcmp(v.text, "a\\nb\\u00e9", 10), 0);
    ck_assert_ptr_eq(v.text, strstr(json, "a\\n"));
    ck_assert(v.text_clean);
    free(v.name);
}
END_TEST

START_TEST(scan_flags_escaped_nul_and_esc) {
    static const char *const unclean[] = {
        "{\"name\":\"o\",\"text\":\"a\\u0000b\"}",
        "{\"name\":\"o\",\"text\":\"\\u001b[31mred\"}",
        "{\"name\":\"o\",\"text\":\"\\u001B\"}",
    };
    for (size_t i = 0; i < sizeof(unclean) / sizeof(*unclean); i++) {
        ipb_stream_view v;
        ck_assert_int_eq(ipb_stream_content_scan(unclean[i], strlen(unclean[i]), &v), 1);
        ck_assert_msg(!v.text_clean, "called clean: %s", unclean[i]);
        free(v.name);
    }
    /* The name's escapes do not matter; the text's other escapes are clean. */
    const char *ok = "{\"name\":\"\\u001b\",\"text\":\"\\u001c\\t\\u00ff\"}";
    ipb_stream_view v;
    ck_assert_int_eq(ipb_stream_content_scan(ok, strlen(ok), &v), 1);
    ck_assert(v.text_clean);
    free(v.name);
}
END_TEST

/* Every chunk size: chunks join to the whole text, each is valid UTF-8 on its own, and no
 * chunk is empty before the end (so callers always make progress). */
START_TEST(chunks_end_on_character_boundaries) {
    const char body[] = "ab\\u00e9\\ud83d\\ude00\xe2\x82\xac\\n\xf0\x9f\x98\x80xyz\\\"\\\\0123456789";
    const char want[] = "ab\xc3\xa9\xf0\x9f\x98\x80\xe2\x82\xac\n\xf0\x9f\x98\x80xyz\"\\0123456789";
    size_t blen = sizeof(body) - 1;
    for (size_t cap = 16; cap <= 40; cap++) {
        char out[64], all[128];
        size_t at = 0, got = 0;
        while (at < blen) {
            size_t n = 0;
            size_t used = ipb_json_unescape_chunk(body + at, blen - at, out, cap, &n);
            ck_assert_msg(used > 0 && n > 0 && n <= cap, "cap %zu: stuck at %zu", cap, at);
            json_t *js = json_stringn(out, n);
            ck_assert_msg(js != NULL, "cap %zu: chunk at %zu is not UTF-8", cap, at);
            json_decref(js);
            memcpy(all + got, out, n);
            got += n;
            at += used;
        }
        ck_assert_uint_eq(got, sizeof(want) - 1);
        ck_assert_int_eq(memcmp(all, want, got), 0);
    }
}
END_TEST

START_TEST(body_prefix_maps_text_offsets) {
    const char body[] = "ab\\u00e9\\ud83d\\ude00\xe2\x82\xac\\n\xf0\x9f\x98\x80xyz\\\"\\\\0123456789";
    const char want[] = "ab\xc3\xa9\xf0\x9f\x98\x80\xe2\x82\xac\n\xf0\x9f\x98\x80xyz\"\\0123456789";
    size_t blen = sizeof(body) - 1, tlen = sizeof(want) - 1;
    size_t boundaries = 0;
    for (size_t k = 0; k <= tlen + 1; k++) {
        size_t bp = ipb_json_body_prefix(body, blen, k);
        if (k > tlen) {
            ck_assert_uint_eq(bp, 0);
            continue;
        }
        if (!bp && k)
            continue; /* inside what one escape stands for */
        boundaries++;
        char out[128];
        size_t n = 0;
        ck_assert_uint_eq(ipb_json_unescape_chunk(body, bp, out, sizeof(out), &n), bp);
        ck_assert_msg(n == k && !memcmp(out, want, k), "prefix %zu: body %zu decodes to %zu bytes", k, bp, n);
    }
    /* Every offset but those inside the two bytes of \u00e9 and the four of the surrogate pair. */
    ck_assert_uint_eq(boundaries, tlen + 1 - 1 - 3);
    ck_assert_uint_eq(ipb_json_body_prefix(body, blen, 11), 23); /* before the \\n */
    ck_assert_uint_eq(ipb_json_body_prefix(body, blen, 12), 25); /* just after it */
}
END_TEST

START_TEST(escape_body_joins) {
    ipb_buf out = {0};
    ck_assert_int_eq(ipb_buf_append(&out, "\"", 1), 0);
    ck_assert_int_eq(ipb_json_escape_body_append(&out, "a\"\n", 3), 0);
    const char *more = "\x1b\xc3\xa9 long enough for words";
    ck_assert_int_eq(ipb_json_escape_body_append(&out, more, strlen(more)), 0);
    ck_assert_int_eq(ipb_buf_append(&out, "\"", 1), 0);
    json_error_t e;
    json_t *j = json_loadb(out.data, out.len, JSON_DECODE_ANY, &e);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(j), "a\"\n\x1b\xc3\xa9 long enough for words");
    json_decref(j);
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
    tcase_add_test(c, scan_leaves_the_body_in_place);
    tcase_add_test(c, scan_flags_escaped_nul_and_esc);
    tcase_add_test(c, chunks_end_on_character_boundaries);
    tcase_add_test(c, body_prefix_maps_text_offsets);
    tcase_add_test(c, escape_body_joins);
    suite_add_tcase(s, c);
    return ipb_run_suite(s);
}
