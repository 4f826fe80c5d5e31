/* Unit tests for policy/seccomp_policy: the compiled program's shape, and its behaviour once
 * loaded. Each behaviour test forks a child that loads the filter (PR_SET_NO_NEW_PRIVS, so no
 * privilege is needed), makes one system call and reports {return value, errno} through a
 * pipe; the parent checks the result. The child never returns into Check and leaves with
 * _exit() (a sanitizer's exit-time leak check would need ptrace, which the filter refuses).
 * Tests named fixed_bug_* are regression tests for bugs these suites found. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "run_suite.h"
#include "seccomp_policy.h"

typedef struct probe_result {
    long ret;
    int err;
} probe_result;

static uint8_t *prog_bytes;
static size_t prog_len;
static char workdir[64];

static void setup(void) {
    ipb_error *err = NULL;
    ck_assert_msg(ipb_seccomp_compile(&prog_bytes, &prog_len, &err) == 0, "%s", ipb_error_msg(err));
    snprintf(workdir, sizeof(workdir), "/tmp/ipb-unit-seccomp-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(workdir));
}

static void teardown(void) {
    free(prog_bytes);
    prog_bytes = NULL;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", workdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", workdir);
}

/* Runs probe() in a child under the filter. */
static probe_result run_filtered(probe_result (*probe)(void)) {
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        struct sock_fprog fprog = {.len = (unsigned short)(prog_len / sizeof(struct sock_filter)),
                                   .filter = (struct sock_filter *)(void *)prog_bytes};
        probe_result r = {.ret = -9999, .err = -1};
        /* stdin becomes /dev/null: a terminal ioctl that slipped through must not reach a tty */
        int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (nullfd < 0 || dup2(nullfd, 0) < 0)
            _exit(3);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0) {
            r.err = errno;
            (void)!write(p[1], &r, sizeof(r));
            _exit(2);
        }
        r = probe();
        (void)!write(p[1], &r, sizeof(r));
        _exit(0);
    }
    close(p[1]);
    probe_result r = {.ret = -9999, .err = -1};
    ssize_t n = read(p[0], &r, sizeof(r));
    close(p[0]);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "the filtered child died (status 0x%x): a rule kills instead of refusing", status);
    ck_assert_msg(WEXITSTATUS(status) != 3, "the child could not open /dev/null");
    ck_assert_msg(WEXITSTATUS(status) == 0, "loading the filter failed: %s", strerror(r.err));
    ck_assert_int_eq(n, (ssize_t)sizeof(r));
    return r;
}

#define EXPECT_ERRNO(probe, e)                                                                                         \
    do {                                                                                                               \
        probe_result r_ = run_filtered(probe);                                                                         \
        ck_assert_msg(r_.ret == -1 && r_.err == (e), #probe ": expected -1/%s, got %ld/%s", strerror(e), r_.ret,       \
                      r_.ret == -1 ? strerror(r_.err) : "-");                                                          \
    } while (0)

