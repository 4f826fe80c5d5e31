/* Unit tests for kernel-shim/standby_s1.c, S1's side of the standby kernel, driven through a
 * fake zygote (a READY shim_zygote whose channel's other end the test holds, with a fake S0)
 * and a fake standby (the channel the fake zygote hands over; the standby's pid is a real
 * child of the test, so that S1's SIGKILL and reap can be seen). And the KILL_ALL that spares
 * one process (reap.c, shim_kill_all_sparing), run only inside a pid namespace of its own with
 * its own /proc: the test forks a child that unshares user, pid and mount namespaces, whose
 * child is PID 1 there. Never in the test process itself. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "reap.h"
#include "run_suite.h"
#include "shim_proto.h"
#include "standby_s1.h"
#include "zygote_proto.h"
#include "zygote_s1.h"

typedef struct fake {
    shim_zygote z;
    shim_standby sb;
    int s0;    /* the fake S0's end of S1's ctl */
    int zyg;   /* the fake zygote's end of its channel */
    int stand; /* the fake standby's end of its channel (after a make), else -1 */
    pid_t child;
} fake;

static void pair(int sp[2]) { ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0); }

static void block_chld(void) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGCHLD);
    sigprocmask(SIG_BLOCK, &s, NULL);
}

/* A process that waits to be killed: the fake standby's pid. */
static pid_t sleeper(void) {
    pid_t p = fork();
    ck_assert_int_ge(p, 0);
    if (p == 0) {
        for (;;)
            pause();
    }
    return p;
}

/* How many descriptors this process holds. */
static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* S1 with the zygote READY and --standby. */
static void setup(fake *f) {
    block_chld();
    int ctl[2], zc[2];
    pair(ctl);
    pair(zc);
    f->z = (shim_zygote){.ctl = ctl[0], .fd = zc[0], .state = SHIM_ZY_READY, .booted = true, .started = true};
    f->s0 = ctl[1];
    f->zyg = zc[1];
    f->stand = -1;
    f->child = 0;
    shim_standby_init(&f->sb, true);
}

/* What S1 sent on fd within ms: its type (gen and a in *m), or 0. */
/* The kernel of generation gen answered, and its standby's delay is over. */
static void answered_now(shim_standby *sb, uint32_t gen) {
    shim_standby_answered(sb, gen);
    sb->due = 0;
}

static uint32_t next_rec(int fd, zy_rec *m, int ms) {
    zy_rec x;
    if (!m)
        m = &x;
    return zy_recv(fd, m, NULL, ms) == 1 ? m->type : 0;
}

/* The running kernel of generation gen answered; the fake zygote answers the ZY_STANDBY that
 * follows with STARTED {serial, child} and the standby's channel. */
static void make_standby(fake *f, uint32_t gen) {
    uint32_t serial = f->sb.serial + 1;
    f->child = sleeper();
    int sc[2];
    pair(sc);
    ck_assert_int_eq(zy_send(f->zyg, ZY_STARTED, serial, f->child, sc[0]), 0);
    close(sc[0]);
    f->stand = sc[1];
    answered_now(&f->sb, gen);
    shim_standby_maybe_make(&f->sb, &f->z, true, gen);
    zy_rec m;
    ck_assert_uint_eq(next_rec(f->zyg, &m, 1000), ZY_STANDBY);
    ck_assert_uint_eq(m.gen, serial);
    ck_assert_int_eq(m.a, 0);
    ck_assert_int_eq(f->sb.pid, f->child);
    ck_assert_int_ge(f->sb.fd, 0);
    ck_assert(!f->sb.prepared);
    ck_assert_int_eq(shim_standby_pollfd(&f->sb), f->sb.fd);
}

static void prepare(fake *f) {
    ck_assert_int_eq(zy_send(f->stand, ZY_PREPARED, f->sb.serial, 0, -1), 0);
    shim_standby_service(&f->sb);
    ck_assert(f->sb.prepared);
    ck_assert_int_eq(shim_standby_spared(&f->sb), f->child);
}

