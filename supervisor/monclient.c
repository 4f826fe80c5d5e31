#include "monclient.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "mon_proto.h"
#include "record.h"
#include "log.h"
#include "monrespawn.h"
#include "mountplan.h"

extern char **environ;

static int chan = -2;
/* Every request and the wait for its answer hold this: the kernel's sandbox is asked for by
 * the session's thread, a sandboxed MCP server's sub-channel by a tool thread. */
static pthread_mutex_t chan_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
/* The id of the ADOPT waiting for its answer (0: none): another ADOPTED or an ADOPT's ERROR
 * is a late answer to one that gave up, and is dropped. */
static uint32_t adopt_want;
static bool private_mon; /* the channel is to our own private monitor (messages say so) */
static ipb_options limits_opts;
/* EXITED records that came while waiting for something else. */
static struct {
    uint32_t id;
    int status;
} exited[16];
static unsigned nexited;

/* Our private monitor (ipb_monitor_start_private), until reaped, and our end of its channel
 * (the same as chan for a worker's). */
static pid_t private_pid;
static int private_chan = -1;
/* Earlier private monitors that were found gone but not reaped yet (one that closed our
 * channel ends on its own once it has killed what was ours). */
static pid_t ended[8];
static unsigned nended;
static bool exit_hook;
/* chan's other end hung up: its monitor is gone, and every sandbox it started went with it
 * (a shim's parent-death signal is SIGKILL, and each sandbox's PID 1 dies with its shim). */
static bool chan_lost;
/* Counts channels: sandbox ids are per channel, so a sandbox of a monitor that is gone is
 * never named on its successor's. */
static uint32_t chan_gen = 1;
static ipb_respawn respawn;

static void reap_ended(void) {
    for (unsigned i = 0; i < nended;) {
        pid_t r = waitpid(ended[i], NULL, WNOHANG);
        /* ECHILD: reaped by someone else (the daemon's loop reaps every child). */
        if (r == ended[i] || (r < 0 && errno == ECHILD))
            ended[i] = ended[--nended];
        else
            i++;
    }
}

/* At exit: our end closes, the private monitor kills what is left of ours, frees the slots
 * and ends; we wait for that (a while), so that nothing of ours outlives us. */
static void private_end(void) {
    if (private_chan >= 0)
        close(private_chan);
    private_chan = -1;
    for (int i = 0; private_pid > 0 && i < 1000; i++) {
        pid_t r = waitpid(private_pid, NULL, WNOHANG);
        if (r == private_pid || (r < 0 && errno != EINTR))
            break;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    private_pid = 0;
    reap_ended();
}

/* The program of root's private monitor: ipybox-monitor in ../libexec/ipybox from this
 * binary's folder, the monitor's code alone, which starts in about a millisecond (this binary,
 * with its libraries, in about five; root's sandbox waits for it). Only from this binary's own
 * tree, never the installed libexec (another build's monitor would answer us), and not once
 * this binary's file was replaced (a newer build's would be beside it). Else this binary, which
 * has the same code (`ipyboxd --private-monitor`), as /proc/self/exe: that runs even a file
 * since replaced. */
static void monitor_program(char *out, size_t len) {
    static const char deleted[] = " (deleted)";
    char exe[4096];
    snprintf(out, len, "/proc/self/exe");
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0 || n >= (ssize_t)sizeof(exe) - 1)
        return;
    exe[n] = '\0';
    size_t dl = sizeof(deleted) - 1;
    char *slash = strrchr(exe, '/');
    if (((size_t)n >= dl && !strcmp(exe + n - dl, deleted)) || !slash)
        return;
    *slash = '\0';
    char lean[4200];
    int w = snprintf(lean, sizeof(lean), "%s/../libexec/ipybox/ipybox-monitor", exe);
    if (w > 0 && (size_t)w < sizeof(lean) && (size_t)w < len && access(lean, X_OK) == 0)
        snprintf(out, len, "%s", lean);
}

