/* The monitor's loop: its channels, signals (SIGCHLD: reaping sandboxes' shims, frontends
 * and closers; SIGTERM: stopping) and a one-second timer (sweeps, frontend restarts) on one
 * epoll set; and the end of a stop, once no frontend or sandbox is left. */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "monitor_int.h"

long ipbm_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
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
        ipbm_user_pause(M, u, ipbm_held_paused(&u->held));
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

int ipbm_serve(struct ipbm *M) {
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
                        log_info("SIGHUP: the configuration and users are read at start; restart the service to apply "
                                 "changes");
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
                } else if (ipbm_chan_request(M, c) < 0)
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
                ipbm_chan_close(M, c);
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