/* The fake standby was SIGKILLed and reaped by S1 (its pid is no child of ours any more). */
static void assert_killed_and_reaped(pid_t child) {
    errno = 0;
    ck_assert_int_eq(waitpid(child, NULL, WNOHANG), -1);
    ck_assert_int_eq(errno, ECHILD);
}

static void teardown(fake *f) {
    if (f->stand >= 0)
        close(f->stand);
    close(f->s0);
    close(f->zyg);
    if (f->z.fd >= 0)
        close(f->z.fd);
    close(f->z.ctl);
}

START_TEST(made_once_per_gen_after_answered) {
    fake f;
    setup(&f);
    /* Not before the running kernel answered, nor for an answer of another generation. */
    shim_standby_maybe_make(&f.sb, &f.z, true, 3);
    ck_assert_uint_eq(next_rec(f.zyg, NULL, 100), 0);
    answered_now(&f.sb, 2);
    shim_standby_maybe_make(&f.sb, &f.z, true, 3);
    ck_assert_uint_eq(next_rec(f.zyg, NULL, 100), 0);
    /* Not with the zygote not READY. */
    answered_now(&f.sb, 3);
    f.z.state = SHIM_ZY_BOOTING;
    shim_standby_maybe_make(&f.sb, &f.z, true, 3);
    ck_assert_uint_eq(next_rec(f.zyg, NULL, 100), 0);
    f.z.state = SHIM_ZY_READY;
    make_standby(&f, 3);
    ck_assert_uint_eq(f.sb.serial, 1);
    /* One there: none more. */
    shim_standby_maybe_make(&f.sb, &f.z, true, 3);
    ck_assert_uint_eq(next_rec(f.zyg, NULL, 100), 0);
    /* Kernel code kills it: its reap forgets it, and none is made again for this kernel. */
    kill(f.child, SIGKILL);
    ck_assert_int_eq(waitpid(f.child, NULL, 0), f.child);
    shim_standby_reaped(&f.sb, f.child);
    ck_assert_int_eq(f.sb.pid, 0);
    ck_assert_int_eq(f.sb.fd, -1);
    shim_standby_maybe_make(&f.sb, &f.z, true, 3);
    ck_assert_uint_eq(next_rec(f.zyg, NULL, 100), 0);
    /* The next kernel's answer: a new one, serial 2. */
    close(f.stand);
    make_standby(&f, 4);
    ck_assert_uint_eq(f.sb.serial, 2);
    kill(f.child, SIGKILL);
    waitpid(f.child, NULL, 0);
    teardown(&f);
}
END_TEST

/* Made SHIM_STANDBY_DELAY_MS after the answer, not at once: its fork and preparation do not
 * compete with a client's first cells after a reset. The loop is told how long to wait. */
START_TEST(made_after_the_delay) {
    fake f;
    setup(&f);
    ck_assert_int_eq(shim_standby_wait_ms(&f.sb, true, 7), -1);
    shim_standby_answered(&f.sb, 7);
    int w = shim_standby_wait_ms(&f.sb, true, 7);
    ck_assert_int_gt(w, SHIM_STANDBY_DELAY_MS / 2);
    ck_assert_int_le(w, SHIM_STANDBY_DELAY_MS);
    ck_assert_int_eq(shim_standby_wait_ms(&f.sb, false, 7), -1);
    ck_assert_int_eq(shim_standby_wait_ms(&f.sb, true, 8), -1);
    shim_standby_maybe_make(&f.sb, &f.z, true, 7);
    ck_assert_uint_eq(next_rec(f.zyg, NULL, 100), 0);
    ck_assert_int_eq(f.sb.pid, 0);
    usleep((useconds_t)(shim_standby_wait_ms(&f.sb, true, 7) + 5) * 1000);
    ck_assert_int_eq(shim_standby_wait_ms(&f.sb, true, 7), -1);
    uint32_t serial = f.sb.serial + 1;
    f.child = sleeper();
    int sc[2];
    pair(sc);
    ck_assert_int_eq(zy_send(f.zyg, ZY_STARTED, serial, f.child, sc[0]), 0);
    close(sc[0]);
    f.stand = sc[1];
    shim_standby_maybe_make(&f.sb, &f.z, true, 7);
    ck_assert_uint_eq(next_rec(f.zyg, NULL, 1000), ZY_STANDBY);
    ck_assert_int_eq(f.sb.pid, f.child);
    kill(f.child, SIGKILL);
    waitpid(f.child, NULL, 0);
    teardown(&f);
}
END_TEST

