/* Unit tests for policy/mountplan: the sandbox's filesystem as data. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
#include "mountplan.h"
#include "options.h"

static ipb_options opts;
static ipb_mount_plan plan;

static void build_with(const char *const *words, const char *rundir) {
    ipb_options_init(&opts);
    int argc = 0;
    while (words && words[argc])
        argc++;
    ipb_error *err = NULL;
    ck_assert_msg(ipb_options_parse(&opts, argc, (char **)words, NULL, &err) == 0, "%s", ipb_error_msg(err));
    ck_assert_int_eq(ipb_options_finish(&opts, "/home/u", NULL), 0);
    ipb_plan_input in = {.opts = &opts, .workspace = "/srv/ws", .home = "/srv/home", .rundir = rundir};
    memset(&plan, 0, sizeof(plan));
    ck_assert_msg(ipb_mount_plan_build(&in, &plan, &err) == 0, "%s", ipb_error_msg(err));
    ck_assert_uint_gt(plan.n, 0);
}

static void teardown(void) {
    ipb_mount_plan_free(&plan);
    ipb_options_free(&opts);
}

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Index of the first entry with this dst, or -1. */
static long find_dst(const char *dst) {
    for (size_t i = 0; i < plan.n; i++)
        if (!strcmp(plan.m[i].dst, dst))
            return (long)i;
    return -1;
}

static const ipb_mount *expect_entry(const char *dst, uint32_t kind) {
    long i = find_dst(dst);
    ck_assert_msg(i >= 0, "no entry for %s", dst);
    ck_assert_msg(plan.m[i].kind == kind, "%s has kind %u, expected %u", dst, plan.m[i].kind, kind);
    return &plan.m[i];
}

static bool is_under(const char *path, const char *dir) {
    size_t l = strlen(dir);
    return !strncmp(path, dir, l) && (path[l] == '/' || (l == 1 && dir[0] == '/'));
}

START_TEST(app_bound_rw_from_workspace) {
    build_with(NULL, NULL);
    const ipb_mount *m = expect_entry("/app", IPB_MNT_BIND_RW);
    ck_assert_str_eq(m->src, "/srv/ws");
    ck_assert_uint_eq(m->flags & IPB_MNT_OPTIONAL, 0); /* a missing workspace must fail, not vanish */
    m = expect_entry(IPB_SANDBOX_HOME, IPB_MNT_BIND_RW);
    ck_assert_str_eq(m->src, "/srv/home");
    ck_assert_int_lt(find_dst(IPB_SANDBOX_RUNDIR), 0); /* no rundir given */
}
END_TEST

START_TEST(binds_below_app) {
    build_with(WORDS("--container-bind", "/data/in:input", "--container-bind", "/data/models:deep/models"), NULL);
    const ipb_mount *m = expect_entry("/app/input", IPB_MNT_BIND_RW);
    ck_assert_str_eq(m->src, "/data/in");
    m = expect_entry("/app/deep/models", IPB_MNT_BIND_RW);
    ck_assert_str_eq(m->src, "/data/models");
    /* after /app, or the workspace bind would hide them */
    ck_assert_int_gt(find_dst("/app/input"), find_dst("/app"));
    ck_assert_int_gt(find_dst("/app/deep/models"), find_dst("/app"));
}
END_TEST

/* The identities of the user-named trees go with their steps (IPB_MNT_SAME); nothing else
 * carries one. */
START_TEST(named_trees_carry_their_identity) {
    ipb_options_init(&opts);
    const char *const *words = WORDS("--container-bind", "/data/in:input", "--container-bind", "/data/b:b");
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_options_parse(&opts, 4, (char **)words, NULL, &err), 0);
    ck_assert_int_eq(ipb_options_finish(&opts, "/home/u", NULL), 0);
    ipb_file_id ws = {7, 70}, binds[2] = {{8, 80}, {9, 90}};
    ipb_plan_input in = {
        .opts = &opts, .workspace = "/srv/ws", .home = "/srv/home", .workspace_id = &ws, .bind_ids = binds};
    memset(&plan, 0, sizeof(plan));
    ck_assert_int_eq(ipb_mount_plan_build(&in, &plan, &err), 0);
    const ipb_mount *m = expect_entry("/app", IPB_MNT_BIND_RW);
    ck_assert_uint_eq(m->flags & IPB_MNT_SAME, IPB_MNT_SAME);
    ck_assert(m->id.dev == 7 && m->id.ino == 70);
    m = expect_entry("/app/input", IPB_MNT_BIND_RW);
    ck_assert(m->flags & IPB_MNT_SAME);
    ck_assert(m->id.dev == 8 && m->id.ino == 80);
    m = expect_entry("/app/b", IPB_MNT_BIND_RW);
    ck_assert(m->id.dev == 9 && m->id.ino == 90);
    size_t same = 0;
    for (size_t i = 0; i < plan.n; i++)
        same += (plan.m[i].flags & IPB_MNT_SAME) != 0;
    ck_assert_uint_eq(same, 3);
}
END_TEST

