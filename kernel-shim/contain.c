#include "contain.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdio.h"
#include "netns.h"
#include "pid1.h"
#include "rootfs.h"
#include "harden.h"
#include "zygote_s0.h"

/* Sends the failed step to the supervisor and exits. */
__attribute__((noreturn)) static void fail(int fd, const char *step, ipb_error *err) {
    shim_send(fd, SHIM_EV_ERROR, 0, err ? err->errnum : 0, 0, step, ipb_error_msg(err));
    _exit(1);
}

static const char *userns_hint(int e) {
    if (e == EPERM || e == EACCES)
        return " (unprivileged user namespaces are disabled: enable them with "
               "`sysctl kernel.unprivileged_userns_clone=1`, or on Ubuntu allow them in AppArmor with "
               "`sysctl kernel.apparmor_restrict_unprivileged_userns=0`)";
    if (e == ENOSPC)
        return " (the user namespace limit is reached: raise user.max_user_namespaces)";
    return "";
}

/* Whether this process is uid 0 of a user namespace other than the host's: there the map is
 * not the identity of the whole id space. */
static bool in_own_userns(void) {
    char buf[256];
    if (ipb_read_small("/proc/self/uid_map", buf, sizeof(buf)) < 0)
        return false;
    unsigned long in, out, count;
    if (sscanf(buf, "%lu %lu %lu", &in, &out, &count) != 3 || (in == 0 && out == 0 && count == 4294967295ul))
        return false;
    return getuid() == 0 && geteuid() == 0;
}

/* An anonymous pipe or a socket: an object of no filesystem, which a chmod, chown or write
 * from the sandbox cannot turn into a change of a host file. A named FIFO is a host file. */
static bool anonymous(int fd) {
    struct stat st;
    struct statfs sf;
    if (fstat(fd, &st) < 0)
        return false;
    if (S_ISSOCK(st.st_mode))
        return true;
    return S_ISFIFO(st.st_mode) && fstatfs(fd, &sf) == 0 && sf.f_type == PIPEFS_MAGIC;
}

/* PID 1's (and so the program's) stdio from inside the sandbox: whatever the supervisor gave
 * that is not an anonymous pipe or socket (the host's /dev/null, a host file or tty) is
 * replaced by the sandbox's /dev/null, a read-only bind on which chmod and chown fail. A host
 * inode stays reachable through no descriptor of the sandbox's, so the sandbox's user can
 * change none, whichever host user it maps to. Runs after pivot_root. */
int shim_own_stdio(ipb_error **err) {
    int null = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (null < 0)
        return ipb_error_set(err, errno, "opening the sandbox's /dev/null");
    for (int i = 0; i < 3; i++)
        if (!anonymous(i) && dup2(null, i) < 0) {
            int e = errno;
            close(null);
            return ipb_error_set(err, e, "placing the sandbox's /dev/null on fd %d", i);
        }
    close(null);
    return 0;
}

void shim_contain(int fd, shim_config *cfg) {
    ipb_error *err = NULL;

    /* 1. If the supervisor dies, so does the sandbox. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1) {
        ipb_error_set(&err, errno, "the supervisor is gone");
        fail(fd, "parent-death signal", err);
    }

    /* 2. User namespace 1: owns every other namespace of the sandbox and maps the invoking
     *    user to root inside it, so that the shim may build mounts but holds nothing on the host. */
    if (cfg->system) {
        /* The monitor made it already: uid 0 here is the first of the sandbox's pool range. */
        if (!in_own_userns()) {
            ipb_error_set(&err, EPERM, "system mode outside a user namespace of the monitor's");
            fail(fd, "user namespace", err);
        }
    } else {
        if (unshare(CLONE_NEWUSER) < 0) {
            int e = errno;
            ipb_error_set(&err, e, "cannot create a user namespace%s", userns_hint(e));
            fail(fd, "user namespace", err);
        }
        if (shim_write_id_maps(0, 0, cfg->uid, 0, cfg->gid, &err) < 0)
            fail(fd, "user namespace id maps", err);
        /* Limits without cgroups (the supervisor chose them, ulimits.h). Processes are
         * counted per user namespace and uid, so from here on the count is this sandbox's
         * alone (its user namespaces below record this limit at their creation); the address
         * space limit is per process. Lowering needs no privilege. */
        if (cfg->nproc_max) {
            struct rlimit rl = {cfg->nproc_max, cfg->nproc_max};
            if (setrlimit(RLIMIT_NPROC, &rl) < 0) {
                ipb_error_set(&err, errno, "setting RLIMIT_NPROC to %llu", (unsigned long long)cfg->nproc_max);
                fail(fd, "limits", err);
            }
        }
        if (cfg->as_max) {
            struct rlimit rl = {cfg->as_max, cfg->as_max};
            if (setrlimit(RLIMIT_AS, &rl) < 0) {
                ipb_error_set(&err, errno, "setting RLIMIT_AS to %llu", (unsigned long long)cfg->as_max);
                fail(fd, "limits", err);
            }
        }
    }

    /* 3. The other namespaces: mounts, network, IPC, hostname, cgroup view
     *    and pids (the next child becomes PID 1). */
    if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_NEWPID) < 0) {
        ipb_error_set(&err, errno, "cannot create mount, network, IPC, UTS, cgroup and PID namespaces");
        fail(fd, "namespaces", err);
    }

    pid_t pid1 = fork();
    if (pid1 < 0) {
        ipb_error_set(&err, errno, "cannot fork PID 1 of the sandbox");
        fail(fd, "pid namespace", err);
    }
    if (pid1 > 0) {
        /* The outer shim only mirrors PID 1's exit, so the supervisor has a child to wait for. */
        close(fd);
        int status;
        while (waitpid(pid1, &status, 0) < 0)
            if (errno != EINTR)
                _exit(1);
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }

    /* PID 1 of the sandbox from here on. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
        ipb_error_set(&err, errno, "setting the parent-death signal");
        fail(fd, "parent-death signal", err);
    }
    /* With a zygote, this is S0 (PID 1 of P0, where zygotes live); its child S1, PID 1 of the
     * kernels' namespace P1, goes on with the steps below. */
    int ctl = -1;
    if (cfg->zygote) {
        shim_s0_split(fd, cfg, &ctl);
        /* If S0 is already gone, so is P0 and everything in it, S1 too. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
            ipb_error_set(&err, errno, "setting the parent-death signal");
            fail(fd, "parent-death signal", err);
        }
    }
    /* 4. Network: only loopback exists in the new namespace. Bring it up, route everything to
     *    it, load the egress ruleset and create the listeners the supervisor's proxy serves. */
    ipb_egress_fds efds;
    if (ipb_netns_egress_setup(&efds, &err) < 0)
        fail(fd, "network namespace", err);
    /* 5. Hostname, so the host's name does not leak in. */
    const char *hn = cfg->hostname ? cfg->hostname : "ipybox";
    if (sethostname(hn, strlen(hn)) < 0) {
        ipb_error_set(&err, errno, "setting the hostname");
        fail(fd, "uts namespace", err);
    }
    /* 6. The root filesystem: tmpfs, read-only system binds, minimal /etc and /dev, /app,
     *    size-limited /tmp and /dev/shm, fresh /proc with sensitive parts masked, pivot_root. */
    if (shim_build_root(cfg->root, &cfg->plan, cfg->system != 0, cfg->mount_fds, &err) < 0)
        fail(fd, "root filesystem", err);
    if (shim_own_stdio(&err) < 0)
        fail(fd, "standard descriptors", err);
    shim_pid1(fd, cfg, &efds, ctl);
}
