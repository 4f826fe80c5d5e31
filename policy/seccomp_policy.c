#include "seccomp_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdio.h"

/* Refused outright with EPERM. Knowingly excluded from this list: unix sockets (the ZMQ ipc
 * transport needs them; the mount and net namespaces isolate them), ptrace-free process
 * control (kill, prctl: they only reach sandbox processes), and clone() itself (only its
 * namespace flags are refused, below). */
static const char *const denied_syscalls[] = {
    /* namespaces and mounts: the kernel must stay where it was put */
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    /* reaching outside through file handles */
    "open_by_handle_at",
    "name_to_handle_at",
    /* kernel attack surface with a long history of privilege escalations */
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "fanotify_init",
    /* memory the kernel hides from itself: a young interface nothing in Python needs */
    "memfd_secret",
    /* other processes' memory */
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    /* 16-bit segments: old local-root bugs, nothing Python needs */
    "modify_ldt",
    /* host administration */
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "syslog",
    "acct",
    "quotactl",
    "quotactl_fd",
    "lookup_dcookie",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "vhangup",
    "uselib",
    "sethostname",
    "setdomainname",
    "nfsservctl",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "_sysctl",
    "vm86",
    "vm86old",
    "pciconfig_read",
    "pciconfig_write",
    "pciconfig_iobase",
};

static int add(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n, const struct scmp_arg_cmp *cmp) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR)
        return 0; /* not on this architecture */
    int r = seccomp_rule_add_array(ctx, action, nr, n, cmp);
    return r == -EDOM ? 0 : r;
}

#define EPERM_ACT SCMP_ACT_ERRNO(EPERM)

static int add_rules(scmp_filter_ctx ctx) {
    int r;
    for (size_t i = 0; i < sizeof(denied_syscalls) / sizeof(*denied_syscalls); i++)
        if ((r = add(ctx, EPERM_ACT, denied_syscalls[i], 0, NULL)) < 0)
            return r;

    /* clone3 passes its flags in memory that seccomp cannot read: ENOSYS makes glibc fall back
     * to clone(), whose flags we can check. */
    if ((r = add(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL)) < 0)
        return r;
    static const uint64_t ns_flags[] = {CLONE_NEWNS,  CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET,
                                        CLONE_NEWIPC, CLONE_NEWUTS,  CLONE_NEWCGROUP, 0x80 /* CLONE_NEWTIME */};
    for (size_t i = 0; i < sizeof(ns_flags) / sizeof(*ns_flags); i++) {
        struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]);
        if ((r = add(ctx, EPERM_ACT, "clone", 1, &c)) < 0)
            return r;
    }

    /* Terminal injection, and line disciplines (TIOCSETD can autoload n_gsm and friends, a
     * known escalation path): the kernel truncates the command to 32 bits, so compare only
     * those (high bits set in the argument must not slip through). */
    static const uint64_t bad_ioctls[] = {TIOCSTI, TIOCLINUX, TIOCSETD};
    for (size_t i = 0; i < sizeof(bad_ioctls) / sizeof(*bad_ioctls); i++) {
        struct scmp_arg_cmp c = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, bad_ioctls[i]);
        if ((r = add(ctx, EPERM_ACT, "ioctl", 1, &c)) < 0)
            return r;
    }

    /* Device nodes: mknod of character and block devices; FIFOs and sockets stay allowed. */
    static const uint64_t dev_types[] = {S_IFCHR, S_IFBLK};
    for (size_t i = 0; i < 2; i++) {
        struct scmp_arg_cmp c1 = SCMP_A1(SCMP_CMP_MASKED_EQ, S_IFMT, dev_types[i]);
        struct scmp_arg_cmp c2 = SCMP_A2(SCMP_CMP_MASKED_EQ, S_IFMT, dev_types[i]);
        if ((r = add(ctx, EPERM_ACT, "mknod", 1, &c1)) < 0 || (r = add(ctx, EPERM_ACT, "mknodat", 1, &c2)) < 0)
            return r;
    }

    /* Socket families: only unix, IPv4, IPv6 and routing netlink. */
    static const char *const sock_calls[] = {"socket", "socketpair"};
    for (size_t s = 0; s < 2; s++) {
        for (uint64_t fam = 0; fam < AF_NETLINK + 1; fam++) {
            if (fam == AF_UNIX || fam == AF_INET || fam == AF_INET6 || fam == AF_NETLINK)
                continue;
            struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_EQ, fam);
            if ((r = add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), sock_calls[s], 1, &c)) < 0)
                return r;
        }
        struct scmp_arg_cmp hi = SCMP_A0(SCMP_CMP_GT, AF_NETLINK);
        if ((r = add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), sock_calls[s], 1, &hi)) < 0)
            return r;
    }
    struct scmp_arg_cmp nl[2] = {SCMP_A0(SCMP_CMP_EQ, AF_NETLINK), SCMP_A2(SCMP_CMP_NE, 0 /* NETLINK_ROUTE */)};
    if ((r = add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", 2, nl)) < 0)
        return r;
    static const uint64_t inet[] = {AF_INET, AF_INET6};
    for (size_t i = 0; i < 2; i++) {
        struct scmp_arg_cmp raw[2] = {SCMP_A0(SCMP_CMP_EQ, inet[i]), SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW)};
        struct scmp_arg_cmp pkt[2] = {SCMP_A0(SCMP_CMP_EQ, inet[i]), SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_PACKET)};
        if ((r = add(ctx, EPERM_ACT, "socket", 2, raw)) < 0 || (r = add(ctx, EPERM_ACT, "socket", 2, pkt)) < 0)
            return r;
    }

    /* Set-user-ID and set-group-ID bits: files the sandbox writes in /app (and binds) are host
     * files owned by whoever started ipybox (root too); with one of these bits they would
     * be a set-id program on the host for anyone who can reach the workspace. Refused where a
     * mode is given: chmod family, creating opens, mknod. openat2 carries its mode in memory
     * that seccomp cannot read: ENOSYS, and callers fall back to openat. */
    if ((r = add(ctx, SCMP_ACT_ERRNO(ENOSYS), "openat2", 0, NULL)) < 0)
        return r;
    static const uint64_t setid[] = {S_ISUID, S_ISGID};
    static const struct {
        const char *name;
        unsigned mode_arg;
    } mode_calls[] = {{"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2},
                      {"creat", 1}, {"mknod", 1},  {"mknodat", 2}};
    static const struct {
        const char *name;
        unsigned flags_arg;
    } open_calls[] = {{"open", 1}, {"openat", 2}};
    static const uint64_t creating[] = {O_CREAT, O_TMPFILE};
    for (size_t b = 0; b < 2; b++) {
        for (size_t i = 0; i < sizeof(mode_calls) / sizeof(*mode_calls); i++) {
            struct scmp_arg_cmp c = {mode_calls[i].mode_arg, SCMP_CMP_MASKED_EQ, setid[b], setid[b]};
            if ((r = add(ctx, EPERM_ACT, mode_calls[i].name, 1, &c)) < 0)
                return r;
        }
        for (size_t i = 0; i < sizeof(open_calls) / sizeof(*open_calls); i++)
            for (size_t k = 0; k < 2; k++) {
                unsigned fa = open_calls[i].flags_arg;
                struct scmp_arg_cmp c[2] = {{fa, SCMP_CMP_MASKED_EQ, creating[k], creating[k]},
                                            {fa + 1, SCMP_CMP_MASKED_EQ, setid[b], setid[b]}};
                if ((r = add(ctx, EPERM_ACT, open_calls[i].name, 2, c)) < 0)
                    return r;
            }
    }

    /* personality: no READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE and similar weakening flags. */
    static const uint64_t bad_persona[] = {0x0400000 /* READ_IMPLIES_EXEC */, 0x0040000 /* ADDR_NO_RANDOMIZE */,
                                           0x0200000 /* ADDR_COMPAT_LAYOUT */, 0x0100000 /* MMAP_PAGE_ZERO */};
    /* libseccomp cannot AND two comparisons on one argument, so the query persona
     * 0xffffffff is told apart by bit 31, which no real persona uses: a flag is refused
     * when bit 31 is clear, and any value with bit 31 set but another bit clear is
     * refused, which leaves exactly 0xffffffff. */
    for (size_t i = 0; i < sizeof(bad_persona) / sizeof(*bad_persona); i++) {
        struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, bad_persona[i] | 0x80000000u, bad_persona[i]);
        if ((r = add(ctx, EPERM_ACT, "personality", 1, &c)) < 0)
            return r;
    }
    for (unsigned bit = 0; bit < 31; bit++) {
        struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, 0x80000000u | (1u << bit), 0x80000000u);
        if ((r = add(ctx, EPERM_ACT, "personality", 1, &c)) < 0)
            return r;
    }
    return 0;
}