int ipb_monitor_start_private(bool frontend) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    /* Above 3, so that the dup2 to 3 in the child is a real one (it clears close-on-exec). */
    int theirs = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    close(sv[1]);
    if (theirs < 0) {
        /* The channel stays, dead: a sandbox asked for fails with a sentence, and none ever
         * starts as root. */
        return sv[0];
    }
    char exe[4200];
    monitor_program(exe, sizeof(exe));
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    /* A process group of its own: a terminal's ^C is for the command (forwarded by us), not
     * for the monitor that holds its sandbox. */
    ipb_spawnattr_clean(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    /* Not our MCP stream: only stderr, for its messages. */
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, theirs, 3);
    char *argv[] = {(char *)"ipyboxd", (char *)"--private-monitor", (char *)(frontend ? "frontend" : "worker"), NULL};
    pid_t pid;
    int e = posix_spawn(&pid, exe, &fa, &attr, argv, environ);
    if (e != 0 && strcmp(exe, "/proc/self/exe"))
        e = posix_spawn(&pid, "/proc/self/exe", &fa, &attr, argv, environ);
    if (e == 0) {
        if (private_pid > 0 && nended < sizeof(ended) / sizeof(*ended))
            ended[nended++] = private_pid;
        private_pid = pid;
        private_chan = sv[0];
        if (!exit_hook)
            exit_hook = atexit(private_end) == 0;
    }
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(theirs);
    return sv[0];
}

/* The channel's other end hung up (noted once per channel). */
static void monitor_lost(void) {
    if (chan_lost)
        return;
    chan_lost = true;
    ipb_respawn_ended(&respawn, ipb_now_ms());
}

static bool hung_up(int r) { return r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN; }

/* A private monitor in place of the one that is gone, started exactly as the first was (the
 * same binary, checks, pool and slot locks; a fresh socketpair). Returns our end of its
 * channel, or -1 with err. The old channel (fd) is closed and the old monitor reaped. */
static int replace(int fd, bool frontend, ipb_error **err) {
    long wait_ms;
    if (!ipb_respawn_may_start(&respawn, ipb_now_ms(), &wait_ms))
        return ipb_error_set(err, 0,
                             "the private monitor of root's ipybox ended %u times in a row before it served "
                             "a request (its messages are on ipybox's stderr); it is not started again for %ld s",
                             respawn.unserved, (wait_ms + 999) / 1000);
    pid_t old_pid = private_pid;
    /* Started before the old channel closes: when it cannot be, the caller keeps the old one
     * (dead) and the next request tries again. */
    int nfd = ipb_monitor_start_private(frontend);
    if (nfd < 0)
        return ipb_error_set(err, errno, "cannot start the private monitor of root's ipybox again");
    if (old_pid > 0 && private_pid == old_pid) {
        /* Not started (its channel is dead, as at a first start that fails): the old one
         * is still to be reaped. */
        if (nended < sizeof(ended) / sizeof(*ended))
            ended[nended++] = old_pid;
        private_pid = 0;
    }
    if (private_chan == fd)
        private_chan = -1;
    if (fd >= 0)
        close(fd);
    reap_ended();
    chan_lost = false;
    chan_gen++;
    nexited = 0;
    log_warn("the private monitor of root's ipybox was gone (the sandboxes it ran went with it): started another");
    return nfd;
}

int ipb_monitor_private_replace(int fd, ipb_error **err) {
    monitor_lost();
    return replace(fd, true, err);
}

void ipb_monitor_private_served(void) { ipb_respawn_served(&respawn); }

static int monitor_fd_locked(void);

int ipb_monitor_fd(void) {
    pthread_mutex_lock(&init_lock);
    int fd = monitor_fd_locked();
    pthread_mutex_unlock(&init_lock);
    return fd;
}

