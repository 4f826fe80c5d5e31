/* Unit tests for common/: errors as sentences, the growable buffer, directory trees.
 * Tests named fixed_bug_* are regression tests for bugs these suites found. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "run_suite.h"
#include "cleanup.h"
#include "error.h"
#include "fdio.h"
#include "jsonlimit.h"
#include "strbuf.h"
#include "tree.h"

static char tmpdir[512];

static void tmp_setup(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/ipb-unit-common-XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void tmp_teardown(void) {
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
}

static void path_in(char *out, const char *rel) {
    int n = snprintf(out, PATH_MAX, "%s/%s", tmpdir, rel);
    ck_assert(n > 0 && n < PATH_MAX);
}

static void touch(const char *path, const char *content) {
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "creating %s: %s", path, strerror(errno));
    fputs(content, f);
    fclose(f);
}

static bool exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* ---- errors ---- */

START_TEST(error_set_with_errno) {
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_error_set(&err, ENOENT, "opening %s", "x.txt"), -1);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(err->errnum, ENOENT);
    char expect[256];
    snprintf(expect, sizeof(expect), "opening x.txt: %s", strerror(ENOENT));
    ck_assert_str_eq(ipb_error_msg(err), expect);
    ipb_error_free(err);
}
END_TEST

START_TEST(error_set_without_errno) {
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_error_set(&err, 0, "value %d is out of range", 42), -1);
    ck_assert_int_eq(err->errnum, 0);
    ck_assert_str_eq(ipb_error_msg(err), "value 42 is out of range");
    ipb_error_free(err);
}
END_TEST

START_TEST(error_set_keeps_first_error) {
    ipb_error *err = NULL;
    ipb_error_set(&err, 0, "first");
    ck_assert_int_eq(ipb_error_set(&err, EIO, "second"), -1);
    ck_assert_str_eq(ipb_error_msg(err), "first");
    ck_assert_int_eq(err->errnum, 0);
    ipb_error_free(err);
}
END_TEST

START_TEST(error_set_null_slot) {
    /* Callers that do not want the error pass NULL: still -1, no crash. */
    ck_assert_int_eq(ipb_error_set(NULL, EIO, "ignored"), -1);
    ck_assert_int_eq(ipb_error_wrap(NULL, "ignored"), -1);
}
END_TEST

START_TEST(error_wrap_prepends_context) {
    ipb_error *err = NULL;
    ipb_error_set(&err, EACCES, "opening /x");
    ck_assert_int_eq(ipb_error_wrap(&err, "starting kernel %d", 2), -1);
    ipb_error_wrap(&err, "session");
    char expect[256];
    snprintf(expect, sizeof(expect), "session: starting kernel 2: opening /x: %s", strerror(EACCES));
    ck_assert_str_eq(ipb_error_msg(err), expect);
    ck_assert_int_eq(err->errnum, EACCES);
    ipb_error_free(err);
}
END_TEST

START_TEST(error_wrap_without_error_is_noop) {
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_error_wrap(&err, "context"), -1);
    ck_assert_ptr_null(err);
}
END_TEST

START_TEST(error_msg_and_freep) {
    ck_assert_str_eq(ipb_error_msg(NULL), "no error");
    ipb_error *err = NULL;
    ipb_error_set(&err, 0, "x");
    ipb_error_freep(&err);
    ck_assert_ptr_null(err);
    ipb_error_freep(&err); /* accepts an already-empty slot */
    ipb_error_freep(NULL);
    ipb_error_free(NULL);
    {
        cleanup_error ipb_error *scoped = NULL;
        ipb_error_set(&scoped, 0, "released at scope end (ASan checks the leak)");
        ck_assert_ptr_nonnull(scoped);
    }
}
END_TEST

/* ---- ipb_buf ---- */

