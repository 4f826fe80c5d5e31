/* Unit tests for the tool channel's reply line (supervisor/toolmsg.c ipb_toolmsg_reply) and the
 * content block checks (supervisor/toolcontent.c): every kind of block passed on in order,
 * malformed blocks dropped with a reason without breaking the reply, and the size bound. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
#include "error.h"
#include "toolcontent.h"
#include "toolmsg.h"

static json_t *load(const char *s) {
    json_error_t jerr;
    json_t *v = json_loads(s, JSON_ALLOW_NUL, &jerr);
    ck_assert_msg(v != NULL, "bad JSON in the test: %s (%s)", s, jerr.text);
    return v;
}

/* The reply for the CallToolResult res (JSON text) equals want (JSON text). */
static void expect_reply(const char *res, const char *want) {
    json_t *r = load(res), *w = load(want);
    json_t *got = ipb_toolmsg_reply(r, NULL);
    char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
    char *x = json_dumps(w, JSON_COMPACT | JSON_SORT_KEYS);
    ck_assert_msg(json_equal(got, w), "reply to %s:\n got      %s\n expected %s", res, g, x);
    free(g);
    free(x);
    json_decref(got);
    json_decref(r);
    json_decref(w);
}

/* The reply's "result" for res, checked to be one. */
static json_t *result_of(const char *res) {
    json_t *r = load(res);
    json_t *got = ipb_toolmsg_reply(r, NULL);
    json_decref(r);
    json_t *inner = json_object_get(got, "result");
    ck_assert_msg(json_is_object(inner) && json_object_size(got) == 1, "no result for %s", res);
    json_incref(inner);
    json_decref(got);
    return inner;
}

START_TEST(no_result_is_an_error) {
    ipb_error e = {.errnum = ETIMEDOUT, .msg = (char *)"the call took over 120 s"};
    json_t *got = ipb_toolmsg_reply(NULL, &e);
    json_t *w = load("{\"error\":{\"kind\":\"timeout\",\"message\":\"the call took over 120 s\"}}");
    ck_assert(json_equal(got, w));
    json_decref(got);
    json_decref(w);
    e = (ipb_error){.errnum = EPIPE, .msg = (char *)"the server went away"};
    got = ipb_toolmsg_reply(NULL, &e);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(got, "error"), "kind")), "failed");
    json_decref(got);
    got = ipb_toolmsg_reply(NULL, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(got, "error"), "kind")), "failed");
    json_decref(got);
}
END_TEST

START_TEST(one_text_block_stays_short) {
    expect_reply("{\"content\":[{\"type\":\"text\",\"text\":\"Echo: hi\"}]}", "{\"text\":\"Echo: hi\"}");
    expect_reply(
        "{\"content\":[{\"type\":\"text\",\"text\":\"x\",\"annotations\":{\"priority\":1}}],\"isError\":false}",
        "{\"text\":\"x\"}");
    /* no block at all is not one empty text block */
    expect_reply("{\"content\":[]}", "{\"result\":{\"content\":[]}}");
    expect_reply("{}", "{\"result\":{\"content\":[]}}");
    expect_reply("{\"content\":[],\"structuredContent\":null}", "{\"result\":{\"content\":[]}}");
    expect_reply("{\"content\":[{\"type\":\"text\",\"text\":\"\"}]}", "{\"text\":\"\"}");
    /* embedded NUL kept */
    expect_reply("{\"content\":[{\"type\":\"text\",\"text\":\"a\\u0000b\"}]}", "{\"text\":\"a\\u0000b\"}");
}
END_TEST

START_TEST(text_blocks_in_order) {
    expect_reply(
        "{\"content\":[{\"type\":\"text\",\"text\":\"one\"},{\"type\":\"text\",\"text\":\"two\"}]}",
        "{\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"one\"},{\"type\":\"text\",\"text\":\"two\"}]}}");
}
END_TEST

