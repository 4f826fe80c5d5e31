/* Unit tests for the monitor's parts: the configuration file (monitor/sysconf.c), the uid
 * pool (monitor/pool.c), the channel's record framing (monitor/mon_proto.c) and finding and
 * killing a uid range's processes and the slot locks every monitor shares (monitor/procs.c,
 * monitor/slotlock.c, as root only). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mon_proto.h"
#include "pool.h"
#include "procs.h"
#include "run_suite.h"
#include "slotlock.h"
#include "sysconf.h"

static int parse(ipbm_sysconf *c, const char *text, char *msg, size_t msglen) {
    ipbm_sysconf_defaults(c);
    ipb_error *err = NULL;
    int r = ipbm_sysconf_parse(c, text, strlen(text), "t.conf", &err);
    snprintf(msg, msglen, "%s", err ? ipb_error_msg(err) : "");
    ipb_error_free(err);
    return r;
}

/* A child in uid u, sitting until killed. */
static pid_t child_as(uid_t u) {
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        if (setresuid(u, u, u) < 0)
            _exit(1);
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    close(p[1]);
    char b;
    ck_assert_int_eq(read(p[0], &b, 1), 1);
    close(p[0]);
    return pid;
}

START_TEST(test_range_procs_found_and_killed) {
    if (geteuid() != 0)
        return; /* needs to switch uids */
    const uint32_t base = 0x7e000000u;
    pid_t a = child_as(base + 1000), b = child_as(base + 65536);
    ck_assert_int_eq(ipbm_range_procs(base, 65536, false), 1);
    ck_assert_int_eq(ipbm_range_procs(base + 65536, 1, false), 1);
    ck_assert_int_eq(ipbm_range_procs(base + 1001, 65536 - 1001, false), 0);
    ck_assert_int_eq(ipbm_range_procs(base, 65536, true), 1);
    int st;
    ck_assert_int_eq(waitpid(a, &st, 0), a);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* b is in no cgroup called sb-999999: untouched. */
    ipbm_kill_in_cgroup(b, "sb-999999");
    ck_assert_int_eq(waitpid(b, &st, WNOHANG), 0);
    /* A scan of three slots: b's (the second) is busy; killing the third leaves it alone,
     * killing the second does not. */
    uint8_t kill[3] = {0, 0, 1}, busy[3];
    ipbm_pool_scan(base, 3, 65536, kill, busy);
    ck_assert(!busy[0] && busy[1] && !busy[2]);
    ck_assert_int_eq(waitpid(b, &st, WNOHANG), 0);
    kill[1] = 1;
    ipbm_pool_scan(base, 3, 65536, kill, busy);
    ck_assert_int_eq(waitpid(b, &st, 0), b);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}
END_TEST

START_TEST(test_pool_meets_subordinate_ids) {
    ipbm_pool p;
    ck_assert_int_eq(ipbm_pool_init(&p, 0x70000000u, 2), 0); /* [0x70000000, 0x70020000) */
    ck_assert_uint_eq(ipbm_pool_subid_clash(&p, ""), 0);
    ck_assert_uint_eq(ipbm_pool_subid_clash(&p, "a:100000:65536\nb:165536:65536\n"), 0);
    ck_assert_uint_eq(ipbm_pool_subid_clash(&p, "a:100000:65536\nb:1879048191:2\n"), 2); /* ends inside */
    ck_assert_uint_eq(ipbm_pool_subid_clash(&p, "b:1879179263:1"), 1);                   /* last uid */
    ck_assert_uint_eq(ipbm_pool_subid_clash(&p, "b:1879179264:100\nc:1879048190:2"), 0); /* touch only */
    ck_assert_uint_eq(ipbm_pool_subid_clash(&p, "# comment\nbroken\nx:y:z\nd:1879048192:0\ne:1879048192:1"), 5);
    ipbm_pool_free(&p);
}
END_TEST