START_TEST(disabled_makes_none) {
    fake f;
    setup(&f);
    shim_standby_init(&f.sb, false);
    answered_now(&f.sb, 1);
    shim_standby_maybe_make(&f.sb, &f.z, true, 1);
    ck_assert_uint_eq(next_rec(f.zyg, NULL, 100), 0);
    ck_assert_int_eq(shim_standby_pollfd(&f.sb), -1);
    ck_assert_int_eq(shim_standby_activate(&f.sb, 2), 0);
    teardown(&f);
}
END_TEST

START_TEST(zygote_failed_or_bad_answer) {
    fake f;
    setup(&f);
    /* ZY_FAILED: no standby, the zygote stays READY, and none is asked again for this gen. */
    ck_assert_int_eq(zy_send(f.zyg, ZY_FAILED, 1, EAGAIN, -1), 0);
    answered_now(&f.sb, 5);
    shim_standby_maybe_make(&f.sb, &f.z, true, 5);
    ck_assert_uint_eq(next_rec(f.zyg, NULL, 1000), ZY_STANDBY);
    ck_assert_int_eq(f.sb.pid, 0);
    ck_assert_int_eq(f.z.state, SHIM_ZY_READY);
    shim_standby_maybe_make(&f.sb, &f.z, true, 5);
    ck_assert_uint_eq(next_rec(f.zyg, NULL, 100), 0);
    /* Next gen: ZY_STARTED without the channel is bad: the zygote is killed (ZY_KILL to S0). */
    ck_assert_int_eq(zy_send(f.zyg, ZY_STARTED, 2, 77, -1), 0);
    ck_assert_int_eq(zy_send(f.s0, ZY_ENDED, 0, 9, -1), 0); /* its end, for S1's await */
    answered_now(&f.sb, 6);
    shim_standby_maybe_make(&f.sb, &f.z, true, 6);
    ck_assert_uint_eq(next_rec(f.zyg, NULL, 1000), ZY_STANDBY);
    ck_assert_int_eq(f.sb.pid, 0);
    ck_assert_int_eq(f.sb.fd, -1);
    ck_assert_uint_eq(next_rec(f.s0, NULL, 1000), ZY_KILL);
    ck_assert_int_eq(f.z.fd, -1);
    ck_assert_int_eq(f.z.why, SHIM_ZYGOTE_BAD);
    ck_assert(f.z.untold);
    /* Its slot in the pids limit is held again at once (a Zpre held until the next kernel). */
    ck_assert_uint_eq(next_rec(f.s0, NULL, 1000), ZY_MAKE);
    ck_assert_int_eq(f.z.state, SHIM_ZY_MAKING);
    ck_assert(f.z.after_loss);
    teardown(&f);
    /* A descriptor that is no SOCK_SEQPACKET socket (a pipe, a stream socket): bad too, and
     * not kept. */
    for (int kind = 0; kind < 2; kind++) {
        int open_before = open_fds();
        setup(&f);
        int p[2];
        if (kind == 0)
            ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        else
            ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p), 0);
        ck_assert_int_eq(zy_send(f.zyg, ZY_STARTED, 1, 77, p[0]), 0);
        close(p[0]);
        ck_assert_int_eq(zy_send(f.s0, ZY_ENDED, 0, 9, -1), 0);
        answered_now(&f.sb, 1);
        shim_standby_maybe_make(&f.sb, &f.z, true, 1);
        ck_assert_int_eq(f.sb.pid, 0);
        ck_assert_uint_eq(next_rec(f.s0, NULL, 1000), ZY_KILL);
        close(p[1]);
        teardown(&f);
        ck_assert_int_eq(open_fds(), open_before); /* the descriptor that came was closed */
    }
}
END_TEST

