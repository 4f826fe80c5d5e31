/* Unit tests for supervisor/files: workspace writes and reads below a directory fd (the fixture:
 * files_fixture.h). Host paths resolved beneath the allowed directories' fds: test_files_host.c. */
#include <check.h>
#include <string.h>

#include "files.h"
#include "files_fixture.h"
#include "run_suite.h"

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
    EXPECT_OK(ipb_ws_copy_in(wsfd, "in/copy.txt", pf[0], NULL, &err));
    close(pf[0]);
    ck_assert_str_eq(content_of("ws/in/copy.txt"), "from a pipe");

    /* a regular file is copied whole, over several reads */
    char big[PATH_MAX];
    p(big, "outside/big");
    FILE *bf = fopen(big, "w");
    ck_assert_ptr_nonnull(bf);
    for (int i = 0; i < 200000; i++)
        fputc('a' + i % 26, bf);
    fclose(bf);
    int bfd = open(big, O_RDONLY | O_CLOEXEC);
    EXPECT_OK(ipb_ws_copy_in(wsfd, "big.copy", bfd, NULL, &err));
    close(bfd);
    struct stat bst;
    ck_assert_int_eq(fstatat(wsfd, "big.copy", &bst, 0), 0);
    ck_assert_int_eq(bst.st_size, 200000);

    /* refuses to replace a directory, which stays with its content */
    ck_assert_int_eq(mkdirat(wsfd, "dir", 0755), 0);
    put_file("ws/dir/keep", "k");
    put_file("outside/src", "data");
    char src[PATH_MAX];
    p(src, "outside/src");
    int sfd = open(src, O_RDONLY | O_CLOEXEC);
    EXPECT_FAIL(ipb_ws_copy_in(wsfd, "dir", sfd, NULL, &err), "writing /app/dir");
    close(sfd);
    ck_assert_str_eq(content_of("ws/dir/keep"), "k");

    /* a source that fails to read leaves nothing, not even a partial file */
    put_file("ws/existing", "before");
    char d[PATH_MAX];
    p(d, "outside");
    int bad = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* read() gives EISDIR */
    EXPECT_FAIL(ipb_ws_copy_in(wsfd, "existing", bad, NULL, &err), "writing /app/existing");
    close(bad);
    ck_assert_str_eq(content_of("ws/existing"), "before");
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
    return s;
}

int main(void) { return ipb_run_suite(files_suite()); }
