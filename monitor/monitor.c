/* The monitor: root's only process in the service. It reads its configuration, makes each
 * user's socket, starts each user's frontend, and then only answers the fixed-layout
 * requests of mon_proto.h on its channels; it never reads text from anyone but the
 * administrator (the configuration file, the user database). */
#include "monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fdio.h"
#include "log.h"
#include "nofile.h"
#include "monitor_int.h"
#include "selfcheck.h"
#include "options.h"
#include "procs.h"
#include "record.h"
#include "shim_proto.h"

long ipbm_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

struct ipbm_chan *ipbm_chan_add(struct ipbm *M, int fd, bool frontend, struct ipbm_user *u, struct ipbm_chan *parent) {
    struct ipbm_chan *c = calloc(1, sizeof(*c));
    if (!c) {
        ipbm_release_user_fd(u, fd);
        return NULL;
    }
    c->fd = fd;
    c->frontend = frontend;
    c->user = u;
    c->parent = parent;
    struct epoll_event ev = {.events = u->paused ? 0 : EPOLLIN, .data.ptr = c};
    if (epoll_ctl(M->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        ipbm_release_user_fd(u, fd);
        free(c);
        return NULL;
    }
    c->next = M->chans;
    M->chans = c;
    if (parent)
        u->nsubs++;
    else if (!frontend)
        u->nchans++;
    return c;
}

void ipbm_chan_send(struct ipbm_chan *c, const struct ipbm_msg *m, const int *fds, unsigned nfds) {
    /* A worker that does not read its channel loses it (and its sandboxes) rather than
     * stopping the monitor. */
    if (!c->broken && ipbm_send(c->fd, m, fds, nfds, MSG_DONTWAIT) < 0)
        c->broken = true;
}

/* A channel closed or misbehaved: its sandboxes are killed (reaped later), and so are its
 * sub-channels with theirs (whoever holds their other ends: a worker that is gone leaves
 * nothing behind). */
static void chan_close(struct ipbm *M, struct ipbm_chan *c) {
    for (struct ipbm_chan *k = M->chans; k;) {
        if (k->parent == c) {
            chan_close(M, k); /* a sub-channel has none of its own */
            k = M->chans;
        } else {
            k = k->next;
        }
    }
    for (struct ipbm_sandbox *s = M->sandboxes; s; s = s->next)
        if (s->chan == c) {
            s->chan = NULL;
            ipbm_sandbox_kill(M, s);
        }
    epoll_ctl(M->ep, EPOLL_CTL_DEL, c->fd, NULL);
    /* Its queue may hold descriptors a user sent: released by a closer, not here. */
    ipbm_release_user_fd(c->user, c->fd);
    if (c->parent)
        c->user->nsubs--;
    else if (!c->frontend)
        c->user->nchans--;
    else if (c->user->fchan == c) {
        /* A frontend without its channel can start nothing: it is restarted (it is still our
         * child, not yet reaped, so the pid is its own). */
        c->user->fchan = NULL;
        if (c->user->frontend > 0)
            kill(c->user->frontend, SIGTERM);
    }
    for (struct ipbm_chan **pp = &M->chans; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    free(c);
}

/* A channel's requests are the user's to make: at most ten warnings a minute for each user,
 * so that none can flood the log. */
static bool chan_may_log(struct ipbm_chan *c) {
    struct ipbm_user *u = c->user;
    long now = ipbm_now_ms();
    if (now - u->warn_since > 60000) {
        u->warn_since = now;
        u->warnings = 0;
    }
    if (u->warnings == 10)
        log_warn("user %s: further failures are not logged for a minute", u->name);
    return ++u->warnings <= 10;
}

/* A user with too many descriptors waiting for their closer (a stalled one) is not read
 * until it is done: their channels wait for nothing but a hang-up (always reported), and one
 * that hangs up is closed unread (what it queued goes to the closer with it). */
static void user_pause(struct ipbm *M, struct ipbm_user *u, bool paused) {
    if (paused == u->paused)
        return;
    u->paused = paused;
    if (paused)
        log_warn("user %s: %u descriptors the user sent wait to be closed (a closer is stalled, on the user's own "
                 "filesystem, say); the user's requests wait until they are closed", u->name, u->held.n);
    else
        log_info("user %s: the descriptors are closed; serving the user again", u->name);
    for (struct ipbm_chan *c = M->chans; c; c = c->next)
        if (c->user == u) {
            struct epoll_event ev = {.events = paused ? 0 : EPOLLIN, .data.ptr = c};
            epoll_ctl(M->ep, EPOLL_CTL_MOD, c->fd, &ev);
        }
}

/* One request (fds: as many as came; a descriptor taken over is set to -1). Returns -1 when
 * the channel must be closed. */
static int chan_dispatch(struct ipbm *M, struct ipbm_chan *c, const struct ipbm_msg *m, int *fds, unsigned nfds) {
    int ret = 0;
    switch (m->type) {
    case IPBM_ADOPT: {
        /* A frontend adopts a worker channel; a worker channel a sub-channel (for a process
         * of the worker's, whose sandbox then belongs to the worker's channel too); a
         * sub-channel adopts nothing. Each is the same user's. */
        if (c->parent || nfds) {
            ret = -1;
            break;
        }
        struct ipbm_chan *parent = c->frontend ? NULL : c;
        struct ipbm_msg rep = {.magic = IPBM_MAGIC, .type = IPBM_ERROR, .id = m->id, .err = EUSERS};
        int sv[2] = {-1, -1};
        errno = 0;
        if (!parent && c->user->nchans >= IPBM_USER_CHANS(&M->conf)) {
            snprintf(rep.text, sizeof(rep.text), "user %s has %u sessions open, the most the service allows "
                     "(max_sessions_per_user)", c->user->name, M->conf.max_sessions_per_user);
            if (chan_may_log(c))
                log_warn("user %s: a session refused: %u sessions open", c->user->name, c->user->nchans);
        } else if (parent && c->user->nsubs >= IPBM_USER_SUBS(&M->conf)) {
            snprintf(rep.text, sizeof(rep.text), "user %s has %u sandboxed MCP servers' channels open, the most "
                     "the service allows (twice max_sessions_per_user)", c->user->name, c->user->nsubs);
            if (chan_may_log(c))
                log_warn("user %s: a sub-channel refused: %u open", c->user->name, c->user->nsubs);
        } else if (parent && M->stopping) {
            rep.err = ESHUTDOWN;
            snprintf(rep.text, sizeof(rep.text), "the service is stopping");
        } else if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
                   !ipbm_chan_add(M, sv[0], false, c->user, parent)) {
            rep.err = errno ? errno : ENOMEM;
            snprintf(rep.text, sizeof(rep.text), "the service cannot make a channel: %s", strerror(rep.err));
            if (sv[0] >= 0)
                close(sv[1]); /* sv[0] went with the failed ipbm_chan_add */
            sv[1] = -1;
        } else {
            rep.type = IPBM_ADOPTED;
            rep.err = 0;
        }
        ipbm_chan_send(c, &rep, &sv[1], sv[1] >= 0);
        if (sv[1] >= 0)
            close(sv[1]); /* made here: nothing of the user's is queued in it */
        break;
    }
    case IPBM_SPAWN: {
        if (c->frontend || M->stopping) {
            ret = c->frontend ? -1 : 0;
            if (!c->frontend) {
                struct ipbm_msg e = {.magic = IPBM_MAGIC, .type = IPBM_ERROR, .err = ESHUTDOWN};
                snprintf(e.text, sizeof(e.text), "the service is stopping");
                ipbm_chan_send(c, &e, NULL, 0);
            }
            break;
        }
        struct ipbm_msg rep;
        int rfds[2];
        unsigned nr = 0;
        ipbm_spawn(M, c, m, fds, nfds, &rep, rfds, &nr);
        /* A private monitor's only requester prints the error itself, on the same terminal. */
        if (rep.type == IPBM_ERROR && !M->private_mon && chan_may_log(c))
            log_warn("user %s: a sandbox could not start: %s", c->user->name, rep.text);
        ipbm_chan_send(c, &rep, rfds, nr);
        for (unsigned i = 0; i < nr; i++)
            close(rfds[i]);
        break;
    }
    case IPBM_KILL:
        if (c->frontend || nfds) {
            ret = -1;
            break;
        }
        for (struct ipbm_sandbox *s = M->sandboxes; s; s = s->next)
            if (s->chan == c && s->id == m->id && s->pid > 0)
                ipbm_sandbox_kill(M, s);
        break;
    default:
        ret = -1;
    }
    return ret;
}

/* The next request on a channel. Returns -1 when the channel must be closed. */
static int chan_request(struct ipbm *M, struct ipbm_chan *c) {
    if (c->user->paused)
        return 0; /* an event of this batch from before the pause */
    struct ipbm_msg m;
    /* Room for all a record can carry: the kernel drops none here (fds.h). */
    int fds[IPB_RECORD_MAX_FDS];
    unsigned nfds = 0;
    /* Never waits: a channel whose other end is also ours (adopted twice, say) or that sent
     * nothing yet must not stop the monitor. */
    int r = ipbm_recv(c->fd, &m, fds, IPB_RECORD_MAX_FDS, &nfds, MSG_DONTWAIT);
    int ret = r == 1 ? chan_dispatch(M, c, &m, fds, nfds) : r == -EAGAIN ? 0 : -1;
    /* Whatever came is the user's: closed where closing cannot stop the monitor. */
    for (unsigned i = 0; i < nfds; i++)
        ipbm_release_user_fd(c->user, fds[i]);
    if (ipbm_held_paused(&c->user->held))
        user_pause(M, c->user, true);
    if (ret < 0 && r == 1 && chan_may_log(c))
        log_warn("user %s: a malformed request on a %s channel; closing it", c->user->name,
                 c->frontend ? "frontend" : "worker");
    return ret;
}

static void reap(struct ipbm *M) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        bool found = false;
        for (struct ipbm_sandbox *s = M->sandboxes; s && !found; s = s->next)
            if (s->pid == pid) {
                found = true;
                ipbm_sandbox_gone(M, s, status); /* may free s */
                break;
            }
        for (struct ipbm_user *u = M->users; u && !found; u = u->next)
            found = ipbm_held_reaped(&u->held, pid);
        for (struct ipbm_user *u = M->users; u && !found; u = u->next)
            if (u->frontend == pid) {
                found = true;
                u->frontend = 0;
                /* Its channel goes with it, even if another of the user's processes holds
                 * the other end: one channel per frontend. */
                if (u->fchan)
                    u->fchan->broken = true;
                u->fchan = NULL;
                if (!M->stopping) {
                    /* Restarted, after a pause that grows if it keeps failing. */
                    u->restarts++;
                    long wait = u->restarts > 5 ? 30000 : 1000;
                    u->restart_ms = ipbm_now_ms() + wait;
                    log_error("user %s: the frontend ended (status 0x%x); starting it again in %ld s", u->name, status,
                              wait / 1000);
                }
            }
    }
}

