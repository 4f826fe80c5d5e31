/* Unit tests for supervisor/files: workspace writes and reads below a directory fd, and host
 * paths checked against allowed directories. Each test works in a fresh temporary directory
 * holding ws/ (the workspace), allowed/ (an allowed host directory) and outside/. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_suite.h"
#include "files.h"

static char top[256];
static int wsfd = -1;
static ipb_strv allowed;

static void p(char *out, const char *rel) {
    int n = snprintf(out, PATH_MAX, "%s/%s", top, rel);
    ck_assert(n > 0 && n < PATH_MAX);
}

static void setup(void) {
    const char *t = getenv("TMPDIR");
    snprintf(top, sizeof(top), "%s/ipb-unit-files-XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(top));
    /* canonical, so that comparisons with resolved paths hold */
    char *canon = realpath(top, NULL);
    ck_assert_ptr_nonnull(canon);
    snprintf(top, sizeof(top), "%s", canon);
    free(canon);
    char d[PATH_MAX];
    static const char *const dirs[] = {"ws", "allowed", "outside"};
    for (int i = 0; i < 3; i++) {
        p(d, dirs[i]);
        ck_assert_int_eq(mkdir(d, 0755), 0);
    }
    p(d, "ws");
    wsfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(wsfd, 0);
    memset(&allowed, 0, sizeof(allowed));
    p(d, "allowed");
    ipb_strv_push(&allowed, d);
}

static void teardown(void) {
    if (wsfd >= 0)
        close(wsfd);
    wsfd = -1;
    ipb_strv_free(&allowed);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", top);
}

static void put_file(const char *rel, const char *content) {
    char path[PATH_MAX];
    p(path, rel);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "creating %s", path);
    fputs(content, f);
    fclose(f);
}

/* The file's content (at most 255 bytes), or NULL if it cannot be opened. */
static char *content_of(const char *rel) {
    static char buf[256];
    char path[PATH_MAX];
    p(path, rel);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static bool exists(const char *rel) {
    char path[PATH_MAX];
    struct stat st;
    p(path, rel);
    return lstat(path, &st) == 0;
}

static void link_to(const char *target_rel, const char *link_rel) {
    char t[PATH_MAX], l[PATH_MAX];
    p(t, target_rel);
    p(l, link_rel);
    ck_assert_int_eq(symlink(t, l), 0);
}

/* No temporary file is left anywhere below dir. */
static void assert_no_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        ck_assert_msg(strncmp(de->d_name, ".ipybox-tmp-", 12), "temporary file %s/%s left behind", dir, de->d_name);
        if (de->d_type == DT_DIR) {
            char sub[PATH_MAX];
            snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
            assert_no_temp_files(sub);
        }
    }
    closedir(d);
}

static void assert_clean(void) {
    char d[PATH_MAX];
    p(d, "ws");
    assert_no_temp_files(d);
    p(d, "allowed");
    assert_no_temp_files(d);
    p(d, "outside");
    assert_no_temp_files(d);
}