START_TEST(buf_append_and_cstr) {
    ipb_buf b = {0};
    ck_assert_int_eq(ipb_buf_append(&b, "abc", 3), 0);
    ck_assert_int_eq(ipb_buf_appendf(&b, "-%d-%s", 12, "x"), 0);
    ck_assert_uint_eq(b.len, 8);
    ck_assert_str_eq(ipb_buf_cstr(&b), "abc-12-x");
    ck_assert_uint_ge(b.cap, b.len + 1);
    ipb_buf_free(&b);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.cap, 0);
}
END_TEST

START_TEST(buf_empty_cstr) {
    ipb_buf b = {0};
    ck_assert_str_eq(ipb_buf_cstr(&b), "");
    ck_assert_int_eq(ipb_buf_append(&b, NULL, 0), 0);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_str_eq(ipb_buf_cstr(&b), "");
    ipb_buf_free(&b);
}
END_TEST

START_TEST(buf_binary_and_growth) {
    ipb_buf b = {0};
    char chunk[1000];
    for (int i = 0; i < 100; i++) {
        memset(chunk, 'a' + i % 26, sizeof(chunk));
        chunk[0] = '\0'; /* embedded NULs are data */
        ck_assert_int_eq(ipb_buf_append(&b, chunk, sizeof(chunk)), 0);
    }
    ck_assert_uint_eq(b.len, 100000);
    ck_assert_int_eq(b.data[0], '\0');
    ck_assert_int_eq(b.data[1], 'a');
    ck_assert_int_eq(b.data[99 * 1000 + 1], 'a' + 99 % 26);
    ck_assert_int_eq(b.data[b.len], '\0');
    ipb_buf_free(&b);
}
END_TEST

START_TEST(buf_consume_and_reset) {
    ipb_buf b = {0};
    ipb_buf_append(&b, "hello world", 11);
    ipb_buf_consume(&b, 6);
    ck_assert_uint_eq(b.len, 5);
    ck_assert_str_eq(ipb_buf_cstr(&b), "world");
    ipb_buf_consume(&b, 0);
    ck_assert_str_eq(ipb_buf_cstr(&b), "world");
    ipb_buf_consume(&b, 50); /* more than there is: empties */
    ck_assert_uint_eq(b.len, 0);
    ck_assert_str_eq(ipb_buf_cstr(&b), "");
    ipb_buf_append(&b, "again", 5);
    ipb_buf_reset(&b);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_str_eq(b.data, "");
    ipb_buf b2 = {0};
    ipb_buf_consume(&b2, 3); /* on a never-used buffer */
    ipb_buf_reset(&b2);
    ck_assert_uint_eq(b2.len, 0);
    ipb_buf_free(&b);
    ipb_buf_free(&b2);
}
END_TEST

/* ---- trees ---- */

START_TEST(mkdir_p_nested) {
    char p[PATH_MAX];
    path_in(p, "a/b/c/d");
    ck_assert_int_eq(ipb_mkdir_p(p, 0755), 0);
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    ck_assert_int_eq(ipb_mkdir_p(p, 0755), 0); /* already there */
    path_in(p, "a/b/e/");
    ck_assert_int_eq(ipb_mkdir_p(p, 0755), 0); /* trailing slash */
    path_in(p, "a/b/e");
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
}
END_TEST

START_TEST(mkdir_p_bad_input) {
    char p[PATH_MAX];
    ck_assert_int_lt(ipb_mkdir_p("", 0755), 0);
    char *longp = malloc(PATH_MAX + 10);
    memset(longp, 'x', PATH_MAX + 9);
    longp[0] = '/';
    longp[PATH_MAX + 9] = '\0';
    ck_assert_int_eq(ipb_mkdir_p(longp, 0755), -ENAMETOOLONG);
    free(longp);
    path_in(p, "file");
    touch(p, "x");
    path_in(p, "file/sub");
    ck_assert_int_eq(ipb_mkdir_p(p, 0755), -ENOTDIR);
}
END_TEST