#define EXPECT_OK(probe)                                                                                               \
    do {                                                                                                               \
        probe_result r_ = run_filtered(probe);                                                                         \
        ck_assert_msg(r_.ret >= 0, #probe ": expected success, got %ld/%s", r_.ret, strerror(r_.err));                 \
    } while (0)

static probe_result result(long ret) { return (probe_result){.ret = ret, .err = ret < 0 ? errno : 0}; }

/* A clone that may succeed if the filter is wrong: the copy leaves at once. */
static probe_result clone_flags(unsigned long flags) {
    long r = syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
    if (r == 0)
        _exit(0);
    probe_result res = result(r);
    if (r > 0)
        waitpid((pid_t)r, NULL, 0);
    return res;
}

static probe_result p_unshare_user(void) { return result(unshare(CLONE_NEWUSER)); }
static probe_result p_unshare_ns(void) { return result(unshare(CLONE_NEWNS)); }
static probe_result p_clone3(void) { return result(syscall(SYS_clone3, NULL, 0)); }
static probe_result p_clone_newuser(void) { return clone_flags(CLONE_NEWUSER); }
static probe_result p_clone_newns(void) { return clone_flags(CLONE_NEWNS); }
static probe_result p_clone_newnet(void) { return clone_flags(CLONE_NEWNET); }
static probe_result p_clone_newpid(void) { return clone_flags(CLONE_NEWPID); }
static probe_result p_clone_plain(void) { return clone_flags(0); }
static probe_result p_fork(void) {
    pid_t pid = fork();
    if (pid == 0)
        _exit(7);
    if (pid < 0)
        return result(-1);
    int st = 0;
    waitpid(pid, &st, 0);
    return result(WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0 : -1);
}
static void *thread_fn(void *arg) { return arg; }
static probe_result p_pthread(void) {
    /* glibc tries clone3 first and falls back to clone() on ENOSYS */
    pthread_t t;
    int e = pthread_create(&t, NULL, thread_fn, (void *)0x1234);
    if (e)
        return (probe_result){-1, e};
    void *ret = NULL;
    pthread_join(t, &ret);
    return result(ret == (void *)0x1234 ? 0 : -1);
}

static probe_result p_tiocsti(void) {
    char c = 'x';
    return result(ioctl(0, TIOCSTI, &c));
}
static probe_result p_tiocsti_high_bits(void) {
    char c = 'x';
    return result(ioctl(0, TIOCSTI | (1UL << 32), &c));
}
static probe_result p_tioclinux(void) {
    char c = 0;
    return result(ioctl(0, TIOCLINUX, &c));
}
/* N_TTY on a pty of our own: allowed without the filter, so EPERM can only be the filter. */
static probe_result p_tiocsetd(void) {
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
        return result(-1);
    int s = open(ptsname(m), O_RDWR | O_NOCTTY);
    int ldisc = 0;
    long r = s < 0 ? -1 : ioctl(s, TIOCSETD, &ldisc);
    probe_result pr = result(r);
    if (s >= 0)
        close(s);
    close(m);
    return pr;
}
static probe_result p_tiocsetd_high_bits(void) {
    int ldisc = 0;
    return result(ioctl(0, TIOCSETD | (1UL << 32), &ldisc));
}
static probe_result p_ioctl_fionread(void) {
    int fds[2];
    if (pipe(fds) < 0)
        return result(-1);
    int n = -1;
    long r = ioctl(fds[0], FIONREAD, &n);
    return result(r == 0 && n == 0 ? 0 : -1);
}

static probe_result p_af_packet(void) { return result(socket(AF_PACKET, SOCK_RAW, 0)); }
static probe_result p_af_packet_high(void) { return result(syscall(SYS_socket, (1L << 32) | AF_PACKET, SOCK_RAW, 0)); }
static probe_result p_af_bluetooth(void) { return result(socket(31 /* AF_BLUETOOTH */, SOCK_STREAM, 0)); }
static probe_result p_af_alg(void) { return result(socket(38 /* AF_ALG */, SOCK_SEQPACKET, 0)); }
static probe_result p_af_vsock(void) { return result(socket(40 /* AF_VSOCK */, SOCK_STREAM, 0)); }
static probe_result p_af_key(void) { return result(socket(15 /* AF_KEY */, SOCK_RAW, 2)); }
static probe_result p_socketpair_packet(void) {
    int sv[2];
    return result(socketpair(AF_PACKET, SOCK_DGRAM, 0, sv));
}
static probe_result p_netlink_route(void) { return result(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)); }
static probe_result p_netlink_audit(void) { return result(socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT)); }
static probe_result p_netlink_uevent(void) { return result(socket(AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT)); }
static probe_result p_netlink_netfilter(void) { return result(socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER)); }
static probe_result p_netlink_proto_high(void) {
    return result(syscall(SYS_socket, AF_NETLINK, SOCK_RAW, (1L << 32) | NETLINK_AUDIT));
}
static probe_result p_inet_raw(void) { return result(socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP)); }
static probe_result p_inet6_raw(void) { return result(socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6)); }
static probe_result p_inet_dgram(void) { return result(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)); }
static probe_result p_inet6_stream(void) { return result(socket(AF_INET6, SOCK_STREAM, 0)); }
static probe_result p_unix_pair(void) {
    int sv[2];
    return result(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
}

static probe_result mknod_in_workdir(const char *name, mode_t mode, dev_t dev) {
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", workdir, name);
    return result(mknod(path, mode, dev));
}
static probe_result p_mknod_chr(void) { return mknod_in_workdir("null2", S_IFCHR | 0666, makedev(1, 3)); }
static probe_result p_mknod_blk(void) { return mknod_in_workdir("sda", S_IFBLK | 0600, makedev(8, 0)); }
static probe_result p_mknod_raw_chr(void) {
    char path[128];
    snprintf(path, sizeof(path), "%s/mem", workdir);
    return result(syscall(SYS_mknod, path, S_IFCHR | 0600, makedev(1, 1)));
}
static probe_result p_mkfifo(void) {
    char path[128];
    snprintf(path, sizeof(path), "%s/fifo", workdir);
    return result(mkfifo(path, 0600));
}
static probe_result p_mknod_sock(void) { return mknod_in_workdir("sock", S_IFSOCK | 0600, 0); }
static probe_result p_mknod_reg(void) { return mknod_in_workdir("regular", S_IFREG | 0600, 0); }

/* Set-id bits on files the sandbox writes: each way a mode is given. */
static void wpath(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", workdir, name); }
static probe_result p_open_creat_setuid(void) {
    char p[128];
    wpath(p, sizeof(p), "suid-open");
    return result(syscall(SYS_open, p, O_WRONLY | O_CREAT, 04755));
}
static probe_result p_openat_creat_setgid(void) {
    char p[128];
    wpath(p, sizeof(p), "sgid-openat");
    return result(syscall(SYS_openat, AT_FDCWD, p, O_WRONLY | O_CREAT, 02755));
}
static probe_result p_openat_tmpfile_setuid(void) {
    return result(syscall(SYS_openat, AT_FDCWD, workdir, O_WRONLY | O_TMPFILE, 04755));
}
static probe_result p_creat_setuid(void) {
    char p[128];
    wpath(p, sizeof(p), "suid-creat");
    return result(syscall(SYS_creat, p, 04755));
}
static probe_result p_openat_creat_plain(void) {
    char p[128];
    wpath(p, sizeof(p), "plain");
    return result(syscall(SYS_openat, AT_FDCWD, p, O_WRONLY | O_CREAT, 0755));
}
/* mode bits without O_CREAT mean nothing: not refused */
static probe_result p_openat_read_mode_garbage(void) {
    return result(syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY, 06777));
}
static int make_plain_file(void) {
    char p[128];
    wpath(p, sizeof(p), "victim");
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
    return fd;
}
static probe_result p_chmod_setuid(void) {
    char p[128];
    int fd = make_plain_file();
    if (fd < 0)
        return result(-1);
    close(fd);
    wpath(p, sizeof(p), "victim");
    return result(syscall(SYS_chmod, p, 04755));
}
static probe_result p_fchmod_setgid(void) {
    int fd = make_plain_file();
    return fd < 0 ? result(-1) : result(syscall(SYS_fchmod, fd, 02755));
}
static probe_result p_fchmodat_setuid(void) {
    char p[128];
    int fd = make_plain_file();
    if (fd < 0)
        return result(-1);
    close(fd);
    wpath(p, sizeof(p), "victim");
    return result(syscall(SYS_fchmodat, AT_FDCWD, p, 04755));
}
static probe_result p_fchmodat2_setuid(void) {
    char p[128];
    int fd = make_plain_file();
    if (fd < 0)
        return result(-1);
    close(fd);
    wpath(p, sizeof(p), "victim");
    long r = syscall(452 /* fchmodat2 */, AT_FDCWD, p, 04755, 0);
    return r < 0 && errno == ENOSYS ? (probe_result){-1, EPERM} /* kernel without it: nothing to refuse */
                                    : result(r);
}
static probe_result p_fchmod_plain(void) {
    int fd = make_plain_file();
    return fd < 0 ? result(-1) : result(syscall(SYS_fchmod, fd, 0700));
}
static probe_result p_mknod_reg_setuid(void) { return mknod_in_workdir("suid-mknod", S_IFREG | 04755, 0); }
static probe_result p_openat2_any(void) {
    struct {
        uint64_t flags, mode, resolve;
    } how = {O_RDONLY, 0, 0};
    return result(syscall(437 /* openat2 */, AT_FDCWD, "/dev/null", &how, sizeof(how)));
}

static probe_result p_persona_rie(void) { return result(personality(READ_IMPLIES_EXEC)); }
static probe_result p_persona_norandom(void) { return result(personality(ADDR_NO_RANDOMIZE)); }
static probe_result p_persona_page_zero(void) { return result(personality(MMAP_PAGE_ZERO)); }
static probe_result p_persona_compat(void) { return result(personality(ADDR_COMPAT_LAYOUT)); }
static probe_result p_persona_combined(void) { return result(personality(PER_LINUX | READ_IMPLIES_EXEC | 0x0008000)); }
static probe_result p_persona_linux(void) { return result(personality(PER_LINUX)); }
static probe_result p_persona_query(void) { return result(personality(0xffffffff)); }

/* A target that does not exist: if the rule were missing, root would get ENOENT, not a mount. */
static probe_result p_mount(void) { return result(mount("none", "/nonexistent/ipb-unit", "tmpfs", 0, NULL)); }
static probe_result p_ptrace(void) { return result(ptrace(PTRACE_TRACEME, 0, NULL, NULL)); }
static probe_result p_keyctl(void) { return result(syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0)); }
static probe_result p_bpf(void) { return result(syscall(SYS_bpf, 0, NULL, 0)); }
static probe_result p_io_uring(void) { return result(syscall(SYS_io_uring_setup, 1, NULL)); }
static probe_result p_userfaultfd(void) { return result(syscall(SYS_userfaultfd, 0)); }
static probe_result p_memfd_secret(void) { return result(syscall(447 /* memfd_secret, x86_64 and arm64 */, 0)); }
static probe_result p_setns(void) { return result(setns(0, 0)); }
static probe_result p_chroot(void) { return result(chroot("/")); }
static probe_result p_getpid(void) { return result(getpid()); }

