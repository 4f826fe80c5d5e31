/* SPAWN: a sandbox's shim started by the monitor in a uid range of the pool, in a cgroup of
 * its own, as uid 0 of a new user namespace (owned by root) that maps only that range; the
 * user's trees handed to it as idmapped mounts. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/mount.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdio.h"
#include "fds.h"
#include "log.h"
#include "mountplan.h"
#include "monitor_int.h"
#include "procs.h"
#include "shim_proto.h"

static void fail(struct ipbm_msg *rep, int e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(struct ipbm_msg *rep, int e, const char *fmt, ...) {
    rep->type = IPBM_ERROR;
    rep->err = e;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep->text, sizeof(rep->text), fmt, ap);
    va_end(ap);
}

static int write_map(pid_t pid, const char *file, const char *map) {
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = ipb_write_all(fd, map, strlen(map));
    close(fd);
    return r;
}

/* A child that sits in a new user namespace until told, so that its maps can be written. */
static pid_t userns_child(int *go_w, int *ready_r);

/* A user namespace to idmap the user's trees: their uid and gid seen as the sandbox's user.
 * Returns its fd or -errno. */
static int idmap_userns(uid_t uid, gid_t gid, uint32_t sandbox_uid) {
    int go_w = -1, ready_r = -1;
    pid_t pid = userns_child(&go_w, &ready_r);
    if (pid < 0)
        return pid;
    unsigned char b;
    int fd = -EIO;
    ssize_t got = read(ready_r, &b, 1);
    if (got == 1 && b != 'u')
        fd = -(int)b; /* the child's unshare failed with that errno */
    else if (got == 1) {
        char um[64], gm[64], p[64];
        snprintf(um, sizeof(um), "%u %u 1\n", (unsigned)uid, sandbox_uid);
        snprintf(gm, sizeof(gm), "%u %u 1\n", (unsigned)gid, sandbox_uid);
        snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)pid);
        int r;
        if ((r = write_map(pid, "uid_map", um)) < 0 || (r = write_map(pid, "gid_map", gm)) < 0)
            fd = r;
        else if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
            fd = -errno;
    }
    close(go_w); /* the child exits on EOF */
    close(ready_r);
    while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
        ;
    return fd;
}