/* Builds tmpdir/tree with files, subdirectories and symlinks that point outside it, at
 * tmpdir/outside (a directory with a file) and tmpdir/outside-file. */
static void build_tree(void) {
    char p[PATH_MAX], t[PATH_MAX];
    path_in(p, "outside");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    path_in(p, "outside/keep.txt");
    touch(p, "keep");
    path_in(p, "outside-file");
    touch(p, "keep too");
    path_in(p, "tree/a/b/c");
    ck_assert_int_eq(ipb_mkdir_p(p, 0755), 0);
    path_in(p, "tree/a/b/c/f");
    touch(p, "f");
    path_in(p, "tree/top");
    touch(p, "top");
    path_in(t, "outside");
    path_in(p, "tree/a/link-to-dir");
    ck_assert_int_eq(symlink(t, p), 0);
    path_in(p, "tree/a/b/rel-link");
    ck_assert_int_eq(symlink("../../../outside", p), 0);
    path_in(t, "outside-file");
    path_in(p, "tree/link-to-file");
    ck_assert_int_eq(symlink(t, p), 0);
    path_in(p, "tree/a/b/locked");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    path_in(p, "tree/a/b/locked/inner");
    touch(p, "x");
    path_in(p, "tree/a/b/locked");
    ck_assert_int_eq(chmod(p, 0500), 0); /* no write bit, as sandbox code may leave it */
}

static void assert_outside_survived(void) {
    char p[PATH_MAX];
    path_in(p, "outside/keep.txt");
    ck_assert_msg(exists(p), "rm_rf followed a symlink and removed %s", p);
    path_in(p, "outside-file");
    ck_assert_msg(exists(p), "rm_rf followed a symlink and removed %s", p);
}

START_TEST(rm_rf_does_not_follow_symlinks) {
    build_tree();
    char p[PATH_MAX];
    path_in(p, "tree");
    ck_assert_int_eq(ipb_rm_rf(p), 0);
    ck_assert(!exists(p));
    assert_outside_survived();
}
END_TEST

START_TEST(rm_rf_top_level_symlink) {
    build_tree();
    char p[PATH_MAX], t[PATH_MAX];
    path_in(t, "outside");
    path_in(p, "top-link");
    ck_assert_int_eq(symlink(t, p), 0);
    ck_assert_int_eq(ipb_rm_rf(p), 0);
    ck_assert(!exists(p));
    assert_outside_survived();
}
END_TEST

START_TEST(rm_rf_missing_and_plain_file) {
    char p[PATH_MAX];
    path_in(p, "does-not-exist");
    ck_assert_int_eq(ipb_rm_rf(p), 0);
    path_in(p, "plain");
    touch(p, "x");
    ck_assert_int_eq(ipb_rm_rf(p), 0);
    ck_assert(!exists(p));
}
END_TEST

START_TEST(rm_rf_at_and_empty_dir_at) {
    build_tree();
    cleanup_close int dfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(dfd, 0);
    ck_assert_int_eq(ipb_rm_rf_at(dfd, "tree"), 0);
    char p[PATH_MAX];
    path_in(p, "tree");
    ck_assert(!exists(p));
    assert_outside_survived();

    path_in(p, "keepme/x/y");
    ipb_mkdir_p(p, 0755);
    path_in(p, "keepme/file");
    touch(p, "z");
    path_in(p, "keepme/link");
    char t[PATH_MAX];
    path_in(t, "outside");
    ck_assert_int_eq(symlink(t, p), 0);
    path_in(p, "keepme");
    cleanup_close int kfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(kfd, 0);
    ck_assert_int_eq(ipb_empty_dir_at(kfd), 0);
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0); /* the directory itself stays */
    ck_assert(S_ISDIR(st.st_mode));
    path_in(p, "keepme/x");
    ck_assert(!exists(p));
    path_in(p, "keepme/file");
    ck_assert(!exists(p));
    assert_outside_survived();
}
END_TEST