int ipb_seccomp_compile(uint8_t **ret_bpf, size_t *ret_len, ipb_error **err) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return ipb_error_set(err, ENOMEM, "compiling the seccomp filter");
    int r;
    cleanup_close int fd = -1;
    if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0 ||
        (r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0 ||
        /* A binary tree of syscall numbers instead of a linear scan: every syscall the kernel
         * makes runs this program. */
        (r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0) {
        seccomp_release(ctx);
        return ipb_error_set(err, -r, "compiling the seccomp filter: setting attributes");
    }
    if ((r = add_rules(ctx)) < 0) {
        seccomp_release(ctx);
        return ipb_error_set(err, -r, "compiling the seccomp filter: adding rules");
    }
    fd = memfd_create("ipybox-seccomp", MFD_CLOEXEC);
    if (fd < 0) {
        seccomp_release(ctx);
        return ipb_error_set(err, errno, "compiling the seccomp filter: memfd_create");
    }
    r = seccomp_export_bpf(ctx, fd);
    seccomp_release(ctx);
    if (r < 0)
        return ipb_error_set(err, -r, "compiling the seccomp filter: exporting BPF");
    off_t size = lseek(fd, 0, SEEK_END);
    if (size <= 0 || size % 8 != 0 || size > 65536 * 8)
        return ipb_error_set(err, 0, "compiling the seccomp filter: unexpected program size %lld", (long long)size);
    uint8_t *buf = malloc((size_t)size);
    if (!buf)
        return ipb_error_set(err, ENOMEM, "compiling the seccomp filter");
    if (pread(fd, buf, (size_t)size, 0) != size) {
        free(buf);
        return ipb_error_set(err, errno, "compiling the seccomp filter: reading BPF");
    }
    *ret_bpf = buf;
    *ret_len = (size_t)size;
    return 0;
}