START_TEST(zygote_late_answer) {
    fake f;
    setup(&f);
    answered_now(&f.sb, 1);
    long t0 = ipb_now_ms();
    shim_standby_maybe_make(&f.sb, &f.z, true, 1);
    long dt = ipb_now_ms() - t0;
    /* SHIM_ZY_FORK_MS for the answer, then the same again for the killed zygote's end. */
    ck_assert_int_ge(dt, SHIM_ZY_FORK_MS - 50);
    ck_assert_int_le(dt, 2 * SHIM_ZY_FORK_MS + 500);
    ck_assert_int_eq(f.sb.pid, 0);
    ck_assert_uint_eq(next_rec(f.s0, NULL, 1000), ZY_KILL);
    teardown(&f);
}
END_TEST

START_TEST(prepared_is_activated) {
    fake f;
    setup(&f);
    make_standby(&f, 7);
    prepare(&f);
    /* Kernel code stopped it: S1 continues it. */
    kill(f.child, SIGSTOP);
    int st;
    ck_assert_int_eq(waitpid(f.child, &st, WUNTRACED), f.child);
    ck_assert(WIFSTOPPED(st));
    ck_assert_int_eq(zy_send(f.stand, ZY_ACTIVE, 8, 0, -1), 0);
    ck_assert_int_eq(shim_standby_activate(&f.sb, 8), f.child);
    zy_rec m;
    ck_assert_uint_eq(next_rec(f.stand, &m, 1000), ZY_ACTIVATE);
    ck_assert_uint_eq(m.gen, 8);
    ck_assert_int_eq(m.a, 0);
    ck_assert_int_eq(waitpid(f.child, &st, WCONTINUED), f.child);
    ck_assert(WIFCONTINUED(st));
    /* It is the program now: forgotten, its channel closed, never killed by S1. */
    ck_assert_int_eq(f.sb.pid, 0);
    ck_assert_int_eq(f.sb.fd, -1);
    ck_assert_int_eq(zy_recv(f.stand, &m, NULL, 1000), -EPIPE);
    ck_assert_int_eq(kill(f.child, 0), 0);
    ck_assert(f.sb.made && f.sb.made_for == 7);
    kill(f.child, SIGKILL);
    waitpid(f.child, NULL, 0);
    teardown(&f);
}
END_TEST

/* Each failure: the standby SIGKILLed and reaped, 0 (the caller takes the zygote's path). */
static void fails_then_zygote_path(fake *f, uint32_t gen) {
    ck_assert_int_eq(shim_standby_activate(&f->sb, gen), 0);
    assert_killed_and_reaped(f->child);
    ck_assert_int_eq(f->sb.pid, 0);
    ck_assert_int_eq(f->sb.fd, -1);
    ck_assert_int_eq(shim_standby_spared(&f->sb), 0);
    /* The zygote is untouched: this START forks from it (a fake zygote in a child answers). */
    ck_assert_int_eq(f->z.state, SHIM_ZY_READY);
    pid_t zy = fork();
    ck_assert_int_ge(zy, 0);
    if (zy == 0) {
        zy_rec m;
        if (zy_recv(f->zyg, &m, NULL, 2000) != 1 || m.type != ZY_FORK || m.gen != gen)
            _exit(1);
        _exit(zy_send(f->zyg, ZY_STARTED, gen, 4242, -1) == 0 ? 0 : 2);
    }
    int sup[2];
    pair(sup);
    ck_assert_int_eq(shim_zygote_start(&f->z, sup[0], gen), 4242);
    int st;
    ck_assert_int_eq(waitpid(zy, &st, 0), zy);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(sup[0]);
    close(sup[1]);
}

