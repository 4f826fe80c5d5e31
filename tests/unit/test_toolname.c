/* Unit tests for toolgen/toolname.c: the tool names an approval question can show truthfully
 * pass; names that could rearrange, hide or break its sentence are refused with the reason. */
#include <check.h>
#include <string.h>

#include "run_suite.h"
#include "toolname.h"

static const char *problem(const char *s) { return ipb_tool_name_problem(s, strlen(s)); }

START_TEST(plain_names_pass) {
    const char *ok[] = {"echo",
                        "get-sum",
                        "fs.read_file",
                        "a/b",
                        "x); import os #",
                        "\xc3\xa9t\xc3\xa9",
                        "\xe4\xb8\xad\xf0\x9f\x98\x80",
                        "__init__"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++)
        ck_assert_msg(problem(ok[i]) == NULL, "%s refused: %s", ok[i], problem(ok[i]));
    char longest[IPB_TOOL_NAME_MAX + 2];
    memset(longest, 'n', IPB_TOOL_NAME_MAX);
    longest[IPB_TOOL_NAME_MAX] = '\0';
    ck_assert_ptr_null(problem(longest));
    longest[IPB_TOOL_NAME_MAX] = 'n';
    longest[IPB_TOOL_NAME_MAX + 1] = '\0';
    ck_assert_str_eq(problem(longest), "is longer than 256 bytes");
}
END_TEST

START_TEST(lying_names_are_refused) {
    struct {
        const char *name, *why;
    } bad[] = {
        {"", "is empty"},
        {"a\nb", "control"},
        {"a\rb", "control"},
        {"a\x1b[2Kb", "control"},
        {"a\x7f", "control"},
        {"a\xc2\x85", "control"}, /* NEL */
        {"a\xc2\x9b"
         "2K",
         "control"}, /* CSI */
        {"a\xe2\x80\xae"
         "cba",
         "reorders"}, /* RLO */
        {"a\xe2\x81\xa6"
         "b",
         "reorders"},                  /* LRI */
        {"a\xe2\x80\x8f", "reorders"}, /* RLM */
        {"a\xd8\x9c", "reorders"},     /* ALM */
        {"a\xe2\x80\x8b"
         "b",
         "reorders"}, /* ZWSP */
        {"a\xe2\x80\xa8"
         "b",
         "reorders"},                      /* LINE SEPARATOR */
        {"a\xef\xbb\xbf", "reorders"},     /* BOM */
        {"a\xf3\xa0\x80\x81", "reorders"}, /* a tag character */
        {"a\xc2\xad"
         "b",
         "reorders"}, /* soft hyphen */
        {"a'b", "quote"},
        {"a\"b", "quote"},
        {"a`b", "quote"},
        {"a\xff", "UTF-8"},
        {"a\xc0\xaf", "UTF-8"},     /* overlong '/' */
        {"a\xed\xa0\x80", "UTF-8"}, /* a surrogate */
        {"a\xe2\x80", "UTF-8"},     /* cut short */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        const char *why = problem(bad[i].name);
        ck_assert_msg(why != NULL, "case %zu passed", i);
        ck_assert_msg(strstr(why, bad[i].why), "case %zu: %s", i, why);
    }
    /* A NUL byte inside (json strings may hold one) is a control character. */
    ck_assert_ptr_nonnull(ipb_tool_name_problem("a\0b", 3));
}
END_TEST

static Suite *toolname_suite(void) {
    Suite *s = suite_create("toolname");
    TCase *t = tcase_create("problem");
    tcase_add_test(t, plain_names_pass);
    tcase_add_test(t, lying_names_are_refused);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return ipb_run_suite(toolname_suite()); }