/* Runs a call that must fail and checks its message. */
#define EXPECT_FAIL(call, needle)                                                                            \
    do {                                                                                                     \
        ipb_error *err = NULL;                                                                               \
        int r_ = (call);                                                                                     \
        ck_assert_msg(r_ < 0, #call " succeeded");                                                           \
        ck_assert_msg(err != NULL, #call " failed without an error");                                        \
        ck_assert_msg(strstr(ipb_error_msg(err), (needle)) != NULL, #call ": message lacks '%s': %s", needle, \
                      ipb_error_msg(err));                                                                   \
        ipb_error_free(err);                                                                                 \
    } while (0)

#define EXPECT_OK(call)                                                          \
    do {                                                                         \
        ipb_error *err = NULL;                                                   \
        int r_ = (call);                                                         \
        ck_assert_msg(r_ == 0, #call " failed: %s", ipb_error_msg(err));         \
        ipb_error_free(err);                                                     \
    } while (0)

/* ---- workspace ---- */

START_TEST(ws_write_creates_parents) {
    EXPECT_OK(ipb_ws_write(wsfd, "a.txt", "hello", 5, &err));
    ck_assert_str_eq(content_of("ws/a.txt"), "hello");
    EXPECT_OK(ipb_ws_write(wsfd, "d1/d2/d3/f.py", "print(1)\n", 9, &err));
    ck_assert_str_eq(content_of("ws/d1/d2/d3/f.py"), "print(1)\n");
    struct stat st;
    char path[PATH_MAX];
    p(path, "ws/d1/d2");
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    EXPECT_OK(ipb_ws_write(wsfd, "./x/./y//z", "z", 1, &err));
    ck_assert_str_eq(content_of("ws/x/y/z"), "z");
    EXPECT_OK(ipb_ws_write(wsfd, "empty", "", 0, &err));
    ck_assert_str_eq(content_of("ws/empty"), "");
    assert_clean();
}
END_TEST

START_TEST(ws_write_replaces_atomically) {
    put_file("ws/f", "old content");
    char a[PATH_MAX], b[PATH_MAX];
    p(a, "ws/f");
    p(b, "ws/f-hardlink");
    ck_assert_int_eq(link(a, b), 0);
    struct stat before, after;
    ck_assert_int_eq(stat(a, &before), 0);
    EXPECT_OK(ipb_ws_write(wsfd, "f", "new", 3, &err));
    ck_assert_str_eq(content_of("ws/f"), "new");
    /* a new inode was renamed into place: the old file (seen through its other link) is intact */
    ck_assert_int_eq(stat(a, &after), 0);
    ck_assert_uint_ne(after.st_ino, before.st_ino);
    ck_assert_str_eq(content_of("ws/f-hardlink"), "old content");
    assert_clean();
}
END_TEST

START_TEST(ws_write_replaces_symlink_without_following) {
    put_file("outside/target", "outside data");
    link_to("outside/target", "ws/link");
    EXPECT_OK(ipb_ws_write(wsfd, "link", "mine", 4, &err));
    ck_assert_str_eq(content_of("outside/target"), "outside data");
    struct stat st;
    char path[PATH_MAX];
    p(path, "ws/link");
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_str_eq(content_of("ws/link"), "mine");
}
END_TEST

START_TEST(ws_bad_paths) {
    EXPECT_FAIL(ipb_ws_write(wsfd, "", "x", 1, &err), "empty");
    EXPECT_FAIL(ipb_ws_write(wsfd, "/etc/passwd", "x", 1, &err), "absolute");
    EXPECT_FAIL(ipb_ws_write(wsfd, "../escape", "x", 1, &err), "'..'");
    EXPECT_FAIL(ipb_ws_write(wsfd, "a/../../escape", "x", 1, &err), "'..'");
    EXPECT_FAIL(ipb_ws_write(wsfd, "dir/", "x", 1, &err), "ends with '/'");
    EXPECT_FAIL(ipb_ws_write(wsfd, "dir2/.", "x", 1, &err), "does not name a file");
    EXPECT_FAIL(ipb_ws_write(wsfd, ".", "x", 1, &err), "/app itself");
    ck_assert(!exists("escape"));
    ck_assert(!exists("ws/dir"));
    ck_assert(!exists("ws/escape"));
}
END_TEST

START_TEST(ws_open_parent_refuses_symlinked_dir) {
    link_to("outside", "ws/sub");
    EXPECT_FAIL(ipb_ws_write(wsfd, "sub/planted.txt", "x", 1, &err), "'sub' in /app is a symlink");
    ck_assert(!exists("outside/planted.txt"));
    /* deeper, and relative symlinks too */
    ck_assert_int_eq(mkdirat(wsfd, "real", 0755), 0);
    ck_assert_int_eq(symlinkat("../../outside", wsfd, "real/up"), 0);
    EXPECT_FAIL(ipb_ws_write(wsfd, "real/up/x", "x", 1, &err), "'real/up' in /app is a symlink");
    ck_assert(!exists("outside/x"));
    int dfd = -1;
    const char *name = NULL;
    EXPECT_FAIL(ipb_ws_open_parent(wsfd, "sub/f", false, &dfd, &name, &err), "symlink");
    ck_assert_int_eq(dfd, -1);
    /* a symlink to a directory inside the workspace is refused all the same */
    ck_assert_int_eq(symlinkat("real", wsfd, "alias"), 0);
    EXPECT_FAIL(ipb_ws_open_parent(wsfd, "alias/f", true, &dfd, &name, &err), "symlink");
    assert_clean();
}
END_TEST

START_TEST(ws_open_parent_results) {
    int dfd = -1;
    const char *name = NULL;
    const char *rel = "p/q/name.txt";
    EXPECT_FAIL(ipb_ws_open_parent(wsfd, rel, false, &dfd, &name, &err), "'p' in /app");
    ck_assert(!exists("ws/p"));
    EXPECT_OK(ipb_ws_open_parent(wsfd, rel, true, &dfd, &name, &err));
    ck_assert_ptr_eq(name, rel + 4);
    struct stat a, b;
    char path[PATH_MAX];
    p(path, "ws/p/q");
    ck_assert_int_eq(fstat(dfd, &a), 0);
    ck_assert_int_eq(stat(path, &b), 0);
    ck_assert_uint_eq(a.st_ino, b.st_ino);
    ck_assert_int_ne(fcntl(dfd, F_GETFD) & FD_CLOEXEC, 0);
    close(dfd);
    /* a file in the way */
    put_file("ws/plain", "x");
    EXPECT_FAIL(ipb_ws_open_parent(wsfd, "plain/f", true, &dfd, &name, &err), "'plain' in /app is not a directory");
}
END_TEST

START_TEST(ws_open_read_cases) {
    put_file("ws/data.csv", "a,b\n1,2\n");
    int fd = -1;
    EXPECT_OK(ipb_ws_open_read(wsfd, "data.csv", &fd, &err));
    char buf[32] = "";
    ck_assert_int_eq(read(fd, buf, sizeof(buf)), 8);
    ck_assert_str_eq(buf, "a,b\n1,2\n");
    ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    close(fd);
    fd = -1;

    put_file("outside/secret", "s");
    link_to("outside/secret", "ws/link");
    EXPECT_FAIL(ipb_ws_open_read(wsfd, "link", &fd, &err), "/app/link is a symlink");
    ck_assert_int_eq(mkdirat(wsfd, "adir", 0755), 0);
    EXPECT_FAIL(ipb_ws_open_read(wsfd, "adir", &fd, &err), "/app/adir is not a regular file");
    char a[PATH_MAX], b[PATH_MAX];
    p(a, "outside/secret");
    p(b, "ws/hard");
    ck_assert_int_eq(link(a, b), 0);
    EXPECT_FAIL(ipb_ws_open_read(wsfd, "hard", &fd, &err), "/app/hard has other hard links");
    EXPECT_FAIL(ipb_ws_open_read(wsfd, "missing.txt", &fd, &err), "/app/missing.txt does not exist");
    EXPECT_FAIL(ipb_ws_open_read(wsfd, "nodir/missing.txt", &fd, &err), "'nodir' in /app");
    ck_assert(!exists("ws/nodir")); /* reading creates nothing */
    ck_assert_int_eq(mkfifoat(wsfd, "fifo", 0600), 0);
    EXPECT_FAIL(ipb_ws_open_read(wsfd, "fifo", &fd, &err), "/app/fifo is not a regular file"); /* and no hang */
    link_to("outside", "ws/dirlink");
    EXPECT_FAIL(ipb_ws_open_read(wsfd, "dirlink/secret", &fd, &err), "symlink");
    ck_assert_int_eq(fd, -1); /* untouched on failure */
}
END_TEST

START_TEST(ws_copy_in_cases) {
    int pf[2];
    ck_assert_int_eq(pipe(pf), 0);
    ck_assert_int_eq(write(pf[1], "from a pipe", 11), 11);
    close(pf[1]);
    EXPECT_OK(ipb_ws_copy_in(wsfd, "in/copy.txt", pf[0], &err));
    close(pf[0]);
    ck_assert_str_eq(content_of("ws/in/copy.txt"), "from a pipe");

    /* refuses to replace a directory, which stays with its content */
    ck_assert_int_eq(mkdirat(wsfd, "dir", 0755), 0);
    put_file("ws/dir/keep", "k");
    put_file("outside/src", "data");
    char src[PATH_MAX];
    p(src, "outside/src");
    int sfd = open(src, O_RDONLY | O_CLOEXEC);
    EXPECT_FAIL(ipb_ws_copy_in(wsfd, "dir", sfd, &err), "writing /app/dir");
    close(sfd);
    ck_assert_str_eq(content_of("ws/dir/keep"), "k");

    /* a source that fails to read leaves nothing, not even a partial file */
    put_file("ws/existing", "before");
    char d[PATH_MAX];
    p(d, "outside");
    int bad = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* read() gives EISDIR */
    EXPECT_FAIL(ipb_ws_copy_in(wsfd, "existing", bad, &err), "writing /app/existing");
    close(bad);
    ck_assert_str_eq(content_of("ws/existing"), "before");
    assert_clean();
}
END_TEST

/* ---- host side ---- */

START_TEST(host_read_inside_and_outside) {
    put_file("allowed/in.txt", "ok");
    put_file("outside/out.txt", "no");
    char path[PATH_MAX], expect[PATH_MAX];
    char *ret = NULL;
    p(path, "allowed/in.txt");
    EXPECT_OK(ipb_host_resolve_read(&allowed, path, &ret, &err));
    ck_assert_str_eq(ret, path);
    free(ret);
    ret = NULL;
    /* a '..' that stays inside is resolved */
    p(path, "allowed/../allowed/./in.txt");
    p(expect, "allowed/in.txt");
    EXPECT_OK(ipb_host_resolve_read(&allowed, path, &ret, &err));
    ck_assert_str_eq(ret, expect);
    free(ret);
    ret = NULL;
    p(path, "outside/out.txt");
    EXPECT_FAIL(ipb_host_resolve_read(&allowed, path, &ret, &err), "is not within the allowed directories");
    p(path, "allowed/../outside/out.txt");
    EXPECT_FAIL(ipb_host_resolve_read(&allowed, path, &ret, &err), "is not within the allowed directories");
    link_to("outside/out.txt", "allowed/link");
    p(path, "allowed/link");
    EXPECT_FAIL(ipb_host_resolve_read(&allowed, path, &ret, &err), "is not within the allowed directories");
    link_to("outside", "allowed/dirlink");
    p(path, "allowed/dirlink/out.txt");
    EXPECT_FAIL(ipb_host_resolve_read(&allowed, path, &ret, &err), "--allowed-dir");
    EXPECT_FAIL(ipb_host_resolve_read(&allowed, "relative/in.txt", &ret, &err), "must be an absolute host path");
    p(path, "allowed/missing");
    EXPECT_FAIL(ipb_host_resolve_read(&allowed, path, &ret, &err), "file not found");
    p(path, "allowed");
    EXPECT_FAIL(ipb_host_resolve_read(&allowed, path, &ret, &err), "is not a regular file");
    ck_assert_ptr_null(ret);
}
END_TEST

START_TEST(host_allowed_dir_rules) {
    /* a sibling whose name extends the allowed directory's is outside */
    char d[PATH_MAX], path[PATH_MAX];
    p(d, "allowed2");
    ck_assert_int_eq(mkdir(d, 0755), 0);
    put_file("allowed2/f", "x");
    p(path, "allowed2/f");
    char *ret = NULL;
    EXPECT_FAIL(ipb_host_resolve_read(&allowed, path, &ret, &err), "not within");
    /* an allowed directory given through a symlink is resolved */
    ipb_strv via = {0};
    p(d, "allowed-link");
    link_to("allowed", "allowed-link");
    ipb_strv_push(&via, d);
    put_file("allowed/g", "y");
    p(path, "allowed/g");
    EXPECT_OK(ipb_host_resolve_read(&via, path, &ret, &err));
    free(ret);
    ret = NULL;
    /* no allowed directories: nothing is allowed; a missing allowed directory allows nothing */
    ipb_strv none = {0};
    EXPECT_FAIL(ipb_host_resolve_read(&none, path, &ret, &err), "not within");
    ipb_strv gone = {0};
    ipb_strv_push(&gone, "/nonexistent/ipb-unit");
    EXPECT_FAIL(ipb_host_resolve_read(&gone, path, &ret, &err), "/nonexistent/ipb-unit");
    ipb_strv_free(&via);
    ipb_strv_free(&gone);
}
END_TEST

START_TEST(host_write_resolution) {
    char path[PATH_MAX], expect[PATH_MAX];
    char *ret = NULL;
    p(path, "allowed/new.txt");
    EXPECT_OK(ipb_host_resolve_write(&allowed, path, &ret, &err));
    ck_assert_str_eq(ret, path);
    free(ret);
    ret = NULL;
    p(path, "allowed/n1/n2/new.txt"); /* parents do not exist yet */
    EXPECT_OK(ipb_host_resolve_write(&allowed, path, &ret, &err));
    ck_assert_str_eq(ret, path);
    free(ret);
    ret = NULL;
    ck_assert(!exists("allowed/n1")); /* resolving creates nothing */
    p(expect, "allowed/sub");
    ck_assert_int_eq(mkdir(expect, 0755), 0);
    p(path, "allowed/sub/../new.txt");
    p(expect, "allowed/new.txt");
    EXPECT_OK(ipb_host_resolve_write(&allowed, path, &ret, &err)); /* existing part: resolved */
    ck_assert_str_eq(ret, expect);
    free(ret);
    ret = NULL;

    p(path, "outside/x.txt");
    EXPECT_FAIL(ipb_host_resolve_write(&allowed, path, &ret, &err), "not within the allowed directories");
    p(path, "allowed/../outside/x.txt");
    EXPECT_FAIL(ipb_host_resolve_write(&allowed, path, &ret, &err), "not within the allowed directories");
    p(path, "allowed/new/../../outside/x.txt");
    EXPECT_FAIL(ipb_host_resolve_write(&allowed, path, &ret, &err), "'.' or '..'");
    p(path, "allowed/new/./x.txt");
    EXPECT_FAIL(ipb_host_resolve_write(&allowed, path, &ret, &err), "'.' or '..'");
    p(path, "allowed/new/..");
    EXPECT_FAIL(ipb_host_resolve_write(&allowed, path, &ret, &err), "'.' or '..'");
    link_to("outside", "allowed/out-link");
    p(path, "allowed/out-link/x.txt");
    EXPECT_FAIL(ipb_host_resolve_write(&allowed, path, &ret, &err), "not within");
    p(path, "allowed/out-link/deeper/x.txt");
    EXPECT_FAIL(ipb_host_resolve_write(&allowed, path, &ret, &err), "not within");
    put_file("outside/victim", "v");
    link_to("outside/victim", "allowed/file-link");
    p(path, "allowed/file-link");
    EXPECT_FAIL(ipb_host_resolve_write(&allowed, path, &ret, &err), "not within");
    p(path, "allowed/dir/");
    EXPECT_FAIL(ipb_host_resolve_write(&allowed, path, &ret, &err), "must name a file");
    p(path, "allowed");
    EXPECT_FAIL(ipb_host_resolve_write(&allowed, path, &ret, &err), "local_path");
    EXPECT_FAIL(ipb_host_resolve_write(&allowed, "rel/x", &ret, &err), "must be an absolute host path");
    EXPECT_FAIL(ipb_host_resolve_write(&allowed, "", &ret, &err), "must be an absolute host path");
    EXPECT_FAIL(ipb_host_resolve_write(&allowed, "/", &ret, &err), "must name a file");
    ck_assert_ptr_null(ret);
    ck_assert(!exists("outside/x.txt"));
    ck_assert_str_eq(content_of("outside/victim"), "v");
}
END_TEST

static void write_via_host(const char *rel, const char *data) {
    char path[PATH_MAX];
    p(path, rel);
    char *dst = NULL;
    EXPECT_OK(ipb_host_resolve_write(&allowed, path, &dst, &err));
    int pf[2];
    ck_assert_int_eq(pipe(pf), 0);
    ck_assert_int_eq(write(pf[1], data, strlen(data)), (ssize_t)strlen(data));
    close(pf[1]);
    EXPECT_OK(ipb_host_write_from(dst, pf[0], &err));
    close(pf[0]);
    free(dst);
}

START_TEST(host_write_from_creates_parents) {
    write_via_host("allowed/a/b/c/out.txt", "downloaded");
    ck_assert_str_eq(content_of("allowed/a/b/c/out.txt"), "downloaded");
    write_via_host("allowed/a/b/c/out.txt", "again"); /* replaces */
    ck_assert_str_eq(content_of("allowed/a/b/c/out.txt"), "again");
    write_via_host("allowed/top.txt", "top");
    ck_assert_str_eq(content_of("allowed/top.txt"), "top");
    assert_clean();
}
END_TEST

START_TEST(host_write_dangling_symlinks) {
    /* A dangling symlink in an allowed directory resolves to itself; writing replaces the
     * link, never creating its target outside. */
    link_to("outside/created-by-link", "allowed/dangling");
    write_via_host("allowed/dangling", "data");
    ck_assert(!exists("outside/created-by-link"));
    struct stat st;
    char path[PATH_MAX];
    p(path, "allowed/dangling");
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert(S_ISREG(st.st_mode));

    /* A dangling symlink as a directory component must not lead outside either. */
    link_to("outside/newdir", "allowed/ddir");
    p(path, "allowed/ddir/f.txt");
    char *dst = NULL;
    ipb_error *err = NULL;
    if (ipb_host_resolve_write(&allowed, path, &dst, &err) == 0) {
        int pf[2];
        ck_assert_int_eq(pipe(pf), 0);
        close(pf[1]);
        int r = ipb_host_write_from(dst, pf[0], &err);
        close(pf[0]);
        free(dst);
        ck_assert_int_lt(r, 0);
    }
    ipb_error_free(err);
    ck_assert(!exists("outside/newdir"));
    ck_assert(!exists("outside/newdir/f.txt"));
    assert_clean();
}
END_TEST

static Suite *files_suite(void) {
    Suite *s = suite_create("files");
    TCase *w = tcase_create("workspace");
    tcase_add_checked_fixture(w, setup, teardown);
    tcase_add_test(w, ws_write_creates_parents);
    tcase_add_test(w, ws_write_replaces_atomically);
    tcase_add_test(w, ws_write_replaces_symlink_without_following);
    tcase_add_test(w, ws_bad_paths);
    tcase_add_test(w, ws_open_parent_refuses_symlinked_dir);
    tcase_add_test(w, ws_open_parent_results);
    tcase_add_test(w, ws_open_read_cases);
    tcase_add_test(w, ws_copy_in_cases);
    suite_add_tcase(s, w);
    TCase *h = tcase_create("host");
    tcase_add_checked_fixture(h, setup, teardown);
    tcase_add_test(h, host_read_inside_and_outside);
    tcase_add_test(h, host_allowed_dir_rules);
    tcase_add_test(h, host_write_resolution);
    tcase_add_test(h, host_write_from_creates_parents);
    tcase_add_test(h, host_write_dangling_symlinks);
    suite_add_tcase(s, h);
    return s;
}

int main(void) {
    return ipb_run_suite(files_suite());
}