START_TEST(declined_is_killed) {
    fake f;
    setup(&f);
    make_standby(&f, 1);
    prepare(&f);
    ck_assert_int_eq(zy_send(f.stand, ZY_DECLINED, 2, ZY_DECLINE_CONFIG, -1), 0);
    fails_then_zygote_path(&f, 2);
    ck_assert_uint_eq(next_rec(f.stand, NULL, 1000), ZY_ACTIVATE);
    teardown(&f);
}
END_TEST

START_TEST(eof_is_killed) {
    fake f;
    setup(&f);
    make_standby(&f, 1);
    prepare(&f);
    close(f.stand);
    f.stand = -1;
    fails_then_zygote_path(&f, 2);
    teardown(&f);
}
END_TEST

START_TEST(timeout_is_killed) {
    fake f;
    setup(&f);
    make_standby(&f, 1);
    prepare(&f);
    long t0 = ipb_now_ms();
    fails_then_zygote_path(&f, 2);
    long dt = ipb_now_ms() - t0;
    ck_assert_int_ge(dt, SHIM_ZY_FORK_MS - 50);
    ck_assert_int_le(dt, SHIM_ZY_FORK_MS + 1000);
    teardown(&f);
}
END_TEST

START_TEST(not_prepared_is_killed) {
    fake f;
    setup(&f);
    make_standby(&f, 1);
    fails_then_zygote_path(&f, 2);
    /* No ACTIVATE was sent to it. */
    zy_rec m;
    ck_assert_int_eq(zy_recv(f.stand, &m, NULL, 200), -EPIPE);
    teardown(&f);
}
END_TEST

START_TEST(wrong_active_is_killed) {
    fake f;
    setup(&f);
    make_standby(&f, 1);
    prepare(&f);
    ck_assert_int_eq(zy_send(f.stand, ZY_ACTIVE, 3, 0, -1), 0); /* another gen */
    fails_then_zygote_path(&f, 2);
    teardown(&f);
}
END_TEST

/* A record it had no business sending (before activation): SIGKILL, its channel closed, its
 * pid kept until the SIGCHLD loop's reap. */
static void bad_record(bool prepared, uint32_t type, uint32_t gen, int32_t a) {
    fake f;
    setup(&f);
    make_standby(&f, 1);
    if (prepared)
        prepare(&f);
    ck_assert_int_eq(zy_send(f.stand, type, gen, a, -1), 0);
    shim_standby_service(&f.sb);
    ck_assert_int_eq(f.sb.fd, -1);
    ck_assert(!f.sb.prepared);
    ck_assert_int_eq(f.sb.pid, f.child);
    ck_assert_int_eq(shim_standby_spared(&f.sb), 0);
    ck_assert_int_eq(shim_standby_pollfd(&f.sb), -1);
    int st;
    ck_assert_int_eq(waitpid(f.child, &st, 0), f.child);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    shim_standby_reaped(&f.sb, f.child);
    ck_assert_int_eq(f.sb.pid, 0);
    teardown(&f);
}

START_TEST(bad_record_is_killed) {
    bad_record(false, ZY_PREPARED, 99, 0); /* another serial */
    bad_record(true, ZY_PREPARED, 1, 0);   /* twice */
    bad_record(true, ZY_ACTIVE, 1, 0);     /* unasked */
    bad_record(false, ZY_READY, 0, 0);
    bad_record(true, ZY_DECLINED, 1, 5);
}
END_TEST

START_TEST(eof_while_waiting_is_killed) {
    fake f;
    setup(&f);
    make_standby(&f, 1);
    close(f.stand);
    f.stand = -1;
    shim_standby_service(&f.sb);
    ck_assert_int_eq(f.sb.fd, -1);
    int st;
    ck_assert_int_eq(waitpid(f.child, &st, 0), f.child);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    shim_standby_reaped(&f.sb, f.child);
    ck_assert_int_eq(f.sb.pid, 0);
    teardown(&f);
}
END_TEST

/* ---- the KILL_ALL that spares one, in a pid namespace of its own ---- */

/* Runs fn as PID 1 of a new pid namespace (with a new user and mount namespace); with_proc:
 * a /proc of that namespace mounted over /proc (privately). Returns fn's exit code, or 77
 * when namespaces cannot be made here. */
