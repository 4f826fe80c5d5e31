/* Unit tests for monitor/fds.c: children start with only the descriptors they were given,
 * and what a user sent is closed by a closer, not by the caller. (A real stalling close, on a
 * FUSE file, is in tests/integration/test_system_monitor.py.) */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fds.h"
#include "run_suite.h"

static bool is_open(int fd) { return fcntl(fd, F_GETFD) >= 0; }

/* ipbm_fds_reserve takes over 3 to 63, where the test framework keeps its own descriptors:
 * each check runs in a child of its own that reports on a pipe above them. */
static void isolated(void (*body)(int report)) {
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    int rd = fcntl(p[0], F_DUPFD_CLOEXEC, 100), wr = fcntl(p[1], F_DUPFD_CLOEXEC, 101);
    close(p[0]);
    close(p[1]);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(rd);
        body(wr);
        _exit(0);
    }
    close(wr);
    char msg[512] = "";
    ssize_t n = read(rd, msg, sizeof(msg) - 1);
    msg[n > 0 ? n : 0] = '\0';
    close(rd);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && !msg[0], "%s", msg);
}

#define REQUIRE(report, cond)                                                                                          \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            dprintf(report, "line %d: %s (errno %s)", __LINE__, #cond, strerror(errno));                               \
            _exit(1);                                                                                                  \
        }                                                                                                              \
    } while (0)

static void children_get_only_what_they_are_given(int report) {
    REQUIRE(report, ipbm_fds_reserve() == 0);
    /* Everything opened from now on is at 64 or above. */
    int sv[2], p[2];
    REQUIRE(report, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    REQUIRE(report, pipe2(p, O_CLOEXEC) == 0);
    REQUIRE(report, sv[0] >= 64 && sv[1] >= 64 && p[0] >= 64 && p[1] >= 64);
    int give[2] = {p[1], sv[1]};
    pid_t pid = ipbm_fork_clean(-1, give, 2);
    REQUIRE(report, pid >= 0);
    if (pid == 0) {
        /* Its table: 0 to 2 as they were, the pipe at 3, the socket at 4 (close-on-exec). */
        char seen[256] = "";
        for (int fd = 0; fd < 1024; fd++)
            if (is_open(fd))
                snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "%d ", fd);
        int cloexec = fcntl(IPBM_LOW_FD, F_GETFD) & fcntl(IPBM_LOW_FD + 1, F_GETFD) & FD_CLOEXEC;
        dprintf(IPBM_LOW_FD, "%s%s", seen, cloexec ? "cloexec" : "inheritable");
        send(IPBM_LOW_FD + 1, "s", 1, 0);
        _exit(0);
    }
    close(p[1]);
    char got[300] = "";
    ssize_t n = read(p[0], got, sizeof(got) - 1);
    got[n > 0 ? n : 0] = '\0';
    int st;
    REQUIRE(report, waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (strcmp(got, "0 1 2 3 4 cloexec")) {
        dprintf(report, "the child's table: %s", got);
        _exit(1);
    }
    char c;
    REQUIRE(report, recv(sv[0], &c, 1, MSG_DONTWAIT) == 1 && c == 's');
    /* The parent's low descriptors are /dev/null again; its own are where they were. */
    char link[64], proc[64];
    for (int fd = IPBM_LOW_FD; fd < 64; fd++) {
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        ssize_t l = readlink(proc, link, sizeof(link) - 1);
        REQUIRE(report, l > 0);
        link[l] = '\0';
        REQUIRE(report, !strcmp(link, "/dev/null"));
        REQUIRE(report, is_open(fd));
    }
    REQUIRE(report, is_open(sv[0]) && is_open(sv[1]) && is_open(p[0]));
    /* More than the low descriptors can hold is refused. */
    int many[64];
    for (int i = 0; i < 64; i++)
        many[i] = sv[0];
    REQUIRE(report, ipbm_fork_clean(-1, many, IPBM_LOW_FDS) == -EINVAL);
}

START_TEST(test_children_get_only_what_they_are_given) { isolated(children_get_only_what_they_are_given); }
END_TEST

START_TEST(test_what_closes_without_the_senders_code) {
    int p[2], sv[2];
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int path = open("/", O_PATH);
    int file = open("/proc/self/status", O_RDONLY);
    int dir = open("/", O_RDONLY | O_DIRECTORY);
    int null = open("/dev/null", O_RDONLY);
    ck_assert(ipbm_fd_inert(p[0]) && ipbm_fd_inert(p[1]) && ipbm_fd_inert(path));
    /* A socket may carry descriptors in its queue, a file or a device may have a flush. */
    ck_assert(!ipbm_fd_inert(sv[0]) && !ipbm_fd_inert(file) && !ipbm_fd_inert(dir) && !ipbm_fd_inert(null));
    ck_assert(!ipbm_fd_inert(-1));

    ipbm_held h = {0};
    int all[] = {p[0], p[1], path, sv[0], sv[1], file, dir, null};
    for (unsigned i = 0; i < 8; i++)
        ipbm_release(&h, all[i]);
    /* The inert ones are closed at once; the rest wait for a closer. */
    ck_assert(!is_open(p[0]) && !is_open(p[1]) && !is_open(path));
    ck_assert_uint_eq(h.n, 5);
    for (unsigned i = 3; i < 8; i++)
        ck_assert(is_open(all[i]));
    ipbm_held_run(&h);
    ck_assert_int_gt(h.closer, 0);
    ck_assert_uint_eq(h.n, 0);
    pid_t closer = h.closer;
    int st;
    ck_assert_int_eq(waitpid(closer, &st, 0), closer);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert(!ipbm_held_reaped(&h, closer + 1));
    ck_assert(ipbm_held_reaped(&h, closer));
    ck_assert_int_eq(h.closer, 0);
    /* It shared the table: they are closed here. */
    for (unsigned i = 3; i < 8; i++)
        ck_assert_msg(!is_open(all[i]), "descriptor %d still open", all[i]);
    ipbm_held_final(&h);
}
END_TEST

START_TEST(test_a_user_with_many_held_is_paused) {
    ipbm_held h = {0};
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    h.closer = 1; /* as if one ran and stalled */
    int fds[IPBM_HELD_PAUSE];
    for (unsigned i = 0; i < IPBM_HELD_PAUSE; i++) {
        ck_assert(!ipbm_held_paused(&h));
        ck_assert_int_ge(fds[i] = dup(sv[0]), 0);
        ipbm_release(&h, fds[i]);
    }
    ck_assert(ipbm_held_paused(&h));
    ipbm_held_run(&h); /* the stalled one still runs: nothing starts */
    ck_assert_uint_eq(h.n, IPBM_HELD_PAUSE);
    ck_assert(ipbm_held_reaped(&h, 1));
    ipbm_held_run(&h);
    ck_assert_uint_eq(h.n, 0);
    ck_assert(!ipbm_held_paused(&h));
    int st;
    ck_assert_int_eq(waitpid(h.closer, &st, 0), h.closer);
    for (unsigned i = 0; i < IPBM_HELD_PAUSE; i++)
        ck_assert(!is_open(fds[i]));
    ipbm_held_final(&h);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

int main(void) {
    Suite *s = suite_create("fds");
    TCase *t = tcase_create("fds");
    tcase_add_test(t, test_children_get_only_what_they_are_given);
    tcase_add_test(t, test_what_closes_without_the_senders_code);
    tcase_add_test(t, test_a_user_with_many_held_is_paused);
    suite_add_tcase(s, t);
    return ipb_run_suite(s);
}
