/* The daemon's event loop: the listening socket, clients, workers, signals and a one-second
 * timer for idle sessions, all on one epoll set. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_int.h"
#include "log.h"

/* How long workers get to stop their sandboxes at shutdown before they are killed. */
#define STOP_GRACE_MS 10000

long ipbd_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

int ipbd_watch_add(struct ipbd *d, struct ipbd_watch *w, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.ptr = w};
    w->events = events;
    return epoll_ctl(d->ep, EPOLL_CTL_ADD, w->fd, &ev);
}

void ipbd_watch_mod(struct ipbd *d, struct ipbd_watch *w, uint32_t events) {
    if (w->fd < 0 || w->events == events)
        return;
    struct epoll_event ev = {.events = events, .data.ptr = w};
    w->events = events;
    epoll_ctl(d->ep, EPOLL_CTL_MOD, w->fd, &ev);
}

void ipbd_watch_del(struct ipbd *d, struct ipbd_watch *w) {
    if (w->fd < 0)
        return;
    epoll_ctl(d->ep, EPOLL_CTL_DEL, w->fd, NULL);
    close(w->fd);
    w->fd = -1;
}

int ipbd_out_flush(struct ipbd *d, struct ipbd_watch *w, struct ipbd_out *o) {
    while (o->off < o->buf.len) {
        /* write(): sockets and pipes alike (SIGPIPE is ignored; a gone peer is EPIPE). */
        ssize_t n = write(w->fd, o->buf.data + o->off, o->buf.len - o->off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                ipbd_watch_mod(d, w, w->events | EPOLLOUT);
                return 0;
            }
            return -1;
        }
        o->off += (size_t)n;
    }
    /* All written: keep a small buffer, not the largest one ever needed. */
    if (o->buf.cap > (1u << 20))
        ipb_buf_free(&o->buf);
    else
        ipb_buf_reset(&o->buf);
    o->off = 0;
    ipbd_watch_mod(d, w, w->events & ~(uint32_t)EPOLLOUT);
    return 0;
}

int ipbd_out_send(struct ipbd *d, struct ipbd_watch *w, struct ipbd_out *o, const char *data, size_t len) {
    if (w->fd < 0 || o->buf.len - o->off + len > IPBD_OUT_MAX)
        return -1;
    /* What was written goes, so that a long stream to a slow reader does not pile up. */
    if (o->off && (o->off == o->buf.len || o->off >= (1u << 20))) {
        ipb_buf_consume(&o->buf, o->off);
        o->off = 0;
    }
    if (ipb_buf_append(&o->buf, data, len) < 0)
        return -1;
    if (w->events & EPOLLOUT)
        return 0; /* waiting for the peer; EPOLLOUT writes it */
    return ipbd_out_flush(d, w, o);
}

static int setup(struct ipbd *d, ipb_error **err) {
    d->ep = epoll_create1(EPOLL_CLOEXEC);
    if (d->ep < 0)
        return ipb_error_set(err, errno, "epoll_create1");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return ipb_error_set(err, errno, "sigprocmask");
    signal(SIGPIPE, SIG_IGN);
    signal(SIGCHLD, SIG_DFL); /* inherited as ignored, workers would be reaped behind our back */
    d->sig = (struct ipbd_watch){W_SIGNAL, signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK), NULL, 0};
    d->timer = (struct ipbd_watch){W_TIMER, timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK), NULL, 0};
    if (d->sig.fd < 0 || d->timer.fd < 0)
        return ipb_error_set(err, errno, "creating the signal and timer descriptors");
    struct itimerspec its = {{1, 0}, {1, 0}};
    timerfd_settime(d->timer.fd, 0, &its, NULL);
    d->listen = (struct ipbd_watch){W_LISTEN, d->cfg->listen_fd, NULL, 0};
    if (ipbd_watch_add(d, &d->sig, EPOLLIN) < 0 || ipbd_watch_add(d, &d->timer, EPOLLIN) < 0 ||
        ipbd_watch_add(d, &d->listen, EPOLLIN) < 0)
        return ipb_error_set(err, errno, "epoll_ctl");
    return 0;
}

/* Stop: no new clients; every worker is asked to stop (it interrupts a running cell and takes
 * its sandbox down); clients are told nothing more and dropped once their sessions are gone. */