static int monitor_fd_locked(void) {
    if (chan != -2)
        return chan;
    chan = -1;
    const char *v = getenv(IPB_MONITOR_FD_ENV);
    if (!v) {
        /* Started by root (user mode): the sandbox still never runs as root, nor as any user
         * of the host. A private monitor starts it in a uid range of the system service's
         * pool, with the workspace and home reached through idmapped mounts, exactly as the
         * service does for its users. */
        if (geteuid() == 0) {
            chan = ipb_monitor_start_private(false);
            private_mon = chan >= 0;
        }
        return chan;
    }
    char *end;
    long fd = strtol(v, &end, 10);
    unsetenv(IPB_MONITOR_FD_ENV);
    int type = 0;
    socklen_t l = sizeof(type);
    if (*end || fd < 3 || fd > 1 << 20 || getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 ||
        type != SOCK_SEQPACKET) {
        /* Not a channel (stale, or set by hand): root still never starts a sandbox itself. */
        if (geteuid() == 0) {
            chan = ipb_monitor_start_private(false);
            private_mon = chan >= 0;
        }
        return chan;
    }
    fcntl((int)fd, F_SETFD, FD_CLOEXEC);
    chan = (int)fd;
    return chan;
}

static const char *who(void) {
    return private_mon ? "the private monitor of root's ipybox (its sandboxes run in the uid pool of "
                         "the service's ipyboxd.conf)"
                       : "the ipyboxd service";
}

void ipb_monitor_set_limits(const ipb_options *o) {
    limits_opts.memory_max = o->memory_max;
    limits_opts.pids_max = o->pids_max;
    limits_opts.cpu_weight = o->cpu_weight;
}

/* The next record other than an EXITED (which is kept), or the EXITED of want_id. Returns 1,
 * 0 on timeout, -1 when the channel is gone. */
