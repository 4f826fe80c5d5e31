/* Unit tests for policy/options: command-line options, sizes, env assignments and files,
 * --container-bind, defaults and the sandbox environment. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_suite.h"
#include "options.h"

/* Parses a NULL-terminated list of words into o (initialised here). On failure *msg gets a
 * copy of the message (caller frees). */
static int parse_words(ipb_options *o, const char *const *words, int *next, char **msg) {
    int argc = 0;
    while (words[argc])
        argc++;
    ipb_options_init(o);
    ipb_error *err = NULL;
    int r = ipb_options_parse(o, argc, (char **)words, next, &err);
    ck_assert_msg((r < 0) == (err != NULL), "return value %d and error %p disagree", r, (void *)err);
    if (msg)
        *msg = err ? strdup(ipb_error_msg(err)) : NULL;
    ipb_error_free(err);
    return r;
}

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void expect_parse_error(const char *const *words, const char *needle) {
    ipb_options o;
    char *msg = NULL;
    int r = parse_words(&o, words, NULL, &msg);
    ck_assert_msg(r < 0, "'%s %s' was accepted", words[0], words[1] ? words[1] : "");
    ck_assert_msg(strstr(msg, needle) != NULL, "message lacks '%s': %s", needle, msg);
    free(msg);
    ipb_options_free(&o);
}

static char env_path[64];