/* sd_notify: one datagram to $NOTIFY_SOCKET when systemd gave one. */
static void notify(const char *state) {
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || (path[0] != '/' && path[0] != '@') || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path));
    if (sa.sun_path[0] == '@')
        sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path)));
    close(fd);
}

/* After each batch: each user's held descriptors go to their closer, and a user with too
 * many waiting (their closer stalled) is not read until it is done. */
static void release_held(struct ipbm *M) {
    for (struct ipbm_user *u = M->users; u; u = u->next) {
        ipbm_held_run(&u->held);
        user_pause(M, u, ipbm_held_paused(&u->held));
    }
}

static bool anything_left(struct ipbm *M) {
    for (struct ipbm_user *u = M->users; u; u = u->next)
        if (u->frontend > 0)
            return true;
    /* A sandbox is gone when its cgroup is empty and removed (the sweep frees it then): the
     * processes of its pid namespace die after its shim. */
    return M->sandboxes != NULL;
}

static int serve(struct ipbm *M) {
    /* A sandbox's shim outlives the process that started it by a moment when both are
     * killed: it comes back to us, not to PID 1, and is reaped at once (its uid keeps the
     * slot taken until it is; a PID 1 that reaps once a second made every stop take 1 s). */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    sigset_t set;
    sigprocmask(SIG_BLOCK, NULL, &set);
    signal(SIGPIPE, SIG_IGN);
    M->sig = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    M->timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    struct itimerspec its = {{1, 0}, {1, 0}};
    if (M->sig < 0 || M->timer < 0 || timerfd_settime(M->timer, 0, &its, NULL) < 0)
        return -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &M->sig};
    epoll_ctl(M->ep, EPOLL_CTL_ADD, M->sig, &ev);
    ev.data.ptr = &M->timer;
    epoll_ctl(M->ep, EPOLL_CTL_ADD, M->timer, &ev);
    ipbm_frontends_start(M);
    notify("READY=1\nSTATUS=serving");
    long stop_deadline = 0;
    for (;;) {
        if (M->stopping && !anything_left(M))
            break;
        if (M->stopping && ipbm_now_ms() > stop_deadline) {
            log_warn("stopping: killing what is left after 10 s");
            for (struct ipbm_user *u = M->users; u; u = u->next)
                if (u->frontend > 0)
                    kill(u->frontend, SIGKILL);
            for (struct ipbm_sandbox *s = M->sandboxes; s; s = s->next)
                ipbm_sandbox_kill(M, s);
            stop_deadline = ipbm_now_ms() + 60000;
        }
        struct epoll_event evs[32];
        int n = epoll_wait(M->ep, evs, 32, M->stopping ? 50 : 1000);
        if (M->stopping)
            ipbm_sandboxes_sweep(M);
        if (n < 0 && errno != EINTR)
            return -1;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &M->sig) {
                struct signalfd_siginfo si;
                while (read(M->sig, &si, sizeof(si)) == sizeof(si)) {
                    if (si.ssi_signo == SIGCHLD)
                        continue;
                    if (si.ssi_signo == SIGHUP) {
                        log_info("SIGHUP: the configuration and users are read at start; restart the service to apply changes");
                        continue;
                    }
                    if (!M->stopping) {
                        log_info("stopping (signal %d): closing every user's sessions", (int)si.ssi_signo);
                        notify("STOPPING=1");
                        M->stopping = true;
                        stop_deadline = ipbm_now_ms() + 10000;
                        for (struct ipbm_user *u = M->users; u; u = u->next)
                            if (u->frontend > 0)
                                kill(u->frontend, SIGTERM);
                    }
                }
                reap(M);
            } else if (p == &M->timer) {
                uint64_t x;
                while (read(M->timer, &x, sizeof(x)) > 0)
                    ;
                ipbm_sandboxes_sweep(M);
                ipbm_frontends_start(M);
                if (M->reclaim_left && ipbm_now_ms() < M->reclaim_until)
                    M->reclaim_left = ipbm_reclaim_orphans(M);
            } else {
                struct ipbm_chan *c = p;
                if (c->user->paused) {
                    if (evs[i].events & (EPOLLHUP | EPOLLERR))
                        c->broken = true;
                } else if (chan_request(M, c) < 0)
                    c->broken = true;
            }
        }
        if (M->sweep_due) {
            M->sweep_due = false;
            ipbm_sandboxes_sweep(M);
        }
        /* Closed after the batch: an event later in it may name the same channel. */
        for (struct ipbm_chan *c = M->chans; c;) {
            if (c->broken) {
                if (!c->frontend)
                    log_debug("user %s: a %s closed", c->user->name, c->parent ? "sub-channel" : "worker's channel");
                /* Its sub-channels go with it: the list is walked again. */
                chan_close(M, c);
                c = M->chans;
            } else {
                c = c->next;
            }
        }
        /* A private monitor has no one left to serve: it ends once its sandboxes are gone. */
        if (M->private_mon && !M->chans && !M->stopping) {
            M->stopping = true;
            stop_deadline = ipbm_now_ms() + 10000;
        }
        release_held(M);
    }
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "Usage: ipyboxd [--config FILE] [-v] [SANDBOX OPTIONS]   (as root: the system service)\n"
            "       ipyboxd --user [OPTIONS]                          (one user's own daemon; see --user --help)\n\n"
            "As root, ipyboxd serves every permitted user (users = in the configuration) on a socket of\n"
            "their own, /run/ipybox/<user>/ipybox.sock (owned by the user, mode 0600; `ipybox mcp` finds\n"
            "it). Each user's sessions run in a frontend process of that user; each sandbox runs in a uid\n"
            "range of its own from a reserved pool, in a cgroup with memory (no swap), process and CPU\n"
            "limits. Root keeps one small process, the monitor, which takes only fixed-layout requests.\n\n"
            "Options:\n"
            "  --config FILE  the configuration (default " IPBM_DEFAULT_CONFIG "; a missing default file\n"
            "                 means the built-in defaults)\n"
            "  -v, --verbose  log more (-vv: the same)\n"
            "  -V, --version  print the version and exit\n"
            "  -h, --help     this text\n\n"
            "Sandbox options given here are defaults for every session; clients add their own. Per session\n"
            "a client may ask for --memory SIZE, --max-processes N and --cpu-weight N within the bounds of\n"
            "the configuration.\n\n%s",
            ipb_options_help());
}