/* A chain of `levels` directories "d" below dirfd/name (deeper than PATH_MAX allows to name),
 * with a file and a symlink to tmpdir/outside at the bottom. Built through fds. */
static void build_deep(int dirfd, const char *name, int levels) {
    char t[PATH_MAX];
    path_in(t, "outside");
    ck_assert_int_eq(mkdirat(dirfd, name, 0755), 0);
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    for (int i = 0; i < levels; i++) {
        ck_assert_int_eq(mkdirat(fd, "d", 0755), 0);
        int nfd = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(nfd, 0);
        close(fd);
        fd = nfd;
    }
    int ffd = openat(fd, "f", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    ck_assert_int_ge(ffd, 0);
    close(ffd);
    ck_assert_int_eq(symlinkat(t, fd, "link"), 0);
    close(fd);
}

/* Sandbox code can make trees of any depth in its $HOME and run directory; their removal
 * at the session's end must neither stop at a depth limit (leaving the session directory
 * behind for ever) nor run out of fds. */
START_TEST(rm_rf_very_deep_tree) {
    build_tree();
    cleanup_close int dfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(dfd, 0);
    build_deep(dfd, "deep", 3000);
    char p[PATH_MAX];
    path_in(p, "deep");
    ck_assert_int_eq(ipb_rm_rf(p), 0);
    ck_assert_msg(!exists(p), "a 3000-level tree was left behind");
    assert_outside_survived();

    /* The same below a directory that stays (the kernel's run directory). */
    path_in(p, "rundir");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    cleanup_close int rfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(rfd, 0);
    build_deep(rfd, "deep", 1000);
    ck_assert_int_eq(ipb_empty_dir_at(rfd), 0);
    DIR *d = fdopendir(dup(rfd));
    ck_assert_ptr_nonnull(d);
    rewinddir(d);
    int left = 0;
    for (struct dirent *de; (de = readdir(d));)
        left += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    ck_assert_int_eq(left, 0);
    assert_outside_survived();
}
END_TEST

/* What sandbox code may do while a removal runs (should it still be alive): swap directories
 * being walked with symlinks to a host directory (RENAME_EXCHANGE), move subtrees around and
 * add files. The walk must never remove anything outside the tree. */
struct racer {
    int treefd;
    atomic_bool stop;
    atomic_long swaps;
};

static void *race_tree(void *arg) {
    struct racer *r = arg;
    while (!atomic_load(&r->stop)) {
        /* Either order: the directory under the symlink's name and back. */
        if (renameat2(r->treefd, "a", r->treefd, "lnk", RENAME_EXCHANGE) == 0)
            atomic_fetch_add(&r->swaps, 1);
        renameat2(r->treefd, "a/b", r->treefd, "lnk2", RENAME_EXCHANGE);
        renameat(r->treefd, "a/b/c", r->treefd, "moved");
        int fd = openat(r->treefd, "a/new", O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd >= 0)
            close(fd);
    }
    return NULL;
}

START_TEST(rm_rf_races_with_symlink_swaps) {
    char p[PATH_MAX], t[PATH_MAX];
    path_in(p, "outside");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    path_in(p, "outside/sub");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    path_in(p, "outside/keep.txt");
    touch(p, "keep");
    path_in(p, "outside/sub/keep.txt");
    touch(p, "keep");
    path_in(p, "outside-file");
    touch(p, "keep too");
    path_in(t, "outside");
    long swaps = 0;
    for (int round = 0; round < 300; round++) {
        char q[PATH_MAX];
        path_in(p, "tree/a/b/c/d");
        ck_assert_int_eq(ipb_mkdir_p(p, 0755), 0);
        for (int i = 0; i < 20; i++) {
            snprintf(q, sizeof(q), "%s/tree/a/b/f%d", tmpdir, i);
            touch(q, "x");
            snprintf(q, sizeof(q), "%s/tree/a/b/c/g%d", tmpdir, i);
            touch(q, "x");
        }
        path_in(p, "tree/lnk");
        ck_assert_int_eq(symlink(t, p), 0);
        path_in(p, "tree/lnk2");
        ck_assert_int_eq(symlink("../outside/sub", p), 0);
        path_in(p, "tree");
        struct racer r = {.treefd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
        ck_assert_int_ge(r.treefd, 0);
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, race_tree, &r), 0);
        while (atomic_load(&r.swaps) < 2) /* racing already when the removal starts */
            sched_yield();
        (void)ipb_rm_rf(p); /* may report ENOTEMPTY: the racer adds files */
        atomic_store(&r.stop, true);
        pthread_join(th, NULL);
        swaps += atomic_load(&r.swaps);
        close(r.treefd);
        ck_assert_int_eq(ipb_rm_rf(p), 0);
        ck_assert(!exists(p));
        path_in(p, "outside/sub/keep.txt");
        ck_assert_msg(exists(p), "round %d: the removal followed a swapped-in symlink", round);
        assert_outside_survived();
    }
    ck_assert_msg(swaps > 0, "the racer never swapped; the test proved nothing");
}
END_TEST