START_TEST(test_sysconf_defaults_and_values) {
    ipbm_sysconf c;
    char msg[300];
    ck_assert_int_eq(parse(&c, "", msg, sizeof(msg)), 0);
    ck_assert_str_eq(c.group, "");
    ck_assert_uint_eq(c.memory_max, 2ull << 30);
    ck_assert_uint_eq(c.pool_start, 0x70000000u);
    ck_assert_uint_eq(c.warm_sessions, 0);
    ck_assert_uint_eq(c.user_memory_max, 1ull << 30);
    ck_assert_uint_eq(c.user_pids_max, 1024);
    ck_assert(!c.zygote);
    const char *text = "# comment\n\nusers = group  ipybox-users \r\nmemory_max = 512M # trailing\n"
                       "memory_max_bound=1G\npids_max = 100\ncpu_weight = 50\ncpu_weight_bound = 200\n"
                       "uid_pool_start = 200000000\nuid_pool_size = 10\ntmp_size = 64M\nidle_timeout = 60\n"
                       "max_sessions_per_user = 3\nwarm_sessions = 2\nuser_memory_max = 300M\nuser_pids_max = 200\n";
    ck_assert_msg(parse(&c, text, msg, sizeof(msg)) == 0, "%s", msg);
    ck_assert_str_eq(c.group, "ipybox-users");
    ck_assert_uint_eq(c.memory_max, 512ull << 20);
    ck_assert_uint_eq(c.memory_max_bound, 1ull << 30);
    ck_assert_uint_eq(c.pids_max, 100);
    ck_assert_uint_eq(c.cpu_weight, 50);
    ck_assert_uint_eq(c.pool_start, 200000000u);
    ck_assert_uint_eq(c.pool_size, 10);
    ck_assert_uint_eq(c.tmp_size, 64ull << 20);
    ck_assert_int_eq(c.idle_timeout_s, 60);
    ck_assert_uint_eq(c.max_sessions_per_user, 3);
    ck_assert_uint_eq(c.warm_sessions, 2);
    ck_assert_uint_eq(c.user_memory_max, 300ull << 20);
    ck_assert_uint_eq(c.user_pids_max, 200);
    ck_assert(!c.zygote);
    ck_assert_msg(parse(&c, "zygote = false\n", msg, sizeof(msg)) == 0, "%s", msg);
    ck_assert(!c.zygote);
    ck_assert_msg(parse(&c, "zygote = true\n", msg, sizeof(msg)) == 0, "%s", msg);
    ck_assert(c.zygote);
    ck_assert(!c.standby);
    ck_assert_msg(parse(&c, "zygote = true\nstandby = true\n", msg, sizeof(msg)) == 0, "%s", msg);
    ck_assert(c.zygote && c.standby);
    ck_assert_msg(parse(&c, "users = group a\nusers = all\n", msg, sizeof(msg)) == 0, "%s", msg);
    ck_assert_str_eq(c.group, "");
}
END_TEST

