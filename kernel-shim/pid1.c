#include "pid1.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#include "fdio.h"
#include "harden.h"
#include "mountplan.h"
#include "reap.h"
#include "standby_s1.h"
#include "tree.h"
#include "zygote_s1.h"

extern char **environ;

int shim_kernel_userns(const shim_config *cfg, int userns, ipb_error **err) {
    /* Its outside id: root of user namespace 1 in user mode (the only id mapped there); in
     * system mode the sandbox's own user of the pool range, never the range's owner. The
     * switch comes first: one may map only one's own id (and a namespace's owner, in its
     * parent, holds every capability in it, which setns needs). */
    uid_t outside = cfg->system ? IPB_SANDBOX_UID : 0;
    if (outside && (setgroups(0, NULL) < 0 || setresgid(outside, outside, outside) < 0 ||
                    setresuid(outside, outside, outside) < 0))
        return ipb_error_set(err, errno, "switching to the sandbox's user before its namespace");
    /* The switch made us non-dumpable, which gives /proc/self to root; the exec to come
     * makes us dumpable again anyway. */
    if (outside && prctl(PR_SET_DUMPABLE, 1) < 0)
        return ipb_error_set(err, errno, "PR_SET_DUMPABLE");
    if (userns >= 0) {
        if (setns(userns, CLONE_NEWUSER) < 0)
            return ipb_error_set(err, errno, "cannot enter the kernels' user namespace");
        return 0;
    }
    if (unshare(CLONE_NEWUSER) < 0)
        return ipb_error_set(err, errno, "cannot create the program's user namespace");
    return shim_write_id_maps(0, IPB_SANDBOX_UID, outside, IPB_SANDBOX_UID, outside, err);
}

/* The program's own hardening, in the child of PID 1 (or, for a zygote, of S0). Any failure is
 * reported (on fd, or on stderr when fd < 0) and the child exits 127 without running anything.
 * keep >= 0: that descriptor crosses the exec as fd 3 (the zygote's channel); env: the
 * environment, or NULL for the configuration's; userns >= 0: the user namespace to enter
 * (the zygote's, made by S0), else a new one. */
__attribute__((noreturn)) void shim_exec_program(int fd, shim_config *cfg, uint32_t gen, int keep, char **env,
                                                 int userns) {
    ipb_error *err = NULL;
    const char *step = "signals";
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    for (int s = 1; s < NSIG; s++)
        signal(s, SIG_DFL);
    /* Its own session and process group: interrupts reach it and its children, not PID 1. */
    setsid();

    /* User namespace 2: the program holds no capability over the mounts or the network
     * namespace, which belong to user namespace 1. */
    step = "kernel user namespace";
    if (shim_kernel_userns(cfg, userns, &err) < 0)
        goto fail;
    step = "capabilities";
    if (shim_drop_bounding_caps(&err) < 0)
        goto fail;
    if (setresgid(IPB_SANDBOX_UID, IPB_SANDBOX_UID, IPB_SANDBOX_UID) < 0 ||
        setresuid(IPB_SANDBOX_UID, IPB_SANDBOX_UID, IPB_SANDBOX_UID) < 0) {
        ipb_error_set(&err, errno, "switching to the sandbox user");
        goto fail;
    }
    if (shim_clear_caps(&err) < 0)
        goto fail;
    /* Credential changes clear the parent-death signal; set it again. */
    step = "parent-death signal";
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != 1) {
        ipb_error_set(&err, errno, "PID 1 is gone");
        goto fail;
    }
    struct rlimit core = {0, 0};
    setrlimit(RLIMIT_CORE, &core);
    step = "no_new_privs";
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        ipb_error_set(&err, errno, "setting no_new_privs");
        goto fail;
    }
    step = "working directory";
    const char *cwd = cfg->cwd ? cfg->cwd : "/";
    if (chdir(cwd) < 0) {
        ipb_error_set(&err, errno, "entering %s", cwd);
        goto fail;
    }
    /* Only fds 0-2 (and the zygote's channel as 3) cross the exec; fd may still report an
     * exec failure until then. */
    step = "file descriptors";
    if (keep >= 0) {
        if ((keep != 3 && dup2(keep, 3) < 0) || fcntl(3, F_SETFD, 0) < 0) {
            ipb_error_set(&err, errno, "placing the zygote's channel on fd 3");
            goto fail;
        }
        ipb_cloexec_from(4);
    } else {
        ipb_cloexec_from(3);
    }
    environ = env ? env : cfg->env.v ? cfg->env.v : (char *[]){NULL};
    step = "seccomp";
    if (shim_apply_seccomp(cfg->bpf, cfg->bpf_len, &err) < 0)
        goto fail;
    execvp(cfg->argv.v[0], cfg->argv.v);
    step = "exec";
    ipb_error_set(&err, errno, "cannot run '%s' in the sandbox", cfg->argv.v[0]);
