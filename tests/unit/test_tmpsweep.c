/* Unit tests for crash-consistent writes into a sandbox's trees (files.c with O_TMPFILE and its
 * named fallback), the marks and sweep of leftover temporaries (tmpmark.c), and the hold on
 * trees that keeps a sweep, or the removal of an empty default workspace, off a tree in use
 * (treehold.c). A "killed supervisor" is a forked child copying from a pipe, SIGKILLed while
 * it waits for more. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run_suite.h"
#include "files.h"
#include "tmpmark.h"
#include "treehold.h"

static char top[256];
static int wsfd = -1;

static void p(char *out, const char *rel) {
    int n = snprintf(out, PATH_MAX, "%s/%s", top, rel);
    ck_assert(n > 0 && n < PATH_MAX);
}

static void setup(void) {
    const char *t = getenv("TMPDIR");
    snprintf(top, sizeof(top), "%s/ipb-unit-tmpsweep-XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(top));
    char d[PATH_MAX];
    static const char *const dirs[] = {"ws", "ws/sub", "outside", "state"};
    for (int i = 0; i < 4; i++) {
        p(d, dirs[i]);
        ck_assert_int_eq(mkdir(d, 0755), 0);
    }
    p(d, "ws");
    wsfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(wsfd, 0);
    p(d, "state");
    ck_assert_int_eq(ipb_tmp_marks_open(d), 0);
}

static void teardown(void) {
    if (wsfd >= 0)
        close(wsfd);
    wsfd = -1;
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", top);
}

static bool exists(const char *rel) {
    char path[PATH_MAX];
    struct stat st;
    p(path, rel);
    return lstat(path, &st) == 0;
}

static void put(const char *rel, const char *content) {
    char path[PATH_MAX];
    p(path, rel);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(content, f);
    fclose(f);
}

/* Entries of a directory below top, but "." and "..". */
static int count_entries(const char *rel, const char *prefix) {
    char path[PATH_MAX];
    p(path, rel);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && !strncmp(de->d_name, prefix, strlen(prefix)))
            n++;
    closedir(d);
    return n;
}

/* The name of the first temporary of ours in ws/<rel>, or "" */
static const char *temp_in(const char *rel) {
    static char found[NAME_MAX + 1];
    char path[PATH_MAX];
    p(path, rel);
    found[0] = '\0';
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d)))
        if (ipb_tmp_name_is_ours(de->d_name))
            snprintf(found, sizeof(found), "%s", de->d_name);
    closedir(d);
    return found;
}

/* A child that copies a pipe into the workspace as rel; *ret_w: the pipe's writing end. */
static pid_t start_copy(const char *rel, int *ret_w) {
    int pf[2];
    ck_assert_int_eq(pipe(pf), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(pf[1]);
        ipb_error *e = NULL;
        _exit(ipb_ws_copy_in(wsfd, rel, pf[0], NULL, &e) == 0 ? 0 : 1);
    }
    close(pf[0]);
    char block[65536];
    memset(block, 'x', sizeof(block));
    ck_assert_int_eq(write(pf[1], block, sizeof(block)), (ssize_t)sizeof(block));
    *ret_w = pf[1];
    return pid;
}

/* Whether pid holds an fd of a file below ws whose size is at least min (an unnamed file
 * shows as "<dir>/#<inode> (deleted)"). */
static bool holds_file_in_ws(pid_t pid, off_t min) {
    char dir[64], ws[PATH_MAX];
    p(ws, "ws/");
    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool found = false;
    struct dirent *de;
    while (!found && (de = readdir(d))) {
        char fdpath[PATH_MAX], link[PATH_MAX];
        snprintf(fdpath, sizeof(fdpath), "%s/%s", dir, de->d_name);
        ssize_t n = readlink(fdpath, link, sizeof(link) - 1);
        struct stat st;
        if (n <= 0)
            continue;
        link[n] = '\0';
        found = !strncmp(link, ws, strlen(ws)) && stat(fdpath, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= min;
    }
    closedir(d);
    return found;
}

static void kill_child(pid_t pid, int wfd) {
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status));
    close(wfd);
}

static void wait_until(bool (*pred)(pid_t), pid_t pid) {
    struct timespec ms = {0, 1000 * 1000};
    for (int i = 0; i < 20000 && !pred(pid); i++)
        nanosleep(&ms, NULL);
    ck_assert_msg(pred(pid), "the copy did not get under way");
}

static bool unnamed_written(pid_t pid) { return holds_file_in_ws(pid, 65536); }
static bool named_written(pid_t pid) {
    (void)pid;
    return temp_in("ws/sub")[0] != '\0';
}