START_TEST(rundir_bound_after_run_tmpfs) {
    build_with(NULL, "/srv/run");
    const ipb_mount *m = expect_entry(IPB_SANDBOX_RUNDIR, IPB_MNT_BIND_RW);
    ck_assert_str_eq(m->src, "/srv/run");
    expect_entry("/run", IPB_MNT_TMPFS);
    ck_assert_int_gt(find_dst(IPB_SANDBOX_RUNDIR), find_dst("/run"));
}
END_TEST

START_TEST(proc_masked) {
    build_with(NULL, NULL);
    expect_entry("/proc", IPB_MNT_PROC);
    static const char *const masked[] = {
        "/proc/kcore",      "/proc/keys",        "/proc/kallsyms",    "/proc/sysrq-trigger", "/proc/kmsg",
        "/proc/timer_list", "/proc/sched_debug", "/proc/vmallocinfo", "/proc/slabinfo",      "/proc/kpagecount",
        "/proc/kpageflags", "/proc/acpi",        "/proc/scsi",        "/proc/latency_stats", "/proc/config.gz"};
    for (size_t i = 0; i < sizeof(masked) / sizeof(*masked); i++) {
        const ipb_mount *m = expect_entry(masked[i], IPB_MNT_MASK);
        ck_assert_msg(find_dst(masked[i]) > find_dst("/proc"), "%s masked before /proc is mounted", masked[i]);
        ck_assert_ptr_null(m->src);
    }
    static const char *const ro[] = {"/proc/sys", "/proc/bus", "/proc/fs", "/proc/irq"};
    for (size_t i = 0; i < sizeof(ro) / sizeof(*ro); i++) {
        expect_entry(ro[i], IPB_MNT_READONLY);
        ck_assert_int_gt(find_dst(ro[i]), find_dst("/proc"));
    }
}
END_TEST

START_TEST(no_host_credentials) {
    build_with(NULL, NULL);
    for (size_t i = 0; i < plan.n; i++) {
        const ipb_mount *m = &plan.m[i];
        if (m->src) {
            ck_assert_msg(!strstr(m->src, "/etc/passwd") && !strstr(m->src, "/etc/shadow") &&
                              !strstr(m->src, "/etc/gshadow") && !strstr(m->src, "/etc/group") &&
                              !strstr(m->src, "/etc/sudoers") && !strstr(m->src, "/etc/ssh") &&
                              !strstr(m->src, "/etc/ssl/private") && !strstr(m->src, "/etc/machine-id"),
                          "host file %s reaches the sandbox at %s", m->src, m->dst);
            ck_assert_msg(strcmp(m->src, "/etc") && strcmp(m->src, "/") && strcmp(m->src, "/root") &&
                              strcmp(m->src, "/etc/ssl") && strcmp(m->src, "/home"),
                          "%s bound whole at %s", m->src, m->dst);
        }
        ck_assert_msg(strcmp(m->dst, "/etc/shadow") && strcmp(m->dst, "/etc/gshadow"), "%s in the plan", m->dst);
    }
    /* passwd and group are written by the plan, naming the sandbox user */
    const ipb_mount *m = expect_entry("/etc/passwd", IPB_MNT_FILE);
    ck_assert_ptr_nonnull(strstr(m->data, "appuser:x:1000:1000:"));
    ck_assert_ptr_null(strstr(m->data, "/bin/bash")); /* not the host's root entry */
    m = expect_entry("/etc/group", IPB_MNT_FILE);
    ck_assert_ptr_nonnull(strstr(m->data, "appuser:x:1000:"));
    m = expect_entry("/etc/hostname", IPB_MNT_FILE);
    ck_assert_str_eq(m->data, IPB_SANDBOX_HOSTNAME "\n");
    ck_assert_int_lt(find_dst("/etc/passwd"), find_dst("/etc/ld.so.cache")); /* /etc exists before binds into it */
    ck_assert_int_lt(find_dst("/etc"), find_dst("/etc/passwd"));
}
END_TEST