static int next(struct ipbm_msg *m, int *fds, unsigned max, unsigned *nfds, uint32_t want_id, int timeout_ms) {
    long deadline = ipb_now_ms() + timeout_ms;
    for (unsigned i = 0; want_id && i < nexited; i++)
        if (exited[i].id == want_id) {
            memset(m, 0, sizeof(*m));
            m->type = IPBM_EXITED;
            m->id = want_id;
            m->status = exited[i].status;
            exited[i] = exited[--nexited];
            *nfds = 0;
            return 1;
        }
    for (;;) {
        long left = deadline - ipb_now_ms();
        struct pollfd p = {chan, POLLIN, 0};
        int r = poll(&p, 1, left > 0 ? (int)left : 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -1 : 0;
        r = ipbm_recv(chan, m, fds, max, nfds, MSG_DONTWAIT);
        if (r == -EAGAIN)
            continue;
        if (r <= 0) {
            ipb_record_close_fds(fds, *nfds);
            *nfds = 0;
            if (r == 0)
                monitor_lost();
            return -1;
        }
        bool stale_adopt = (m->type == IPBM_ADOPTED || (m->type == IPBM_ERROR && m->id)) && m->id != adopt_want;
        if (!stale_adopt && (m->type != IPBM_EXITED || m->id == want_id))
            return 1;
        if (stale_adopt) {
            ipb_record_close_fds(fds, *nfds);
            *nfds = 0;
            continue;
        }
        ipb_record_close_fds(fds, *nfds);
        *nfds = 0;
        if (nexited < sizeof(exited) / sizeof(*exited)) {
            exited[nexited].id = m->id;
            exited[nexited++].status = m->status;
        }
    }
}

/* Sends a request (chan_lock held). When the channel's monitor is gone (killed, say: its
 * sandboxes went with it), root's own ipybox starts another private monitor, as it started
 * the first, and sends it there; a user's worker of the system service has no other (its
 * sandbox is the service's to start). 0, or -1 with err (what: what was asked for). */
static int send_request(const struct ipbm_msg *m, const int *fds, unsigned nfds, const char *what, ipb_error **err) {
    int r = chan_lost ? -EPIPE : ipbm_send(chan, m, fds, nfds, 0);
    if (hung_up(r)) {
        monitor_lost();
        if (geteuid() != 0)
            return ipb_error_set(err, -r,
                                 "%s is gone (the service stopped or is restarting; this session's sandbox "
                                 "went with it): start a new session once the service runs again",
                                 who());
        int nfd = replace(chan, false, err);
        if (nfd < 0)
            return -1;
        chan = nfd;
        private_mon = true;
        r = ipbm_send(chan, m, fds, nfds, 0);
        if (hung_up(r))
            monitor_lost();
    }
    if (r < 0)
        return ipb_error_set(err, -r, "asking %s for %s", who(), what);
    return 0;
}

int ipb_monitor_spawn(const shim_config *cfg, int in_fd, int out_fd, int err_fd, int sync_fd, ipb_monitor_sandbox *ret,
                      ipb_error **err) {
    int fds[IPBM_FD_BINDS + IPBM_MAX_BINDS] = {in_fd, out_fd, err_fd, sync_fd};
    struct ipbm_msg m = {.magic = IPBM_MAGIC, .type = IPBM_SPAWN};
    m.memory_max = limits_opts.memory_max;
    m.pids_max = limits_opts.pids_max;
    m.cpu_weight = limits_opts.cpu_weight;
    if (cfg->zygote)
        m.limits = IPBM_SPAWN_ZYGOTE;
    unsigned n = 0;
    int rc = -1;
    bool locked = false;
    for (size_t i = 0; i < cfg->plan.n; i++) {
        const ipb_mount *mt = &cfg->plan.m[i];
        if (!(mt->flags & IPB_MNT_FD))
            continue;
        if (n >= IPBM_MAX_BINDS) {
            ipb_error_set(err, E2BIG, "more than %d binds", IPBM_MAX_BINDS);
            goto out;
        }
        /* Opened with our rights: the user's. */
        int fd = open(mt->src, O_PATH | O_CLOEXEC);
        if (fd < 0) {
            ipb_error_set(err, errno, "cannot open %s (for %s in the sandbox)", mt->src, mt->dst);
            goto out;
        }
        if (mt->kind == IPB_MNT_BIND_RO)
            m.ro_binds |= 1u << n;
        fds[IPBM_FD_BINDS + n++] = fd;
    }
    m.nbinds = n;
    pthread_mutex_lock(&chan_lock);
    locked = true;
    if (send_request(&m, fds, IPBM_FD_BINDS + n, "a sandbox", err) < 0)
        goto out;
    int rfds[2];
    unsigned nr = 0;
    /* The monitor answers spawns one after another: on a slow host with many sessions
     * starting at once (20 under emulation took over 30 s) the last one waits its turn. */
    int r = next(&m, rfds, 2, &nr, 0, 120000);
    if (r <= 0) {
        ipb_error_set(err, r == 0 ? ETIMEDOUT : EPIPE, "%s did not answer for a sandbox", who());
        goto out;
    }
    if (m.type == IPBM_ERROR) {
        for (unsigned i = 0; i < nr; i++)
            close(rfds[i]);
        /* The monitor's sentence often names the errno already: not twice. */
        ipb_error_set(err, m.err > 0 && strstr(m.text, strerror(m.err)) ? 0 : m.err,
                      "%s could not start the sandbox: %s", who(), m.text);
        goto out;
    }
    if (m.type != IPBM_SPAWNED) {
        for (unsigned i = 0; i < nr; i++)
            close(rfds[i]);
        ipb_error_set(err, EPROTO, "an unexpected answer from %s", who());
        goto out;
    }
    ipb_respawn_served(&respawn);
    ipb_monitor_sandbox s = {.id = m.id,
                             .gen = chan_gen,
                             .pid = m.status,
                             .mem_ev = -1,
                             .pids_ev = -1,
                             .limits = m.limits & 0xff,
                             .memory_max = m.memory_max,
                             .pids_max = m.pids_max};
    unsigned k = 0;
    if ((m.limits & IPBM_HAS_MEM_EVENTS) && k < nr)
        s.mem_ev = rfds[k++];
    if ((m.limits & IPBM_HAS_PIDS_EVENTS) && k < nr)
        s.pids_ev = rfds[k++];
    while (k < nr)
        close(rfds[k++]);
    *ret = s;
    rc = 0;
out:
    if (locked)
        pthread_mutex_unlock(&chan_lock);
    for (unsigned i = 0; i < n; i++)
        close(fds[IPBM_FD_BINDS + i]);
    return rc;
}

int ipb_monitor_end(ipb_monitor_sandbox *s, bool kill_first, int timeout_ms) {
    int status = -1;
    pthread_mutex_lock(&chan_lock);
    /* A sandbox of a monitor that is gone went with it; its id may name another now. */
    if (s->id && chan >= 0 && s->gen == chan_gen && !chan_lost) {
        if (kill_first) {
            struct ipbm_msg k = {.magic = IPBM_MAGIC, .type = IPBM_KILL, .id = s->id};
            if (hung_up(ipbm_send(chan, &k, NULL, 0, 0)))
                monitor_lost();
        }
        struct ipbm_msg m;
        unsigned nr;
        int fds[2];
        if (next(&m, fds, 2, &nr, s->id, timeout_ms) == 1 && m.type == IPBM_EXITED)
            status = m.status;
        for (unsigned i = 0; i < nr; i++)
            close(fds[i]);
    }
    pthread_mutex_unlock(&chan_lock);
    s->id = 0;
    if (s->mem_ev >= 0)
        close(s->mem_ev);
    if (s->pids_ev >= 0)
        close(s->pids_ev);
    s->mem_ev = s->pids_ev = -1;
    return status;
}

/* The number after "key " on a line of an event file. */
static uint64_t counter(int fd, const char *key) {
    if (fd < 0)
        return 0;
    char buf[2048];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    size_t kl = strlen(key);
    for (char *line = buf; line && *line;) {
        if (!strncmp(line, key, kl) && line[kl] == ' ')
            return strtoull(line + kl + 1, NULL, 10);
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return 0;
}

void ipb_monitor_events(const ipb_monitor_sandbox *s, uint64_t *oom_kills, uint64_t *pids_max_hits) {
    *oom_kills = counter(s->mem_ev, "oom_kill");
    *pids_max_hits = counter(s->pids_ev, "max");
}

int ipb_monitor_adopt(ipb_error **err) {
    if (ipb_monitor_fd() < 0)
        return ipb_error_set(err, ENOTCONN, "this process has no channel to a monitor");
    static uint32_t seq;
    pthread_mutex_lock(&chan_lock);
    if (++seq == 0)
        seq = 1; /* 0 is a spawn's */
    struct ipbm_msg m = {.magic = IPBM_MAGIC, .type = IPBM_ADOPT, .id = seq};
    int ret = -1;
    if (send_request(&m, NULL, 0, "a channel", err) < 0)
        goto out;
    adopt_want = m.id;
    for (;;) {
        struct ipbm_msg rep;
        int fds[2];
        unsigned nfds = 0;
        int r = next(&rep, fds, 2, &nfds, 0, 30000);
        if (r <= 0) {
            ipb_error_set(err, r == 0 ? ETIMEDOUT : EPIPE, "%s did not answer for a channel", who());
            break;
        }
        if (rep.type == IPBM_ADOPTED && nfds == 1 && ipbm_is_seqpacket(fds[0])) {
            ipb_respawn_served(&respawn);
            ret = fds[0];
            break;
        }
        ipb_record_close_fds(fds, nfds);
        if (rep.type == IPBM_ERROR && rep.id == m.id) {
            ipb_error_set(err, rep.err > 0 && strstr(rep.text, strerror(rep.err)) ? 0 : rep.err,
                          "%s could not make a channel: %s", who(), rep.text);
            break;
        }
        if (rep.type != IPBM_SPAWNED && rep.type != IPBM_ERROR) {
            ipb_error_set(err, EPROTO, "an unexpected answer from %s", who());
            break;
        }
        /* The answer to a spawn that gave up waiting (its sandbox ends with this channel):
         * skipped. */
    }
    adopt_want = 0;
out:
    pthread_mutex_unlock(&chan_lock);
    return ret;
}