static pid_t userns_child(int *go_w, int *ready_r) {
    int go[2], ready[2];
    if (pipe2(go, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(ready, O_CLOEXEC) < 0) {
        int e = errno;
        close(go[0]);
        close(go[1]);
        return -e;
    }
    int keep[2] = {go[0], ready[1]};
    pid_t pid = ipbm_fork_clean(-1, keep, 2);
    if (pid == 0) {
        if (unshare(CLONE_NEWUSER) < 0) {
            /* tell why (an errno fits a byte; 'u' is none of the ones unshare gives) */
            unsigned char e = (unsigned char)(errno > 0 && errno < 256 && errno != 'u' ? errno : EIO);
            (void)!write(IPBM_LOW_FD + 1, &e, 1);
            _exit(1);
        }
        if (write(IPBM_LOW_FD + 1, "u", 1) != 1)
            _exit(1);
        char b;
        _exit(read(IPBM_LOW_FD, &b, 1) == 1 ? 0 : 1);
    }
    int e = -pid;
    close(go[0]);
    close(ready[1]);
    if (pid < 0) {
        close(go[1]);
        close(ready[0]);
        return -e;
    }
    *go_w = go[1];
    *ready_r = ready[0];
    return pid;
}

/* The user's tree behind fd as a detached idmapped mount. Returns the mount fd or -errno. */
static int idmapped(int fd, int userns, bool ro) {
    /* With whatever is mounted below it, as the user sees the tree: a copy without them would
     * show what those mounts cover. */
    int m = (int)syscall(SYS_open_tree, fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (m < 0)
        return -errno;
    struct mount_attr a = {.attr_set =
                               MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (ro ? MOUNT_ATTR_RDONLY : 0),
                           .userns_fd = (uint64_t)userns};
    if (syscall(SYS_mount_setattr, m, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0) {
        int e = errno;
        close(m);
        return -e;
    }
    return m;
}

struct child_plan {
    const struct ipbm *M;
    int slot;
    const ipbm_limits_req *lim;
    int go_r, ready_w;
    int fds[4 + IPBM_MAX_BINDS]; /* stdin, stdout, stderr, sync, mounts */
    unsigned nfds;
    pid_t monitor;
};

/* What the child tells the monitor on its pipe: stage 0 once its user namespace exists; a
 * failure (stage, errno) at any point; nothing more once ipybox-shim runs (the pipe closes on
 * exec). The child never writes to the user's descriptors: a full pipe there would stall it,
 * and the monitor with it. */
struct child_report {
    int32_t stage;
    int32_t err;
};
enum { ST_READY, ST_CGROUP, ST_GROUPS, ST_USERNS, ST_IDS, ST_PDEATH, ST_FDS, ST_EXEC, ST_N };
static const char *const stage_text[ST_N] = {
    [ST_READY] = "",
    [ST_CGROUP] = "joining its cgroup",
    [ST_GROUPS] = "dropping supplementary groups",
    [ST_USERNS] = "creating its user namespace",
    [ST_IDS] = "switching to the sandbox's uid range",
    [ST_PDEATH] = "setting its parent-death signal",
    [ST_FDS] = "placing its descriptors",
    [ST_EXEC] = "executing ipybox-shim",
};

__attribute__((noreturn)) static void child_fail(const struct child_plan *p, int stage, int e) {
    struct child_report r = {stage, e};
    ssize_t n = write(p->ready_w, &r, sizeof(r));
    (void)n;
    _exit(126);
}

/* The child, between fork and the shim's exec. It makes the sandbox's user namespace while
 * still root, so that root owns it: no host process with a pool uid ever has rights over a
 * sandbox. Only then, inside, it becomes uid 0 there (the pool base on the host). */
__attribute__((noreturn)) static void child(struct child_plan *p) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int s = 1; s < NSIG; s++)
        signal(s, SIG_DFL);
    setsid();
    /* Out of the way of the descriptors' targets (0 to 3 + IPBM_MAX_BINDS). */
    if ((p->ready_w = fcntl(p->ready_w, F_DUPFD_CLOEXEC, 64 + IPBM_MAX_BINDS)) < 0 ||
        (p->go_r = fcntl(p->go_r, F_DUPFD_CLOEXEC, 64 + IPBM_MAX_BINDS)) < 0)
        _exit(126);
    int r = ipbm_cgroup_enter_v1(&p->M->cg, p->slot);
    if (r < 0)
        child_fail(p, ST_CGROUP, -r);
    /* Processes per uid: a backstop with cgroups, the limit without them (each sandbox has
     * uids of its own, so the count is the sandbox's). */
    rlim_t np =
        p->lim->pids_max + p->lim->pids_extra + (p->M->cg.kind == IPBM_LIMITS_RLIMIT ? 0 : 16); /* the cgroup first */
    struct rlimit nproc = {np, np};
    setrlimit(RLIMIT_NPROC, &nproc);
    if (p->M->cg.kind == IPBM_LIMITS_RLIMIT) {
        struct rlimit as = {p->lim->memory_max, p->lim->memory_max};
        setrlimit(RLIMIT_AS, &as);
    }
    if (setgroups(0, NULL) < 0)
        child_fail(p, ST_GROUPS, errno);
    if (unshare(CLONE_NEWUSER) < 0)
        child_fail(p, ST_USERNS, errno);
    struct child_report ready = {ST_READY, 0};
    char b;
    if (write(p->ready_w, &ready, sizeof(ready)) != (ssize_t)sizeof(ready) || read(p->go_r, &b, 1) != 1)
        _exit(126);
    /* The maps exist now: 0 here is the pool base on the host. */
    if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
        child_fail(p, ST_IDS, errno);
    /* After the last change of credentials (which clears it). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        child_fail(p, ST_PDEATH, errno);
    if (getppid() != p->monitor)
        _exit(126);
    /* Lift every fd above its target, then put each in place (dup2 clears close-on-exec). */
    for (unsigned i = 0; i < p->nfds; i++)
        if ((p->fds[i] = fcntl(p->fds[i], F_DUPFD_CLOEXEC, 64 + IPBM_MAX_BINDS)) < 0)
            child_fail(p, ST_FDS, errno);
    for (unsigned i = 0; i < p->nfds; i++) {
        int target = i < IPBM_FD_BINDS ? (int)i : SHIM_MOUNT_FD0 + (int)(i - IPBM_FD_BINDS);
        if (dup2(p->fds[i], target) < 0)
            child_fail(p, ST_FDS, errno);
    }
    ipb_cloexec_from(SHIM_MOUNT_FD0 + (int)(p->nfds - IPBM_FD_BINDS));
    char nmounts[16];
    snprintf(nmounts, sizeof(nmounts), "%u", p->nfds - IPBM_FD_BINDS);
    char *argv[] = {(char *)"ipybox-shim", (char *)"--system", nmounts, NULL};
    char *envp[] = {NULL};
    execve(p->M->shim, argv, envp);
    child_fail(p, ST_EXEC, errno);
}

/* The child's next report: 1 with *rep, 0 when its pipe closed (it exec'd or died), -1 when it
 * said nothing for 10 s. */
static int child_report(int fd, struct child_report *rep) {
    struct pollfd pf = {fd, POLLIN, 0};
    int r;
    while ((r = poll(&pf, 1, 10000)) < 0 && errno == EINTR)
        ;
    if (r <= 0)
        return -1;
    ssize_t n;
    while ((n = read(fd, rep, sizeof(*rep))) < 0 && errno == EINTR)
        ;
    if (n == (ssize_t)sizeof(*rep) && rep->stage >= 0 && rep->stage < ST_N)
        return 1;
    return 0;
}

static int limits(const ipbm_sysconf *c, const struct ipbm_msg *req, ipbm_limits_req *l, struct ipbm_msg *rep) {
    l->memory_max = req->memory_max ? req->memory_max : c->memory_max;
    l->pids_max = req->pids_max ? req->pids_max : c->pids_max;
    l->pids_extra = (req->limits & IPBM_SPAWN_ZYGOTE) ? IPBM_ZYGOTE_PIDS : 0;
    l->cpu_weight = req->cpu_weight ? req->cpu_weight : c->cpu_weight;
    if (l->memory_max > c->memory_max_bound || l->memory_max < (16ull << 20)) {
        fail(rep, EPERM, "--memory %llu MiB is outside what the administrator allows (16 to %llu MiB)",
             (unsigned long long)(l->memory_max >> 20), (unsigned long long)(c->memory_max_bound >> 20));
        return -1;
    }
    if (l->pids_max > c->pids_max_bound || l->pids_max < 16) {
        fail(rep, EPERM, "--max-processes %u is outside what the administrator allows (16 to %u)", l->pids_max,
             c->pids_max_bound);
        return -1;
    }
    if (l->cpu_weight > c->cpu_weight_bound || l->cpu_weight < 1) {
        fail(rep, EPERM, "--cpu-weight %u is outside what the administrator allows (1 to %u)", l->cpu_weight,
             c->cpu_weight_bound);
        return -1;
    }
    return 0;
}

/* A free slot whose lock we hold and in which nothing runs, or -1. A locked slot where
 * something still runs (left by a monitor that died, or run by one that takes no locks) is
 * not ours to kill or to share: it is skipped (the service cleans it at its next start). */
static int take_slot(struct ipbm *M) {
    for (uint32_t k = 0; k < M->pool.size; k++) {
        int lock = -1;
        int slot = ipbm_slot_take(&M->pool, &lock);
        if (slot < 0)
            return -1;
        if (!ipbm_range_procs(ipbm_pool_uid(&M->pool, slot), IPBM_RANGE, false) && !ipbm_cgroup_busy(&M->cg, slot)) {
            M->slot_lock[slot] = lock;
            return slot;
        }
        close(lock);
        ipbm_pool_put(&M->pool, slot);
    }
    return -1;
}

void ipbm_spawn(struct ipbm *M, struct ipbm_chan *chan, const struct ipbm_msg *req, int *fds, unsigned nfds,
                struct ipbm_msg *rep, int *rfds, unsigned *nrfds) {
    *nrfds = 0;
    memset(rep, 0, sizeof(*rep));
    rep->magic = IPBM_MAGIC;
    ipbm_limits_req lim;
    if (req->nbinds > IPBM_MAX_BINDS || nfds != IPBM_FD_BINDS + req->nbinds ||
        (req->nbinds < 32 && (req->ro_binds >> req->nbinds))) {
        fail(rep, EINVAL, "a malformed spawn request");
        return;
    }
    /* stdin, stdout and stderr are pipes, sockets or /dev/null; the sync channel is what the
     * shim expects; the binds are O_PATH. Nothing else reaches a sandbox, and none of these
     * runs the sender's code when the monitor closes a copy (fds.h). */
    for (unsigned i = IPBM_FD_STDIN; i <= IPBM_FD_STDERR; i++) {
        /* The type from the inode as cached: no request to a filesystem the user serves. */
        struct statx st;
        if (statx(fds[i], "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &st) < 0 ||
            !(S_ISFIFO(st.stx_mode) || S_ISSOCK(st.stx_mode) ||
              (S_ISCHR(st.stx_mode) && st.stx_rdev_major == 1 && st.stx_rdev_minor == 3))) {
            fail(rep, EINVAL, "a spawn request whose descriptor %u is not a pipe, socket or /dev/null", i);
            return;
        }
    }
    for (unsigned i = 0; i < req->nbinds; i++) {
        int fl = fcntl(fds[IPBM_FD_BINDS + i], F_GETFL);
        if (fl < 0 || !(fl & O_PATH)) {
            fail(rep, EINVAL, "a spawn request whose bind %u is not an O_PATH descriptor", i);
            return;
        }
    }
    if (!ipbm_is_seqpacket(fds[IPBM_FD_SYNC])) {
        fail(rep, EINVAL, "a spawn request whose sync descriptor is not a seqpacket socket");
        return;
    }
    if (limits(&M->conf, req, &lim, rep) < 0)
        return;
    if (chan->user->nsandboxes >= IPBM_USER_SANDBOXES(&M->conf)) {
        fail(rep, EUSERS,
             "user %s has %u sandboxes running, the most the service allows (twice "
             "max_sessions_per_user)",
             chan->user->name, chan->user->nsandboxes);
        return;
    }
    int slot = take_slot(M);
    if (slot < 0) {
        fail(rep, EAGAIN,
             "all %u sandbox uid ranges are in use (uid_pool_size in the configuration; the system "
             "service and root's own ipybox share them)",
             M->pool.size);
        return;
    }
    uint32_t base = ipbm_pool_uid(&M->pool, slot);
    int cgfd = -1, mem_ev = -1, pids_ev = -1, userns = -1, go_w = -1, ready_r = -1;
    int mounts[IPBM_MAX_BINDS];
    unsigned nm = 0;
    pid_t pid = -1, undo_pid = 0;
    char why[300];
    if (ipbm_cgroup_create(&M->cg, slot, &lim, &cgfd, &mem_ev, &pids_ev, why, sizeof(why)) < 0) {
        fail(rep, EIO, "%s", why);
        goto undo;
    }
    if (req->nbinds) {
        userns = idmap_userns(chan->user->uid, chan->user->gid, base + IPB_SANDBOX_UID);
        if (userns < 0) {
            fail(rep, -userns, "cannot make the user namespace for idmapped mounts: %s%s", strerror(-userns),
                 -userns == ENOSPC ? " (the user namespace limit is reached: raise user.max_user_namespaces)" : "");
            goto undo;
        }
    }
    for (; nm < req->nbinds; nm++) {
        int m = idmapped(fds[IPBM_FD_BINDS + nm], userns, (req->ro_binds >> nm) & 1);
        if (m < 0) {
            fail(rep, -m, "cannot make an idmapped mount of bind %u: %s%s", nm, strerror(-m),
                 -m == EINVAL ? " (its filesystem may not support idmapped mounts)" : "");
            goto undo;
        }
        mounts[nm] = m;
    }
    struct child_plan p = {.M = M, .slot = slot, .lim = &lim, .monitor = getpid()};
    for (unsigned i = 0; i < IPBM_FD_BINDS; i++)
        p.fds[i] = fds[i];
    for (unsigned i = 0; i < nm; i++)
        p.fds[IPBM_FD_BINDS + i] = mounts[i];
    p.nfds = IPBM_FD_BINDS + nm;
    int go[2], ready[2];
    if (pipe2(go, O_CLOEXEC) < 0) {
        fail(rep, errno, "pipe: %s", strerror(errno));
        goto undo;
    }
    if (pipe2(ready, O_CLOEXEC) < 0) {
        fail(rep, errno, "pipe: %s", strerror(errno));
        close(go[0]);
        close(go[1]);
        goto undo;
    }
    int keep[2 + 4 + IPBM_MAX_BINDS] = {ready[1], go[0]};
    for (unsigned i = 0; i < p.nfds; i++)
        keep[2 + i] = p.fds[i];
    pid = ipbm_fork_clean(cgfd, keep, 2 + p.nfds);
    if (pid == 0) {
        /* Its table holds only these, in this order. */
        p.ready_w = IPBM_LOW_FD;
        p.go_r = IPBM_LOW_FD + 1;
        for (unsigned i = 0; i < p.nfds; i++)
            p.fds[i] = IPBM_LOW_FD + 2 + (int)i;
        child(&p);
    }
    int fe = -pid;
    close(go[0]);
    close(ready[1]);
    go_w = go[1];
    ready_r = ready[0];
    if (pid < 0) {
        fail(rep, fe, "cannot fork the sandbox: %s", strerror(fe));
        goto undo;
    }
    struct child_report cr;
    int r = child_report(ready_r, &cr);
    if (r <= 0 || cr.stage != ST_READY) {
        if (r > 0)
            fail(rep, cr.err, "cannot start the sandbox: %s: %s", stage_text[cr.stage], strerror(cr.err));
        else
            fail(rep, EIO, "the sandbox's first process %s before its user namespace was made",
                 r < 0 ? "stalled" : "ended");
        goto undo;
    }
    char map[64];
    snprintf(map, sizeof(map), "0 %u %u\n", base, IPBM_RANGE);
    if ((r = write_map(pid, "uid_map", map)) < 0 || (r = write_map(pid, "gid_map", map)) < 0) {
        fail(rep, -r, "cannot write the sandbox's id maps: %s", strerror(-r));
        goto undo;
    }
    if (write(go_w, "g", 1) != 1) {
        fail(rep, EIO, "the sandbox's first process ended early");
        goto undo;
    }
    /* Its pipe closes when ipybox-shim runs; a report says why it could not. */
    if ((r = child_report(ready_r, &cr)) != 0) {
        if (r > 0)
            fail(rep, cr.err, "cannot start the sandbox: %s: %s", stage_text[cr.stage], strerror(cr.err));
        else
            fail(rep, ETIMEDOUT, "the sandbox's first process stalled before running ipybox-shim");
        goto undo;
    }
    ipbm_cgroup_set_cpu(&M->cg, slot, lim.cpu_weight);
    struct ipbm_sandbox *s = calloc(1, sizeof(*s));
    if (!s) {
        fail(rep, ENOMEM, "out of memory");
        goto undo;
    }
    s->id = ++chan->next_id;
    s->slot = slot;
    s->pid = pid;
    s->chan = chan;
    s->user = chan->user;
    s->user->nsandboxes++;
    s->next = M->sandboxes;
    M->sandboxes = s;
    M->nsandboxes++;
    rep->type = IPBM_SPAWNED;
    rep->id = s->id;
    rep->status = pid;
    rep->memory_max = lim.memory_max;
    rep->pids_max = lim.pids_max;
    rep->cpu_weight = lim.cpu_weight;
    rep->limits = M->cg.kind;
    rep->uid_base = base;
    if (mem_ev >= 0) {
        rep->limits |= IPBM_HAS_MEM_EVENTS;
        rfds[(*nrfds)++] = mem_ev;
        mem_ev = -1;
    }
    if (pids_ev >= 0) {
        rep->limits |= IPBM_HAS_PIDS_EVENTS;
        rfds[(*nrfds)++] = pids_ev;
        pids_ev = -1;
    }
    log_info("user %s: sandbox %u started (pid %d, uids %u-%u, %llu MiB, %u processes, cpu weight %u)",
             chan->user->name, s->id, (int)pid, base, base + IPBM_RANGE - 1, (unsigned long long)(lim.memory_max >> 20),
             lim.pids_max, lim.cpu_weight);
    pid = -1;
    slot = -1;
undo:
    if (pid > 0) {
        /* Reaped now if it is gone already, else by the loop's reap (a child that cannot die
         * yet must not stop the monitor); its slot waits for the sweep either way. */
        kill(pid, SIGKILL);
        if (waitpid(pid, NULL, WNOHANG) != pid)
            undo_pid = pid;
    }
    if (slot >= 0) {
        /* The slot is free only once nothing of it is left; else the sweep sees to it. Only
         * a child that ran can have left anything with a uid of the range. */
        bool ran = pid > 0;
        struct ipbm_sandbox *z;
        ipbm_cgroup_kill(&M->cg, slot);
        if (ran && !undo_pid)
            ipbm_range_procs(base, IPBM_RANGE, true);
        if (!undo_pid && !(ran && ipbm_range_procs(base, IPBM_RANGE, false)) && ipbm_cgroup_remove(&M->cg, slot))
            ipbm_slot_free(M, slot);
        else if ((z = calloc(1, sizeof(*z)))) {
            z->slot = slot;
            z->pid = undo_pid; /* 0, or reaped (and then swept) by the loop */
            z->user = chan->user;
            z->user->nsandboxes++;
            z->gone_ms = ipbm_now_ms();
            z->next = M->sandboxes;
            M->sandboxes = z;
            M->nsandboxes++;
        } else
            log_error("sandbox uids %u-%u stay in use until the service restarts", base, base + IPBM_RANGE - 1);
    }
    for (unsigned i = 0; i < nm; i++)
        close(mounts[i]);
    int *c[] = {&cgfd, &mem_ev, &pids_ev, &userns, &go_w, &ready_r};
    for (size_t i = 0; i < sizeof(c) / sizeof(*c); i++)
        if (*c[i] >= 0)
            close(*c[i]);
}

void ipbm_sandbox_kill(struct ipbm *M, struct ipbm_sandbox *s) {
    if (s->pid > 0)
        kill(s->pid, SIGKILL); /* our child, not reaped yet: the pid is still its own */
    ipbm_cgroup_kill(&M->cg, s->slot);
    /* Anything else with a uid of its range goes in the next sweep, once the shim is reaped. */
}

void ipbm_sandbox_gone(struct ipbm *M, struct ipbm_sandbox *s, int status) {
    s->pid = 0;
    s->gone_ms = ipbm_now_ms();
    /* PID 1 dies with the shim and takes its pid namespace along; anything else left (none
     * should be) is killed before the range is handed out again. */
    ipbm_sandbox_kill(M, s);
    if (s->chan) {
        struct ipbm_msg m = {.magic = IPBM_MAGIC, .type = IPBM_EXITED, .id = s->id, .status = status};
        ipbm_chan_send(s->chan, &m, NULL, 0);
    }
    M->sweep_due = true; /* once for all that ended together */
}

void ipbm_sandboxes_sweep(struct ipbm *M) {
    bool any = false;
    for (struct ipbm_sandbox *s = M->sandboxes; s && !any; s = s->next)
        any = s->pid == 0;
    if (!any)
        return;
    /* One pass over /proc for every slot: the gone sandboxes' processes are killed, and a
     * slot any process still has a uid of stays taken. */
    uint8_t *dying = calloc(M->pool.size, 1), *busy = calloc(M->pool.size, 1);
    if (!dying || !busy) {
        free(dying);
        free(busy);
        return;
    }
    for (struct ipbm_sandbox *s = M->sandboxes; s; s = s->next)
        if (s->pid == 0)
            dying[s->slot] = 1;
    ipbm_pool_scan(M->pool.start, M->pool.size, IPBM_RANGE, dying, busy);
    for (struct ipbm_sandbox **pp = &M->sandboxes; *pp;) {
        struct ipbm_sandbox *s = *pp;
        /* Free once its cgroup is empty and removed and no process has a uid of its range
         * (the only sign there is with rlimits alone); until then killed again each time. */
        bool left = s->pid == 0 && (busy[s->slot] || ipbm_cgroup_busy(&M->cg, s->slot));
        if (left)
            ipbm_cgroup_kill(&M->cg, s->slot);
        if (s->pid == 0 && !left && ipbm_cgroup_remove(&M->cg, s->slot)) {
            ipbm_slot_free(M, s->slot);
            *pp = s->next;
            M->nsandboxes--;
            s->user->nsandboxes--;
            free(s);
            continue;
        }
        pp = &s->next;
    }
    free(dying);
    free(busy);
}