static int load_config(ipbm_sysconf *conf, const char *path, bool given) {
    ipbm_sysconf_defaults(conf);
    char *text = NULL;
    size_t len = 0;
    int r = ipb_read_file(path, 1 << 20, &text, &len);
    if (r == -ENOENT && !given)
        return 0;
    if (r < 0) {
        log_error("cannot read %s: %s", path, strerror(-r));
        return -1;
    }
    ipb_error *err = NULL;
    r = ipbm_sysconf_parse(conf, text, len, path, &err);
    free(text);
    if (r < 0) {
        log_error("%s", ipb_error_msg(err));
        ipb_error_free(err);
    }
    return r;
}

/* Users' frontends run our own binary as the user: every directory on its way must let
 * others through, and the binary let them run it (a build under /root, 0700, does not). */
static int check_users_can_run(const char *self) {
    char path[PATH_MAX];
    size_t n = strnlen(self, sizeof(path) - 1);
    memcpy(path, self, n);
    path[n] = '\0';
    bool dir = false;
    for (;;) {
        const char *p = path[0] ? path : "/";
        struct stat st;
        if (stat(p, &st) < 0) {
            log_error("cannot look at %s (on the way to this program, %s): %s", p, self, strerror(errno));
            return -1;
        }
        if (!(st.st_mode & S_IXOTH)) {
            log_error("users cannot run %s, which their frontends run as them: %s is mode %04o (others may not "
                      "%s); install it (make install) or build where every user can reach it", self, p,
                      (unsigned)(st.st_mode & 07777), dir ? "pass" : "run it");
            return -1;
        }
        char *slash = strrchr(path, '/');
        if (!path[0] || !slash)
            return 0;
        *slash = '\0';
        dir = true;
    }
}