START_TEST(program_shape) {
    ck_assert_ptr_nonnull(prog_bytes);
    ck_assert_uint_gt(prog_len, 0);
    ck_assert_uint_eq(prog_len % sizeof(struct sock_filter), 0);
    ck_assert_uint_eq(sizeof(struct sock_filter), 8);
    ck_assert_uint_le(prog_len / 8, BPF_MAXINSNS);
    /* It starts by checking the architecture (seccomp_data.arch). */
    const struct sock_filter *f = (const struct sock_filter *)(const void *)prog_bytes;
    ck_assert_uint_eq(f[0].code, BPF_LD | BPF_W | BPF_ABS);
    ck_assert_uint_eq(f[0].k, offsetof(struct seccomp_data, arch));
    /* It ends in a return. */
    ck_assert_uint_eq(BPF_CLASS(f[prog_len / 8 - 1].code), BPF_RET);
    /* Compiling twice gives the same program. */
    uint8_t *again = NULL;
    size_t again_len = 0;
    ck_assert_int_eq(ipb_seccomp_compile(&again, &again_len, NULL), 0);
    ck_assert_uint_eq(again_len, prog_len);
    ck_assert_int_eq(memcmp(again, prog_bytes, prog_len), 0);
    free(again);
}
END_TEST

START_TEST(namespaces_refused) {
    EXPECT_ERRNO(p_unshare_user, EPERM);
    EXPECT_ERRNO(p_unshare_ns, EPERM);
    EXPECT_ERRNO(p_setns, EPERM);
    EXPECT_ERRNO(p_clone_newuser, EPERM);
    EXPECT_ERRNO(p_clone_newns, EPERM);
    EXPECT_ERRNO(p_clone_newnet, EPERM);
    EXPECT_ERRNO(p_clone_newpid, EPERM);
}
END_TEST