START_TEST(name_pattern) {
    ck_assert(ipb_tmp_name_is_ours(".ipybox-tmp-0123456789abcdef"));
    ck_assert(!ipb_tmp_name_is_ours(".ipybox-tmp-0123456789ABCDEF"));
    ck_assert(!ipb_tmp_name_is_ours(".ipybox-tmp-0123456789abcde"));
    ck_assert(!ipb_tmp_name_is_ours(".ipybox-tmp-0123456789abcdef0"));
    ck_assert(!ipb_tmp_name_is_ours(".ipybox-tmp-0123456789abcdeg"));
    ck_assert(!ipb_tmp_name_is_ours("ipybox-tmp-0123456789abcdef"));
    ck_assert(!ipb_tmp_name_is_ours(".ipybox-tmp-"));
}
END_TEST

/* With O_TMPFILE the data never has a name until it is whole: a kill mid-copy leaves nothing,
 * and nothing is marked. */
START_TEST(killed_unnamed_copy_leaves_nothing) {
    int w;
    pid_t pid = start_copy("sub/big.bin", &w);
    wait_until(unnamed_written, pid);
    ck_assert_int_eq(count_entries("ws/sub", ""), 0);
    kill_child(pid, w);
    ck_assert_int_eq(count_entries("ws/sub", ""), 0);
    ck_assert_int_eq(count_entries("ws", ""), 1); /* sub */
    ck_assert_int_eq(count_entries("state/tmp-pending", ""), 0);
}
END_TEST

/* A copy that completes: a new name is linked at once, an existing file replaced; with or
 * without O_TMPFILE, no temporary and no mark stays. */
START_TEST(writes_leave_no_mark) {
    for (int fallback = 0; fallback < 2; fallback++) {
        ipb_files_no_tmpfile = fallback;
        ipb_error *err = NULL;
        ck_assert_int_eq(ipb_ws_write(wsfd, "sub/a.txt", "one", 3, &err), 0);
        ck_assert_int_eq(ipb_ws_write(wsfd, "sub/a.txt", "two", 3, &err), 0);
        ck_assert_int_eq(symlinkat("../../outside/target", wsfd, "sub/link"), 0);
        ck_assert_int_eq(ipb_ws_write(wsfd, "sub/link", "mine", 4, &err), 0);
        ck_assert(!exists("outside/target"));
        ck_assert_int_eq(ipb_ws_write(wsfd, "sub", "x", 1, &err), -1);
        ck_assert_ptr_nonnull(err);
        ipb_error_free(err);
        ck_assert_str_eq(temp_in("ws/sub"), "");
        ck_assert_str_eq(temp_in("ws"), "");
        ck_assert_int_eq(count_entries("state/tmp-pending", ""), 0);
        unlinkat(wsfd, "sub/link", 0);
    }
}
END_TEST

/* Without O_TMPFILE, a kill leaves a named temporary and a mark; the next hold of the tree
 * sweeps ours only: no symlink followed or removed, no directory, no other name. */
START_TEST(killed_named_copy_is_swept) {
    ipb_files_no_tmpfile = true;
    int w;
    pid_t pid = start_copy("sub/big.bin", &w);
    wait_until(named_written, pid);
    kill_child(pid, w);
    char left[NAME_MAX + 16];
    snprintf(left, sizeof(left), "ws/sub/%s", temp_in("ws/sub"));
    ck_assert(ipb_tmp_name_is_ours(left + 7));
    ck_assert_int_eq(count_entries("state/tmp-pending", ""), 1);
    /* what the sweep must leave alone */
    char path[PATH_MAX];
    put("outside/.ipybox-tmp-00000000000000aa", "outside");
    put("outside/victim", "victim");
    p(path, "outside/victim");
    ck_assert_int_eq(symlinkat(path, wsfd, ".ipybox-tmp-00000000000000bb"), 0);
    p(path, "outside");
    ck_assert_int_eq(symlinkat(path, wsfd, "sub/outlink"), 0);
    ck_assert_int_eq(mkdirat(wsfd, ".ipybox-tmp-00000000000000cc", 0755), 0);
    put("ws/.ipybox-tmp-notours", "user");
    put("ws/.ipybox-tmp-00000000000000DD", "user");
    put("ws/sub/.ipybox-tmp-00000000000000ee", "left too");

    int hold = -1;
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_tree_hold(wsfd, "--workspace", "ws", &hold, &err), 0);
    ck_assert_int_ge(hold, 0);
    ck_assert_msg(!exists(left), "%s was not swept", left);
    ck_assert(!exists("ws/sub/.ipybox-tmp-00000000000000ee"));
    ck_assert(exists("outside/.ipybox-tmp-00000000000000aa"));
    ck_assert(exists("outside/victim"));
    ck_assert(exists("ws/.ipybox-tmp-00000000000000bb"));
    ck_assert(exists("ws/.ipybox-tmp-00000000000000cc"));
    ck_assert(exists("ws/.ipybox-tmp-notours"));
    ck_assert(exists("ws/.ipybox-tmp-00000000000000DD"));
    ck_assert_int_eq(count_entries("state/tmp-pending", ""), 0);
    /* held shared: a second hold gets it too */
    int hold2 = -1;
    ck_assert_int_eq(ipb_tree_hold(wsfd, "--workspace", "ws", &hold2, &err), 0);
    ck_assert_int_ge(hold2, 0);
    close(hold2);
    close(hold);
}
END_TEST