/* The configured defaults against what this host has (ipbm_sysconf_check_host). */
static int check_host(const ipbm_sysconf *conf, const char *path) {
    uint64_t mem_total = 0, pid_max = 0;
    char *text = NULL;
    size_t len;
    if (ipb_read_file("/proc/meminfo", 1 << 16, &text, &len) == 0) {
        const char *m = strstr(text, "MemTotal:");
        unsigned long long kb;
        if (m && sscanf(m, "MemTotal: %llu kB", &kb) == 1)
            mem_total = (uint64_t)kb << 10;
        free(text);
    }
    if (ipb_read_file("/proc/sys/kernel/pid_max", 64, &text, &len) == 0) {
        pid_max = strtoull(text, NULL, 10);
        free(text);
    }
    ipb_error *err = NULL;
    if (ipbm_sysconf_check_host(conf, mem_total, pid_max, path, &err) < 0) {
        log_error("%s", ipb_error_msg(err));
        ipb_error_free(err);
        return -1;
    }
    return 0;
}

static void block_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
}

/* The pool, its check against the host's users and delegated ranges, and (when clean: the
 * system service) what an earlier run left in it (processes with its uids, sandbox cgroups),
 * for every slot whose lock we get: the others are another monitor's, in use (slotlock.h).
 * Then the cgroups. A private monitor cleans nothing up: it only skips a slot where something
 * runs. */