START_TEST(clone3_enosys_and_fallbacks_work) {
    EXPECT_ERRNO(p_clone3, ENOSYS);
    EXPECT_OK(p_clone_plain);
    EXPECT_OK(p_fork);
    EXPECT_OK(p_pthread);
}
END_TEST

START_TEST(terminal_injection_refused) {
    EXPECT_ERRNO(p_tiocsti, EPERM);
    EXPECT_ERRNO(p_tiocsti_high_bits, EPERM);
    EXPECT_ERRNO(p_tioclinux, EPERM);
    EXPECT_ERRNO(p_tiocsetd, EPERM);
    EXPECT_ERRNO(p_tiocsetd_high_bits, EPERM);
    EXPECT_OK(p_ioctl_fionread);
}
END_TEST

START_TEST(socket_families) {
    EXPECT_ERRNO(p_af_packet, EAFNOSUPPORT);
    EXPECT_ERRNO(p_af_packet_high, EAFNOSUPPORT);
    EXPECT_ERRNO(p_af_bluetooth, EAFNOSUPPORT);
    EXPECT_ERRNO(p_af_alg, EAFNOSUPPORT);
    EXPECT_ERRNO(p_af_vsock, EAFNOSUPPORT);
    EXPECT_ERRNO(p_af_key, EAFNOSUPPORT);
    EXPECT_ERRNO(p_socketpair_packet, EAFNOSUPPORT);
    EXPECT_OK(p_inet_dgram);
    EXPECT_OK(p_inet6_stream);
    EXPECT_OK(p_unix_pair);
}
END_TEST