START_TEST(test_sysconf_errors_name_the_line) {
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"bogus = 1\n", "t.conf:1: unknown setting 'bogus'"},
        {"\nmemory_max\n", "t.conf:2: expected `key = value`"},
        {"pids_max = -5\n", "t.conf:1: bad value for pids_max: '-5'"},
        {"pids_max = 12x\n", "bad value for pids_max"},
        {"cpu_weight = 0\n", "bad value for cpu_weight"},
        {"cpu_weight = 10001\n", "bad value for cpu_weight"},
        {"memory_max = 1M\n", "bad value for memory_max"},
        {"users = group a/b\n", "bad value for users"},
        {"users = some\n", "bad value for users"},
        {"zygote = yes\n", "bad value for zygote"},
        {"zygote = true\nstandby = 1\n", "bad value for standby"},
        {"standby = true\n", "standby = true needs zygote = true"},
        {"standby = true\nzygote = false\n", "standby = true needs zygote = true"},
        {"memory_max = 9G\n", "memory_max is above memory_max_bound"},
        {"pids_max = 5000\n", "pids_max is above pids_max_bound"},
        {"uid_pool_start = 4294901760\nuid_pool_size = 2\n", "passes 2^32-1"},
        {"uid_pool_start = 65536\nuid_max = 70000\n", "overlaps the users' uids"},
        {"uid_min = 5000\nuid_max = 4000\n", "uid_min is above uid_max"},
        {"pids_max = 99999999999999999999\n", "bad value"},
        {"max_sessions_per_user = 2\nwarm_sessions = 3\n", "warm_sessions is above max_sessions_per_user"},
        {"user_memory_max = 10M\n", "bad value for user_memory_max"},
        {"user_pids_max = 8\n", "bad value for user_pids_max"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        ipbm_sysconf c;
        char msg[300];
        ck_assert_msg(parse(&c, cases[i].text, msg, sizeof(msg)) < 0, "accepted: %s", cases[i].text);
        ck_assert_msg(strstr(msg, cases[i].want), "%s -> %s", cases[i].text, msg);
    }
    /* Defaults the host cannot give; bounds above it are only caps. */
    ipb_error *herr = NULL;
    ipbm_sysconf h;
    ipbm_sysconf_defaults(&h);
    ck_assert_int_eq(ipbm_sysconf_check_host(&h, 4ull << 30, 32768, "t", &herr), 0);
    ck_assert_int_lt(ipbm_sysconf_check_host(&h, 1ull << 30, 32768, "t", &herr), 0);
    ck_assert_msg(strstr(ipb_error_msg(herr), "memory_max = 2048 MiB is more than this host's memory (1024 MiB)"), "%s",
                  ipb_error_msg(herr));
    ipb_error_free(herr);
    herr = NULL;
    h.memory_max = 512ull << 20;
    ck_assert_int_lt(ipbm_sysconf_check_host(&h, 768ull << 20, 32768, "t", &herr), 0);
    ck_assert_msg(strstr(ipb_error_msg(herr), "user_memory_max"), "%s", ipb_error_msg(herr));
    ipb_error_free(herr);
    herr = NULL;
    ck_assert_int_lt(ipbm_sysconf_check_host(&h, 0, 500, "t", &herr), 0);
    ck_assert_msg(strstr(ipb_error_msg(herr), "pids_max = 512 is more than this host's kernel.pid_max (500)"), "%s",
                  ipb_error_msg(herr));
    ipb_error_free(herr);
    herr = NULL;
    ck_assert_int_eq(ipbm_sysconf_check_host(&h, 0, 0, "t", &herr), 0);
    /* A NUL byte and an overlong line. */
    ipbm_sysconf c;
    ipbm_sysconf_defaults(&c);
    ipb_error *err = NULL;
    ck_assert_int_lt(ipbm_sysconf_parse(&c, "pids_max = 1\0\n", 14, "t", &err), 0);
    ipb_error_free(err);
    err = NULL;
    char big[700];
    memset(big, '#', sizeof(big));
    ck_assert_int_lt(ipbm_sysconf_parse(&c, big, sizeof(big), "t", &err), 0);
    ck_assert_ptr_nonnull(strstr(ipb_error_msg(err), "too long"));
    ipb_error_free(err);
}
END_TEST

START_TEST(test_pool_hands_out_each_range_once) {
    ipbm_pool p;
    ck_assert_int_eq(ipbm_pool_init(&p, 0x70000000u, 3), 0);
    int a = ipbm_pool_take(&p), b = ipbm_pool_take(&p), c = ipbm_pool_take(&p);
    ck_assert(a != b && b != c && a != c);
    ck_assert_int_eq(ipbm_pool_take(&p), -1);
    ck_assert_uint_eq(ipbm_pool_uid(&p, 2), 0x70000000u + 2 * IPBM_RANGE);
    ck_assert_int_eq(ipbm_pool_slot_of(&p, 0x70000000u + IPBM_RANGE + 1000), 1);
    ck_assert_int_eq(ipbm_pool_slot_of(&p, 0x70000000u - 1), -1);
    ck_assert_int_eq(ipbm_pool_slot_of(&p, 0x70000000u + 3 * IPBM_RANGE), -1);
    /* A freed slot comes back, but not before the others (round robin). */
    ipbm_pool_put(&p, b);
    ck_assert_int_eq(ipbm_pool_take(&p), b);
    ipbm_pool_put(&p, a);
    ipbm_pool_put(&p, c);
    int d = ipbm_pool_take(&p);
    ck_assert_int_ne(d, b);
    ipbm_pool_put(&p, 99); /* out of range: ignored */
    ipbm_pool_free(&p);
}
END_TEST