static void begin_stop(struct ipbd *d, int sig) {
    if (d->stopping)
        return;
    log_info("%s: closing %u session%s", strsignal(sig), d->nsessions, d->nsessions == 1 ? "" : "s");
    d->stopping = true;
    ipbd_watch_del(d, &d->listen);
    for (struct ipbd_session *s = d->sessions; s; s = s->next)
        ipbd_session_close(d, s, "the daemon is stopping");
}

static void signals(struct ipbd *d) {
    struct signalfd_siginfo si;
    while (read(d->sig.fd, &si, sizeof(si)) == sizeof(si)) {
        /* SIGCHLD: the reap after this round of events handles it (freeing sessions now would
         * leave later events of the round pointing at freed watches). */
        if (si.ssi_signo != SIGCHLD)
            begin_stop(d, (int)si.ssi_signo);
    }
}

int ipbd_serve(const ipbd_config *cfg, ipb_error **err) {
    struct ipbd d;
    memset(&d, 0, sizeof(d));
    d.cfg = cfg;
    d.monitor_fd = cfg->monitor_fd;
    d.sig.fd = d.timer.fd = -1;
    d.listen.fd = cfg->listen_fd; /* ours from here: closed when we stop listening */
    d.next_client_id = 1;
    d.first_request_ms = IPBD_FIRST_REQUEST_MS;
    const char *fr = getenv("IPYBOXD_FIRST_REQUEST_MS");
    if (fr && *fr) {
        char *end;
        long v = strtol(fr, &end, 10);
        if (!*end && v > 0)
            d.first_request_ms = v;
    }
    d.refused_cap.what = "connections refused at --max-clients";
    d.refused_uid.what = "connections of other users refused";
    d.dropped_idle.what = "connections dropped";
    /* `ipyboxd --user --warm N` was started to be used: its warm workers start at once. A
     * system service's frontend waits for its user's first connection. */
    d.active_ms = !cfg->frontend ? ipbd_now_ms() : 0;
    if (setup(&d, err) < 0) {
        close(d.listen.fd);
        close(d.sig.fd);
        close(d.timer.fd);
        close(d.ep);
        return -1;
    }
    long stop_deadline = 0;
    ipbd_warm_fill(&d);
    for (;;) {
        if (d.stopping) {
            if (!d.sessions)
                break;
            if (!stop_deadline)
                stop_deadline = ipbd_now_ms() + STOP_GRACE_MS;
            if (ipbd_now_ms() > stop_deadline) {
                for (struct ipbd_session *s = d.sessions; s; s = s->next)
                    if (s->pid > 0) {
                        log_warn("session %s: the worker did not stop in time; killing it", s->name);
                        kill(s->pid, SIGKILL);
                    }
                stop_deadline = ipbd_now_ms() + STOP_GRACE_MS;
            }
        }
        struct epoll_event evs[64];
        int n = epoll_wait(d.ep, evs, 64, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            log_error("epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            struct ipbd_watch *w = evs[i].data.ptr;
            switch (w->kind) {
            case W_LISTEN:
                ipbd_client_accept(&d);
                break;
            case W_CLIENT:
                ipbd_client_event(&d, w->obj, evs[i].events);
                break;
            case W_LINK:
            case W_STDERR:
                ipbd_session_event(&d, w, evs[i].events);
                break;
            case W_SIGNAL:
                signals(&d);
                break;
            case W_TIMER: {
                uint64_t t;
                if (read(d.timer.fd, &t, sizeof(t)) < 0) {
                    /* nothing: the timer fires again */
                }
                ipbd_sessions_sweep(&d);
                ipbd_clients_sweep(&d);
                break;
            }
            }
        }
        /* Sessions held for a client that has read since. */
        ipbd_sessions_flow(&d);
        /* Freed only here, so that no event of this round points at freed memory. */
        ipbd_sessions_reap(&d);
        ipbd_clients_reap(&d);
        /* Warm workers taken, ended or due again are replaced. */
        ipbd_warm_fill(&d);
    }
    while (d.clients) {
        ipbd_client_drop(&d, d.clients);
        ipbd_clients_reap(&d);
    }
    if (d.listen.fd >= 0)
        close(d.listen.fd);
    close(d.sig.fd);
    close(d.timer.fd);
    close(d.ep);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    return 0;
}
