/* Unit tests for policy/pathrules: /app-relative paths and "is under" for host paths. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
#include "error.h"
#include "pathrules.h"

/* Checks the first len bytes of p and returns the result; *msg gets the message (caller
 * frees) or NULL. The bytes are copied to an exact-size heap buffer without a NUL, so that
 * ASan catches any read past len (messages included). */
static int check_len(const char *p, size_t len, char **msg) {
    char *copy = malloc(len ? len : 1);
    memcpy(copy, p, len);
    ipb_error *err = NULL;
    int r = ipb_check_relpath(copy, len, &err);
    *msg = err ? strdup(ipb_error_msg(err)) : NULL;
    ck_assert_msg((r < 0) == (err != NULL), "return value and error disagree for '%.*s'", (int)len, p);
    ipb_error_free(err);
    free(copy);
    return r;
}

static void expect_ok(const char *p) {
    char *msg = NULL;
    int r = check_len(p, strlen(p), &msg);
    ck_assert_msg(r == 0, "'%s' was refused: %s", p, msg ? msg : "?");
    free(msg);
}

static void expect_refused(const char *p, const char *needle) {
    char *msg = NULL;
    int r = check_len(p, strlen(p), &msg);
    ck_assert_msg(r < 0, "'%s' was accepted", p);
    ck_assert_msg(strstr(msg, needle) != NULL, "message for '%s' lacks '%s': %s", p, needle, msg);
    free(msg);
}

START_TEST(relpath_plain_ok) {
    expect_ok("a");
    expect_ok("a.txt");
    expect_ok("dir/sub/file.py");
    expect_ok("a/./b");
    expect_ok("./a");
    expect_ok("a//b");
    expect_ok("a/");  /* trailing '/' is the file layer's business */
    expect_ok("..a"); /* names that merely start or end with dots */
    expect_ok("a..");
    expect_ok("a/..b/c");
    expect_ok("...");
    expect_ok(".hidden");
    expect_ok("with space/and:colon");
}
END_TEST

START_TEST(relpath_empty) {
    char *msg = NULL;
    ck_assert_int_lt(check_len("", 0, &msg), 0);
    ck_assert_ptr_nonnull(strstr(msg, "empty"));
    free(msg);
    ipb_error *err = NULL;
    ck_assert_int_lt(ipb_check_relpath(NULL, 0, &err), 0);
    ck_assert_ptr_nonnull(err);
    ipb_error_free(err);
    /* NULL err is allowed: the result alone */
    ck_assert_int_lt(ipb_check_relpath("", 0, NULL), 0);
}
END_TEST

START_TEST(relpath_absolute) {
    expect_refused("/etc/passwd", "absolute");
    expect_refused("/", "absolute");
    expect_refused("//app/x", "absolute");
}
END_TEST

START_TEST(relpath_dotdot_anywhere) {
    expect_refused("..", "'..'");
    expect_refused("../x", "'..'");
    expect_refused("a/..", "'..'");
    expect_refused("a/../b", "'..'");
    expect_refused("a/b/c/../../../..", "'..'");
    expect_refused("./..", "'..'");
    expect_refused("a//../b", "'..'");
    expect_refused("a/../", "'..'");
}
END_TEST

START_TEST(relpath_names_app_itself) {
    expect_refused(".", "/app itself");
    expect_refused("./", "/app itself");
    expect_refused("./.", "/app itself");
    expect_refused(".//./", "/app itself");
}
END_TEST

START_TEST(relpath_embedded_nul) {
    char *msg = NULL;
    ck_assert_int_lt(check_len("a\0b", 3, &msg), 0);
    ck_assert_ptr_nonnull(strstr(msg, "NUL"));
    free(msg);
    ck_assert_int_lt(check_len("abc\0", 4, &msg), 0);
    free(msg);
    /* `len` bounds the check: the NUL after it is not part of the path */
    ck_assert_int_eq(check_len("ab\0", 2, &msg), 0);
    ck_assert_ptr_null(msg);
}
END_TEST