/* A tree that a live session holds is not swept, mark or not. */
START_TEST(held_tree_is_not_swept) {
    ipb_files_no_tmpfile = true;
    int w;
    pid_t pid = start_copy("sub/big.bin", &w);
    wait_until(named_written, pid);
    kill_child(pid, w);
    char left[NAME_MAX + 16];
    snprintf(left, sizeof(left), "ws/sub/%s", temp_in("ws/sub"));
    int other = openat(wsfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_eq(flock(other, LOCK_SH), 0); /* a running session */
    int hold = -1;
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_tree_hold(wsfd, "--workspace", "ws", &hold, &err), 0);
    ck_assert_int_ge(hold, 0);
    ck_assert(exists(left));
    ck_assert_int_eq(count_entries("state/tmp-pending", ""), 1);
    close(hold);
    close(other);
    /* once it is gone, the next start sweeps */
    ck_assert_int_eq(ipb_tree_hold(wsfd, "--workspace", "ws", &hold, &err), 0);
    ck_assert(!exists(left));
    close(hold);
}
END_TEST

/* A tree someone else keeps exclusively (any reader of the directory can): the start goes on
 * without holding it, rather than fail. */
START_TEST(exclusive_holder_does_not_stop_a_start) {
    int other = openat(wsfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_eq(flock(other, LOCK_EX), 0);
    int hold = 7;
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_tree_hold(wsfd, "--workspace", "ws", &hold, &err), 0);
    ck_assert_ptr_null(err);
    ck_assert_int_eq(hold, -1);
    close(other);
}
END_TEST

START_TEST(default_workspaces_swept) {
    static const char *const dirs[] = {
        "state/ipybox",
        "state/ipybox/sessions",
        "state/ipybox/workspaces",
        "state/ipybox/workspaces/00000000000000a1", /* empty, no session: goes */
        "state/ipybox/workspaces/00000000000000a2", /* empty, its session dir is there */
        "state/ipybox/sessions/00000000000000a2",
        "state/ipybox/workspaces/00000000000000a3", /* not empty */
        "state/ipybox/workspaces/00000000000000a4", /* empty, held (named with --workspace) */
        "state/ipybox/workspaces/not-an-id",        /* not one of ours */
        /* Unnamed ones as named now (wsname.h): when, and the session's id. */
        "state/ipybox/workspaces/2026-11-26T130512Z-00000000000000b1", /* empty, no session: goes */
        "state/ipybox/workspaces/2026-11-26T130513Z-00000000000000b2", /* its session dir is there */
        "state/ipybox/sessions/00000000000000b2",
        "outside/empty",
    };
    char path[PATH_MAX], target[PATH_MAX];
    for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++) {
        p(path, dirs[i]);
        ck_assert_int_eq(mkdir(path, 0755), 0);
    }
    put("state/ipybox/workspaces/00000000000000a3/notes.txt", "kept");
    p(target, "outside/empty");
    p(path, "state/ipybox/workspaces/00000000000000a5"); /* a symlink: never followed */
    ck_assert_int_eq(symlink(target, path), 0);
    p(path, "state/ipybox/workspaces/00000000000000a4");
    int held = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_eq(flock(held, LOCK_SH), 0);
    p(path, "state/ipybox");
    ck_assert_int_eq(ipb_default_workspaces_sweep(path), 2);
    ck_assert(!exists("state/ipybox/workspaces/00000000000000a1"));
    ck_assert(!exists("state/ipybox/workspaces/2026-11-26T130512Z-00000000000000b1"));
    ck_assert(exists("state/ipybox/workspaces/2026-11-26T130513Z-00000000000000b2"));
    ck_assert(exists("state/ipybox/workspaces/00000000000000a2"));
    ck_assert(exists("state/ipybox/workspaces/00000000000000a3/notes.txt"));
    ck_assert(exists("state/ipybox/workspaces/00000000000000a4"));
    ck_assert(exists("state/ipybox/workspaces/00000000000000a5"));
    ck_assert(exists("state/ipybox/workspaces/not-an-id"));
    ck_assert(exists("outside/empty"));
    close(held);
    ck_assert_int_eq(ipb_default_workspaces_sweep(path), 1);
    ck_assert(!exists("state/ipybox/workspaces/00000000000000a4"));
}
END_TEST

static Suite *tmpsweep_suite(void) {
    Suite *s = suite_create("tmpsweep");
    TCase *t = tcase_create("tmpsweep");
    tcase_set_timeout(t, 60);
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, name_pattern);
    tcase_add_test(t, killed_unnamed_copy_leaves_nothing);
    tcase_add_test(t, writes_leave_no_mark);
    tcase_add_test(t, killed_named_copy_is_swept);
    tcase_add_test(t, held_tree_is_not_swept);
    tcase_add_test(t, exclusive_holder_does_not_stop_a_start);
    tcase_add_test(t, default_workspaces_swept);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return ipb_run_suite(tmpsweep_suite()); }