/* A FIFO where a file is expected (an env file in a workspace that sandbox code can
 * replace) is refused at once, not waited on for a writer. */
START_TEST(read_file_refuses_fifo_without_blocking) {
    char p[PATH_MAX];
    path_in(p, "fifo");
    ck_assert_int_eq(mkfifo(p, 0644), 0);
    char *text = NULL;
    alarm(5);
    ck_assert_int_eq(ipb_read_file(p, 4096, &text, NULL), -EINVAL);
    alarm(0);
    ck_assert_ptr_null(text);
}
END_TEST

/* One read, cut to the buffer and NUL-terminated; empty, missing and a FIFO are errors, the
 * FIFO at once (O_NONBLOCK), not waited on for a writer. */
START_TEST(read_small_cuts_and_terminates) {
    char p[PATH_MAX], buf[8];
    path_in(p, "small");
    touch(p, "0 1000 1\nmore");
    ck_assert_int_eq(ipb_read_small(p, buf, sizeof(buf)), 7);
    ck_assert_str_eq(buf, "0 1000 ");
    char big[64];
    ck_assert_int_eq(ipb_read_small(p, big, sizeof(big)), 13);
    ck_assert_str_eq(big, "0 1000 1\nmore");
    ck_assert_int_eq(ipb_read_small(p, buf, 1), -EINVAL);
    path_in(p, "empty");
    touch(p, "");
    ck_assert_int_eq(ipb_read_small(p, buf, sizeof(buf)), -ENODATA);
    path_in(p, "missing");
    ck_assert_int_eq(ipb_read_small(p, buf, sizeof(buf)), -ENOENT);
    path_in(p, "fifo2");
    ck_assert_int_eq(mkfifo(p, 0644), 0);
    alarm(5);
    ck_assert_int_lt(ipb_read_small(p, buf, sizeof(buf)), 0);
    alarm(0);
    ck_assert_int_gt(ipb_read_small("/proc/self/stat", big, sizeof(big)), 0);
    ck_assert_ptr_nonnull(strchr(big, ')'));
}
END_TEST

/* FIXED BUG (common/tree.c:27, ipb_mkdir_p): ipb_mkdir_p() ignores EEXIST for the last component
 * without checking that what exists is a directory, so it reports success for a path that is a
 * regular file ("mkdir -p" fails with "File exists"). */
START_TEST(fixed_bug_mkdir_p_existing_file) {
    char p[PATH_MAX];
    path_in(p, "regular");
    touch(p, "x");
    int r = ipb_mkdir_p(p, 0755);
    ck_assert_msg(r < 0, "ipb_mkdir_p(\"%s\") returned %d for a regular file, expected -EEXIST or -ENOTDIR", p, r);
}
END_TEST

