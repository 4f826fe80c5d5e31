/* ipybox doctor's checks of the host: user namespaces (and the sysctls that block them), the
 * egress ruleset in a throwaway network namespace, and how --memory, --max-processes and
 * --cpu-weight would be enforced. Each namespace check runs in a forked child that exits. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "doctor.h"
#include "fdio.h"
#include "harden.h"
#include "netns.h"
#include "ulimits.h"

#define CGROUP1_MAGIC 0x27e0eb

/* A sysctl's value as a number, or -1 when the file is not there (the kernel has no such
 * setting) or does not hold one. */
static long sysctl_value(const char *path) {
    char *buf = NULL;
    size_t len;
    if (ipb_read_file(path, 64, &buf, &len) < 0)
        return -1;
    char *end;
    long v = strtol(buf, &end, 10);
    bool ok = end != buf;
    free(buf);
    return ok ? v : -1;
}

/* Runs fn in a forked child; its message (up to len - 1 bytes) comes back in msg. Returns the
 * child's exit status, or -1 when it could not run or was killed. */
static int in_child(void (*fn)(int fd), char *msg, size_t len) {
    int p[2];
    msg[0] = '\0';
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(msg, len, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(msg, len, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        fn(p[1]);
        _exit(0);
    }
    close(p[1]);
    size_t got = 0;
    ssize_t n;
    while (got + 1 < len && ((n = read(p[0], msg + got, len - 1 - got)) > 0 || (n < 0 && errno == EINTR)))
        if (n > 0)
            got += (size_t)n;
    msg[got] = '\0';
    close(p[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void try_userns(int fd) {
    if (unshare(CLONE_NEWUSER) < 0) {
        int e = errno;
        dprintf(fd, "%s", strerror(e));
        _exit(e & 0xff ? e & 0xff : 1);
    }
}

bool doctor_check_userns(doctor *d) {
    char msg[256];
    int r = in_child(try_userns, msg, sizeof(msg));
    long max = sysctl_value("/proc/sys/user/max_user_namespaces");
    long clone = sysctl_value("/proc/sys/kernel/unprivileged_userns_clone");
    long apparmor = sysctl_value("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
    if (r == 0) {
        doctor_say(d, DOCTOR_OK, "user namespaces", "this user can create one (user.max_user_namespaces = %ld)", max);
        return true;
    }
    /* Name each setting that blocks them, with the command that lifts it (as root). Root is
     * not held back by the two that concern unprivileged users. */
    bool root = geteuid() == 0;
    char why[1024] = "";
    size_t at = 0;
    if (max == 0)
        at +=
            (size_t)snprintf(why + at, sizeof(why) - at,
                             "; user.max_user_namespaces = 0 allows none: `sysctl -w user.max_user_namespaces=15000`");
    if (clone == 0 && !root && at < sizeof(why))
        at += (size_t)snprintf(why + at, sizeof(why) - at,
                               "; kernel.unprivileged_userns_clone = 0 (Debian) refuses them to users: "
                               "`sysctl -w kernel.unprivileged_userns_clone=1`");
    if (apparmor == 1 && !root && at < sizeof(why))
        snprintf(why + at, sizeof(why) - at,
                 "; kernel.apparmor_restrict_unprivileged_userns = 1 (Ubuntu) refuses them to programs without an "
                 "AppArmor profile that allows them: `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`");
    if (!why[0])
        snprintf(why, sizeof(why),
                 "; no sysctl of this kernel says why: a seccomp filter or a container runtime "
                 "(Docker, systemd's RestrictNamespaces=) may refuse unshare(CLONE_NEWUSER) here");
    doctor_say(d, DOCTOR_FAIL, "user namespaces",
               "cannot create one (%s)%s; every sandbox needs them (as root; "
               "make it permanent in /etc/sysctl.d/)",
               msg[0] ? msg : "the check did not run", why);
    return false;
}

/* The sandbox's network recipe (netns.h), in a new network namespace owned by a new user
 * namespace as the shim makes it; root without user namespaces tries the network namespace
 * alone, so that the two failures are told apart. */
static void try_ruleset(int fd) {
    ipb_error *err = NULL;
    uid_t uid = geteuid();
    gid_t gid = getegid();
    bool userns = unshare(CLONE_NEWUSER) == 0;
    if (userns && shim_write_id_maps(0, 0, uid, 0, gid, &err) < 0)
        goto fail;
    if (unshare(CLONE_NEWNET) < 0) {
        ipb_error_set(&err, errno, "cannot create a network namespace");
        goto fail;
    }
    ipb_egress_fds fds;
    if (ipb_netns_egress_setup(&fds, &err) < 0)
        goto fail;
    ipb_egress_fds_close(&fds);
    _exit(0);
fail:
    dprintf(fd, "%s", ipb_error_msg(err));
    _exit(1);
}

bool doctor_check_nftables(doctor *d, bool userns_ok) {
    if (!userns_ok && geteuid() != 0) {
        doctor_say(d, DOCTOR_SKIP, "nftables", "not checked: it needs a user namespace");
        return false;
    }
    char msg[1024];
    int r = in_child(try_ruleset, msg, sizeof(msg));
    if (r == 0) {
        doctor_say(d, DOCTOR_OK, "nftables",
                   "the egress ruleset loads in a new network namespace (NAT redirect to "
                   "ipybox's proxy and DNS stub, drop of all else)");
        return true;
    }
    doctor_say(d, DOCTOR_FAIL, "nftables", "the sandbox's network cannot be set up: %s",
               msg[0] ? msg : "the check ended without a word");
    return false;
}

static bool is_cgroup1(const char *path) {
    struct statfs sf;
    return statfs(path, &sf) == 0 && (long)sf.f_type == CGROUP1_MAGIC;
}

void doctor_check_cgroups(doctor *d, const ipb_options *o) {
    if (geteuid() == 0) {
        /* Root's sandboxes are made by a private monitor (monclient.h), which uses the v1
         * memory and pids hierarchies where they are mounted and rlimits otherwise (cgroup v2
         * is divided by the system service alone, whose unit delegates it). */
        if (is_cgroup1("/sys/fs/cgroup/memory") && is_cgroup1("/sys/fs/cgroup/pids"))
            doctor_say(d, DOCTOR_OK, "cgroups",
                       "--memory and --max-processes are enforced (run by root: ipybox's "
                       "private monitor gives each sandbox cgroup v1 memory and pids cgroups)%s",
                       is_cgroup1("/sys/fs/cgroup/cpu") ? "" : "; no v1 cpu controller, so no --cpu-weight");
        else
            doctor_say(d, DOCTOR_WARN, "cgroups",
                       "--memory is a per-process address-space limit and --max-processes "
                       "applies per uid (run by root without cgroup v1 hierarchies: rlimits only); for cgroup v2 "
                       "limits use the system service (systemctl start ipyboxd), whose unit delegates a cgroup");
        return;
    }
    /* Every limit, with the values given (else examples), so that each is said about. */
    uint64_t mem = o->memory_max ? o->memory_max : 1ull << 30;
    unsigned pids = o->pids_max ? o->pids_max : 256, cpu = o->cpu_weight ? o->cpu_weight : 50;
    char desc[600], notice[1500];
    enum ipb_ulimits_kind k = ipb_ulimits_probe(mem, pids, cpu, desc, sizeof(desc), notice, sizeof(notice));
    if (k == IPB_ULIMITS_RLIMIT)
        doctor_say(d, DOCTOR_WARN, "cgroups",
                   "no cgroup to divide: %s. For cgroup v2 limits, run ipybox from a "
                   "login with a systemd user manager (XDG_RUNTIME_DIR set, `systemctl --user` works) or use the "
                   "system service (ipyboxd(8))",
                   notice);
    else if (notice[0])
        doctor_say(d, DOCTOR_WARN, "cgroups", "limits through %s, but %s", desc, notice);
    else
        doctor_say(d, DOCTOR_OK, "cgroups", "--memory, --max-processes and --cpu-weight are enforced: %s", desc);
}