static void write_env_file(const char *text) {
    snprintf(env_path, sizeof(env_path), "/tmp/ipb-unit-envfile-XXXXXX");
    int fd = mkstemp(env_path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

START_TEST(init_defaults) {
    ipb_options o;
    ipb_options_init(&o);
    ck_assert_uint_eq(o.tmp_size, IPB_DEFAULT_TMP_SIZE);
    ck_assert_uint_eq(o.shm_size, IPB_DEFAULT_SHM_SIZE);
    ck_assert_int_eq(o.max_output_chars, IPB_DEFAULT_MAX_OUTPUT);
    ck_assert_ptr_null(o.python);
    ck_assert_uint_eq(o.allowed_dirs.n, 0);
    ipb_options_free(&o);
    ipb_options_free(&o); /* free twice: the struct is zeroed */
}
END_TEST

START_TEST(parse_every_option) {
    write_env_file("FROM_FILE=1\n");
    ipb_options o;
    int next = -1;
    char *msg = NULL;
    int r = parse_words(&o,
                        WORDS("--allowed-dir", "/data", "--allowed-domain", "example.com", "--container-env-var", "K=V",
                              "--container-env-file", env_path, "--container-bind", "/srv/in:in/data", "--rootfs",
                              "/srv/root", "--container-tag", "ghcr.io/x:1", "--workspace", "/w", "--python",
                              "/opt/py/bin/python3", "--tmp-size", "2G", "--shm-size", "128M", "--max-output-chars",
                              "1234", "--verbose", "-v", "--help", "-h"),
                        &next, &msg);
    unlink(env_path);
    ck_assert_msg(r == 0, "%s", msg ? msg : "");
    ck_assert_int_eq(next, 28);
    ck_assert_uint_eq(o.allowed_dirs.n, 1);
    ck_assert_str_eq(o.allowed_dirs.v[0], "/data");
    ck_assert_ptr_null(o.allowed_dirs.v[1]);
    ck_assert_uint_eq(o.allowed_domains.n, 1);
    ck_assert_str_eq(o.allowed_domains.v[0], "example.com");
    ck_assert_uint_eq(o.egress.n_rules, 1);
    ck_assert_str_eq(o.egress.rules[0].name, "example.com");
    ck_assert_uint_eq(o.env.n, 2);
    ck_assert_str_eq(o.env.v[0], "K=V");
    ck_assert_str_eq(o.env.v[1], "FROM_FILE=1");
    ck_assert_uint_eq(o.n_binds, 1);
    ck_assert_str_eq(o.binds[0].host, "/srv/in");
    ck_assert_str_eq(o.binds[0].rel, "in/data");
    ck_assert_str_eq(o.rootfs, "/srv/root");
    ck_assert_str_eq(o.container_tag, "ghcr.io/x:1");
    ck_assert_str_eq(o.workspace, "/w");
    ck_assert_str_eq(o.python, "/opt/py/bin/python3");
    ck_assert_uint_eq(o.tmp_size, 2ull << 30);
    ck_assert_uint_eq(o.shm_size, 128ull << 20);
    ck_assert_int_eq(o.max_output_chars, 1234);
    ck_assert_int_eq(o.verbose, 2);
    ck_assert(o.help);
    ipb_options_free(&o);
}
END_TEST

START_TEST(parse_equals_form) {
    ipb_options o;
    int next = -1;
    char *msg = NULL;
    int r = parse_words(&o,
                        WORDS("--allowed-dir=/a", "--allowed-dir=/b", "--container-env-var=K=a=b", "--rootfs=/r",
                              "--tmp-size=1M", "--shm-size=1g", "--max-output-chars=100", "--python=/py",
                              "--workspace=/ws", "--container-bind=/h:x", "--allowed-domain=d"),
                        &next, &msg);
    ck_assert_msg(r == 0, "%s", msg ? msg : "");
    ck_assert_int_eq(next, 11);
    ck_assert_uint_eq(o.allowed_dirs.n, 2); /* repeatable, in order */
    ck_assert_str_eq(o.allowed_dirs.v[0], "/a");
    ck_assert_str_eq(o.allowed_dirs.v[1], "/b");
    ck_assert_str_eq(o.env.v[0], "K=a=b"); /* only the first '=' separates the option */
    ck_assert_str_eq(o.rootfs, "/r");
    ck_assert_uint_eq(o.tmp_size, 1ull << 20);
    ck_assert_uint_eq(o.shm_size, 1ull << 30);
    ck_assert_int_eq(o.max_output_chars, 100);
    ck_assert_str_eq(o.python, "/py");
    ck_assert_str_eq(o.workspace, "/ws");
    ck_assert_str_eq(o.binds[0].rel, "x");
    ck_assert_str_eq(o.allowed_domains.v[0], "d");
    ipb_options_free(&o);
}
END_TEST

START_TEST(parse_missing_value) {
    expect_parse_error(WORDS("--python"), "--python needs a value");
    expect_parse_error(WORDS("-v", "--allowed-dir"), "--allowed-dir needs a value");
    expect_parse_error(WORDS("--tmp-size"), "--tmp-size needs a value");
}
END_TEST

START_TEST(parse_unknown_option) {
    expect_parse_error(WORDS("--bogus"), "unknown option '--bogus'");
    expect_parse_error(WORDS("--bogus=1"), "unknown option '--bogus'");
    expect_parse_error(WORDS("-x"), "unknown option '-x'");
    expect_parse_error(WORDS("--pytho", "/x"), "unknown option '--pytho'"); /* no prefix matching */
    expect_parse_error(WORDS("--python3", "/x"), "unknown option");
    expect_parse_error(WORDS("-"), "unknown option");
}
END_TEST

START_TEST(parse_flag_with_value) {
    expect_parse_error(WORDS("--verbose=2"), "--verbose takes no value");
    expect_parse_error(WORDS("--help=yes"), "--help takes no value");
}
END_TEST

START_TEST(parse_repeated_verbose) {
    ipb_options o;
    int next = -1;
    ck_assert_int_eq(parse_words(&o, WORDS("-vv"), &next, NULL), 0);
    ck_assert_int_eq(o.verbose, 2);
    ipb_options_free(&o);
    ck_assert_int_eq(parse_words(&o, WORDS("-v", "-vvv", "--verbose"), &next, NULL), 0);
    ck_assert_int_eq(o.verbose, 5);
    ipb_options_free(&o);
    expect_parse_error(WORDS("-vx"), "unknown option '-vx'");
    expect_parse_error(WORDS("-vv=1"), "unknown option");
}
END_TEST

START_TEST(parse_stops_at_double_dash) {
    ipb_options o;
    int next = -1;
    ck_assert_int_eq(parse_words(&o, WORDS("-v", "--", "--python", "/x"), &next, NULL), 0);
    ck_assert_int_eq(next, 2);
    ck_assert_int_eq(o.verbose, 1);
    ck_assert_ptr_null(o.python);
    ipb_options_free(&o);
}
END_TEST

START_TEST(parse_stops_at_first_word) {
    ipb_options o;
    int next = -1;
    ck_assert_int_eq(parse_words(&o, WORDS("--python", "/py", "script.py", "--bogus", "-v"), &next, NULL), 0);
    ck_assert_int_eq(next, 2);
    ck_assert_int_eq(o.verbose, 0);
    ipb_options_free(&o);
    ck_assert_int_eq(parse_words(&o, WORDS("run"), &next, NULL), 0);
    ck_assert_int_eq(next, 0);
    ipb_options_free(&o);
    /* no words at all */
    ipb_options_init(&o);
    next = -1;
    ck_assert_int_eq(ipb_options_parse(&o, 0, NULL, &next, NULL), 0);
    ck_assert_int_eq(next, 0);
    ipb_options_free(&o);
    /* a value that looks like an option is still the value */
    ck_assert_int_eq(parse_words(&o, WORDS("--container-tag", "--verbose"), &next, NULL), 0);
    ck_assert_str_eq(o.container_tag, "--verbose");
    ck_assert_int_eq(o.verbose, 0);
    ipb_options_free(&o);
}
END_TEST

START_TEST(parse_bad_values) {
    expect_parse_error(WORDS("--allowed-dir", "rel/dir"), "must be an absolute path");
    expect_parse_error(WORDS("--allowed-dir="), "must be an absolute path");
    expect_parse_error(WORDS("--rootfs", "root"), "must be an absolute path");
    /* "ws" is a workspace name (test_wsname.c); a relative path is refused. */
    expect_parse_error(WORDS("--workspace", "sub/ws"), "must be an absolute path");
    expect_parse_error(WORDS("--workspace", ".."), "must not start with '.'");
    expect_parse_error(WORDS("--python", "python3"), "must be an absolute path (the interpreter on this host");
    expect_parse_error(WORDS("--allowed-domain="), "needs a value");
    expect_parse_error(WORDS("--allowed-domain", "*.com"), "'*.com'");
    expect_parse_error(WORDS("--allowed-domain", "10.0.0.1/8"), "did you mean 10.0.0.0/8");
    expect_parse_error(WORDS("--resolve", "example.com"), "NAME:ADDRESS");
    expect_parse_error(WORDS("--resolve", "example.com:nowhere"), "not an IP address");
    expect_parse_error(WORDS("--container-tag="), "needs a non-empty value");
    expect_parse_error(WORDS("--tmp-size", "1k"), "at least 1M");
    expect_parse_error(WORDS("--tmp-size", "big"), "at least 1M");
    expect_parse_error(WORDS("--shm-size", "1048575"), "at least 1M");
    expect_parse_error(WORDS("--max-output-chars", "99"), "between 100 and 10000000");
    expect_parse_error(WORDS("--max-output-chars", "10000001"), "between 100 and 10000000");
    expect_parse_error(WORDS("--max-output-chars", "12x"), "between 100 and 10000000");
    expect_parse_error(WORDS("--max-output-chars", ""), "between 100 and 10000000");
    expect_parse_error(WORDS("--max-output-chars", "99999999999999999999999"), "between 100 and 10000000");
    expect_parse_error(WORDS("--container-env-var", "1X=2"), "--container-env-var: '1X' is not a valid");
    expect_parse_error(WORDS("--container-env-var", "NOEQUALS"), "is not KEY=VALUE");
    expect_parse_error(WORDS("--container-env-var", "JPY_PARENT_PID=1"), "reserved");
    expect_parse_error(WORDS("--container-env-file", "/nonexistent/ipb-env"), "cannot read '/nonexistent/ipb-env'");
    ipb_options o;
    ck_assert_int_eq(parse_words(&o, WORDS("--max-output-chars", "10000000", "--shm-size", "1048576"), NULL, NULL), 0);
    ck_assert_int_eq(o.max_output_chars, 10000000);
    ck_assert_uint_eq(o.shm_size, 1048576);
    ipb_options_free(&o);
}
END_TEST

START_TEST(parse_env_file_error_is_wrapped) {
    write_env_file("OK=1\nbad line\n");
    ipb_options o;
    char *msg = NULL;
    int r = parse_words(&o, WORDS("--container-env-file", env_path), NULL, &msg);
    unlink(env_path);
    ck_assert_int_lt(r, 0);
    char expect[256];
    snprintf(expect, sizeof(expect), "--container-env-file: %s:2: expected KEY=VALUE", env_path);
    ck_assert_str_eq(msg, expect);
    free(msg);
    ipb_options_free(&o);
}
END_TEST

START_TEST(container_bind_specs) {
    ipb_options o;
    ck_assert_int_eq(parse_words(&o, WORDS("--container-bind", "/a:b:c", "--container-bind", "/h:x/./y"), NULL, NULL),
                     0);
    ck_assert_uint_eq(o.n_binds, 2);
    ck_assert_str_eq(o.binds[0].host, "/a:b"); /* the last ':' separates */
    ck_assert_str_eq(o.binds[0].rel, "c");
    ck_assert_str_eq(o.binds[1].host, "/h");
    ck_assert_str_eq(o.binds[1].rel, "x/./y");
    ipb_options_free(&o);

    expect_parse_error(WORDS("--container-bind", "/host"), "expected HOST_PATH:RELATIVE_PATH");
    expect_parse_error(WORDS("--container-bind", "/host:"), "expected HOST_PATH:RELATIVE_PATH");
    expect_parse_error(WORDS("--container-bind", ":rel"), "expected HOST_PATH:RELATIVE_PATH");
    expect_parse_error(WORDS("--container-bind", "host:rel"), "the host path must be absolute");
    expect_parse_error(WORDS("--container-bind", "./h:rel"), "the host path must be absolute");
    expect_parse_error(WORDS("--container-bind", "/h:/abs"), "absolute");
    expect_parse_error(WORDS("--container-bind", "/h:.."), "'..'");
    expect_parse_error(WORDS("--container-bind", "/h:a/../../etc"), "'..'");
    expect_parse_error(WORDS("--container-bind", "/h:sub/.."), "'..'");
    expect_parse_error(WORDS("--container-bind", "/h:./"), "/app itself");
    expect_parse_error(WORDS("--container-bind", "/h:."), "/app itself");
}
END_TEST

START_TEST(finish_defaults) {
    ipb_options o;
    ipb_options_init(&o);
    ck_assert_int_eq(ipb_options_finish(&o, "/home/u", NULL), 0);
    ck_assert_uint_eq(o.allowed_dirs.n, 2);
    ck_assert_str_eq(o.allowed_dirs.v[0], "/home/u");
    ck_assert_str_eq(o.allowed_dirs.v[1], "/tmp");
    ck_assert_str_eq(o.python, IPB_DEFAULT_PYTHON);
    ck_assert_str_eq(o.python, "/usr/bin/python3");
    ipb_options_free(&o);

    const char *homes[] = {NULL, "", "relative/home"};
    for (size_t i = 0; i < 3; i++) {
        ipb_options_init(&o);
        ck_assert_int_eq(ipb_options_finish(&o, homes[i], NULL), 0);
        ck_assert_uint_eq(o.allowed_dirs.n, 1);
        ck_assert_str_eq(o.allowed_dirs.v[0], "/tmp");
        ipb_options_free(&o);
    }
}
END_TEST

START_TEST(finish_refuses_missing_allowed_dirs) {
    static const char *const bad[][2] = {
        {"/nonexistent-ipybox-unit/dir", "No such file or directory"},
        {"/etc/passwd", "need a directory"},
    };
    for (size_t i = 0; i < 2; i++) {
        ipb_options o;
        ck_assert_int_eq(parse_words(&o, WORDS("--allowed-dir", "/tmp", "--allowed-dir", bad[i][0]), NULL, NULL), 0);
        ipb_error *err = NULL;
        ck_assert_int_eq(ipb_options_finish(&o, "/home/u", &err), -1);
        ck_assert_ptr_nonnull(strstr(ipb_error_msg(err), bad[i][0]));
        ck_assert_ptr_nonnull(strstr(ipb_error_msg(err), bad[i][1]));
        ipb_error_free(err);
        ipb_options_free(&o);
    }
}
END_TEST

START_TEST(finish_keeps_explicit_values) {
    ipb_options o;
    /* (An --allowed-dir must exist: see finish_refuses_missing_allowed_dirs.) */
    ck_assert_int_eq(parse_words(&o, WORDS("--allowed-dir", "/usr", "--python", "/py"), NULL, NULL), 0);
    ck_assert_int_eq(ipb_options_finish(&o, "/home/u", NULL), 0);
    ck_assert_uint_eq(o.allowed_dirs.n, 1);
    ck_assert_str_eq(o.allowed_dirs.v[0], "/usr");
    ck_assert_str_eq(o.python, "/py");
    ipb_options_free(&o);
}
END_TEST

START_TEST(parse_size_values) {
    static const struct {
        const char *s;
        uint64_t v;
    } ok[] = {
        {"0", 0},
        {"4096", 4096},
        {"64k", 64 << 10},
        {"64K", 64 << 10},
        {"512M", 512ull << 20},
        {"512m", 512ull << 20},
        {"1G", 1ull << 30},
        {"2g", 2ull << 30},
        {"1KB", 1024},
        {"1MiB", 1ull << 20},
        {"3Gb", 3ull << 30},
        {"17179869183G", 17179869183ull << 30},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
        uint64_t v = 12345;
        ck_assert_msg(ipb_parse_size(ok[i].s, &v) == 0, "'%s' refused", ok[i].s);
        ck_assert_msg(v == ok[i].v, "'%s' gave %llu", ok[i].s, (unsigned long long)v);
    }
    static const char *const bad[] = {"",   "M",   "-1",   "+1",    " 1",   "1 M",
                                      "1T", "1Mx", "1.5G", "1MiBx", "0x10", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        uint64_t v = 12345;
        ck_assert_msg(ipb_parse_size(bad[i], &v) == -EINVAL, "'%s' not refused with -EINVAL", bad[i]);
        ck_assert_msg(v == 12345, "'%s' changed the output on failure", bad[i]);
    }
    uint64_t v = 7;
    ck_assert_int_eq(ipb_parse_size(NULL, &v), -EINVAL);
    ck_assert_int_eq(ipb_parse_size("17179869184G", &v), -ERANGE); /* 2^34 GiB = 2^64 */
    ck_assert_int_eq(ipb_parse_size("18014398509481984K", &v), -ERANGE);
    ck_assert_uint_eq(v, 7);
}
END_TEST

static void env_ok(const char *kv) {
    ipb_error *err = NULL;
    ck_assert_msg(ipb_check_env_assignment(kv, &err) == 0, "'%s' refused: %s", kv, ipb_error_msg(err));
}

static void env_bad(const char *kv, const char *needle) {
    ipb_error *err = NULL;
    ck_assert_msg(ipb_check_env_assignment(kv, &err) < 0, "'%s' accepted", kv);
    ck_assert_msg(strstr(ipb_error_msg(err), needle), "message for '%s' lacks '%s': %s", kv, needle,
                  ipb_error_msg(err));
    ipb_error_free(err);
}

START_TEST(env_assignment_rules) {
    env_ok("A=1");
    env_ok("_=x");
    env_ok("a_B9=");
    env_ok("K==");
    env_ok("JPY_PARENT_PIDX=1");
    env_ok("JPY_PARENT_PI=1");
    env_ok("PATH=/x:/y");
    env_bad("NOEQ", "is not KEY=VALUE");
    env_bad("", "is not KEY=VALUE");
    env_bad("=x", "'' is not a valid variable name");
    env_bad("1A=x", "'1A' is not a valid variable name");
    env_bad("A-B=x", "'A-B' is not a valid");
    env_bad("A B=x", "'A B' is not a valid");
    env_bad("A.B=x", "is not a valid");
    env_bad("\xc3\xa9=x", "is not a valid");
    env_bad("JPY_PARENT_PID=123", "JPY_PARENT_PID is reserved");
    env_bad("JPY_PARENT_PID=", "JPY_PARENT_PID is reserved");
}
END_TEST

static int env_file(const char *text, size_t len, ipb_strv *env, char **msg) {
    ipb_error *err = NULL;
    int r = ipb_parse_env_file(text, len, "vars.env", env, &err);
    *msg = err ? strdup(ipb_error_msg(err)) : NULL;
    ipb_error_free(err);
    return r;
}

START_TEST(env_file_syntax) {
    static const char text[] = "# a comment\n"
                               "\n"
                               "   \n"
                               "A=1\n"
                               "  export B=two  \n"
                               "export\tC = 3\n"
                               "D=\"double quoted # not a comment\"\n"
                               "E='single'\n"
                               "F=\"  kept inside  \"\n"
                               "G=\"mismatched'\n"
                               "H=a=b=c\n"
                               "I=\n"
                               "J=\"\"\n"
                               "exportK=1\n"
                               "    # indented comment\n"
                               "CRLF=yes\r\n"
                               "\r\n"
                               "LAST=no newline";
    ipb_strv env = {0};
    char *msg = NULL;
    int r = env_file(text, sizeof(text) - 1, &env, &msg);
    ck_assert_msg(r == 0, "%s", msg ? msg : "");
    static const char *const expect[] = {"A=1",
                                         "B=two",
                                         "C=3",
                                         "D=double quoted # not a comment",
                                         "E=single",
                                         "F=  kept inside  ",
                                         "G=\"mismatched'",
                                         "H=a=b=c",
                                         "I=",
                                         "J=",
                                         "exportK=1",
                                         "CRLF=yes",
                                         "LAST=no newline"};
    ck_assert_uint_eq(env.n, sizeof(expect) / sizeof(*expect));
    for (size_t i = 0; i < env.n; i++)
        ck_assert_str_eq(env.v[i], expect[i]);
    ck_assert_ptr_null(env.v[env.n]);
    ipb_strv_free(&env);
}
END_TEST

START_TEST(env_file_empty_and_appends) {
    ipb_strv env = {0};
    char *msg = NULL;
    ck_assert_int_eq(env_file("", 0, &env, &msg), 0);
    ck_assert_uint_eq(env.n, 0);
    ck_assert_int_eq(env_file("\n\n# x\n", 6, &env, &msg), 0);
    ck_assert_uint_eq(env.n, 0);
    ipb_strv_push(&env, "PRE=0");
    ck_assert_int_eq(env_file("X=1\nX=2\n", 8, &env, &msg), 0);
    ck_assert_uint_eq(env.n, 3); /* appended in order; the last one wins later */
    ck_assert_str_eq(env.v[0], "PRE=0");
    ck_assert_str_eq(env.v[2], "X=2");
    ipb_strv_free(&env);
}
END_TEST

/* The length comes from the literal, so texts may hold NUL bytes. */
#define ENV_FILE_BAD(lit, expect) env_file_bad(lit, sizeof(lit) - 1, expect)

static void env_file_bad(const char *text, size_t len, const char *expect) {
    ipb_strv env = {0};
    char *msg = NULL;
    ck_assert_msg(env_file(text, len, &env, &msg) < 0, "accepted: %s", text);
    ck_assert_msg(msg && !strcmp(msg, expect), "message '%s', expected '%s'", msg, expect);
    free(msg);
    ipb_strv_free(&env);
}

START_TEST(env_file_errors_with_line_numbers) {
    ENV_FILE_BAD("A=1\nB=2\nnot an assignment\n", "vars.env:3: expected KEY=VALUE");
    ENV_FILE_BAD("A=1\r\n\r\nB\r\n", "vars.env:3: expected KEY=VALUE");
    ENV_FILE_BAD("A=1\nB=x\0y\nC=3\n", "vars.env:2: contains a NUL byte");
    ENV_FILE_BAD("\0", "vars.env:1: contains a NUL byte");
    ENV_FILE_BAD("# ok\n\n\n\nbad-key=1\n",
                 "vars.env:5: 'bad-key' is not a valid variable name (letters, digits, '_', not starting with a "
                 "digit)");
    ENV_FILE_BAD("A=1\nJPY_PARENT_PID=7\n", "vars.env:2: JPY_PARENT_PID is reserved by the sandbox");
    ENV_FILE_BAD("export\n", "vars.env:1: expected KEY=VALUE");
    ENV_FILE_BAD("export FOO\n", "vars.env:1: expected KEY=VALUE");
    ENV_FILE_BAD("=value\n", "vars.env:1: '' is not a valid variable name (letters, digits, '_', not starting "
                             "with a digit)");
}
END_TEST

START_TEST(env_file_respects_length) {
    /* Bytes past len are not read (the text need not be NUL-terminated). */
    char *text = malloc(7);
    memcpy(text, "A=1\nB=2", 7);
    ipb_strv env = {0};
    char *msg = NULL;
    ck_assert_int_eq(env_file(text, 7, &env, &msg), 0);
    ck_assert_uint_eq(env.n, 2);
    ck_assert_str_eq(env.v[1], "B=2");
    ipb_strv_free(&env);
    ck_assert_int_eq(env_file("A=1\nbroken", 4, &env, &msg), 0);
    ck_assert_uint_eq(env.n, 1);
    ipb_strv_free(&env);
    free(text);
}
END_TEST

static const char *env_get(const ipb_strv *env, const char *key, size_t *count) {
    size_t kl = strlen(key);
    const char *found = NULL;
    *count = 0;
    for (size_t i = 0; i < env->n; i++) {
        if (!strncmp(env->v[i], key, kl) && env->v[i][kl] == '=') {
            found = env->v[i] + kl + 1;
            (*count)++;
        }
    }
    return found;
}

START_TEST(sandbox_env_defaults) {
    ipb_options o;
    ipb_options_init(&o);
    ipb_strv env = {0};
    ck_assert_int_eq(ipb_sandbox_env(&o, false, &env, NULL), 0);
    size_t c;
    ck_assert_str_eq(env_get(&env, "PATH", &c), "/usr/local/bin:/usr/bin:/bin");
    ck_assert_str_eq(env_get(&env, "HOME", &c), "/home/appuser");
    ck_assert_str_eq(env_get(&env, "USER", &c), "appuser");
    ck_assert_str_eq(env_get(&env, "LANG", &c), "C.UTF-8");
    ck_assert_ptr_null(env_get(&env, "PYTHONUNBUFFERED", &c)); /* kernel-only */
    ck_assert_ptr_null(env.v[env.n]);
    for (size_t i = 0; i < env.n; i++)
        ck_assert_msg(strchr(env.v[i], '=') != NULL, "'%s' is not KEY=VALUE", env.v[i]);
    ipb_strv_free(&env);
    ck_assert_int_eq(ipb_sandbox_env(&o, true, &env, NULL), 0);
    ck_assert_str_eq(env_get(&env, "PYTHONUNBUFFERED", &c), "1");
    ck_assert_str_eq(env_get(&env, "HOME", &c), "/home/appuser");
    ipb_strv_free(&env);
    ipb_options_free(&o);
}
END_TEST

START_TEST(sandbox_env_user_overrides) {
    ipb_options o;
    ck_assert_int_eq(
        parse_words(&o,
                    WORDS("--container-env-var", "HOME=/custom", "--container-env-var", "X=1", "--container-env-var",
                          "X=2", "--container-env-var", "PATHX=p", "--container-env-var", "PYTHONUNBUFFERED=0"),
                    NULL, NULL),
        0);
    ipb_strv env = {0};
    ck_assert_int_eq(ipb_sandbox_env(&o, true, &env, NULL), 0);
    size_t c;
    ck_assert_str_eq(env_get(&env, "HOME", &c), "/custom");
    ck_assert_uint_eq(c, 1);
    ck_assert_str_eq(env_get(&env, "X", &c), "2");
    ck_assert_uint_eq(c, 1);
    ck_assert_str_eq(env_get(&env, "PYTHONUNBUFFERED", &c), "0");
    ck_assert_uint_eq(c, 1);
    ck_assert_str_eq(env_get(&env, "PATHX", &c), "p");
    ck_assert_str_eq(env_get(&env, "PATH", &c), "/usr/local/bin:/usr/bin:/bin"); /* a prefix is not a match */
    ck_assert_uint_eq(c, 1);
    ipb_strv_free(&env);
    ipb_options_free(&o);
}
END_TEST

START_TEST(sandbox_env_no_host_leak) {
    ck_assert_int_eq(setenv("IPB_UNIT_HOST_SECRET", "leaked", 1), 0);
    ck_assert_int_eq(setenv("LD_PRELOAD", "/tmp/evil.so", 1), 0);
    ck_assert_int_eq(setenv("PYTHONPATH", "/host/lib", 1), 0);
    ck_assert_int_eq(setenv("PATH", "/host/only/bin", 1), 0);
    ipb_options o;
    ipb_options_init(&o);
    for (int kernel = 0; kernel < 2; kernel++) {
        ipb_strv env = {0};
        ck_assert_int_eq(ipb_sandbox_env(&o, kernel, &env, NULL), 0);
        for (size_t i = 0; i < env.n; i++) {
            ck_assert_msg(!strstr(env.v[i], "IPB_UNIT_HOST_SECRET"), "host variable leaked: %s", env.v[i]);
            ck_assert_msg(!strstr(env.v[i], "leaked"), "host value leaked: %s", env.v[i]);
            ck_assert_msg(strncmp(env.v[i], "LD_PRELOAD=", 11), "host LD_PRELOAD leaked");
            ck_assert_msg(strncmp(env.v[i], "PYTHONPATH=", 11), "host PYTHONPATH leaked");
            ck_assert_msg(!strstr(env.v[i], "/host/"), "host value leaked: %s", env.v[i]);
        }
        ipb_strv_free(&env);
    }
    ipb_options_free(&o);
}
END_TEST

START_TEST(strv_push_and_free) {
    ipb_strv s = {0};
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(ipb_strv_push(&s, i == 99 ? "last" : "v"), 0);
    ck_assert_uint_eq(s.n, 100);
    ck_assert_str_eq(s.v[99], "last");
    ck_assert_ptr_null(s.v[100]);
    ipb_strv_free(&s);
    ck_assert_ptr_null(s.v);
    ck_assert_uint_eq(s.n, 0);
    ipb_strv_free(&s);
}
END_TEST

START_TEST(shell_approval_options) {
    ipb_options o;
    char *msg = NULL;
    ck_assert_int_eq(parse_words(&o, WORDS("--approve-tools", "x"), NULL, NULL), 0);
    ck_assert(!o.approve_shell && !o.require_shell_escape);
    ipb_options_free(&o);
    ck_assert_int_eq(parse_words(&o, WORDS("--approve-shell", "--require-shell-escape"), NULL, NULL), 0);
    ck_assert(o.approve_shell && o.require_shell_escape);
    ck_assert_int_eq(ipb_options_finish(&o, "/home/u", NULL), 0);
    ipb_options_free(&o);
    expect_parse_error(WORDS("--approve-shell=yes"), "takes no value");
    /* The escape guard alone would refuse every process with nothing to approve them. */
    ck_assert_int_eq(parse_words(&o, WORDS("--require-shell-escape"), NULL, NULL), 0);
    ipb_error *err = NULL;
    ck_assert_int_lt(ipb_options_finish(&o, "/home/u", &err), 0);
    msg = strdup(ipb_error_msg(err));
    ck_assert_msg(strstr(msg, "--require-shell-escape needs --approve-shell") != NULL, "%s", msg);
    ck_assert_msg(strstr(msg, "%%bash") != NULL, "%s", msg);
    free(msg);
    ipb_error_free(err);
    ipb_options_free(&o);
}
END_TEST

START_TEST(standby_needs_the_zygote) {
    ipb_options o;
    ipb_options_init(&o);
    ck_assert(o.zygote && !o.standby); /* off by default */
    ipb_options_free(&o);
    ck_assert_int_eq(parse_words(&o, WORDS("--standby"), NULL, NULL), 0);
    ck_assert(o.standby && o.zygote);
    ck_assert_int_eq(ipb_options_finish(&o, "/home/u", NULL), 0);
    ipb_options_free(&o);
    ck_assert_int_eq(parse_words(&o, WORDS("--standby", "--no-standby"), NULL, NULL), 0);
    ck_assert(!o.standby);
    ipb_options_free(&o);
    expect_parse_error(WORDS("--standby=1"), "takes no value");
    /* A later --no-zygote turns the standby off: a session's own --no-zygote after the
     * service's --standby (daemon/worker.c puts the service's options first). */
    ck_assert_int_eq(parse_words(&o, WORDS("--standby", "--no-zygote"), NULL, NULL), 0);
    ck_assert(!o.standby && !o.zygote);
    ck_assert_int_eq(ipb_options_finish(&o, "/home/u", NULL), 0);
    ipb_options_free(&o);
    /* --standby after --no-zygote: refused. */
    ck_assert_int_eq(parse_words(&o, WORDS("--no-zygote", "--standby"), NULL, NULL), 0);
    ipb_error *err = NULL;
    ck_assert_int_lt(ipb_options_finish(&o, "/home/u", &err), 0);
    ck_assert_msg(strstr(ipb_error_msg(err), "--standby needs the zygote") != NULL, "%s", ipb_error_msg(err));
    ipb_error_free(err);
    ipb_options_free(&o);
    /* ... and --zygote after it puts it back. */
    ck_assert_int_eq(parse_words(&o, WORDS("--no-zygote", "--standby", "--zygote"), NULL, NULL), 0);
    ck_assert_int_eq(ipb_options_finish(&o, "/home/u", NULL), 0);
    ipb_options_free(&o);
    const char *h = ipb_options_help();
    ck_assert(strstr(h, "--standby, --no-standby") != NULL);
    ck_assert(strstr(h, "--max-processes") != NULL && strstr(h, "11 MiB") != NULL);
}
END_TEST

START_TEST(help_mentions_every_option) {
    const char *h = ipb_options_help();
    static const char *const names[] = {"--allowed-dir",
                                        "--allowed-domain",
                                        "--resolve",
                                        "--container-env-var",
                                        "--container-env-file",
                                        "--container-bind",
                                        "--rootfs",
                                        "--container-tag",
                                        "--workspace",
                                        "--python",
                                        "--tmp-size",
                                        "--shm-size",
                                        "--max-output-chars",
                                        "--verbose",
                                        "--help",
                                        "--approve-shell",
                                        "--require-shell-escape",
                                        "--standby",
                                        "--no-standby",
                                        "--zygote",
                                        "--no-zygote"};
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
        ck_assert_msg(strstr(h, names[i]) != NULL, "help lacks %s", names[i]);
}
END_TEST

static Suite *options_suite(void) {
    Suite *s = suite_create("options");
    TCase *p = tcase_create("parse");
    tcase_add_test(p, init_defaults);
    tcase_add_test(p, standby_needs_the_zygote);
    tcase_add_test(p, parse_every_option);
    tcase_add_test(p, parse_equals_form);
    tcase_add_test(p, parse_missing_value);
    tcase_add_test(p, parse_unknown_option);
    tcase_add_test(p, parse_repeated_verbose);
    tcase_add_test(p, parse_flag_with_value);
    tcase_add_test(p, parse_stops_at_double_dash);
    tcase_add_test(p, parse_stops_at_first_word);
    tcase_add_test(p, parse_bad_values);
    tcase_add_test(p, parse_env_file_error_is_wrapped);
    tcase_add_test(p, container_bind_specs);
    tcase_add_test(p, finish_defaults);
    tcase_add_test(p, finish_keeps_explicit_values);
    tcase_add_test(p, finish_refuses_missing_allowed_dirs);
    tcase_add_test(p, help_mentions_every_option);
    tcase_add_test(p, shell_approval_options);
    suite_add_tcase(s, p);
    TCase *v = tcase_create("values");
    tcase_add_test(v, parse_size_values);
    tcase_add_test(v, env_assignment_rules);
    tcase_add_test(v, env_file_syntax);
    tcase_add_test(v, env_file_empty_and_appends);
    tcase_add_test(v, env_file_errors_with_line_numbers);
    tcase_add_test(v, env_file_respects_length);
    tcase_add_test(v, strv_push_and_free);
    suite_add_tcase(s, v);
    TCase *e = tcase_create("sandbox_env");
    tcase_add_test(e, sandbox_env_defaults);
    tcase_add_test(e, sandbox_env_user_overrides);
    tcase_add_test(e, sandbox_env_no_host_leak);
    suite_add_tcase(s, e);
    return s;
}

int main(void) { return ipb_run_suite(options_suite()); }
