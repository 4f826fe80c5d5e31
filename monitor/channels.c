/* The monitor's channels: a frontend's, a worker's, or a worker's sub-channel; each one user's.
 * Requests are the fixed-layout records of mon_proto.h, dispatched by type with each type's
 * permitted senders; a malformed one closes the channel, and closing a channel kills its
 * sandboxes. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "monitor_int.h"
#include "record.h"

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
void ipbm_chan_close(struct ipbm *M, struct ipbm_chan *c) {
    for (struct ipbm_chan *k = M->chans; k;) {
        if (k->parent == c) {
            ipbm_chan_close(M, k); /* a sub-channel has none of its own */
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
void ipbm_user_pause(struct ipbm *M, struct ipbm_user *u, bool paused) {
    if (paused == u->paused)
        return;
    u->paused = paused;
    if (paused)
        log_warn("user %s: %u descriptors the user sent wait to be closed (a closer is stalled, on the user's own "
                 "filesystem, say); the user's requests wait until they are closed",
                 u->name, u->held.n);
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
            snprintf(rep.text, sizeof(rep.text),
                     "user %s has %u sessions open, the most the service allows "
                     "(max_sessions_per_user)",
                     c->user->name, M->conf.max_sessions_per_user);
            if (chan_may_log(c))
                log_warn("user %s: a session refused: %u sessions open", c->user->name, c->user->nchans);
        } else if (parent && c->user->nsubs >= IPBM_USER_SUBS(&M->conf)) {
            snprintf(rep.text, sizeof(rep.text),
                     "user %s has %u sandboxed MCP servers' channels open, the most "
                     "the service allows (twice max_sessions_per_user)",
                     c->user->name, c->user->nsubs);
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
int ipbm_chan_request(struct ipbm *M, struct ipbm_chan *c) {
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
        ipbm_user_pause(M, c->user, true);
    if (ret < 0 && r == 1 && chan_may_log(c))
        log_warn("user %s: a malformed request on a %s channel; closing it", c->user->name,
                 c->frontend ? "frontend" : "worker");
    return ret;
}
