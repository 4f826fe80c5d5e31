#include "zygote_s0.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pid1.h"
#include "zygote_proto.h"

__attribute__((noreturn)) static void s0_fail(int fd, const char *what) {
    int e = errno;
    char text[160];
    snprintf(text, sizeof(text), "%s: %s", what, strerror(e));
    shim_send(fd, SHIM_EV_ERROR, 0, e, 0, "zygote namespace", text);
    _exit(1);
}

/* Zpre, in P0: its children are born in P1 (setns of pid_for_children), then the kernel's own
 * hardening (shim_exec_program) and an exec of the kernel's argv with the channel as fd 3. A
 * fresh exec by the shim: nothing that ran in the sandbox is in it. */
/* User namespace Z, which the zygote and its kernels share: made by a helper while the host's
 * /proc still resolves the processes of P0 (before S1's pivot_root; nobody could write a
 * zygote's id maps afterwards, as no /proc shows it), and held by S0 as a descriptor. */
static int make_kernel_userns(const shim_config *cfg) {
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return -1;
    pid_t h = fork();
    if (h < 0) {
        close(sp[0]);
        close(sp[1]);
        return -1;
    }
    if (h == 0) {
        ipb_error *err = NULL;
        close(sp[0]);
        if (shim_kernel_userns(cfg, -1, &err) < 0) {
            dprintf(2, "ipybox-shim: the zygote's user namespace: %s\n", ipb_error_msg(err));
            _exit(1);
        }
        int u = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
        _exit(u < 0 || zy_send(sp[1], ZY_NEW, 0, 0, u) < 0 ? 1 : 0);
    }
    close(sp[1]);
    zy_rec m;
    int u = -1;
    int r = zy_recv(sp[0], &m, &u, 10000);
    close(sp[0]);
    while (waitpid(h, NULL, 0) < 0 && errno == EINTR)
        ;
    if (r != 1) {
        if (u >= 0)
            close(u);
        errno = r < 0 ? -r : ETIMEDOUT;
        return -1;
    }
    return u;
}

__attribute__((noreturn)) static void zygote_exec(shim_config *cfg, int p1, int userns, int chan) {
    ipb_error *err = NULL;
    if (setns(p1, CLONE_NEWPID) < 0) {
        dprintf(2, "ipybox-shim: the zygote: entering the kernels' pid namespace: %s\n", strerror(errno));
        _exit(127);
    }
    close(p1);
    if (shim_own_stdio(&err) < 0) {
        dprintf(2, "ipybox-shim: the zygote: %s\n", ipb_error_msg(err));
        _exit(127);
    }
    /* The kernel's environment with the user site pointed away: the zygote must not run a
     * .pth or usercustomize the sandbox wrote. The supervisor makes no zygote when the
     * options set PYTHONUSERBASE or PYTHONPATH. */
    size_t n = cfg->env.n;
    char **env = calloc(n + 2, sizeof(char *));
    if (!env)
        _exit(127);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(cfg->env.v[i], "PYTHONUSERBASE=", 15))
            env[k++] = cfg->env.v[i];
    env[k++] = (char *)"PYTHONUSERBASE=/nonexistent";
    env[k] = NULL;
    shim_exec_program(-1, cfg, 0, chan, env, userns);
}

static pid_t make_zygote(shim_config *cfg, int p1, int userns, int ctl, int sfd) {
    int zc[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, zc) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(ctl);
        close(sfd);
        close(zc[0]);
        /* Held here, a small fork of S0 that already counts against the sandbox's pids limit
         * where the zygote will, until S1 lets it boot (the first zygote at once; one made
         * after a lost zygote once the slow kernel started meanwhile answered, so that the two
         * Pythons do not compete for the CPU). S1's end closed: nothing to boot for. */
        zy_rec m;
        if (zy_recv(zc[1], &m, NULL, -1) != 1 || m.type != ZY_BOOT)
            _exit(1);
        zygote_exec(cfg, p1, userns, zc[1]);
    }
    close(zc[1]);
    if (pid > 0 && zy_send(ctl, ZY_NEW, 0, 0, zc[0]) < 0) {
        kill(pid, SIGKILL);
    }
    close(zc[0]);
    return pid;
}