START_TEST(every_block_type) {
    expect_reply(
        "{\"content\":["
        "{\"type\":\"text\",\"text\":\"before\"},"
        "{\"type\":\"image\",\"data\":\"iVBORw0KGgo=\",\"mimeType\":\"image/"
        "png\",\"annotations\":{\"audience\":[\"user\"]}},"
        "{\"type\":\"audio\",\"data\":\"UklGRg==\",\"mimeType\":\"audio/wav\",\"_meta\":{\"x\":1}},"
        "{\"type\":\"resource\",\"resource\":{\"uri\":\"test://static/resource/1\",\"mimeType\":\"text/plain\","
        "\"text\":\"Resource 1\"}},"
        "{\"type\":\"resource\",\"resource\":{\"uri\":\"test://b\",\"blob\":\"AAEC\"}},"
        "{\"type\":\"resource_link\",\"uri\":\"test://static/resource/2\",\"name\":\"Resource 2\","
        "\"mimeType\":\"application/octet-stream\",\"description\":\"d\",\"title\":\"T\",\"size\":3},"
        "{\"type\":\"resource_link\",\"uri\":\"file:///x\",\"name\":\"\"},"
        "{\"type\":\"text\",\"text\":\"after\"}]}",
        "{\"result\":{\"content\":["
        "{\"type\":\"text\",\"text\":\"before\"},"
        "{\"type\":\"image\",\"data\":\"iVBORw0KGgo=\",\"mimeType\":\"image/png\"},"
        "{\"type\":\"audio\",\"data\":\"UklGRg==\",\"mimeType\":\"audio/wav\"},"
        "{\"type\":\"resource\",\"uri\":\"test://static/resource/1\",\"mimeType\":\"text/plain\",\"text\":\"Resource "
        "1\"},"
        "{\"type\":\"resource\",\"uri\":\"test://b\",\"blob\":\"AAEC\"},"
        "{\"type\":\"resource_link\",\"uri\":\"test://static/resource/2\",\"name\":\"Resource 2\","
        "\"mimeType\":\"application/octet-stream\",\"description\":\"d\",\"title\":\"T\",\"size\":3},"
        "{\"type\":\"resource_link\",\"uri\":\"file:///x\",\"name\":\"\"},"
        "{\"type\":\"text\",\"text\":\"after\"}]}}");
    /* one image alone is a result too (never the short text form) */
    expect_reply("{\"content\":[{\"type\":\"image\",\"data\":\"\",\"mimeType\":\"image/gif\"}]}",
                 "{\"result\":{\"content\":[{\"type\":\"image\",\"data\":\"\",\"mimeType\":\"image/gif\"}]}}");
}
END_TEST

START_TEST(structured_content_and_is_error) {
    expect_reply("{\"content\":[{\"type\":\"text\",\"text\":\"{\\\"t\\\":22}\"}],\"structuredContent\":{\"t\":22}}",
                 "{\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"{\\\"t\\\":22}\"}],"
                 "\"structuredContent\":{\"t\":22}}}");
    /* any JSON value but null passes as structured content */
    expect_reply("{\"content\":[],\"structuredContent\":[1,2]}",
                 "{\"result\":{\"content\":[],\"structuredContent\":[1,2]}}");
    expect_reply("{\"content\":[{\"type\":\"text\",\"text\":\"boom\"}],\"isError\":true}",
                 "{\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"boom\"}],\"isError\":true}}");
    expect_reply("{\"content\":[],\"isError\":true}", "{\"result\":{\"content\":[],\"isError\":true}}");
    /* isError that is not true is not an error */
    expect_reply("{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}],\"isError\":\"yes\"}", "{\"text\":\"ok\"}");
}
END_TEST

/* res has one good text block "ok" around one bad block; the bad one is dropped for `why`. */
static void expect_dropped(const char *bad, const char *why) {
    char res[4096];
    snprintf(res, sizeof(res),
             "{\"content\":[{\"type\":\"text\",\"text\":\"ok\"},%s,{\"type\":\"text\",\"text\":\"end\"}]}", bad);
    json_t *r = result_of(res);
    json_t *content = json_object_get(r, "content"), *dropped = json_object_get(r, "dropped");
    ck_assert_msg(json_array_size(content) == 2, "%s: %zu blocks kept", bad, json_array_size(content));
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(content, 0), "text")), "ok");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(content, 1), "text")), "end");
    ck_assert_msg(json_array_size(dropped) == 1, "%s: dropped %zu", bad, json_array_size(dropped));
    const char *reason = json_string_value(json_array_get(dropped, 0));
    ck_assert_msg(reason && !strncmp(reason, "block 2: ", 9) && strstr(reason, why), "%s: reason '%s', expected '%s'",
                  bad, reason, why);
    json_decref(r);
}