static int pool_setup(struct ipbm *M, bool clean, ipb_error **err) {
    uint32_t n = M->conf.pool_size;
    if (ipbm_pool_init(&M->pool, M->conf.pool_start, n) < 0 || !(M->slot_lock = malloc((n ? n : 1) * sizeof(int))))
        return ipb_error_set(err, ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++)
        M->slot_lock[i] = -1;
    if (ipbm_pool_check_host(M, err) < 0)
        return -1;
    uint8_t *mine = calloc(n ? n : 1, 1), *busy = calloc(n ? n : 1, 1);
    if (!mine || !busy) {
        free(mine);
        free(busy);
        return ipb_error_set(err, ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; clean && i < n; i++) {
        int fd = ipbm_slot_lock(&M->pool, (int)i);
        if (fd >= 0) {
            M->slot_lock[i] = fd;
            mine[i] = 1;
        }
    }
    if (clean)
        ipbm_pool_scan(M->conf.pool_start, n, IPBM_RANGE, mine, busy);
    int left = 0;
    for (uint32_t i = 0; i < n; i++)
        left += mine[i] && busy[i];
    if (left)
        log_warn("killed what %d sandbox uid range%s held from an earlier run", left, left == 1 ? "" : "s");
    char desc[4096];
    ipbm_cgroups_init(&M->cg, !M->private_mon, mine, n, desc, sizeof(desc));
    if (!M->private_mon && M->cg.kind == IPBM_LIMITS_RLIMIT && ipbm_cgroup_unified()) {
        /* A systemd host: the unit delegates a cgroup (Delegate=yes); without it a sandbox's
         * memory would be bounded per process only and its sum not at all. */
        free(mine);
        free(busy);
        return ipb_error_set(err, 0, "%s. Sandboxes would run without a memory limit: start the service as its "
                             "unit (systemctl start ipyboxd; the unit has Delegate=yes), or by hand in a delegated "
                             "scope: systemd-run --scope -p Delegate=yes ipyboxd ...", desc);
    }
    log_info("limits: %s", desc);
    for (uint32_t i = 0; i < n; i++)
        if (M->slot_lock[i] >= 0) {
            close(M->slot_lock[i]);
            M->slot_lock[i] = -1;
        }
    free(mine);
    free(busy);
    return 0;
}

/* `ipyboxd --private-monitor worker|frontend`, with a channel on fd 3: the monitor of root's
 * own ipybox (`ipybox mcp`, `ipybox run`, `ipyboxd --user` started by root), so that root's
 * sandboxes, too, run in a uid range of the pool and never as root (monclient.h). The channel
 * is root's (a worker's, or a frontend's that adopts one per worker); there are no sockets,
 * no frontends and no other users. It ends with its channels, or when its parent dies. A
 * failure at start is sent on the channel as an ERROR record. */
static int private_main(int argc, char **argv) {
    static struct ipbm M0;
    struct ipbm *M = &M0;
    ipb_error *err = NULL;
    bool frontend = argc == 3 && !strcmp(argv[2], "frontend");
    if (argc != 3 || (!frontend && strcmp(argv[2], "worker")) || geteuid() != 0 || !ipbm_is_seqpacket(3)) {
        log_error("--private-monitor is for ipybox's own use");
        return 2;
    }
    /* Descriptors 3 to 63 are held for children (fds.h) and a sandbox's are lifted above
     * 64 + IPBM_MAX_BINDS while they are put in place: below this limit a spawn cannot work. */
    long nofile = ipb_nofile_raise();
    if (nofile >= 0 && nofile < IPBM_MIN_NOFILE) {
        struct ipbm_msg low = {.magic = IPBM_MAGIC, .type = IPBM_ERROR, .err = EMFILE};
        snprintf(low.text, sizeof(low.text),
                 "too many open files (the limit is %ld): the monitor needs a descriptor limit (RLIMIT_NOFILE, "
                 "ulimit -n) of at least %d",
                 nofile, IPBM_MIN_NOFILE);
        log_error("%s", low.text);
        ipbm_send(3, &low, NULL, 0, MSG_DONTWAIT);
        return 1;
    }
    int chan = fcntl(3, F_DUPFD_CLOEXEC, 64);
    pid_t parent = getppid();
    if (chan < 0 || prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent || parent == 1)
        return 1;
    close(3);
    unsetenv("NOTIFY_SOCKET");
    M->private_mon = true;
    struct ipbm_msg fail = {.magic = IPBM_MAGIC, .type = IPBM_ERROR, .err = EIO};
    int fr = ipbm_fds_reserve();
    if (fr < 0) {
        ipb_error_set(&err, -fr, "cannot reserve descriptors for children");
        goto failed;
    }
    if (load_config(&M->conf, IPBM_DEFAULT_CONFIG, false) < 0) {
        ipb_error_set(&err, EINVAL, "the configuration " IPBM_DEFAULT_CONFIG " (its uid pool) is not valid");
        goto failed;
    }
    /* Root sets its own limits: the configured defaults apply, the bounds do not. */
    M->conf.memory_max_bound = 1ull << 50;
    M->conf.pids_max_bound = 1u << 22;
    M->conf.cpu_weight_bound = 10000;
    M->conf.max_sessions_per_user = 10000;
    char *shim = NULL;
    if (ipb_find_shim(&shim, &err) < 0)
        goto failed;
    snprintf(M->shim, sizeof(M->shim), "%s", shim);
    free(shim);
    if (pool_setup(M, false, &err) < 0)
        goto failed;
    /* Root's sandboxes keep the CPU share of the process that started them (a cpu cgroup of
     * ours would put all of them under one share), and without cgroups no address-space
     * limit unless --memory asks for one: as before they ran in the pool. */
    M->cg.cpu[0] = '\0';
    if (M->cg.kind == IPBM_LIMITS_RLIMIT)
        M->conf.memory_max = M->conf.memory_max_bound;
    /* What a private monitor that was killed left (its sandboxes may still be dying). */
    M->reclaim_left = ipbm_reclaim_orphans(M);
    M->reclaim_until = ipbm_now_ms() + 60000;
    M->ep = epoll_create1(EPOLL_CLOEXEC);
    int e = M->ep < 0 ? -errno : ipbm_root_dir("/run/ipybox", 0755);
    if (e < 0 || (e = ipbm_root_dir(IPBM_ROOT_DIR, 0755)) < 0) {
        ipb_error_set(&err, -e, "preparing /run/ipybox");
        goto failed;
    }
    struct ipbm_user *u = calloc(1, sizeof(*u));
    if (!u) {
        ipb_error_set(&err, ENOMEM, "out of memory");
        goto failed;
    }
    snprintf(u->name, sizeof(u->name), "root");
    u->uid = 0;
    u->gid = 0;
    u->listen_fd = -1;
    M->users = u;
    struct ipbm_chan *c = ipbm_chan_add(M, chan, frontend, u, NULL);
    if (!c) {
        log_error("cannot serve the private monitor's channel");
        return 1;
    }
    if (frontend)
        u->fchan = c;
    int r = serve(M);
    ipbm_sandboxes_sweep(M);
    while (M->chans)
        chan_close(M, M->chans);
    ipbm_held_final(&u->held);
    return r < 0 ? 1 : 0;
failed:
    snprintf(fail.text, sizeof(fail.text), "%s", ipb_error_msg(err));
    fail.err = err && err->errnum ? err->errnum : EIO;
    log_error("%s", fail.text);
    ipbm_send(chan, &fail, NULL, 0, MSG_DONTWAIT);
    return 1;
}

int ipbm_main(int argc, char **argv) {
    /* From the start: a SIGTERM during start-up is handled once the loop runs, not fatal. */
    block_signals();
    if (argc >= 2 && !strcmp(argv[1], "--private-monitor")) {
        ipb_log_init("ipybox-monitor", IPB_LOG_WARN);
        return private_main(argc, argv);
    }
    ipb_log_init("ipyboxd", IPB_LOG_INFO);
    const char *config = IPBM_DEFAULT_CONFIG;
    bool given = false;
    static struct ipbm M0;
    struct ipbm *M = &M0;
    char **sargs = calloc((size_t)argc + 1, sizeof(char *));
    int ns = 0;
    if (!sargs)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc) {
                log_error("--config needs a file");
                return 2;
            }
            config = argv[++i];
            given = true;
        } else if (!strcmp(argv[i], "--verbose"))
            M->verbose++;
        else if (argv[i][0] == '-' && argv[i][1] == 'v' && !argv[i][strspn(argv[i] + 1, "v") + 1])
            M->verbose += (int)strlen(argv[i]) - 1; /* -v, -vv, ... */
        else
            sargs[ns++] = argv[i];
    }
    M->session_args = sargs;
    ipb_log_init("ipyboxd", M->verbose ? IPB_LOG_DEBUG : IPB_LOG_INFO);
    if (geteuid() != 0) {
        log_error("the system service runs as root; for your own sessions run `ipyboxd --user`");
        return 2;
    }
    int fr = ipbm_fds_reserve();
    if (fr < 0) {
        log_error("cannot reserve descriptors for children: %s", strerror(-fr));
        return 1;
    }
    if (load_config(&M->conf, config, given) < 0 || check_host(&M->conf, config) < 0)
        return 2;
    /* The sandbox options every session gets must be valid now. */
    ipb_options o;
    ipb_error *err = NULL;
    int next = 0;
    ipb_options_init(&o);
    if (ipb_options_parse(&o, ns, sargs, &next, &err) < 0 || next < ns) {
        log_error("%s", err ? ipb_error_msg(err) : "unexpected argument (see ipyboxd --help)");
        return 2;
    }
    ipb_options_free(&o);
    ssize_t sl = readlink("/proc/self/exe", M->self, sizeof(M->self) - 1);
    char *shim = NULL;
    if (sl <= 0 || ipb_find_shim(&shim, &err) < 0) {
        log_error("%s", err ? ipb_error_msg(err) : "cannot find this program's binary");
        return 1;
    }
    M->self[sl] = '\0';
    snprintf(M->shim, sizeof(M->shim), "%s", shim);
    free(shim);
    if (check_users_can_run(M->self) < 0)
        return 2;
    if (pool_setup(M, true, &err) < 0) {
        log_error("%s", ipb_error_msg(err));
        return 2;
    }
    ipbm_cgroup_users_sweep(&M->cg); /* users' cgroups an earlier run left */
    if (ipbm_selfcheck(&err) < 0) {
        log_error("%s", ipb_error_msg(err));
        return 2;
    }
    M->ep = epoll_create1(EPOLL_CLOEXEC);
    if (M->ep < 0 || ipbm_users_load(M, &err) < 0) {
        log_error("%s", err ? ipb_error_msg(err) : strerror(errno));
        ipbm_users_cleanup(M);
        return 1;
    }
    unsigned nu = 0;
    for (struct ipbm_user *u = M->users; u; u = u->next)
        nu++;
    char user_bound[96] = "no bound (no cgroups)";
    if (M->cg.kind == IPBM_LIMITS_CGROUP2 || M->cg.kind == IPBM_LIMITS_CGROUP1)
        snprintf(user_bound, sizeof(user_bound), "%llu MiB memory, %u tasks in u-<uid>",
                 (unsigned long long)(M->conf.user_memory_max >> 20), M->conf.user_pids_max);
    log_info("serving %u user%s at /run/ipybox/<user>/ipybox.sock; sandbox uids %u-%u (%u at once); "
             "per sandbox %llu MiB memory, %u processes, cpu weight %u by default; per user (frontend and "
             "workers) %s",
             nu, nu == 1 ? "" : "s", M->conf.pool_start, M->conf.pool_start + M->conf.pool_size * IPBM_RANGE - 1,
             M->conf.pool_size, (unsigned long long)(M->conf.memory_max >> 20), M->conf.pids_max, M->conf.cpu_weight,
             user_bound);
    int r = serve(M);
    ipbm_sandboxes_sweep(M);
    /* What is left of the users' (channels, and listening sockets whose queued connections
     * may carry their descriptors) goes to a last closer: the monitor never holds the last
     * reference. */
    while (M->chans)
        chan_close(M, M->chans);
    for (struct ipbm_user *u = M->users; u; u = u->next) {
        if (u->listen_fd >= 0)
            ipbm_release_user_fd(u, u->listen_fd);
        u->listen_fd = -1;
    }
    long closer_deadline = ipbm_now_ms() + 2000;
    for (struct ipbm_user *u = M->users; u; u = u->next) {
        /* A closer started while serving normally ends at once; only one still running after
         * a moment waits on something (not reaped yet is not waiting). */
        while (u->held.closer > 0 && waitpid(u->held.closer, NULL, WNOHANG) == 0 && ipbm_now_ms() < closer_deadline)
            usleep(10000);
        if (u->held.closer > 0 && kill(u->held.closer, 0) == 0 && waitpid(u->held.closer, NULL, WNOHANG) == 0)
            log_warn("user %s: a closer still waits on a descriptor the user sent (on their own filesystem, "
                     "say); it ends when that filesystem answers", u->name);
        ipbm_held_final(&u->held);
    }
    ipbm_users_cleanup(M);
    log_info("stopped");
    return r < 0 ? 1 : 0;
}