START_TEST(netlink_route_only) {
    EXPECT_OK(p_netlink_route);
    EXPECT_ERRNO(p_netlink_audit, EAFNOSUPPORT);
    EXPECT_ERRNO(p_netlink_uevent, EAFNOSUPPORT);
    EXPECT_ERRNO(p_netlink_netfilter, EAFNOSUPPORT);
    EXPECT_ERRNO(p_netlink_proto_high, EAFNOSUPPORT);
}
END_TEST

START_TEST(raw_inet_refused) {
    EXPECT_ERRNO(p_inet_raw, EPERM);
    EXPECT_ERRNO(p_inet6_raw, EPERM);
}
END_TEST

START_TEST(device_nodes_refused_fifos_allowed) {
    EXPECT_ERRNO(p_mknod_chr, EPERM);
    EXPECT_ERRNO(p_mknod_blk, EPERM);
    EXPECT_ERRNO(p_mknod_raw_chr, EPERM);
    EXPECT_OK(p_mkfifo);
    EXPECT_OK(p_mknod_sock);
    EXPECT_OK(p_mknod_reg);
    char path[128];
    snprintf(path, sizeof(path), "%s/fifo", workdir);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
    snprintf(path, sizeof(path), "%s/null2", workdir);
    ck_assert_int_lt(lstat(path, &st), 0);
}
END_TEST

START_TEST(setid_bits_refused) {
    EXPECT_ERRNO(p_open_creat_setuid, EPERM);
    EXPECT_ERRNO(p_openat_creat_setgid, EPERM);
    EXPECT_ERRNO(p_openat_tmpfile_setuid, EPERM);
    EXPECT_ERRNO(p_creat_setuid, EPERM);
    EXPECT_ERRNO(p_chmod_setuid, EPERM);
    EXPECT_ERRNO(p_fchmod_setgid, EPERM);
    EXPECT_ERRNO(p_fchmodat_setuid, EPERM);
    EXPECT_ERRNO(p_fchmodat2_setuid, EPERM);
    EXPECT_ERRNO(p_mknod_reg_setuid, EPERM);
    EXPECT_ERRNO(p_openat2_any, ENOSYS);
    EXPECT_OK(p_openat_creat_plain);
    EXPECT_OK(p_openat_read_mode_garbage);
    EXPECT_OK(p_fchmod_plain);
    static const char *const never[] = {"suid-open", "sgid-openat", "suid-creat", "suid-mknod"};
    for (size_t i = 0; i < sizeof(never) / sizeof(*never); i++) {
        char p[128];
        wpath(p, sizeof(p), never[i]);
        ck_assert_msg(access(p, F_OK) < 0, "%s was created", never[i]);
    }
    char p[128];
    struct stat st;
    wpath(p, sizeof(p), "victim");
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_msg(!(st.st_mode & (S_ISUID | S_ISGID)), "a set-id bit reached the file: %o", st.st_mode);
}
END_TEST