START_TEST(malformed_blocks_are_dropped_with_a_reason) {
    expect_dropped("42", "not an object");
    expect_dropped("{\"text\":\"no type\"}", "not an object with a string \"type\"");
    expect_dropped("{\"type\":7}", "not an object with a string \"type\"");
    expect_dropped("{\"type\":\"video\",\"data\":\"AAAA\"}", "unknown type");
    expect_dropped("{\"type\":\"text\"}", "without a string \"text\"");
    expect_dropped("{\"type\":\"text\",\"text\":5}", "without a string \"text\"");
    expect_dropped("{\"type\":\"image\",\"mimeType\":\"image/png\"}", "without a string \"data\"");
    expect_dropped("{\"type\":\"image\",\"data\":[1],\"mimeType\":\"image/png\"}", "without a string \"data\"");
    expect_dropped("{\"type\":\"image\",\"data\":\"AAA\",\"mimeType\":\"image/png\"}", "not base64");
    expect_dropped("{\"type\":\"image\",\"data\":\"AA=A\",\"mimeType\":\"image/png\"}", "not base64");
    expect_dropped("{\"type\":\"image\",\"data\":\"AA\\nA\",\"mimeType\":\"image/png\"}", "not base64");
    expect_dropped("{\"type\":\"audio\",\"data\":\"AA-_\",\"mimeType\":\"audio/wav\"}", "not base64");
    expect_dropped("{\"type\":\"image\",\"data\":\"AAAA\"}", "valid \"mimeType\"");
    expect_dropped("{\"type\":\"image\",\"data\":\"AAAA\",\"mimeType\":1}", "valid \"mimeType\"");
    expect_dropped("{\"type\":\"image\",\"data\":\"AAAA\",\"mimeType\":\"\"}", "valid \"mimeType\"");
    expect_dropped("{\"type\":\"image\",\"data\":\"AAAA\",\"mimeType\":\"image/png; x=\\\"a b\\\"\"}",
                   "valid \"mimeType\"");
    expect_dropped("{\"type\":\"audio\",\"data\":\"AAAA\",\"mimeType\":\"audio/\\u00e9\"}", "valid \"mimeType\"");
    expect_dropped("{\"type\":\"resource\"}", "without a \"resource\" object");
    expect_dropped("{\"type\":\"resource\",\"resource\":\"test://x\"}", "without a \"resource\" object");
    expect_dropped("{\"type\":\"resource\",\"resource\":{\"text\":\"t\"}}", "without a \"uri\"");
    expect_dropped("{\"type\":\"resource\",\"resource\":{\"uri\":\"\",\"text\":\"t\"}}", "without a \"uri\"");
    expect_dropped("{\"type\":\"resource\",\"resource\":{\"uri\":3,\"text\":\"t\"}}", "wrong type");
    expect_dropped("{\"type\":\"resource\",\"resource\":{\"uri\":\"u\"}}", "exactly one of");
    expect_dropped("{\"type\":\"resource\",\"resource\":{\"uri\":\"u\",\"text\":\"t\",\"blob\":\"AAAA\"}}",
                   "exactly one of");
    expect_dropped("{\"type\":\"resource\",\"resource\":{\"uri\":\"u\",\"blob\":\"%%%%\"}}", "not base64");
    expect_dropped("{\"type\":\"resource\",\"resource\":{\"uri\":\"u\",\"text\":null}}", "wrong type");
    expect_dropped("{\"type\":\"resource\",\"resource\":{\"uri\":\"u\",\"text\":\"t\",\"mimeType\":\"\"}}", "invalid");
    expect_dropped("{\"type\":\"resource_link\",\"uri\":\"u\"}", "without a \"uri\" and a \"name\"");
    expect_dropped("{\"type\":\"resource_link\",\"name\":\"n\"}", "without a \"uri\" and a \"name\"");
    expect_dropped("{\"type\":\"resource_link\",\"uri\":\"u\",\"name\":\"n\",\"size\":-1}", "wrong type");
    expect_dropped("{\"type\":\"resource_link\",\"uri\":\"u\",\"name\":\"n\",\"size\":1.5}", "wrong type");
    expect_dropped("{\"type\":\"resource_link\",\"uri\":\"u\",\"name\":\"n\",\"description\":{}}", "wrong type");
    expect_dropped("{\"type\":\"resource_link\",\"uri\":\"u\",\"name\":\"n\",\"mimeType\":\"a b\"}", "invalid");
}
END_TEST

START_TEST(a_drop_never_gives_the_short_form) {
    /* one good text block and a bad one: the kernel is told that something was dropped */
    json_t *r = result_of("{\"content\":[{\"type\":\"text\",\"text\":\"t\"},{\"type\":\"image\"}]}");
    ck_assert_int_eq(json_array_size(json_object_get(r, "content")), 1);
    ck_assert_int_eq(json_array_size(json_object_get(r, "dropped")), 1);
    json_decref(r);
    /* content that is not a list */
    r = result_of("{\"content\":\"hello\",\"structuredContent\":{\"a\":1}}");
    ck_assert_int_eq(json_array_size(json_object_get(r, "content")), 0);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(r, "dropped"), 0)), "\"content\" is not a list");
    ck_assert(json_is_object(json_object_get(r, "structuredContent")));
    json_decref(r);
}
END_TEST

