/* Unit tests for the shim's root filesystem builder (kernel-shim/rootfs.c), run for real in a
 * child with a user and mount namespace of its own: a plan (which a worker writes, so a user
 * under the system service) must not get a writable bind or place anything on the host by
 * way of symlinks. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdio.h"
#include "mountplan.h"
#include "rootfs.h"
#include "run_suite.h"

static char tmp[64];

/* In a child: own user and mount namespaces, the plan built at tmp/root (pivoted into), then
 * probe(); the child's exit status is what probe returns, 100 when the build failed. */
static int in_new_root(const ipb_mount_plan *plan, int (*probe)(void)) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        uid_t uid = geteuid();
        gid_t gid = getegid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
            _exit(101);
        char map[64];
        snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)uid);
        if (ipb_write_file("/proc/self/uid_map", map, strlen(map), 0) < 0 ||
            ipb_write_file("/proc/self/setgroups", "deny", 4, 0) < 0)
            _exit(102);
        snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
        if (ipb_write_file("/proc/self/gid_map", map, strlen(map), 0) < 0)
            _exit(103);
        char root[128];
        snprintf(root, sizeof(root), "%s/root", tmp);
        ipb_error *err = NULL;
        if (shim_build_root(root, plan, false, 0, &err) < 0) {
            fprintf(stderr, "build: %s\n", ipb_error_msg(err));
            _exit(100);
        }
        _exit(probe());
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void setup(void) {
    snprintf(tmp, sizeof(tmp), "/tmp/ipybox-rootfs-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmp));
    char p[128];
    snprintf(p, sizeof(p), "%s/root", tmp);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/pub", tmp);
    ck_assert_int_eq(mkdir(p, 0777), 0);
}

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    ck_assert_int_eq(system(cmd), 0);
}

static int write_t_x(void) {
    int fd = open("/t/x", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        close(fd);
        return 1; /* written: the bind was left writable */
    }
    return errno == EROFS ? 0 : 2;
}

/* The plan makes /t/v a symlink to /t and binds a tree read-only at /t/v; the tree holds its
 * own v -> "/". A second lookup of /t/v after the mount would land on the root and leave the
 * bind writable. */
START_TEST(test_a_read_only_bind_stays_read_only_through_symlinks) {
    char pub[128], v[160];
    snprintf(pub, sizeof(pub), "%s/pub", tmp);
    snprintf(v, sizeof(v), "%s/v", pub);
    ck_assert_int_eq(symlink("/", v), 0);
    ipb_mount_plan plan = {0};
    ck_assert_int_eq(ipb_mount_plan_add(&plan, IPB_MNT_SYMLINK, 0, "/t", "/t/v", NULL), 0);
    ck_assert_int_eq(ipb_mount_plan_add(&plan, IPB_MNT_BIND_RO, 0, pub, "/t/v", NULL), 0);
    ck_assert_int_eq(in_new_root(&plan, write_t_x), 0);
    char x[160];
    snprintf(x, sizeof(x), "%s/x", pub);
    ck_assert_int_eq(access(x, F_OK), -1);
    ipb_mount_plan_free(&plan);
}
END_TEST

static int nothing(void) { return 0; }

static int file_inside(void) {
    char buf[16] = {0};
    int fd = open("/real/file", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, buf, sizeof(buf) - 1) != 6)
        return 1;
    close(fd);
    return strcmp(buf, "inside") ? 1 : 0;
}

/* A destination through a symlink to an absolute host path is looked for inside the new
 * root (where that path does not exist: the step fails), never on the host. */
START_TEST(test_destinations_resolve_inside_the_root) {
    char host[128], made[160];
    snprintf(host, sizeof(host), "%s/host", tmp);
    ck_assert_int_eq(mkdir(host, 0777), 0);
    static const uint32_t kinds[] = {IPB_MNT_DIR, IPB_MNT_FILE, IPB_MNT_TMPFS, IPB_MNT_SYMLINK};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++) {
        ipb_mount_plan plan = {0};
        ck_assert_int_eq(ipb_mount_plan_add(&plan, IPB_MNT_SYMLINK, 0, host, "/a", NULL), 0);
        ck_assert_int_eq(ipb_mount_plan_add(&plan, kinds[i], 0, kinds[i] == IPB_MNT_SYMLINK ? "/x" : NULL, "/a/made",
                                            kinds[i] == IPB_MNT_TMPFS ? "size=1m" : "x"),
                         0);
        ck_assert_int_eq(in_new_root(&plan, nothing), 100);
        ipb_mount_plan_free(&plan);
        snprintf(made, sizeof(made), "%s/made", host);
        ck_assert_msg(access(made, F_OK) < 0, "step kind %u made %s on the host", kinds[i], made);
    }
    /* A relative symlink that stays inside works. */
    ipb_mount_plan plan = {0};
    ck_assert_int_eq(ipb_mount_plan_add(&plan, IPB_MNT_DIR, 0, NULL, "/real", NULL), 0);
    ck_assert_int_eq(ipb_mount_plan_add(&plan, IPB_MNT_SYMLINK, 0, "real", "/b", NULL), 0);
    ck_assert_int_eq(ipb_mount_plan_add(&plan, IPB_MNT_FILE, 0, NULL, "/b/file", "inside"), 0);
    ck_assert_int_eq(in_new_root(&plan, file_inside), 0);
    ipb_mount_plan_free(&plan);
}
END_TEST