fail:
    if (fd >= 0)
        shim_send(fd, SHIM_EV_ERROR, 0, err ? err->errnum : 0, gen, step, ipb_error_msg(err));
    else
        dprintf(2, "ipybox-shim: the zygote: %s: %s\n", step, ipb_error_msg(err));
    _exit(127);
}

/* rescue: the kernel's interpreter gets -s after its name (argv is `python -c ...`), so that
 * nothing of the user site (.pth files, usercustomize) runs at its start. */
static pid_t start_program(int fd, shim_config *cfg, uint32_t gen, bool rescue) {
    pid_t pid = fork();
    if (pid == 0) {
        char *v[16]; /* the kernel's argv has 5 */
        if (rescue && cfg->argv.n > 0 && cfg->argv.n + 2 <= sizeof(v) / sizeof(v[0])) {
            v[0] = cfg->argv.v[0];
            v[1] = (char *)"-s";
            for (size_t i = 1; i <= cfg->argv.n; i++)
                v[i + 1] = cfg->argv.v[i];
            cfg->argv.v = v;
            cfg->argv.n++;
        }
        shim_exec_program(fd, cfg, gen, -1, NULL, -1);
    }
    return pid;
}

/* How long PID 1 reaps after SIGKILL to every other process before it goes on (reap.h): the
 * supervisor waits 10 s for KILLED. */
#define SHIM_KILL_ALL_MS 5000

/* SIGKILL every process of the sandbox but PID 1, and reap them within a bound: PID 1 never
 * waits without one for what sandbox code made. The standby goes too (kill(-1)). */
static void kill_all(shim_standby *sb) {
    shim_kill_all_bounded(SHIM_KILL_ALL_MS);
    shim_standby_forget(sb);
}

/* The supervisor's KILL_ALL: a live standby is spared (passes over P1's /proc, reap.h); without
 * one, or when that walk refuses, kill(-1) as everywhere else. A walk that reached its bound
 * with processes still found may have missed one forked during its last pass (unlike kill(-1),
 * a walk is not atomic against fork): then kill(-1) at once, which takes the standby too, and
 * no second wait (what is left goes to the SIGCHLD loop). */
static void kill_all_but_standby(shim_standby *sb) {
    pid_t spare = shim_standby_spared(sb);
    if (spare > 1) {
        bool gone = false;
        int r = shim_kill_all_sparing(spare, SHIM_KILL_ALL_MS, &gone);
        if (r == 1) {
            if (gone)
                shim_standby_forget(sb);
            return;
        }
        if (r == 0) {
            kill(-1, SIGKILL);
            shim_standby_forget(sb);
            return;
        }
    }
    kill_all(sb);
}

/* The sandbox's stdin, stdout and stderr are each one open file description that every process
 * of the sandbox shares (/dev/null, the supervisor's stderr pipe), and what a process sets on
 * one outlives it: status flags (O_NONBLOCK, O_APPEND, O_ASYNC) and the SIGIO owner and
 * signal. Kernel code could make the pipe signal the standby's pid (F_SETOWN, F_SETSIG, O_ASYNC)
 * at every read by the supervisor, and so the next kernel; or leave it non-blocking. KILL_ALL
 * puts them back as PID 1 got them, once no process that could set them again is left. */
static int stdio_flags[3] = {-1, -1, -1};

static void stdio_record(void) {
    for (int i = 0; i < 3; i++)
        stdio_flags[i] = fcntl(i, F_GETFL);
}