static int as_pid1(int (*fn)(void), bool with_proc) {
    pid_t c = fork();
    ck_assert_int_ge(c, 0);
    if (c == 0) {
        uid_t uid = getuid();
        gid_t gid = getgid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS) < 0)
            _exit(77);
        char map[64];
        int fd = open("/proc/self/setgroups", O_WRONLY);
        if (fd >= 0) {
            (void)!write(fd, "deny", 4);
            close(fd);
        }
        snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
        fd = open("/proc/self/uid_map", O_WRONLY);
        if (fd < 0 || write(fd, map, strlen(map)) < 0)
            _exit(77);
        close(fd);
        snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
        fd = open("/proc/self/gid_map", O_WRONLY);
        if (fd < 0 || write(fd, map, strlen(map)) < 0)
            _exit(77);
        close(fd);
        pid_t p1 = fork();
        if (p1 < 0)
            _exit(77);
        if (p1 == 0) {
            if (getpid() != 1)
                _exit(90);
            if (with_proc && (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
                              mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0))
                _exit(77);
            _exit(fn());
        }
        int st;
        if (waitpid(p1, &st, 0) != p1)
            _exit(91);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0));
    }
    int st;
    ck_assert_int_eq(waitpid(c, &st, 0), c);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void expect_ok(int (*fn)(void), bool with_proc) {
    int r = as_pid1(fn, with_proc);
    if (r == 77) {
        fprintf(stderr, "test_standby_s1: skipped: no user and pid namespaces here\n");
        return;
    }
    ck_assert_msg(r == 0, "failed at step %d", r);
}

/* The pids of /proc but 1 (up to max); how many there were. */
static int proc_pids(pid_t *out, int max) {
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int v = atoi(e->d_name);
        if (v > 1) {
            if (n < max)
                out[n] = v;
            n++;
        }
    }
    closedir(d);
    return n;
}

static void forever(void) {
    for (;;)
        pause();
}

static int spares_one(void) {
    block_chld();
    pid_t spare = fork();
    if (spare == 0)
        forever();
    pid_t plain = fork();
    if (plain == 0)
        forever();
    /* One that forks in a loop: its children pause (and outlive it as PID 1's). */
    pid_t breeder = fork();
    if (breeder == 0) {
        for (int i = 0; i < 4000; i++) {
            pid_t g = fork();
            if (g == 0)
                forever();
            usleep(200);
        }
        forever();
    }
    /* A stopped one, and a double-forked daemon in its own session. */
    pid_t stopped = fork();
    if (stopped == 0) {
        raise(SIGSTOP);
        forever();
    }
    pid_t d = fork();
    if (d == 0) {
        setsid();
        if (fork() == 0)
            forever();
        _exit(0);
    }
    usleep(100 * 1000);
    pid_t seen[8];
    if (proc_pids(seen, 8) < 6)
        return 2;
    long t0 = ipb_now_ms();
    bool gone = true;
    int r = shim_kill_all_sparing(spare, 5000, &gone);
    long dt = ipb_now_ms() - t0;
    if (r != 1)
        return 3;
    if (gone)
        return 4;
    if (dt > 5000)
        return 5;
    if (kill(spare, 0) != 0)
        return 6;
    int n = proc_pids(seen, 8);
    if (n != 1 || seen[0] != spare)
        return 7;
    if (waitpid(-1, NULL, WNOHANG) != 0) /* only the spared one is left, alive */
        return 8;
    /* Again with nothing to kill: done at once. */
    t0 = ipb_now_ms();
    if (shim_kill_all_sparing(spare, 5000, &gone) != 1 || gone || ipb_now_ms() - t0 > 1000)
        return 9;
    /* The spared one ends before a walk: its reap is reported, and then it is no one's. */
    kill(spare, SIGKILL);
    usleep(50 * 1000);
    if (shim_kill_all_sparing(spare, 5000, &gone) != 1 || !gone)
        return 10;
    if (proc_pids(seen, 8) != 0)
        return 11;
    /* Spare 0: every process dies. */
    pid_t x = fork();
    if (x == 0)
        forever();
    if (shim_kill_all_sparing(0, 5000, NULL) != 1 || proc_pids(seen, 8) != 0)
        return 12;
    return 0;
}