static int pub_bound_at_app_real(void) {
    struct stat st;
    return stat("/app/real/marker", &st) == 0 ? 0 : 1;
}

/* A symlink left in the workspace (by an earlier session's code) is never followed to place a
 * later mount: not to a directory outside /app, not to one inside it, not in the middle of a
 * path. A real directory there works. */
START_TEST(test_workspace_symlinks_never_followed_for_mounts) {
    char ws[128], p[192], pub[128];
    snprintf(ws, sizeof(ws), "%s/ws", tmp);
    snprintf(pub, sizeof(pub), "%s/pub", tmp);
    ck_assert_int_eq(mkdir(ws, 0755), 0);
    snprintf(p, sizeof(p), "%s/sub", ws);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/real", ws);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/out", ws);
    ck_assert_int_eq(symlink("../usr", p), 0);
    snprintf(p, sizeof(p), "%s/in", ws);
    ck_assert_int_eq(symlink("sub", p), 0);
    snprintf(p, sizeof(p), "%s/marker", pub);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    close(fd);
    static const char *const refused[] = {"/app/out", "/app/in", "/app/in/x", "/app/out/share/doc"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(*refused); i++) {
        ipb_mount_plan plan = {0};
        ck_assert_int_eq(ipb_mount_plan_add(&plan, IPB_MNT_DIR, 0, NULL, "/usr/share/doc", NULL), 0);
        ck_assert_int_eq(ipb_mount_plan_add(&plan, IPB_MNT_BIND_RW, 0, ws, IPB_SANDBOX_APP, NULL), 0);
        ck_assert_int_eq(ipb_mount_plan_add(&plan, IPB_MNT_BIND_RW, 0, pub, refused[i], NULL), 0);
        ck_assert_msg(in_new_root(&plan, nothing) == 100, "a bind at %s was placed through a symlink", refused[i]);
        ipb_mount_plan_free(&plan);
    }
    snprintf(p, sizeof(p), "%s/sub/x", ws);
    ck_assert_msg(access(p, F_OK) < 0, "a mount point was made through the symlink");
    ipb_mount_plan plan = {0};
    ck_assert_int_eq(ipb_mount_plan_add(&plan, IPB_MNT_BIND_RW, 0, ws, IPB_SANDBOX_APP, NULL), 0);
    ck_assert_int_eq(ipb_mount_plan_add(&plan, IPB_MNT_BIND_RW, 0, pub, "/app/real", NULL), 0);
    ck_assert_int_eq(in_new_root(&plan, pub_bound_at_app_real), 0);
    ipb_mount_plan_free(&plan);
}
END_TEST

static int pub_bound_at_t(void) {
    struct stat st;
    return stat("/t/marker", &st) == 0 ? 0 : 1;
}

/* IPB_MNT_SAME: the tree cloned for the bind must be the one the supervisor resolved (its
 * dev, ino). The right identity binds; another one (a symlink swapped in under the name,
 * or an absent source that appeared) is refused, nothing bound. */
START_TEST(test_bind_source_identity_is_checked) {
    char pub[128], other[128], lnk[128], p[192];
    snprintf(pub, sizeof(pub), "%s/pub", tmp);
    snprintf(other, sizeof(other), "%s/other", tmp);
    snprintf(lnk, sizeof(lnk), "%s/lnk", tmp);
    ck_assert_int_eq(mkdir(other, 0755), 0);
    ck_assert_int_eq(symlink(other, lnk), 0);
    snprintf(p, sizeof(p), "%s/marker", pub);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    close(fd);
    struct stat st;
    ck_assert_int_eq(stat(pub, &st), 0);
    ipb_file_id right = {(uint64_t)st.st_dev, (uint64_t)st.st_ino};
    ipb_file_id wrong_ino = {(uint64_t)st.st_dev, (uint64_t)st.st_ino + 1};
    ipb_file_id absent = {0, 0};
    struct {
        const char *src;
        const ipb_file_id *id;
        int want;
    } cases[] = {
        {pub, &right, 0},       /* the very tree: bound */
        {pub, &wrong_ino, 100}, /* another inode */
        {lnk, &right, 100},     /* the name now leads elsewhere (a symlink swapped in) */
        {pub, &absent, 100},    /* was not there when resolved */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        ipb_mount_plan plan = {0};
        ck_assert_int_eq(ipb_mount_plan_add(&plan, IPB_MNT_BIND_RW, IPB_MNT_SAME, cases[i].src, "/t", NULL), 0);
        plan.m[0].id = *cases[i].id;
        ck_assert_msg(in_new_root(&plan, pub_bound_at_t) == cases[i].want, "case %zu", i);
        ipb_mount_plan_free(&plan);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("rootfs");
    TCase *tc = tcase_create("rootfs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_a_read_only_bind_stays_read_only_through_symlinks);
    tcase_add_test(tc, test_destinations_resolve_inside_the_root);
    tcase_add_test(tc, test_workspace_symlinks_never_followed_for_mounts);
    tcase_add_test(tc, test_bind_source_identity_is_checked);
    suite_add_tcase(s, tc);
    return ipb_run_suite(s);
}