/* The values a parse would build are counted before it, strings and escapes skipped. */
START_TEST(json_values_bound) {
    ck_assert_uint_eq(ipb_json_values_bound("1", 1, 100), 1);
    ck_assert_uint_eq(ipb_json_values_bound("[1,2,3]", 7, 100), 4);
    ck_assert_uint_eq(ipb_json_values_bound("{\"a\":[],\"b\":{}}", 15, 100), 5);
    /* Structure inside strings, escaped quotes and backslashes, counts for nothing. */
    const char *s = "[\"[,{,\\\"[,\", \"\\\\\", {}]";
    ck_assert_uint_eq(ipb_json_values_bound(s, strlen(s), 100), 5);
    /* An unterminated string ends the count. */
    ck_assert_uint_eq(ipb_json_values_bound("[\"[[[[", 6, 100), 2);
    /* Counting stops once past the limit. */
    char many[3000];
    for (size_t i = 0; i < sizeof(many); i += 3)
        memcpy(many + i, "[],", 3);
    ck_assert_uint_eq(ipb_json_values_bound(many, sizeof(many), 10), 11);
    ck_assert(!ipb_json_values_ok(many, sizeof(many), 1999));
    ck_assert(ipb_json_values_ok(many, sizeof(many), 2001));
    /* Megabytes of one string are one value. */
    size_t big = 8u << 20;
    char *text = malloc(big);
    ck_assert_ptr_nonnull(text);
    memset(text, 'x', big);
    text[0] = '"';
    text[big - 1] = '"';
    ck_assert_uint_eq(ipb_json_values_bound(text, big, 10), 1);
    free(text);
}
END_TEST

static Suite *common_suite(void) {
    Suite *s = suite_create("common");
    TCase *e = tcase_create("error");
    tcase_add_test(e, error_set_with_errno);
    tcase_add_test(e, error_set_without_errno);
    tcase_add_test(e, error_set_keeps_first_error);
    tcase_add_test(e, error_set_null_slot);
    tcase_add_test(e, error_wrap_prepends_context);
    tcase_add_test(e, error_wrap_without_error_is_noop);
    tcase_add_test(e, error_msg_and_freep);
    suite_add_tcase(s, e);

    TCase *b = tcase_create("buf");
    tcase_add_test(b, buf_append_and_cstr);
    tcase_add_test(b, buf_empty_cstr);
    tcase_add_test(b, buf_binary_and_growth);
    tcase_add_test(b, buf_consume_and_reset);
    suite_add_tcase(s, b);

    TCase *t = tcase_create("tree");
    tcase_add_checked_fixture(t, tmp_setup, tmp_teardown);
    tcase_add_test(t, mkdir_p_nested);
    tcase_add_test(t, mkdir_p_bad_input);
    tcase_add_test(t, rm_rf_does_not_follow_symlinks);
    tcase_add_test(t, rm_rf_top_level_symlink);
    tcase_add_test(t, rm_rf_missing_and_plain_file);
    tcase_add_test(t, rm_rf_at_and_empty_dir_at);
    tcase_add_test(t, rm_rf_very_deep_tree);
    tcase_add_test(t, rm_rf_races_with_symlink_swaps);
    tcase_add_test(t, read_file_refuses_fifo_without_blocking);
    tcase_add_test(t, read_small_cuts_and_terminates);
    tcase_add_test(t, json_values_bound);
    tcase_set_timeout(t, 60);
    suite_add_tcase(s, t);

    {
        TCase *k = tcase_create("fixed_bugs");
        tcase_add_checked_fixture(k, tmp_setup, tmp_teardown);
        tcase_add_test(k, fixed_bug_mkdir_p_existing_file);
        suite_add_tcase(s, k);
    }
    return s;
}

int main(void) { return ipb_run_suite(common_suite()); }