START_TEST(kill_all_spares_one) { expect_ok(spares_one, true); }
END_TEST

/* A zombie child of the spared one: only the spared one can reap it, so the walk must not wait
 * for it (it found it on every pass until the bound, holding PID 1 for 5 s at each reset). */
static int spares_ones_zombie_not_waited(void) {
    block_chld();
    pid_t spare = fork();
    if (spare == 0) {
        if (fork() == 0)
            _exit(0);
        forever(); /* never reaps its child */
    }
    usleep(100 * 1000);
    long t0 = ipb_now_ms();
    bool gone = true;
    if (shim_kill_all_sparing(spare, 3000, &gone) != 1)
        return 2;
    if (ipb_now_ms() - t0 > 1000)
        return 3;
    if (gone || kill(spare, 0) != 0)
        return 4;
    kill(spare, SIGKILL);
    return 0;
}

START_TEST(kill_all_does_not_wait_for_the_spared_ones_zombie) { expect_ok(spares_ones_zombie_not_waited, true); }
END_TEST

/* The guard: not PID 1 (a child in the namespace), or PID 1 seeing another namespace's /proc. */
static int refuses_not_pid1(void) {
    block_chld();
    pid_t victim = fork();
    if (victim == 0)
        forever();
    pid_t c = fork();
    if (c == 0)
        _exit(shim_kill_all_sparing(0, 1000, NULL) == -EPERM ? 0 : 1);
    int st;
    if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return 2;
    if (kill(victim, 0) != 0)
        return 3;
    kill(victim, SIGKILL);
    waitpid(victim, NULL, 0);
    return 0;
}

static int refuses_foreign_proc(void) {
    block_chld();
    pid_t victim = fork();
    if (victim == 0)
        forever();
    /* /proc is still the outer namespace's here: /proc/self is not "1". */
    if (shim_kill_all_sparing(0, 1000, NULL) != -EPERM)
        return 2;
    if (kill(victim, 0) != 0)
        return 3;
    kill(victim, SIGKILL);
    waitpid(victim, NULL, 0);
    return 0;
}

START_TEST(kill_all_sparing_refuses_outside_its_namespace) {
    expect_ok(refuses_not_pid1, true);
    expect_ok(refuses_foreign_proc, false);
}
END_TEST

static Suite *standby_s1_suite(void) {
    Suite *s = suite_create("standby_s1");
    TCase *c = tcase_create("standby");
    tcase_set_timeout(c, 20);
    tcase_add_test(c, made_once_per_gen_after_answered);
    tcase_add_test(c, made_after_the_delay);
    tcase_add_test(c, disabled_makes_none);
    tcase_add_test(c, zygote_failed_or_bad_answer);
    tcase_add_test(c, zygote_late_answer);
    tcase_add_test(c, prepared_is_activated);
    tcase_add_test(c, declined_is_killed);
    tcase_add_test(c, eof_is_killed);
    tcase_add_test(c, timeout_is_killed);
    tcase_add_test(c, not_prepared_is_killed);
    tcase_add_test(c, wrong_active_is_killed);
    tcase_add_test(c, bad_record_is_killed);
    tcase_add_test(c, eof_while_waiting_is_killed);
    suite_add_tcase(s, c);
    TCase *k = tcase_create("kill sparing one");
    tcase_set_timeout(k, 30);
    tcase_add_test(k, kill_all_spares_one);
    tcase_add_test(k, kill_all_does_not_wait_for_the_spared_ones_zombie);
    tcase_add_test(k, kill_all_sparing_refuses_outside_its_namespace);
    suite_add_tcase(s, k);
    return s;
}

int main(void) { return ipb_run_suite(standby_s1_suite()); }