START_TEST(many_drops_are_counted_not_listed) {
    json_t *res = json_pack("{s:[]}", "content");
    json_t *content = json_object_get(res, "content");
    for (int i = 0; i < 1000; i++)
        json_array_append_new(content, json_pack("{s:s}", "type", i == 500 ? "text" : "nope"));
    json_object_set_new(json_array_get(content, 500), "text", json_string("kept"));
    json_t *got = ipb_toolmsg_reply(res, NULL);
    json_t *r = json_object_get(got, "result");
    ck_assert_int_eq(json_array_size(json_object_get(r, "content")), 1);
    json_t *dropped = json_object_get(r, "dropped");
    ck_assert_int_eq(json_array_size(dropped), IPB_TOOLMSG_MAX_DROPPED + 1);
    ck_assert_str_eq(json_string_value(json_array_get(dropped, 0)), "block 1: a block of an unknown type");
    ck_assert_str_eq(json_string_value(json_array_get(dropped, IPB_TOOLMSG_MAX_DROPPED)), "and 983 more");
    json_decref(got);
    json_decref(res);
}
END_TEST

START_TEST(base64_rules) {
    static const struct {
        const char *s;
        size_t len;
        bool ok;
    } cases[] = {
        {"", 0, true},         {"AAAA", 4, true},   {"AA==", 4, true},      {"AAA=", 4, true},      {"+/+/", 4, true},
        {"Zm9vYmFy", 8, true}, {"A", 1, false},     {"AA", 2, false},       {"AAA", 3, false},      {"A===", 4, false},
        {"====", 4, false},    {"AA=A", 4, false},  {"=AAA", 4, false},     {"AAAA\n", 5, false},   {"AA AA", 5, false},
        {"AA-_", 4, false},    {"AA\0A", 4, false}, {"AAAAA===", 8, false}, {"AAAA====", 8, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(ipb_toolcontent_base64_ok(cases[i].s, cases[i].len) == cases[i].ok, "'%s'", cases[i].s);
}
END_TEST

START_TEST(reply_line_stays_within_three_times_the_message) {
    /* The worst growth: 4-byte UTF-8 characters become 12-byte \u escape pairs with
     * JSON_ENSURE_ASCII (how the channel writes the line); base64 is passed on as it is. */
    size_t n = 1 << 18;
    char *emoji = malloc(4 * n + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(emoji + 4 * i, "\xf0\x9f\x98\x80", 4);
    emoji[4 * n] = 0;
    char *b64 = malloc(4 * n + 1);
    memset(b64, 'A', 4 * n);
    b64[4 * n] = 0;
    json_t *res = json_pack("{s:[{s:s, s:s}, {s:s, s:s, s:s}], s:{s:s}}", "content", "type", "text", "text", emoji,
                            "type", "image", "data", b64, "mimeType", "image/png", "structuredContent", "s", emoji);
    char *msg = json_dumps(res, JSON_COMPACT);
    json_t *got = ipb_toolmsg_reply(res, NULL);
    char *line = json_dumps(got, JSON_COMPACT | JSON_ENSURE_ASCII);
    ck_assert(json_is_object(json_object_get(got, "result")));
    ck_assert_msg(strlen(line) <= 3 * strlen(msg) + 200, "line %zu bytes for a %zu-byte message", strlen(line),
                  strlen(msg));
    ck_assert_msg(strlen(line) > 3 * 2 * 4 * n, "line %zu bytes", strlen(line)); /* both texts as \u pairs */
    free(line);
    free(msg);
    free(emoji);
    free(b64);
    json_decref(got);
    json_decref(res);
}
END_TEST

static Suite *toolmsg_suite(void) {
    Suite *s = suite_create("toolmsg");
    TCase *t = tcase_create("reply");
    tcase_add_test(t, no_result_is_an_error);
    tcase_add_test(t, one_text_block_stays_short);
    tcase_add_test(t, text_blocks_in_order);
    tcase_add_test(t, every_block_type);
    tcase_add_test(t, structured_content_and_is_error);
    tcase_add_test(t, malformed_blocks_are_dropped_with_a_reason);
    tcase_add_test(t, a_drop_never_gives_the_short_form);
    tcase_add_test(t, many_drops_are_counted_not_listed);
    tcase_add_test(t, base64_rules);
    tcase_add_test(t, reply_line_stays_within_three_times_the_message);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return ipb_run_suite(toolmsg_suite()); }
