/* Unit tests for sandboxed MCP servers: the "sandbox" member of stdio params (mcpclient/
 * sandbox_params.c, through ipb_mcp_params_check), the rewrite into an `ipybox run` command
 * line (supervisor/mcp_sandbox.c) and the run-only options it uses (policy/options.c,
 * policy/mountplan.c). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mcp_client.h"
#include "mcp_sandbox.h"
#include "mountplan.h"
#include "options.h"
#include "run_suite.h"
#include "tree.h"

static int check_text(const char *text, ipb_error **err) {
    json_error_t jerr;
    json_t *p = json_loads(text, JSON_DECODE_ANY, &jerr);
    ck_assert_msg(p != NULL, "bad test JSON %s: %s", text, jerr.text);
    int r = ipb_mcp_params_check(p, err);
    json_decref(p);
    return r;
}

static void expect_ok(const char *text) {
    ipb_error *err = NULL;
    int r = check_text(text, &err);
    ck_assert_msg(r == IPB_MCP_STDIO, "%s refused: %s", text, err ? ipb_error_msg(err) : "?");
}

static void expect_refused(const char *text, const char *word) {
    ipb_error *err = NULL;
    int r = check_text(text, &err);
    ck_assert_msg(r == -1, "%s was accepted", text);
    ck_assert_int_eq(err->errnum, EINVAL);
    ck_assert_msg(strstr(ipb_error_msg(err), word), "%s: '%s' does not mention '%s'", text, ipb_error_msg(err), word);
    ipb_error_free(err);
}

START_TEST(sandbox_params_accepted) {
    expect_ok("{\"command\":\"npx\",\"sandbox\":true}");
    expect_ok("{\"command\":\"npx\",\"sandbox\":false}");
    expect_ok("{\"command\":\"npx\",\"sandbox\":{}}");
    expect_ok("{\"command\":\"npx\",\"sandbox\":{\"allowed_domains\":[\"registry.npmjs.org\",\"*.example.com\","
              "\"10.1.0.0/16\",\"2001:db8::1\"],\"allowed_dirs\":[\"/srv/data\",\"/home/me/project\"],"
              "\"env\":{\"TOKEN\":\"${GH_TOKEN}\",\"_X1\":\"\"}}}");
    expect_ok("{\"command\":\"x\",\"cwd\":\"/srv/data/sub\",\"env\":{\"A\":\"1\"},"
              "\"sandbox\":{\"allowed_dirs\":[\"/srv/data\"]}}");
    /* Not sandboxed: cwd and env names as before. */
    expect_ok("{\"command\":\"x\",\"cwd\":\"rel\",\"env\":{\"1A\":\"1\"},\"sandbox\":false}");
}
END_TEST

START_TEST(sandbox_params_refused) {
    expect_refused("{\"command\":\"x\",\"sandbox\":1}", "must be true, false or an object");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"net\":[]}}", "unknown key 'net' in 'sandbox'");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_dirs\":\"/srv\"}}", "array of strings");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_dirs\":[3]}}", "must be a string");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_dirs\":[\"srv\"]}}", "not an absolute path");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_dirs\":[\"/\"]}}", "whole filesystem");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_dirs\":[\"/srv/../etc\"]}}", "'..'");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_dirs\":[\"/srv/./a\"]}}", "'..'");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_dirs\":[\"/srv//a\"]}}", "empty component");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_dirs\":[\"/srv/a/\"]}}", "trailing");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_dirs\":[\"/etc/ssl\"]}}",
                   "inside the sandbox's own /etc");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_dirs\":[\"/tmp/x\"]}}", "own /tmp");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_dirs\":[\"/opt\"]}}",
                   "cover the sandbox's own /opt/ipybox");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_dirs\":[\"/srv/${D}\"]}}", "not filled here");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_dirs\":[]}}", "is empty");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_domains\":[]}}", "every public destination");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_domains\":[\"a b\"]}}", "'allowed_domains'[0]");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_domains\":[\"ok.test\",\"*.com\"]}}",
                   "'allowed_domains'[1]");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"allowed_domains\":[\"10.0.0.1/8\"]}}", "'allowed_domains'[0]");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"env\":{\"A=B\":\"1\"}}}", "not a variable name");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"env\":{\"A\":1}}}", "must be a string");
    expect_refused("{\"command\":\"x\",\"sandbox\":{\"env\":{\"JPY_PARENT_PID\":\"1\"}}}", "reserved");
    expect_refused("{\"command\":\"x\",\"env\":{\"9A\":\"1\"},\"sandbox\":{}}", "not a variable name");
    expect_refused("{\"command\":\"x\",\"cwd\":\"/srv\",\"sandbox\":{}}", "inside one of its");
    expect_refused("{\"command\":\"x\",\"cwd\":\"/srvx\",\"sandbox\":{\"allowed_dirs\":[\"/srv\"]}}",
                   "inside one of its");
    expect_refused("{\"command\":\"x\",\"cwd\":\"${D}\",\"sandbox\":{\"allowed_dirs\":[\"/srv\"]}}", "placeholder");
    expect_refused("{\"url\":\"http://127.0.0.1/mcp\",\"sandbox\":{}}", "for stdio servers");
}
END_TEST

