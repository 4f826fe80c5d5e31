/* Unit tests for supervisor/statedir.c: resolving a path the user names without following a
 * symlink that sandbox code could have planted (one inside a tree given to a sandbox). */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_suite.h"
#include "statedir.h"

static char tmpdir[512];

static void tmp_setup(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/ipb-unit-statedir-XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    char *canon = realpath(tmpdir, NULL); /* trees are recorded canonical */
    ck_assert_ptr_nonnull(canon);
    snprintf(tmpdir, sizeof(tmpdir), "%s", canon);
    free(canon);
}

static void tmp_teardown(void) {
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
}

static const char *in(const char *rel) {
    static char bufs[4][PATH_MAX];
    static int i;
    char *b = bufs[i++ % 4];
    snprintf(b, PATH_MAX, "%s/%s", tmpdir, rel);
    return b;
}

/* ws: a former workspace (a tree), out: a host directory outside every tree, user: a
 * directory of the user's own with symlinks they made. */
static void build(ipb_strv *trees) {
    ck_assert_int_eq(mkdir(in("ws"), 0755), 0);
    ck_assert_int_eq(mkdir(in("ws/sub"), 0755), 0);
    ck_assert_int_eq(mkdir(in("out"), 0755), 0);
    ck_assert_int_eq(mkdir(in("out/dir"), 0755), 0);
    ck_assert_int_eq(mkdir(in("user"), 0755), 0);
    ck_assert_int_eq(symlink(in("out"), in("ws/lnk")), 0);          /* planted, absolute */
    ck_assert_int_eq(symlink("../lnk", in("ws/sub/up")), 0);        /* planted, relative */
    ck_assert_int_eq(symlink(in("ws/sub"), in("user/alias")), 0);   /* the user's own, into ws */
    ck_assert_int_eq(symlink(in("out/dir"), in("user/to-out")), 0); /* the user's own */
    ck_assert_int_eq(symlink("b", in("user/a")), 0);
    ck_assert_int_eq(symlink("a", in("user/b")), 0);
    memset(trees, 0, sizeof(*trees));
    ck_assert_int_eq(ipb_strv_push(trees, in("ws")), 0);
}

static int check(const ipb_strv *trees, const char *path, const char *want_link) {
    char *link = NULL;
    int r = ipb_path_planted_symlink(trees, path, &link);
    if (want_link) {
        ck_assert_msg(r == 1, "%s: expected the symlink %s to be refused, got %d", path, want_link, r);
        ck_assert_str_eq(link, want_link);
    } else {
        ck_assert_msg(r == 0, "%s: refused (%s), expected allowed", path, link ? link : "?");
    }
    free(link);
    return r;
}

START_TEST(planted_symlinks_are_found) {
    ipb_strv trees;
    build(&trees);
    check(&trees, in("ws/lnk"), in("ws/lnk"));
    check(&trees, in("ws/lnk/dir"), in("ws/lnk"));
    check(&trees, in("ws/sub/up/dir"), in("ws/sub/up"));
    check(&trees, in("ws/sub/../lnk"), in("ws/lnk"));
    check(&trees, in("ws/sub/./up"), in("ws/sub/up"));
    /* Reached through the user's own symlink into the tree: still inside it. */
    check(&trees, in("user/alias/up"), in("ws/sub/up"));
    check(&trees, in("user/alias/../lnk"), in("ws/lnk"));
    ipb_strv_free(&trees);
}
END_TEST

START_TEST(other_paths_are_allowed) {
    ipb_strv trees;
    build(&trees);
    check(&trees, in("ws"), NULL);
    check(&trees, in("ws/sub"), NULL);
    check(&trees, in("ws/sub/missing/deeper"), NULL); /* made later, by mkdir */
    check(&trees, in("out/dir"), NULL);
    check(&trees, in("user/to-out"), NULL);            /* a symlink outside every tree */
    check(&trees, in("user/alias"), NULL);             /* the user's symlink to a real dir in ws */
    check(&trees, in("user/a/x"), NULL);               /* a loop: left to the open's ELOOP */
    check(&trees, "relative/path", NULL);
    ipb_strv_free(&trees);
}
END_TEST

static Suite *statedir_suite(void) {
    Suite *s = suite_create("statedir");
    TCase *t = tcase_create("planted");
    tcase_add_checked_fixture(t, tmp_setup, tmp_teardown);
    tcase_add_test(t, planted_symlinks_are_found);
    tcase_add_test(t, other_paths_are_allowed);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return ipb_run_suite(statedir_suite()); }