__attribute__((noreturn)) static void s0_loop(shim_config *cfg, int ctl, int p1, int userns, pid_t s1) {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        kill(s1, SIGKILL);
        _exit(1);
    }
    pid_t zpid = 0;
    bool ctl_open = true;
    for (;;) {
        struct pollfd p[2] = {{sfd, POLLIN, 0}, {ctl_open ? ctl : -1, POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            kill(s1, SIGKILL);
            _exit(1);
        }
        if (p[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) > 0)
                ;
            int status;
            pid_t w;
            while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
                if (w == s1) {
                    /* As the outer shim does for us: the sandbox's exit is S1's. */
                    if (zpid > 0)
                        kill(zpid, SIGKILL);
                    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
                }
                if (w == zpid) {
                    zpid = 0;
                    if (ctl_open)
                        zy_send(ctl, ZY_ENDED, 0, status, -1);
                }
            }
        }
        if (ctl_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            zy_rec m;
            int r = zy_recv(ctl, &m, NULL, 0);
            if (r < 0) {
                /* S1 is gone or spoke nonsense: it is ours; end the sandbox with it. */
                ctl_open = false;
                if (zpid > 0)
                    kill(zpid, SIGKILL);
                if (r != -EPIPE)
                    kill(s1, SIGKILL);
                continue;
            }
            if (r == 0)
                continue;
            if (m.type == ZY_MAKE && zpid == 0) {
                zpid = make_zygote(cfg, p1, userns, ctl, sfd);
                if (zpid < 0) {
                    zpid = 0;
                    zy_send(ctl, ZY_NOTMADE, 0, errno > 0 ? errno : EIO, -1);
                }
            } else if (m.type == ZY_KILL && zpid > 0) {
                kill(zpid, SIGKILL);
            }
        }
    }
}

void shim_s0_split(int fail_fd, shim_config *cfg, int *ret_ctl) {
    int ctl[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
        s0_fail(fail_fd, "creating the zygote's control channel");
    int p0 = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    if (p0 < 0)
        s0_fail(fail_fd, "opening this pid namespace");
    if (unshare(CLONE_NEWPID) < 0)
        s0_fail(fail_fd, "creating the kernels' pid namespace");
    pid_t s1 = fork();
    if (s1 < 0)
        s0_fail(fail_fd, "forking PID 1 of the kernels' pid namespace");
    if (s1 == 0) {
        close(ctl[0]);
        close(p0);
        /* S0 opens P1 through the host's /proc, which is gone once we pivot: wait for it,
         * within a bound (its user-namespace helper has 10 s; the supervisor waits 30 s for
         * the sandbox). S0 exits when it fails. */
        zy_rec m;
        if (zy_recv(ctl[1], &m, NULL, 20000) != 1 || m.type != ZY_GO)
            _exit(1);
        *ret_ctl = ctl[1];
        return;
    }
    close(ctl[1]);
    int p1 = open("/proc/self/ns/pid_for_children", O_RDONLY | O_CLOEXEC);
    if (p1 < 0 || setns(p0, CLONE_NEWPID) < 0) {
        kill(s1, SIGKILL);
        s0_fail(fail_fd, "holding the kernels' pid namespace");
    }
    close(p0);
    int userns = make_kernel_userns(cfg);
    if (userns < 0) {
        kill(s1, SIGKILL);
        s0_fail(fail_fd, "making the kernels' user namespace");
    }
    if (zy_send(ctl[0], ZY_GO, 0, 0, -1) < 0) {
        kill(s1, SIGKILL);
        s0_fail(fail_fd, "starting PID 1 of the kernels");
    }
    /* The supervisor talks to S1 only; the monitor's mounts are S1's to place. */
    close(fail_fd);
    for (unsigned i = 0; i < cfg->mount_fds; i++)
        close(SHIM_MOUNT_FD0 + (int)i);
    s0_loop(cfg, ctl[0], p1, userns, s1);
}