START_TEST(relpath_explicit_length) {
    /* Only the first len bytes count, whatever follows them. */
    ck_assert_int_eq(ipb_check_relpath("a/../b", 1, NULL), 0);       /* "a" */
    ck_assert_int_lt(ipb_check_relpath("../x", 1, NULL), 0);         /* ".": /app itself */
    ck_assert_int_eq(ipb_check_relpath("x/..", 3, NULL), 0);         /* "x/." */
    ck_assert_int_lt(ipb_check_relpath("x/..", 4, NULL), 0);         /* "x/.." */
    ck_assert_int_eq(ipb_check_relpath("ok/name\0/..", 7, NULL), 0); /* stops before the NUL */
    ck_assert_int_lt(ipb_check_relpath("ok/name\0/..", 8, NULL), 0); /* includes it */
}
END_TEST

START_TEST(relpath_long_names) {
    char name[600];
    memset(name, 'n', 255);
    name[255] = '\0';
    expect_ok(name);
    memset(name, 'n', 256);
    name[256] = '\0';
    expect_refused(name, "longer than 255");
    /* a long component in the middle */
    memset(name, 'm', sizeof(name));
    name[0] = 'a';
    name[1] = '/';
    name[2 + 256] = '/';
    name[2 + 257] = 'z';
    name[2 + 258] = '\0';
    expect_refused(name, "longer than 255");
}
END_TEST

START_TEST(relpath_total_length) {
    /* 16 x (255 + '/') = 4096 bytes: exactly the limit */
    char *p = malloc(IPB_RELPATH_MAX + 2);
    size_t n = 0;
    while (n < IPB_RELPATH_MAX) {
        memset(p + n, 'c', 255);
        n += 255;
        p[n++] = '/';
    }
    p[n] = '\0';
    ck_assert_uint_eq(n, IPB_RELPATH_MAX);
    expect_ok(p);
    p[n] = 'x';
    p[n + 1] = '\0';
    expect_refused(p, "longer than 4096");
    free(p);
}
END_TEST

START_TEST(path_is_under_cases) {
    ck_assert(ipb_path_is_under("/home/u/file", "/home/u"));
    ck_assert(ipb_path_is_under("/home/u", "/home/u"));
    ck_assert(ipb_path_is_under("/home/u/a/b/c", "/home/u"));
    ck_assert(!ipb_path_is_under("/home/user2/file", "/home/u"));
    ck_assert(!ipb_path_is_under("/home/u2", "/home/u"));
    ck_assert(!ipb_path_is_under("/home", "/home/u"));
    ck_assert(!ipb_path_is_under("/tmpfoo", "/tmp"));
    ck_assert(!ipb_path_is_under("/etc/passwd", "/tmp"));
    ck_assert(ipb_path_is_under("/anything", "/"));
    ck_assert(ipb_path_is_under("/", "/"));
    ck_assert(!ipb_path_is_under("relative", "/"));
    ck_assert(!ipb_path_is_under("", "/tmp"));
}
END_TEST

/* The path is given by pointer and length: messages must show those bytes only (this was
 * a bug: they used "%s" and showed whatever followed). */
START_TEST(relpath_message_stops_at_len) {
    static const struct {
        const char *p;
        size_t len;
    } cases[] = {{"/abSECRET", 3}, {"a/..SECRET", 4}, {"./SECRET", 2}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        ipb_error *err = NULL;
        size_t len = cases[i].len;
        ck_assert_int_lt(ipb_check_relpath(cases[i].p, len, &err), 0);
        ck_assert_msg(strstr(ipb_error_msg(err), "SECRET") == NULL,
                      "message for the %zu-byte path '%.*s' shows bytes past its length: %s", len, (int)len, cases[i].p,
                      ipb_error_msg(err));
        ipb_error_free(err);
    }
}
END_TEST

static Suite *pathrules_suite(void) {
    Suite *s = suite_create("pathrules");
    TCase *t = tcase_create("relpath");
    tcase_add_test(t, relpath_plain_ok);
    tcase_add_test(t, relpath_empty);
    tcase_add_test(t, relpath_absolute);
    tcase_add_test(t, relpath_dotdot_anywhere);
    tcase_add_test(t, relpath_names_app_itself);
    tcase_add_test(t, relpath_embedded_nul);
    tcase_add_test(t, relpath_explicit_length);
    tcase_add_test(t, relpath_long_names);
    tcase_add_test(t, relpath_total_length);
    tcase_add_test(t, relpath_message_stops_at_len);
    suite_add_tcase(s, t);
    TCase *u = tcase_create("is_under");
    tcase_add_test(u, path_is_under_cases);
    suite_add_tcase(s, u);
    return s;
}

int main(void) { return ipb_run_suite(pathrules_suite()); }