static void stdio_restore(void) {
    for (int i = 0; i < 3; i++) {
        if (stdio_flags[i] < 0)
            continue;
        fcntl(i, F_SETOWN, 0);
        fcntl(i, F_SETSIG, 0);
        fcntl(i, F_SETFL, stdio_flags[i]);
    }
}

/* /run/ipybox is the sandbox user's directory: kernel code cannot replace it (/run is read-only
 * and not the sandbox's) but can chmod it, and then neither could PID 1 empty it nor the next
 * kernel bind its sockets there, at every start after. KILL_ALL gives it back the mode it had
 * when PID 1 started (through an O_PATH fd of that very directory, checked by its identity)
 * before it empties it. */
static struct stat rundir_st;

static void rundir_record(void) {
    if (lstat(IPB_SANDBOX_RUNDIR, &rundir_st) < 0 || !S_ISDIR(rundir_st.st_mode))
        rundir_st.st_mode = 0;
}

static void rundir_mode_restore(void) {
    if (!rundir_st.st_mode)
        return;
    int pfd = open(IPB_SANDBOX_RUNDIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0)
        return;
    struct stat st;
    if (fstat(pfd, &st) == 0 && st.st_dev == rundir_st.st_dev && st.st_ino == rundir_st.st_ino &&
        (st.st_mode & 07777) != (rundir_st.st_mode & 07777)) {
        char at[32];
        snprintf(at, sizeof(at), "/proc/self/fd/%d", pfd);
        /* Not told on stderr: PID 1 must not wait on a pipe the sandbox can fill. A failure
         * shows as the next kernel's failed start. */
        (void)chmod(at, rundir_st.st_mode & 07777);
    }
    close(pfd);
}

static void clean_rundir(void) {
    rundir_mode_restore();
    int dfd = open(IPB_SANDBOX_RUNDIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd >= 0) {
        ipb_empty_dir_at(dfd);
        close(dfd);
    }
}

