/* Unit tests for supervisor/shellgate: the built-in "ipybox" server of shell-command approval
 * in a registry, its answer, which --approve-tools patterns pre-approve it, and the question
 * put to the application. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
#include "shellgate.h"

static void registry(ipb_mcp_servers *s) {
    memset(s, 0, sizeof(*s));
    s->dir_fd = s->exit_ep = -1;
}

START_TEST(added_once_and_answers_in_process) {
    ipb_mcp_servers s;
    registry(&s);
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_shellgate_add(&s, &err), 0);
    ipb_mcp_server_entry *e = ipb_mcp_servers_get(&s, "ipybox");
    ck_assert_ptr_nonnull(e);
    ck_assert(ipb_shellgate_is(e));
    ck_assert_ptr_nonnull(json_object_get(e->tools, "shell"));
    ck_assert_ptr_nonnull(json_object_get(e->tools, "shell_magic"));
    ck_assert_uint_eq(json_array_size(e->modules), 0); /* no package in mcptools */
    ck_assert_ptr_null(e->client);

    json_t *args = json_pack("{s:s}", "cmd", "echo hi");
    json_t *res = e->local_call(e, "shell", args, &err);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(res, "content"), 0), "text")),
                     "approved");
    ck_assert(!json_is_true(json_object_get(res, "isError")));
    json_decref(res);
    json_decref(args);
    args = json_pack("{s:i}", "cmd", 5);
    res = e->local_call(e, "shell", args, &err);
    ck_assert(json_is_true(json_object_get(res, "isError")));
    json_decref(res);
    json_decref(args);

    /* Added twice: refused; a real server under its name: refused with the reason. */
    ck_assert_int_lt(ipb_shellgate_add(&s, &err), 0);
    ipb_error_free(err);
    err = NULL;
    ck_assert_int_lt(ipb_shellgate_check_name(&s, "ipybox", &err), 0);
    ck_assert_ptr_nonnull(strstr(ipb_error_msg(err), "--approve-shell"));
    ipb_error_free(err);
    err = NULL;
    ck_assert_int_eq(ipb_shellgate_check_name(&s, "github", &err), 0);
    ipb_mcp_servers_free(&s);
}
END_TEST

START_TEST(only_patterns_naming_ipybox_pre_approve) {
    static const struct {
        const char *pattern, *tool;
        bool approved;
    } cases[] = {
        {"ipybox", "shell", true},
        {"ipybox", "shell_magic", true},
        {"ipybox/*", "shell_magic", true},
        {"ipybox/shell", "shell", true},
        {"ipybox/shell", "shell_magic", false},
        {"ipybox/shell_*", "shell_magic", true},
        {"*", "shell", false},
        {"*/shell", "shell", false},
        {"ipy*", "shell", false},
        {"ipybox2", "shell", false},
        {"ipybox?", "shell", false},
        {"[i]pybox/shell", "shell", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        ipb_options o;
        ipb_options_init(&o);
        ck_assert_int_eq(ipb_strv_push(&o.approve_tools, cases[i].pattern), 0);
        ck_assert_msg(ipb_shellgate_preapproved(&o, cases[i].tool) == cases[i].approved, "%s for %s", cases[i].pattern,
                      cases[i].tool);
        ipb_options_free(&o);
    }
}
END_TEST

START_TEST(the_question_shows_the_command_in_ascii_and_says_when_it_is_cut) {
    ipb_mcp_servers s;
    registry(&s);
    ck_assert_int_eq(ipb_shellgate_add(&s, NULL), 0);
    json_t *args = json_pack("{s:s}", "cmd", "rm -rf \"$HOME\"\n\xe2\x80\xae echo");
    char *q = ipb_shellgate_question(&s, "ipybox", "shell", args, 4000);
    ck_assert_ptr_nonnull(q);
    ck_assert_msg(strstr(q, "asks to run the shell command: \"rm -rf \\\"$HOME\\\"\\n\\u202E echo\"") != NULL, "%s", q);
    for (const char *c = q; *c; c++)
        ck_assert_msg((unsigned char)*c >= ' ' && (unsigned char)*c < 0x7f, "not printable ASCII: %s", q);
    free(q);
    q = ipb_shellgate_question(&s, "ipybox", "shell_magic", args, 5);
    ck_assert_ptr_nonnull(strstr(q, "of a cell magic: \"rm -... (CUT: only the first 5 of"));
    free(q);
    /* Not the built-in: the generic question is used. */
    ck_assert_ptr_null(ipb_shellgate_question(&s, "github", "shell", args, 4000));
    json_decref(args);
    args = json_object();
    q = ipb_shellgate_question(&s, "ipybox", "shell", args, 4000);
    ck_assert_ptr_nonnull(strstr(q, "(no command given)"));
    free(q);
    json_decref(args);
    ipb_mcp_servers_free(&s);
}
END_TEST

int main(void) {
    Suite *s = suite_create("shellgate");
    TCase *t = tcase_create("shellgate");
    tcase_add_test(t, added_once_and_answers_in_process);
    tcase_add_test(t, only_patterns_naming_ipybox_pre_approve);
    tcase_add_test(t, the_question_shows_the_command_in_ascii_and_says_when_it_is_cut);
    suite_add_tcase(s, t);
    return ipb_run_suite(s);
}
