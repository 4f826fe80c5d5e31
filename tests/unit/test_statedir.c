/* Unit tests for supervisor/statedir.c: resolving a path the user names without following a
 * symlink that sandbox code could have planted (one inside a tree given to a sandbox). */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "hostpath.h"
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
    check(&trees, in("user/to-out"), NULL); /* a symlink outside every tree */
    check(&trees, in("user/alias"), NULL);  /* the user's symlink to a real dir in ws */
    check(&trees, in("user/a/x"), NULL);    /* a loop: left to the open's ELOOP */
    check(&trees, "relative/path", NULL);
    ipb_strv_free(&trees);
}
END_TEST

/* ---- ipb_host_named_open / ipb_host_named_read: the walk from "/" on fds ---- */

/* The state directory records ws as a tree given to sandboxes. */
static void build_state(void) {
    ipb_strv trees;
    build(&trees);
    ipb_strv_free(&trees);
    setenv("XDG_STATE_HOME", in("state"), 1);
    ck_assert_int_eq(mkdir(in("state"), 0700), 0);
    ck_assert_int_eq(mkdir(in("state/ipybox"), 0700), 0);
    const char *ws = in("ws");
    ck_assert_int_eq(ipb_write_file(in("state/ipybox/granted"), ws, strlen(ws) + 1, 0600), 0);
}

static void named_refused(const char *path, enum ipb_named_kind kind, const char *link) {
    int fd = -1;
    ipb_error *e = NULL;
    ck_assert_msg(ipb_host_named_open("--workspace", path, kind, &fd, NULL, &e) < 0, "%s: not refused", path);
    ck_assert_msg(strstr(ipb_error_msg(e), "symlink") && strstr(ipb_error_msg(e), link), "%s: %s", path,
                  ipb_error_msg(e));
    ipb_error_free(e);
}

/* Opens path; checks that the fd is what want is (by stat) and that canon is want. */
static void named_ok(const char *path, enum ipb_named_kind kind, const char *want) {
    int fd = -1;
    char *canon = NULL;
    ipb_error *e = NULL;
    ck_assert_msg(ipb_host_named_open("--workspace", path, kind, &fd, &canon, &e) == 0, "%s: %s", path,
                  e ? ipb_error_msg(e) : "");
    struct stat a, b;
    ck_assert_int_eq(fstat(fd, &a), 0);
    ck_assert_int_eq(stat(want, &b), 0);
    ck_assert(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
    ck_assert_str_eq(canon, want);
    ck_assert_int_eq(fcntl(fd, F_GETFL) & O_PATH, O_PATH);
    close(fd);
    free(canon);
}

START_TEST(named_walk_from_root) {
    build_state();
    named_refused(in("ws/lnk"), IPB_NAMED_MAKE_DIR, in("ws/lnk"));
    named_refused(in("ws/lnk/dir"), IPB_NAMED_DIR, in("ws/lnk"));
    named_refused(in("ws/sub/up/dir"), IPB_NAMED_MAKE, in("ws/sub/up"));
    named_refused(in("user/alias/up"), IPB_NAMED_DIR, in("ws/sub/up"));
    /* nothing made where a refused symlink points */
    named_refused(in("ws/lnk/new/deeper"), IPB_NAMED_MAKE_DIR, in("ws/lnk"));
    ck_assert_int_eq(access(in("out/new"), F_OK), -1);
    /* symlinks outside every tree are followed; the canonical path is the fd's */
    named_ok(in("user/alias"), IPB_NAMED_DIR, in("ws/sub"));
    named_ok(in("user/to-out"), IPB_NAMED_DIR, in("out/dir"));
    named_ok(in("ws/sub/../sub"), IPB_NAMED_DIR, in("ws/sub"));
    /* missing components are made (real directories, from the parent's fd) */
    named_ok(in("ws/sub/new/deeper"), IPB_NAMED_MAKE_DIR, in("ws/sub/new/deeper"));
    named_ok(in("out/made"), IPB_NAMED_MAKE, in("out/made"));
    /* relative to the working directory */
    char cwd[PATH_MAX];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
    ck_assert_int_eq(chdir(tmpdir), 0);
    named_ok("user/to-out", IPB_NAMED_DIR, in("out/dir"));
    named_refused("ws/lnk", IPB_NAMED_DIR, in("ws/lnk"));
    ck_assert_int_eq(chdir(cwd), 0);
    /* kinds */
    int fd = -1;
    ipb_error *e = NULL;
    ck_assert_int_lt(ipb_host_named_open("--allowed-dir", in("missing"), IPB_NAMED_DIR, &fd, NULL, &e), 0);
    ipb_error_free(e);
    e = NULL;
    ck_assert_int_eq(ipb_write_file(in("ws/sub/f"), "A=1\n", 4, 0644), 0);
    ck_assert_int_lt(ipb_host_named_open("--rootfs", in("ws/sub/f"), IPB_NAMED_DIR, &fd, NULL, &e), 0);
    ipb_error_free(e);
}
END_TEST

START_TEST(named_read_through_the_fd) {
    build_state();
    ck_assert_int_eq(ipb_write_file(in("ws/sub/env"), "A=1\n", 4, 0644), 0);
    ck_assert_int_eq(ipb_write_file(in("out/env"), "SECRET=1\n", 9, 0644), 0);
    ck_assert_int_eq(symlink(in("out/env"), in("ws/env-link")), 0);
    ck_assert_int_eq(mkfifo(in("ws/sub/fifo"), 0644), 0);
    char *text = NULL;
    size_t len = 0;
    ipb_error *e = NULL;
    ck_assert_int_eq(ipb_host_named_read("--container-env-file", in("ws/sub/env"), 1024, &text, &len, &e), 0);
    ck_assert_str_eq(text, "A=1\n");
    free(text);
    text = NULL;
    ck_assert_int_lt(ipb_host_named_read("--container-env-file", in("ws/env-link"), 1024, &text, &len, &e), 0);
    ck_assert_msg(strstr(ipb_error_msg(e), "symlink"), "%s", ipb_error_msg(e));
    ck_assert_ptr_null(text);
    ipb_error_free(e);
    e = NULL;
    /* a FIFO is refused, not waited on */
    ck_assert_int_lt(ipb_host_named_read("--mcp-config", in("ws/sub/fifo"), 1024, &text, &len, &e), 0);
    ck_assert_msg(strstr(ipb_error_msg(e), "FIFO"), "%s", ipb_error_msg(e));
    ipb_error_free(e);
}
END_TEST

static Suite *statedir_suite(void) {
    Suite *s = suite_create("statedir");
    TCase *t = tcase_create("planted");
    tcase_add_checked_fixture(t, tmp_setup, tmp_teardown);
    tcase_add_test(t, planted_symlinks_are_found);
    tcase_add_test(t, other_paths_are_allowed);
    tcase_add_test(t, named_walk_from_root);
    tcase_add_test(t, named_read_through_the_fd);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return ipb_run_suite(statedir_suite()); }