START_TEST(test_records_are_checked) {
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    struct ipbm_msg m = {.magic = IPBM_MAGIC, .type = IPBM_KILL, .id = 7}, got;
    int fd = open("/dev/null", O_RDONLY);
    ck_assert_int_eq(ipbm_send(sv[0], &m, &fd, 1, 0), 0);
    int fds[4];
    unsigned n = 9;
    ck_assert_int_eq(ipbm_recv(sv[1], &got, fds, 4, &n, 0), 1);
    ck_assert_uint_eq(got.id, 7);
    ck_assert_uint_eq(n, 1);
    close(fds[0]);
    /* The wrong magic, a short record, a long one: refused, their fds handed to the caller
     * (the monitor decides where they are closed). */
    m.magic = 0;
    ck_assert_int_eq(ipbm_send(sv[0], &m, &fd, 1, 0), 0);
    ck_assert_int_eq(ipbm_recv(sv[1], &got, fds, 4, &n, 0), -EBADMSG);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(fcntl(fds[0], F_GETFD), FD_CLOEXEC);
    close(fds[0]);
    ck_assert_int_eq(send(sv[0], "short", 5, 0), 5);
    ck_assert_int_eq(ipbm_recv(sv[1], &got, fds, 4, &n, 0), -EBADMSG);
    ck_assert_uint_eq(n, 0);
    char big[sizeof(struct ipbm_msg) + 8] = {0};
    ck_assert_int_eq(send(sv[0], big, sizeof(big), 0), (ssize_t)sizeof(big));
    ck_assert_int_eq(ipbm_recv(sv[1], &got, fds, 4, &n, 0), -EBADMSG);
    /* More fds than the receiver takes: refused; the kernel installs only as many as asked
     * for (an odd number too) and drops the rest, so none leaks. */
    m.magic = IPBM_MAGIC;
    int many[6] = {fd, fd, fd, fd, fd, fd};
    int probe = dup(fd);
    close(probe);
    ck_assert_int_eq(ipbm_send(sv[0], &m, many, 6, 0), 0);
    ck_assert_int_eq(ipbm_recv(sv[1], &got, fds, 3, &n, 0), -EBADMSG);
    ck_assert_uint_eq(n, 3);
    for (unsigned i = 0; i < n; i++)
        close(fds[i]);
    int after = dup(fd);
    ck_assert_int_eq(after, probe);
    close(after);
    close(sv[0]);
    ck_assert_int_eq(ipbm_recv(sv[1], &got, fds, 4, &n, 0), 0);
    close(sv[1]);
    close(fd);
}
END_TEST

START_TEST(test_slot_locks_are_exclusive) {
    if (geteuid() != 0)
        return; /* /run/ipybox-slots is root's */
    ipbm_pool p;
    /* A pool of its own, far from the service's: its lock files name other uids. */
    ck_assert_int_eq(ipbm_pool_init(&p, 0x7d000000u, 3), 0);
    /* Another monitor holds slot 0 (another open file description: flock conflicts even
     * within one process). */
    int other = ipbm_slot_lock(&p, 0);
    ck_assert_int_ge(other, 0);
    ck_assert_int_eq(ipbm_slot_lock(&p, 0), -EWOULDBLOCK);
    int l1 = -1, l2 = -1, l3 = -1;
    int a = ipbm_slot_take(&p, &l1), b = ipbm_slot_take(&p, &l2);
    ck_assert(a == 1 || a == 2);
    ck_assert(b == 1 || b == 2);
    ck_assert_int_ne(a, b);
    /* Slot 0 is free here but locked elsewhere: nothing to hand out, and slot 0 stays free. */
    ck_assert_int_eq(ipbm_slot_take(&p, &l3), -1);
    ck_assert_int_eq(p.used[0], 0);
    /* Released elsewhere: ours to take. */
    close(other);
    ck_assert_int_eq(ipbm_slot_take(&p, &l3), 0);
    ck_assert_int_eq(ipbm_slot_lock(&p, 0), -EWOULDBLOCK);
    close(l1);
    close(l2);
    close(l3);
    for (int i = 0; i < 3; i++) {
        char f[64];
        snprintf(f, sizeof(f), IPBM_SLOT_DIR "/%u", (unsigned)ipbm_pool_uid(&p, i));
        unlink(f); /* this test's pool only */
    }
    ipbm_pool_free(&p);
}
END_TEST

int main(void) {
    Suite *s = suite_create("monitor");
    TCase *tc = tcase_create("monitor");
    tcase_add_test(tc, test_sysconf_defaults_and_values);
    tcase_add_test(tc, test_sysconf_errors_name_the_line);
    tcase_add_test(tc, test_pool_hands_out_each_range_once);
    tcase_add_test(tc, test_records_are_checked);
    tcase_add_test(tc, test_range_procs_found_and_killed);
    tcase_add_test(tc, test_pool_meets_subordinate_ids);
    tcase_add_test(tc, test_slot_locks_are_exclusive);
    suite_add_tcase(s, tc);
    return ipb_run_suite(s);
}