void shim_pid1(int fd, shim_config *cfg, ipb_egress_fds *efds, int ctl) {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    stdio_record();
    rundir_record();
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        shim_send(fd, SHIM_EV_ERROR, 0, errno, 0, "pid 1", "signalfd failed");
        _exit(1);
    }
    /* The supervisor's channel must not leak into the program past its exec. */
    fcntl(fd, F_SETFD, FD_CLOEXEC);

    pid_t prog = 0;
    uint32_t gen = 0;
    int fds[IPB_EGRESS_NFDS];
    size_t nfds = 0;
    int32_t mask = 0;
    for (int i = 0; i < IPB_EGRESS_NFDS; i++)
        if (efds->fd[i] >= 0) {
            fds[nfds++] = efds->fd[i];
            mask |= 1 << i;
        }
    int sent = shim_send_fds(fd, SHIM_EV_READY, mask, fds, nfds);
    /* The supervisor holds the listeners now; PID 1 and the program never need them. */
    ipb_egress_fds_close(efds);
    if (sent < 0)
        _exit(1);
    /* Kernel mode with a zygote: it is made after pivot_root (S0 forks it in the sandbox's
     * root) and boots at once; the first kernel is forked from it. A zygote made after a lost
     * one is held until the kernel started the slow way meanwhile answered (SHIM_CMD_ANSWERED). */
    shim_zygote z;
    shim_zygote_init(&z, cfg->mode == SHIM_MODE_KERNEL ? ctl : -1);
    /* --standby: a kernel prepared beside the running one, made once it answered. */
    shim_standby sb;
    shim_standby_init(&sb, cfg->mode == SHIM_MODE_KERNEL && cfg->standby && z.ctl >= 0);
    if (cfg->mode == SHIM_MODE_RUN) {
        prog = start_program(fd, cfg, gen, false);
        if (prog < 0) {
            shim_send(fd, SHIM_EV_ERROR, 0, errno, gen, "fork", "cannot start the program");
            _exit(1);
        }
        shim_send(fd, SHIM_EV_STARTED, prog, 0, gen, NULL, NULL);
    }
    for (;;) {
        /* A standby is due once the running kernel answered and the zygote is READY (either
         * may come last); at most one per kernel generation. */
        shim_standby_maybe_make(&sb, &z, prog > 0, gen);
        int zfds[2];
        shim_zygote_pollfds(&z, zfds);
        struct pollfd p[5] = {{fd, POLLIN, 0},
                              {sfd, POLLIN, 0},
                              {zfds[0], POLLIN, 0},
                              {zfds[1], POLLIN, 0},
                              {shim_standby_pollfd(&sb), POLLIN, 0}};
        /* A standby due later wakes the loop then (the zygote's READY wakes it through its fd). */
        if (poll(p, 5, shim_standby_wait_ms(&sb, prog > 0, gen)) < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        if (p[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) > 0)
                ;
            int status;
            pid_t w;
            while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
                shim_standby_reaped(&sb, w);
                if (w != prog)
                    continue;
                prog = 0;
                shim_send(fd, SHIM_EV_EXITED, status, 0, gen, NULL, NULL);
                if (cfg->mode == SHIM_MODE_RUN) {
                    kill_all(&sb);
                    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
                }
            }
        }
        if (p[2].revents || p[3].revents)
            shim_zygote_service(&z);
        if (p[4].revents)
            shim_standby_service(&sb);
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            struct shim_msg m;
            int r = shim_recv(fd, &m);
            if (r <= 0) {
                /* The supervisor is gone or spoke nonsense: end the sandbox. */
                kill_all(&sb);
                _exit(r == 0 ? 0 : 1);
            }
            switch (m.type) {
            case SHIM_CMD_START:
                if (prog > 0) {
                    shim_send(fd, SHIM_EV_ERROR, 0, EBUSY, m.gen, "start", "a program is already running");
                    break;
                }
                gen = m.gen;
                /* After a start that failed (a rescue): the slow way with -s, never a standby
                 * (one was prepared as the failed start was) nor the zygote. */
                bool rescue = m.arg == SHIM_START_RESCUE && cfg->mode == SHIM_MODE_KERNEL;
                /* A prepared standby becomes this kernel; any other is killed and reaped here,
                 * before the zygote's fork or the slow way. */
                bool had_standby = sb.pid > 1;
                prog = rescue ? 0 : shim_standby_activate(&sb, gen);
                if (prog > 1) {
                    shim_send(fd, SHIM_EV_STARTED, prog, SHIM_START_STANDBY, gen, NULL, NULL);
                    break;
                }
                /* One that was not taken (it declined, failed, was late or not prepared) may
                 * have left processes, if code ever ran in it: START follows KILL_ALL, which
                 * spared only it, so whatever is in the namespace now is its own. All of it
                 * goes, within the bound, before a kernel is made. */
                if (had_standby)
                    kill_all(&sb);
                prog = rescue ? 0 : shim_zygote_start(&z, fd, gen);
                if (prog > 1) {
                    shim_send(fd, SHIM_EV_STARTED, prog, SHIM_START_ZYGOTE, gen, NULL, NULL);
                    break;
                }
                prog = start_program(fd, cfg, gen, rescue);
                if (prog < 0) {
                    prog = 0;
                    shim_send(fd, SHIM_EV_ERROR, 0, errno, gen, "fork", "cannot start the kernel");
                } else {
                    shim_send(fd, SHIM_EV_STARTED, prog, rescue ? SHIM_START_RESCUE : SHIM_START_EXEC, gen, NULL, NULL);
                }
                if (!rescue)
                    shim_zygote_after_slow(&z);
                break;
            case SHIM_CMD_SIGNAL:
                if (prog > 0 && m.arg > 0 && m.arg < NSIG)
                    kill(-prog, m.arg);
                break;
            case SHIM_CMD_ANSWERED:
                /* The kernel runs and answered: a zygote deferred until now boots beside it
                 * instead of competing with its start. */
                if (prog > 0 && m.gen == gen) {
                    shim_zygote_answered(&z);
                    shim_standby_answered(&sb, gen);
                }
                break;
            case SHIM_CMD_KILL_ALL:
                kill_all_but_standby(&sb);
                stdio_restore();
                if (prog > 0)
                    shim_send(fd, SHIM_EV_EXITED, SIGKILL, 0, gen, NULL, NULL);
                prog = 0;
                if (cfg->mode == SHIM_MODE_KERNEL)
                    clean_rundir();
                shim_send(fd, SHIM_EV_KILLED, 0, 0, gen, NULL, NULL);
                break;
            default:
                kill_all(&sb);
                _exit(1);
            }
        }
    }
}
