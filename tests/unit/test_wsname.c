/* Unit tests for policy/wsname.c: workspace names (`--workspace NAME`) and the names of
 * unnamed workspaces. */
#include <check.h>
#include <string.h>
#include <time.h>

#include "options.h"
#include "run_suite.h"
#include "wsname.h"

static void expect_bad(const char *name, const char *msg) {
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_workspace_name_check("--workspace", name, &err), -1);
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(ipb_error_msg(err), msg), "'%s': %s", name, ipb_error_msg(err));
    ipb_error_free(err);
}

START_TEST(good_names) {
    static const char *const good[] = {"a", "proj", "data.v1_x-y", "A9", "x..y", "2026-11-26T130512Z-0123456789abcdef"};
    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
        ipb_error *err = NULL;
        ck_assert_msg(ipb_workspace_name_check("--workspace", good[i], &err) == 0, "%s", good[i]);
        ck_assert_ptr_null(err);
    }
    char max[IPB_WS_NAME_MAX + 1];
    memset(max, 'n', IPB_WS_NAME_MAX);
    max[IPB_WS_NAME_MAX] = '\0';
    ck_assert_int_eq(ipb_workspace_name_check("--workspace", max, NULL), 0);
}
END_TEST

START_TEST(bad_names) {
    expect_bad("", "empty");
    expect_bad(".", "must not start with '.'");
    expect_bad("..", "must not start with '.'");
    expect_bad(".hidden", "must not start with '.'");
    expect_bad("-rf", "must not start with '-'");
    expect_bad("a b", "only letters");
    expect_bad("a\nb", "only letters");
    expect_bad("caf\xc3\xa9", "only letters");
    expect_bad("a:b", "only letters");
    char big[IPB_WS_NAME_MAX + 2];
    memset(big, 'n', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    expect_bad(big, "at most 64");
}
END_TEST

START_TEST(name_or_path) {
    ck_assert(ipb_workspace_is_name("proj"));
    ck_assert(ipb_workspace_is_name(".."));
    ck_assert(!ipb_workspace_is_name("/abs"));
    ck_assert(!ipb_workspace_is_name("rel/ative"));
    ck_assert(!ipb_workspace_is_name("../x"));
}
END_TEST

START_TEST(options_take_names_and_absolute_paths) {
    static const char *const cases[][2] = {
        {"proj", NULL},
        {"/abs/dir", NULL},
        {"..", "must not start with '.'"},
        {"../x", "must be an absolute path"},
        {"a/b", "must be an absolute path"},
        {"", "empty"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        ipb_options o;
        ipb_options_init(&o);
        char *argv[] = {(char *)"--workspace", (char *)cases[i][0], NULL};
        int next = 0;
        ipb_error *err = NULL;
        int r = ipb_options_parse(&o, 2, argv, &next, &err);
        if (!cases[i][1]) {
            ck_assert_msg(r == 0, "%s: %s", cases[i][0], err ? ipb_error_msg(err) : "");
            ck_assert_str_eq(o.workspace, cases[i][0]);
        } else {
            ck_assert_int_eq(r, -1);
            ck_assert_msg(strstr(ipb_error_msg(err), cases[i][1]), "%s: %s", cases[i][0], ipb_error_msg(err));
            ipb_error_free(err);
        }
        ipb_options_free(&o);
    }
}
END_TEST

START_TEST(unnamed_names) {
    char buf[IPB_WS_UNNAMED_LEN + 1], id[17];
    time_t t = 1795698312; /* 2026-11-26 13:05:12 UTC */
    ck_assert_int_eq(ipb_workspace_unnamed_name(t, "0123456789abcdef", buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "2026-11-26T130512Z-0123456789abcdef");
    /* A valid name too (a user may name one to come back to it), and recognised as unnamed. */
    ck_assert_int_eq(ipb_workspace_name_check("--workspace", buf, NULL), 0);
    time_t made = 0;
    ck_assert(ipb_workspace_unnamed_id(buf, id, &made));
    ck_assert_str_eq(id, "0123456789abcdef");
    ck_assert_int_eq((long)made, (long)t);
    /* Sorted by name is sorted by time. */
    char later[IPB_WS_UNNAMED_LEN + 1];
    ck_assert_int_eq(ipb_workspace_unnamed_name(t + 3600 * 24 * 40, "0000000000000000", later, sizeof(later)), 0);
    ck_assert_int_lt(strcmp(buf, later), 0);
    /* Too small a buffer, a bad id. */
    ck_assert_int_eq(ipb_workspace_unnamed_name(t, "0123456789abcdef", buf, IPB_WS_UNNAMED_LEN), -1);
    ck_assert_int_eq(ipb_workspace_unnamed_name(t, "0123", buf, sizeof(buf)), -1);
    /* Older versions' names: the id alone. */
    ck_assert(ipb_workspace_unnamed_id("00000000000000a1", id, &made));
    ck_assert_str_eq(id, "00000000000000a1");
    ck_assert_int_eq((long)made, 0);
    /* Not unnamed. */
    static const char *const not_unnamed[] = {
        "proj",
        "00000000000000A1",
        "00000000000000a",
        "2026-11-26T130512Z-0123456789abcdeg",
        "2026-13-26T130512Z-0123456789abcdef",
        "2026-11-26T250512Z-0123456789abcdef",
        "2026-11-26T130512-0123456789abcdef",
        "2026-11-26T130512Z-0123456789abcdef0",
        "x026-11-26T130512Z-0123456789abcdef",
    };
    for (size_t i = 0; i < sizeof(not_unnamed) / sizeof(*not_unnamed); i++)
        ck_assert_msg(!ipb_workspace_unnamed_id(not_unnamed[i], id, NULL), "%s", not_unnamed[i]);
}
END_TEST

static Suite *wsname_suite(void) {
    Suite *s = suite_create("wsname");
    TCase *t = tcase_create("wsname");
    tcase_add_test(t, good_names);
    tcase_add_test(t, bad_names);
    tcase_add_test(t, name_or_path);
    tcase_add_test(t, options_take_names_and_absolute_paths);
    tcase_add_test(t, unnamed_names);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return ipb_run_suite(wsname_suite()); }