START_TEST(personality_weakening_refused) {
    EXPECT_ERRNO(p_persona_rie, EPERM);
    EXPECT_ERRNO(p_persona_norandom, EPERM);
    EXPECT_ERRNO(p_persona_compat, EPERM);
    EXPECT_ERRNO(p_persona_combined, EPERM);
    EXPECT_OK(p_persona_linux);
}
END_TEST

START_TEST(kernel_attack_surface_refused) {
    EXPECT_ERRNO(p_mount, EPERM);
    EXPECT_ERRNO(p_chroot, EPERM);
    EXPECT_ERRNO(p_ptrace, EPERM);
    EXPECT_ERRNO(p_keyctl, EPERM);
    EXPECT_ERRNO(p_bpf, EPERM);
    EXPECT_ERRNO(p_io_uring, EPERM);
    EXPECT_ERRNO(p_userfaultfd, EPERM);
    EXPECT_ERRNO(p_memfd_secret, EPERM);
    EXPECT_OK(p_getpid);
}
END_TEST

/* FIXED BUG (policy/seccomp_policy.c:117, bad_persona[]): the rule meant for MMAP_PAGE_ZERO uses
 * 0x0008000, but MMAP_PAGE_ZERO is 0x0100000 (<sys/personality.h>); 0x0008000 is no persona flag
 * at all. personality(MMAP_PAGE_ZERO) succeeds under the filter. */
START_TEST(fixed_bug_personality_mmap_page_zero_allowed) { EXPECT_ERRNO(p_persona_page_zero, EPERM); }
END_TEST

/* FIXED BUG (policy/seccomp_policy.c:116-121, bad_persona[]): the personality rules refuse every
 * argument with a weakening bit set, which includes 0xffffffff, the documented "query the current
 * persona" call (Docker's default profile allows it explicitly): personality(0xffffffff) returns
 * -1/EPERM under the filter instead of the current persona. */
START_TEST(fixed_bug_personality_query_refused) { EXPECT_OK(p_persona_query); }
END_TEST

static Suite *seccomp_suite(void) {
    Suite *s = suite_create("seccomp");
    TCase *t = tcase_create("filter");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 30);
    tcase_add_test(t, program_shape);
    tcase_add_test(t, namespaces_refused);
    tcase_add_test(t, setid_bits_refused);
    tcase_add_test(t, clone3_enosys_and_fallbacks_work);
    tcase_add_test(t, terminal_injection_refused);
    tcase_add_test(t, socket_families);
    tcase_add_test(t, netlink_route_only);
    tcase_add_test(t, raw_inet_refused);
    tcase_add_test(t, device_nodes_refused_fifos_allowed);
    tcase_add_test(t, personality_weakening_refused);
    tcase_add_test(t, kernel_attack_surface_refused);
    suite_add_tcase(s, t);
    {
        TCase *k = tcase_create("fixed_bugs");
        tcase_add_checked_fixture(k, setup, teardown);
        tcase_add_test(k, fixed_bug_personality_mmap_page_zero_allowed);
        tcase_add_test(k, fixed_bug_personality_query_refused);
        suite_add_tcase(s, k);
    }
    return s;
}

int main(void) { return ipb_run_suite(seccomp_suite()); }
