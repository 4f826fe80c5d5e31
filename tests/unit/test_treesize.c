/* Unit tests for common/treesize.c: the size and newest time of a tree sandbox code wrote. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "run_suite.h"
#include "treesize.h"

static char top[64];

static void setup(void) {
    snprintf(top, sizeof(top), "/tmp/ipb-treesize-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(top));
}

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    ck_assert_int_eq(system(cmd), 0);
}

static void write_file(const char *rel, size_t n) {
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", top, rel);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    char buf[4096];
    memset(buf, 'x', sizeof(buf));
    for (size_t done = 0; done < n; done += sizeof(buf))
        ck_assert_uint_eq(fwrite(buf, 1, n - done < sizeof(buf) ? n - done : sizeof(buf), f),
                          n - done < sizeof(buf) ? n - done : sizeof(buf));
    ck_assert_int_eq(fclose(f), 0);
}

static ipb_tree_usage usage(void) {
    int fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ipb_tree_usage u;
    ck_assert_int_eq(ipb_tree_usage_at(fd, &u), 0);
    close(fd);
    return u;
}

START_TEST(hard_links_count_once) {
    write_file("big", 1 << 20);
    ipb_tree_usage one = usage();
    ck_assert_uint_ge(one.bytes, 1 << 20);
    char a[256], b[256];
    snprintf(a, sizeof(a), "%s/big", top);
    for (int i = 0; i < 50; i++) {
        snprintf(b, sizeof(b), "%s/link%d", top, i);
        ck_assert_int_eq(link(a, b), 0);
    }
    ipb_tree_usage many = usage();
    ck_assert_uint_eq(many.bytes, one.bytes);
    ck_assert_int_eq(many.entries, 51);
    ck_assert(!many.partial);
    /* A second file of its own still counts. */
    write_file("other", 1 << 20);
    ipb_tree_usage two = usage();
    ck_assert_uint_ge(two.bytes, one.bytes + (1 << 20));
}
END_TEST

START_TEST(symlinks_count_as_themselves) {
    char p[256];
    snprintf(p, sizeof(p), "%s/etc", top);
    ck_assert_int_eq(symlink("/usr", p), 0);
    ipb_tree_usage u = usage();
    ck_assert_int_eq(u.entries, 1);
    ck_assert_uint_lt(u.bytes, 1 << 20);
}
END_TEST

START_TEST(future_times_do_not_count) {
    write_file("now", 10);
    write_file("later", 10);
    char p[256];
    snprintf(p, sizeof(p), "%s/later", top);
    struct timespec ts[2] = {{4102444800, 0}, {4102444800, 0}}; /* 2100-01-01 */
    ck_assert_int_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
    ipb_tree_usage u = usage();
    ck_assert_int_lt(u.newest, time(NULL) + 86400 + 60);
    ck_assert_int_gt(u.newest, time(NULL) - 3600);
}
END_TEST

START_TEST(depth_bound_is_partial) {
    char p[4096];
    int n = snprintf(p, sizeof(p), "%s", top);
    for (int i = 0; i < IPB_TREESIZE_MAX_DEPTH + 2; i++) {
        n += snprintf(p + n, sizeof(p) - (size_t)n, "/d");
        ck_assert_int_eq(mkdir(p, 0700), 0);
    }
    ipb_tree_usage u = usage();
    ck_assert(u.partial);
}
END_TEST

static Suite *treesize_suite(void) {
    Suite *s = suite_create("treesize");
    TCase *t = tcase_create("treesize");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, hard_links_count_once);
    tcase_add_test(t, symlinks_count_as_themselves);
    tcase_add_test(t, future_times_do_not_count);
    tcase_add_test(t, depth_bound_is_partial);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return ipb_run_suite(treesize_suite()); }