static char tmpdir[64];

static void tmp_setup(void) {
    strcpy(tmpdir, "/tmp/ipb-mcpsb-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    setenv("XDG_STATE_HOME", tmpdir, 1);
}

static void tmp_teardown(void) { ipb_rm_rf(tmpdir); }

static json_t *wrap(const char *text, bool by_default, ipb_error **err) {
    json_t *p = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(p);
    ipb_error *e = NULL;
    ck_assert_msg(ipb_mcp_params_check(p, &e) > 0, "%s", e ? ipb_error_msg(e) : "");
    json_t *r = ipb_mcp_sandbox_wrap("srv", p, by_default, err);
    json_decref(p);
    return r;
}

static const char *arg(json_t *w, size_t i) { return json_string_value(json_array_get(json_object_get(w, "args"), i)); }

START_TEST(wrap_plain_servers_unchanged) {
    ipb_error *err = NULL;
    json_t *w = wrap("{\"command\":\"x\",\"args\":[\"a\"]}", false, &err);
    ck_assert_str_eq(json_string_value(json_object_get(w, "command")), "x");
    json_decref(w);
    w = wrap("{\"command\":\"x\",\"sandbox\":false}", false, &err);
    ck_assert_str_eq(json_string_value(json_object_get(w, "command")), "x");
    ck_assert_ptr_null(json_object_get(w, "sandbox"));
    json_decref(w);
    w = wrap("{\"url\":\"http://127.0.0.1/mcp\"}", true, &err);
    ck_assert_ptr_nonnull(json_object_get(w, "url"));
    json_decref(w);
    /* Opting out when the session sandboxes every server: refused, nothing made. */
    ck_assert_ptr_null(wrap("{\"command\":\"x\",\"sandbox\":false}", true, &err));
    ck_assert_ptr_nonnull(strstr(ipb_error_msg(err), "--sandbox-mcp-servers"));
    ipb_error_free(err);
    char home[128];
    snprintf(home, sizeof(home), "%s/ipybox/mcp-homes/srv", tmpdir);
    ck_assert_int_eq(access(home, F_OK), -1);
}
END_TEST

START_TEST(wrap_into_ipybox_run) {
    ipb_error *err = NULL;
    json_t *w = wrap("{\"command\":\"npx\",\"args\":[\"-y\",\"${PKG}\"],\"cwd\":\"/srv/p\",\"env\":{\"A\":\"1\",\"B\":"
                     "\"top\"},\"sandbox\":{\"allowed_domains\":[\"registry.npmjs.org\"],\"allowed_dirs\":[\"/srv/p\"],"
                     "\"env\":{\"B\":\"${SECRET}\"}}}",
                     false, &err);
    ck_assert_msg(w != NULL, "%s", err ? ipb_error_msg(err) : "");
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n] = 0;
    ck_assert_str_eq(json_string_value(json_object_get(w, "command")), self);
    char home[128];
    snprintf(home, sizeof(home), "%s/ipybox/mcp-homes/srv", tmpdir);
    struct stat st;
    ck_assert_int_eq(stat(home, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    const char *want[] = {"run",
                          "--home",
                          home,
                          "--allowed-domain",
                          "registry.npmjs.org",
                          "--host-dir",
                          "/srv/p",
                          "--cwd",
                          "/srv/p",
                          "--container-env-from",
                          "A=" IPB_MCP_SANDBOX_ENV_PREFIX "0",
                          "--container-env-from",
                          "B=" IPB_MCP_SANDBOX_ENV_PREFIX "1",
                          "--",
                          "npx",
                          "-y",
                          "${PKG}",
                          NULL};
    size_t i = 0;
    for (; want[i]; i++)
        ck_assert_msg(arg(w, i) && !strcmp(arg(w, i), want[i]), "args[%zu] is %s, want %s", i, arg(w, i), want[i]);
    ck_assert_ptr_null(arg(w, i));
    /* The values go in the environment, placeholders unfilled (the client fills them); the
     * sandbox's env wins over the top-level one; none is on the command line. */
    json_t *env = json_object_get(w, "env");
    ck_assert_str_eq(json_string_value(json_object_get(env, IPB_MCP_SANDBOX_ENV_PREFIX "0")), "1");
    ck_assert_str_eq(json_string_value(json_object_get(env, IPB_MCP_SANDBOX_ENV_PREFIX "1")), "${SECRET}");
    ck_assert_ptr_null(json_object_get(w, "sandbox"));
    ck_assert_ptr_null(json_object_get(w, "cwd"));
    json_decref(w);
    /* The default sandbox (--sandbox-mcp-servers) for a server without one. */
    w = wrap("{\"command\":\"uvx\",\"args\":[\"mcp-server-fetch\"]}", true, &err);
    ck_assert_str_eq(arg(w, 0), "run");
    ck_assert_str_eq(arg(w, 3), "--");
    ck_assert_str_eq(arg(w, 4), "uvx");
    json_decref(w);
    /* ... whose top-level params must then suit a sandbox too. */
    ck_assert_ptr_null(wrap("{\"command\":\"x\",\"env\":{\"1A\":\"v\"}}", true, &err));
    ck_assert_ptr_nonnull(strstr(ipb_error_msg(err), "not a variable name"));
    ipb_error_free(err);
}
END_TEST

static int parse(ipb_options *o, bool run, const char *const *argv, ipb_error **err) {
    ipb_options_init(o);
    o->run_only_ok = run;
    int n = 0;
    while (argv[n])
        n++;
    return ipb_options_parse(o, n, (char **)argv, NULL, err);
}

START_TEST(run_only_options) {
    ipb_options o;
    ipb_error *err = NULL;
    const char *a1[] = {"--home", "/h", "--host-dir", "/srv/p/", "--cwd", "/srv/p", "--sandbox-mcp-servers", NULL};
    ck_assert_int_eq(parse(&o, true, a1, &err), 0);
    ck_assert_str_eq(o.home_dir, "/h");
    ck_assert_str_eq(o.cwd, "/srv/p");
    ck_assert(o.sandbox_mcp_servers);
    ck_assert_uint_eq(o.n_binds, 1);
    ck_assert_uint_eq(o.n_host_dirs, 1);
    ck_assert_str_eq(o.binds[0].rel, "/srv/p");
    /* Bound at its own path, after /tmp. */
    ipb_plan_input in = {.opts = &o, .workspace = "/ws", .home = "/h"};
    ipb_mount_plan plan = {0};
    ck_assert_int_eq(ipb_mount_plan_build(&in, &plan, &err), 0);
    size_t at = 0, tmp = 0;
    for (size_t i = 0; i < plan.n; i++) {
        if (!strcmp(plan.m[i].dst, "/srv/p"))
            at = i;
        if (!strcmp(plan.m[i].dst, "/tmp"))
            tmp = i;
        ck_assert_str_ne(plan.m[i].dst, "/app//srv/p");
    }
    ck_assert_uint_gt(at, tmp);
    ck_assert_int_eq(plan.m[at].kind, IPB_MNT_BIND_RW);
    ck_assert_str_eq(plan.m[at].src, "/srv/p");
    ipb_mount_plan_free(&plan);
    ipb_options_free(&o);

    const char *a2[] = {"--home", "/h", NULL};
    ck_assert_int_eq(parse(&o, false, a2, &err), -1);
    ck_assert_ptr_nonnull(strstr(ipb_error_msg(err), "of `ipybox run` only"));
    ipb_error_free(err);
    err = NULL;
    ipb_options_free(&o);
    const char *bad[][3] = {{"--host-dir", "/usr/lib", "inside the sandbox's own /usr"},
                            {"--host-dir", "/home", "would cover the sandbox's own /home/appuser"},
                            {"--host-dir", "/", "other than /"},
                            {"--host-dir", "/a/../b", "no '.'"},
                            {"--cwd", "rel", "absolute"},
                            {"--container-env-from", "A=IPB_TEST_SURELY_UNSET", "is not set"},
                            {"--container-env-from", "1A=PATH", "not a valid variable name"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *a[] = {bad[i][0], bad[i][1], NULL};
        ck_assert_int_eq(parse(&o, true, a, &err), -1);
        ck_assert_msg(strstr(ipb_error_msg(err), bad[i][2]), "%s %s: %s", a[0], a[1], ipb_error_msg(err));
        ipb_error_free(err);
        err = NULL;
        ipb_options_free(&o);
    }
    setenv("IPB_TEST_VALUE", "v=1 2", 1);
    const char *a3[] = {"--container-env-from", "NAME=IPB_TEST_VALUE", NULL};
    ck_assert_int_eq(parse(&o, true, a3, &err), 0);
    ck_assert_str_eq(o.env.v[0], "NAME=v=1 2");
    ipb_options_free(&o);
}
END_TEST

static Suite *mcp_sandbox_suite(void) {
    Suite *s = suite_create("mcp_sandbox");
    TCase *p = tcase_create("params");
    tcase_add_test(p, sandbox_params_accepted);
    tcase_add_test(p, sandbox_params_refused);
    tcase_add_test(p, run_only_options);
    suite_add_tcase(s, p);
    TCase *w = tcase_create("wrap");
    tcase_add_checked_fixture(w, tmp_setup, tmp_teardown);
    tcase_add_test(w, wrap_plain_servers_unchanged);
    tcase_add_test(w, wrap_into_ipybox_run);
    suite_add_tcase(s, w);
    return s;
}

int main(void) { return ipb_run_suite(mcp_sandbox_suite()); }