START_TEST(minimal_dev) {
    build_with(NULL, NULL);
    expect_entry("/dev", IPB_MNT_TMPFS);
    static const char *const allowed[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"};
    size_t ndev = 0;
    for (size_t i = 0; i < plan.n; i++) {
        const ipb_mount *m = &plan.m[i];
        if (m->kind != IPB_MNT_BIND_DEV)
            continue;
        bool ok = false;
        for (size_t k = 0; k < sizeof(allowed) / sizeof(*allowed); k++)
            ok = ok || (!strcmp(m->src, allowed[k]) && !strcmp(m->dst, allowed[k]));
        ck_assert_msg(ok, "device %s -> %s in the sandbox", m->src, m->dst);
        ndev++;
    }
    ck_assert_uint_eq(ndev, 5);
    static const char *const absent[] = {"/dev/tty",  "/dev/console", "/dev/mem",  "/dev/kmsg",
                                         "/dev/fuse", "/dev/sda",     "/dev/tty0", "/dev/kvm"};
    for (size_t k = 0; k < sizeof(absent) / sizeof(*absent); k++)
        ck_assert_msg(find_dst(absent[k]) < 0, "%s in the plan", absent[k]);
    const ipb_mount *m = expect_entry("/dev/fd", IPB_MNT_SYMLINK);
    ck_assert_str_eq(m->src, "/proc/self/fd");
    /* ptys come from a private devpts instance, never from the host's /dev/pts or /dev/ptmx */
    expect_entry("/dev/pts", IPB_MNT_DEVPTS);
    ck_assert_ptr_null(plan.m[find_dst("/dev/pts")].src);
    ck_assert_int_gt(find_dst("/dev/pts"), find_dst("/dev"));
    m = expect_entry("/dev/ptmx", IPB_MNT_SYMLINK);
    ck_assert_str_eq(m->src, "pts/ptmx");
}
END_TEST

START_TEST(system_dirs_from_host) {
    build_with(NULL, NULL);
    static const char *const dirs[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++) {
        const ipb_mount *m = expect_entry(dirs[i], IPB_MNT_BIND_RO);
        ck_assert_str_eq(m->src, dirs[i]);
        ck_assert_uint_eq(m->flags, IPB_MNT_OPTIONAL | IPB_MNT_MIRROR);
    }
    const ipb_mount *m = expect_entry("/etc/ld.so.cache", IPB_MNT_BIND_RO);
    ck_assert_str_eq(m->src, "/etc/ld.so.cache");
}
END_TEST

START_TEST(rootfs_changes_sources) {
    build_with(WORDS("--rootfs", "/srv/debroot"), NULL);
    const ipb_mount *m = expect_entry("/usr", IPB_MNT_BIND_RO);
    ck_assert_str_eq(m->src, "/srv/debroot/usr");
    m = expect_entry("/lib", IPB_MNT_BIND_RO);
    ck_assert_str_eq(m->src, "/srv/debroot/lib");
    m = expect_entry("/etc/ld.so.cache", IPB_MNT_BIND_RO);
    ck_assert_str_eq(m->src, "/srv/debroot/etc/ld.so.cache");
    /* every read-only system bind comes from the rootfs */
    for (size_t i = 0; i < plan.n; i++)
        if (plan.m[i].kind == IPB_MNT_BIND_RO)
            ck_assert_msg(!strncmp(plan.m[i].src, "/srv/debroot/", 13), "%s comes from the host", plan.m[i].src);
    /* the user's data stays where it was */
    m = expect_entry("/app", IPB_MNT_BIND_RW);
    ck_assert_str_eq(m->src, "/srv/ws");
    /* and devices are the host's device nodes */
    m = expect_entry("/dev/null", IPB_MNT_BIND_DEV);
    ck_assert_str_eq(m->src, "/dev/null");
}
END_TEST

START_TEST(tmpfs_sizes) {
    build_with(NULL, NULL);
    const ipb_mount *m = expect_entry("/tmp", IPB_MNT_TMPFS);
    ck_assert_str_eq(m->data, "size=536870912,mode=1777");
    m = expect_entry("/dev/shm", IPB_MNT_TMPFS);
    ck_assert_str_eq(m->data, "size=67108864,mode=1777");
    teardown();
    build_with(WORDS("--tmp-size", "3G", "--shm-size", "5M"), NULL);
    m = expect_entry("/tmp", IPB_MNT_TMPFS);
    ck_assert_str_eq(m->data, "size=3221225472,mode=1777");
    m = expect_entry("/dev/shm", IPB_MNT_TMPFS);
    ck_assert_str_eq(m->data, "size=5242880,mode=1777");
    ck_assert_int_gt(find_dst("/dev/shm"), find_dst("/dev"));
    m = expect_entry("/var/tmp", IPB_MNT_SYMLINK);
    ck_assert_str_eq(m->src, "/tmp");
}
END_TEST

START_TEST(entries_well_formed_and_ordered) {
    build_with(WORDS("--container-bind", "/d:x/y"), "/srv/run");
    for (size_t i = 0; i < plan.n; i++) {
        const ipb_mount *m = &plan.m[i];
        ck_assert_msg(m->kind >= IPB_MNT_BIND_RO && m->kind <= IPB_MNT_DEVPTS, "entry %zu: kind %u", i, m->kind);
        ck_assert_msg(m->dst && m->dst[0] == '/', "entry %zu: dst not absolute", i);
        ck_assert_msg(!strstr(m->dst, "/../") && !strstr(m->dst, "//"), "entry %zu: odd dst %s", i, m->dst);
        bool needs_src = m->kind == IPB_MNT_BIND_RO || m->kind == IPB_MNT_BIND_RW || m->kind == IPB_MNT_BIND_DEV;
        ck_assert_msg(!needs_src || (m->src && m->src[0] == '/'), "entry %zu (%s) needs an absolute src", i, m->dst);
        ck_assert_msg(m->kind != IPB_MNT_SYMLINK || (m->src && *m->src), "symlink %s has no target", m->dst);
        if (m->kind == IPB_MNT_TMPFS || m->kind == IPB_MNT_FILE)
            ck_assert_msg(m->data != NULL, "entry %zu (%s) needs data", i, m->dst);
        /* nothing is mounted over a path after something was put below it */
        bool covers = m->kind == IPB_MNT_TMPFS || m->kind == IPB_MNT_PROC || m->kind == IPB_MNT_BIND_RO ||
                      m->kind == IPB_MNT_BIND_RW || m->kind == IPB_MNT_DEVPTS;
        for (size_t j = 0; covers && j < i; j++)
            ck_assert_msg(!is_under(plan.m[j].dst, m->dst), "%s (entry %zu) is hidden by %s mounted later (%zu)",
                          plan.m[j].dst, j, m->dst, i);
    }
}
END_TEST

START_TEST(plan_add_and_free) {
    ipb_mount_plan p = {0};
    ck_assert_int_eq(ipb_mount_plan_add(&p, IPB_MNT_DIR, 0, NULL, "/x", NULL), 0);
    ck_assert_int_eq(ipb_mount_plan_add(&p, IPB_MNT_FILE, 7, NULL, "/x/f", "content"), 0);
    ck_assert_int_eq(ipb_mount_plan_add(&p, IPB_MNT_BIND_RO, 0, "/h", "/x/b", NULL), 0);
    ck_assert_uint_eq(p.n, 3);
    ck_assert_ptr_null(p.m[0].src);
    ck_assert_ptr_null(p.m[0].data);
    ck_assert_str_eq(p.m[1].data, "content");
    ck_assert_uint_eq(p.m[1].flags, 7);
    ck_assert_str_eq(p.m[2].src, "/h");
    ipb_mount_plan_free(&p);
    ck_assert_ptr_null(p.m);
    ck_assert_uint_eq(p.n, 0);
    ipb_mount_plan_free(&p);
}
END_TEST

static Suite *mountplan_suite(void) {
    Suite *s = suite_create("mountplan");
    TCase *t = tcase_create("build");
    tcase_add_checked_fixture(t, NULL, teardown);
    tcase_add_test(t, app_bound_rw_from_workspace);
    tcase_add_test(t, binds_below_app);
    tcase_add_test(t, named_trees_carry_their_identity);
    tcase_add_test(t, rundir_bound_after_run_tmpfs);
    tcase_add_test(t, proc_masked);
    tcase_add_test(t, no_host_credentials);
    tcase_add_test(t, minimal_dev);
    tcase_add_test(t, system_dirs_from_host);
    tcase_add_test(t, rootfs_changes_sources);
    tcase_add_test(t, tmpfs_sizes);
    tcase_add_test(t, entries_well_formed_and_ordered);
    suite_add_tcase(s, t);
    TCase *a = tcase_create("add");
    tcase_add_test(a, plan_add_and_free);
    suite_add_tcase(s, a);
    return s;
}

int main(void) { return ipb_run_suite(mountplan_suite()); }
