#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <ifaddrs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "proxy_int.h"

#define DNS_MAX_PENDING 64 /* per sandbox */

/* A queue drained when a sandbox's processes end: at most a listener's backlog. */
#define DRAIN_MAX 4096

enum cmd_op { CMD_ATTACH = 1, CMD_DETACH, CMD_END, CMD_STOP, CMD_TAKE_NOTES, CMD_CLEAR_NOTES };
struct cmd {
    enum cmd_op op;
    struct sbx *sb;
    uint32_t id;
    unsigned *ret;           /* CMD_END: how many were ended; CMD_TAKE_NOTES: 1 when served */
    ipb_egress_notes *notes; /* CMD_TAKE_NOTES */
};

long proxy_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

void proxy_addr_port(const ipb_addr *a, uint16_t port, char *buf, size_t len) {
    char t[64];
    ipb_addr_format(a, t, sizeof(t));
    snprintf(buf, len, a->family == AF_INET6 ? "[%s]:%u" : "%s:%u", t, port);
}

void proxy_warn(struct sbx *sb, const char *fmt, ...) {
    long now = proxy_now_ms();
    if (now - sb->log_window >= 1000) {
        if (sb->log_dropped)
            log_warn("egress: sandbox %s: %u more refusals not logged in the last second", sb->label, sb->log_dropped);
        sb->log_window = now;
        sb->log_count = sb->log_dropped = 0;
    }
    if (++sb->log_count > 20) {
        sb->log_dropped++;
        return;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_warn("egress: sandbox %s: %s", sb->label, msg);
}

void proxy_note(struct ipb_proxy *p, struct sbx *sb, enum note_kind k, const char *host, size_t host_len,
                const ipb_addr *a, bool dns, uint16_t port, const char *why) {
    char atext[64];
    ipb_addr lit;
    if (!host) {
        if (!a)
            return;
        ipb_addr_format(a, atext, sizeof(atext));
        host = atext;
        host_len = strlen(atext);
    } else if (k == NOTE_NAME && ipb_addr_parse(host, host_len, &lit)) {
        /* An address literal where a name goes is judged as an address. */
        k = NOTE_ADDR;
        a = &lit;
    }
    ipb_egress_note *e = ipb_egress_notes_add(&sb->notes, host, host_len, dns, port, why ? why : "refused");
    if (!e)
        return; /* told already, or only counted */
    e->is_addr = host == atext || (k == NOTE_ADDR && a == &lit);
    char name[IPB_NAME_MAX + 1];
    bool ok = false;
    switch (k) {
    case NOTE_NAME:
        ok = ipb_name_normalize(host, host_len, name) &&
             ipb_egress_suggest_entry(p->policy, name, NULL, false, e->allow, sizeof(e->allow));
        e->no_option = !ok; /* a name no entry allows: a metadata name */
        break;
    case NOTE_ADDR:
        ok = a && ipb_egress_suggest_entry(p->policy, NULL, a, false, e->allow, sizeof(e->allow));
        break;
    case NOTE_RESOLVED: /* an allowed name: the reason says where it leads; nothing to suggest */
    case NOTE_OTHER:
        return;
    }
    e->starts_list = ok && p->policy->n_rules == 0;
}

int proxy_watch(struct ipb_proxy *p, struct watch *w, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.ptr = w};
    return epoll_ctl(p->ep, EPOLL_CTL_ADD, w->fd, &ev);
}

static void host_addrs_refresh(struct ipb_proxy *p) {
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) < 0)
        return;
    ipb_addr list[64];
    size_t n = 0;
    for (struct ifaddrs *i = ifa; i && n < 64; i = i->ifa_next)
        if (i->ifa_addr && ipb_addr_from_sockaddr(i->ifa_addr, &list[n], NULL))
            n++;
    freeifaddrs(ifa);
    ipb_egress_set_host_addrs(p->policy, list, n);
}

/* The cap: a connection over it is closed at once, and said so (rate-limited). */
static bool over_cap(struct ipb_proxy *p, struct sbx *sb, int fd) {
    if (sb->nconns < p->max_conns)
        return false;
    proxy_warn(sb, "refused a connection: %u connections are open, the most a sandbox may have", sb->nconns);
    char why[120];
    snprintf(why, sizeof(why), "%u connections are open, the most a sandbox may have (--max-connections)", sb->nconns);
    proxy_note(p, sb, NOTE_OTHER, "", 0, NULL, false, 0, why);
    close(fd);
    return true;
}

/* accept4, and when the process is out of descriptors, accept with the spare one and close
 * at once: a connection left in the backlog would keep the listener readable and spin the
 * loop. Returns -1 when there is nothing (more) to accept. */
static int accept_conn(struct ipb_proxy *p, struct sbx *sb, int lfd) {
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0)
            return fd;
        if ((errno != EMFILE && errno != ENFILE) || p->spare < 0)
            return -1;
        close(p->spare);
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0)
            close(fd);
        p->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
        proxy_warn(sb, "refused a connection: the supervisor is out of file descriptors");
        if (fd < 0)
            return -1;
    }
}

/* New connections on a proxy or DNS-over-TCP listener, within the sandbox's cap. */
static void listener_readable(struct ipb_proxy *p, struct sbx *sb, int idx) {
    for (int i = 0; i < 64; i++) {
        int fd = accept_conn(p, sb, sb->w[idx].fd);
        if (fd < 0)
            return;
        if (over_cap(p, sb, fd))
            continue;
        if (sb->w[idx].kind == W_DNS_TCP_LISTEN) {
            dns_tcp_accept(p, sb, fd);
            continue;
        }
        struct conn *c = proxy_new_conn(p, sb, fd);
        if (c)
            conn_start(c);
    }
}

static void sweep_deadlines(struct ipb_proxy *p) {
    long now = proxy_now_ms();
    for (struct sbx *sb = p->sbs; sb; sb = sb->next)
        for (struct conn *c = sb->conns, *n; c; c = n) {
            n = c->next;
            if ((c->st == C_RELAY && !(c->judge_late && c->len)) || c->deadline > now)
                continue;
            switch (c->st) {
            case C_PEEK:
                if (c->len == 0) {
                    /* It says nothing: a server-first protocol; judge the address alone. */
                    c->sn.kind = IPB_SNIFF_OTHER;
                    if (c->explicit_) {
                        conn_refuse(c, "nothing was sent to the proxy");
                    } else {
                        conn_judge_later(c);
                        conn_decide(c);
                    }
                } else {
                    conn_refuse(c, "the request did not arrive whole within %d s", PEEK_MS / 1000);
                }
                break;
            case C_TUNNEL:
                if (c->len == 0) {
                    /* Nothing through the tunnel yet: no name to judge; a server-first protocol. */
                    c->sn.kind = IPB_SNIFF_OTHER;
                    conn_judge_later(c);
                    tunnel_decide(c);
                } else {
                    conn_refuse(c, "the tunnel's first request did not arrive whole within %d s", PEEK_MS / 1000);
                }
                break;
            case C_RESOLVE:
                conn_refuse(c, "resolving %s took too long", c->name);
                break;
            case C_CONNECT:
                c->conn_errno = ETIMEDOUT;
                close(c->uw.fd);
                c->uw.fd = -1;
                c->cur++;
                conn_try_connect(c);
                break;
            case C_DNS:
                proxy_close_conn(c);
                break;
            case C_RELAY:
                conn_refuse(c, "the first request after a silent start did not arrive whole within %d s",
                            PEEK_MS / 1000);
                break;
            }
        }
}

static void resolver_readable(struct ipb_proxy *p) {
    ipb_resolve_req *d = ipb_resolver_take_done(p->res);
    while (d) {
        ipb_resolve_req *next = d->next;
        struct preq *q = (struct preq *)d;
        if (q->kind == RQ_CONN) {
            struct conn *c = q->conn;
            if (c) {
                c->rq = NULL;
                conn_resolved(c, &q->r);
            }
            free(q);
        } else {
            dns_resolved(p, q); /* frees q */
        }
        d = next;
    }
}

/* ---- sandboxes ---- */

static void sbx_free_fds(struct sbx *sb) {
    for (int i = 0; i < IPB_EGRESS_NFDS; i++)
        if (sb->w[i].fd >= 0) {
            close(sb->w[i].fd);
            sb->w[i].fd = -1;
        }
}

/* Ends what the sandbox's processes have here: its connections, both sides; the connections
 * and DNS datagrams still queued on its listeners (made before now, so by what ends: a
 * connection accepted later would be relayed for a process that is gone); and its DNS
 * queries waiting for the resolver, whose answers are then dropped. Logs one line (what
 * says whose they were) when there was anything; returns how many. */
static unsigned sbx_end(struct ipb_proxy *p, struct sbx *sb, const char *what) {
    unsigned conns = 0, dns = 0;
    for (; sb->conns; conns++)
        proxy_close_conn(sb->conns);
    for (struct preq *q = sb->dns_pending; q; q = q->sb_next, dns++) {
        q->sb = NULL;
        ipb_resolver_cancel(p->res, &q->r);
    }
    sb->dns_pending = NULL;
    sb->ndns = 0; /* the TCP ones were released with their connections */
    for (int i = 0; i < IPB_EGRESS_NFDS; i++) {
        int fd = sb->w[i].fd;
        for (int k = 0; fd >= 0 && k < DRAIN_MAX; k++) {
            if (sb->w[i].kind == W_DNS_UDP) {
                char b;
                if (recv(fd, &b, 1, MSG_DONTWAIT | MSG_TRUNC) < 0)
                    break;
                dns++;
            } else {
                int c = accept_conn(p, sb, fd);
                if (c < 0)
                    break;
                close(c);
                conns++;
            }
        }
    }
    char queries[48] = "";
    if (dns)
        snprintf(queries, sizeof(queries), " and %u DNS quer%s", dns, dns == 1 ? "y" : "ies");
    if (conns || dns)
        log_info("egress: sandbox %s: ended %u connection%s%s %s", sb->label, conns, conns == 1 ? "" : "s", queries,
                 what);
    return conns + dns;
}

static void sbx_detach(struct ipb_proxy *p, struct sbx *sb) {
    sbx_end(p, sb, "as the sandbox closed");
    sbx_free_fds(sb);
    sb->dead = true;
    for (struct sbx **pp = &p->sbs; *pp; pp = &(*pp)->next)
        if (*pp == sb) {
            *pp = sb->next;
            break;
        }
    sb->next = p->sb_grave;
    p->sb_grave = sb;
}

static void sbx_attach(struct ipb_proxy *p, struct sbx *sb) {
    host_addrs_refresh(p);
    static const uint8_t kinds[IPB_EGRESS_NFDS] = {
        [IPB_EGRESS_PROXY4] = W_LISTEN,           [IPB_EGRESS_PROXY6] = W_LISTEN,
        [IPB_EGRESS_DNS_TCP4] = W_DNS_TCP_LISTEN, [IPB_EGRESS_DNS_TCP6] = W_DNS_TCP_LISTEN,
        [IPB_EGRESS_DNS_UDP4] = W_DNS_UDP,        [IPB_EGRESS_DNS_UDP6] = W_DNS_UDP,
    };
    for (int i = 0; i < IPB_EGRESS_NFDS; i++) {
        sb->w[i].kind = kinds[i];
        sb->w[i].owner = sb;
        if (sb->w[i].fd >= 0)
            proxy_watch(p, &sb->w[i], EPOLLIN);
    }
    sb->next = p->sbs;
    p->sbs = sb;
}

static void command(struct ipb_proxy *p) {
    struct cmd c;
    ssize_t n = recv(p->cmd[1], &c, sizeof(c), MSG_DONTWAIT);
    if (n != sizeof(c))
        return;
    switch (c.op) {
    case CMD_ATTACH:
        sbx_attach(p, c.sb);
        break;
    case CMD_DETACH:
        for (struct sbx *sb = p->sbs; sb; sb = sb->next)
            if (sb->id == c.id) {
                sbx_detach(p, sb);
                break;
            }
        break;
    case CMD_END:
        for (struct sbx *sb = p->sbs; sb; sb = sb->next)
            if (sb->id == c.id) {
                *c.ret = sbx_end(p, sb, "of the old kernel");
                break;
            }
        break;
    case CMD_TAKE_NOTES:
        for (struct sbx *sb = p->sbs; sb; sb = sb->next)
            if (sb->id == c.id) {
                ipb_egress_notes_take(&sb->notes, c.notes);
                *c.ret = 1;
                break;
            }
        break;
    case CMD_CLEAR_NOTES:
        for (struct sbx *sb = p->sbs; sb; sb = sb->next)
            if (sb->id == c.id)
                ipb_egress_notes_clear(&sb->notes);
        break;
    case CMD_STOP:
        while (p->sbs)
            sbx_detach(p, p->sbs);
        p->stopping = true;
        break;
    }
    char ack = 1;
    if (send(p->cmd[1], &ack, 1, MSG_NOSIGNAL) < 0) {
        /* The caller is gone. */
    }
}

static void bury(struct ipb_proxy *p) {
    for (struct conn *c = p->grave, *n; c; c = n) {
        n = c->grave_next;
        free(c->buf);
        free(c);
    }
    p->grave = NULL;
    for (struct sbx *sb = p->sb_grave, *n; sb; sb = n) {
        n = sb->next;
        free(sb);
    }
    p->sb_grave = NULL;
}

static void *loop(void *arg) {
    struct ipb_proxy *p = arg;
    struct epoll_event evs[64];
    while (!p->stopping) {
        int n = epoll_wait(p->ep, evs, 64, p->ready ? 0 : -1);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            struct watch *w = evs[i].data.ptr;
            switch (w->kind) {
            case W_CMD:
                command(p);
                break;
            case W_RESOLVER:
                resolver_readable(p);
                break;
            case W_TIMER: {
                uint64_t t;
                if (read(p->timer, &t, sizeof(t)) < 0) {
                    /* spurious */
                }
                sweep_deadlines(p);
                break;
            }
            case W_LISTEN:
            case W_DNS_TCP_LISTEN:
            case W_DNS_UDP: {
                struct sbx *sb = w->owner;
                if (sb->dead)
                    break;
                int idx = (int)(w - sb->w);
                if (w->kind == W_DNS_UDP)
                    dns_udp_readable(p, sb, idx);
                else
                    listener_readable(p, sb, idx);
                break;
            }
            case W_CLIENT:
            case W_UPSTREAM: {
                struct conn *c = w->owner;
                if (c->dead)
                    break;
                if (w->kind == W_CLIENT)
                    conn_client_event(c);
                else
                    conn_upstream_event(c);
                break;
            }
            }
        }
        /* Connections that used their budget go again, in turn. */
        struct conn *r = p->ready;
        p->ready = NULL;
        while (r) {
            struct conn *next = r->ready_next;
            r->on_ready = false;
            if (!r->dead)
                relay_pump(r);
            r = next;
        }
        bury(p);
    }
    bury(p);
    return NULL;
}

/* ---- the caller's side ---- */

static int call(struct ipb_proxy *p, struct cmd *c) {
    pthread_mutex_lock(&p->call_lock);
    int r = -1;
    if (send(p->cmd[0], c, sizeof(*c), MSG_NOSIGNAL) == sizeof(*c)) {
        char ack;
        ssize_t n;
        do
            n = recv(p->cmd[0], &ack, 1, 0);
        while (n < 0 && errno == EINTR);
        r = n == 1 ? 0 : -1;
    }
    pthread_mutex_unlock(&p->call_lock);
    return r;
}

static void raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int ipb_proxy_start(ipb_egress_policy *policy, unsigned max_conns, ipb_proxy **ret, ipb_error **err) {
    struct ipb_proxy *p = calloc(1, sizeof(*p));
    if (!p)
        return ipb_error_set(err, ENOMEM, "starting the egress proxy");
    p->policy = policy;
    p->max_conns = max_conns ? max_conns : IPB_PROXY_DEFAULT_MAX_CONNS;
    p->ep = p->timer = p->cmd[0] = p->cmd[1] = -1;
    p->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pthread_mutex_init(&p->call_lock, NULL);
    raise_nofile();
    p->ep = epoll_create1(EPOLL_CLOEXEC);
    p->timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (p->ep < 0 || p->timer < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p->cmd) < 0) {
        ipb_error_set(err, errno, "starting the egress proxy");
        goto fail;
    }
    if (ipb_resolver_start(4, &p->res, err) < 0)
        goto fail;
    struct itimerspec its = {{0, 200 * 1000000L}, {0, 200 * 1000000L}};
    timerfd_settime(p->timer, 0, &its, NULL);
    p->w_cmd = (struct watch){W_CMD, p, p->cmd[1]};
    p->w_res = (struct watch){W_RESOLVER, p, ipb_resolver_fd(p->res)};
    p->w_timer = (struct watch){W_TIMER, p, p->timer};
    if (proxy_watch(p, &p->w_cmd, EPOLLIN) < 0 || proxy_watch(p, &p->w_res, EPOLLIN) < 0 ||
        proxy_watch(p, &p->w_timer, EPOLLIN) < 0) {
        ipb_error_set(err, errno, "starting the egress proxy: epoll");
        goto fail;
    }
    host_addrs_refresh(p);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&p->thread, NULL, loop, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0) {
        ipb_error_set(err, r, "starting the egress proxy thread");
        goto fail;
    }
    *ret = p;
    return 0;
fail:
    ipb_resolver_stop(p->res);
    if (p->ep >= 0)
        close(p->ep);
    if (p->timer >= 0)
        close(p->timer);
    if (p->cmd[0] >= 0) {
        close(p->cmd[0]);
        close(p->cmd[1]);
    }
    if (p->spare >= 0)
        close(p->spare);
    free(p);
    return -1;
}

int ipb_proxy_attach(ipb_proxy *p, const char *label, ipb_egress_fds *fds, uint32_t *ret_id, ipb_error **err) {
    struct sbx *sb = calloc(1, sizeof(*sb));
    if (!sb)
        return ipb_error_set(err, ENOMEM, "serving the sandbox's egress");
    snprintf(sb->label, sizeof(sb->label), "%s", label);
    for (int i = 0; i < IPB_EGRESS_NFDS; i++) {
        sb->w[i].fd = fds->fd[i];
        fds->fd[i] = -1;
    }
    pthread_mutex_lock(&p->call_lock);
    sb->id = ++p->next_id;
    pthread_mutex_unlock(&p->call_lock);
    struct cmd c = {CMD_ATTACH, sb, sb->id, NULL, NULL};
    if (call(p, &c) < 0) {
        sbx_free_fds(sb);
        free(sb);
        return ipb_error_set(err, EIO, "the egress proxy is not running");
    }
    *ret_id = sb->id;
    return 0;
}

unsigned ipb_proxy_end_all(ipb_proxy *p, uint32_t id) {
    unsigned n = 0;
    if (!p || !id)
        return 0;
    struct cmd c = {CMD_END, NULL, id, &n, NULL};
    if (call(p, &c) < 0)
        return 0;
    return n;
}

int ipb_proxy_take_notes(ipb_proxy *p, uint32_t id, ipb_egress_notes *out) {
    unsigned served = 0;
    ipb_egress_notes_clear(out);
    if (!p || !id)
        return -1;
    struct cmd c = {CMD_TAKE_NOTES, NULL, id, &served, out};
    if (call(p, &c) < 0 || !served)
        return -1;
    return 0;
}

void ipb_proxy_clear_notes(ipb_proxy *p, uint32_t id) {
    if (!p || !id)
        return;
    struct cmd c = {CMD_CLEAR_NOTES, NULL, id, NULL, NULL};
    call(p, &c);
}

void ipb_proxy_detach(ipb_proxy *p, uint32_t id) {
    if (!p || !id)
        return;
    struct cmd c = {CMD_DETACH, NULL, id, NULL, NULL};
    call(p, &c);
}

void ipb_proxy_stop(ipb_proxy *p) {
    if (!p)
        return;
    struct cmd c = {CMD_STOP, NULL, 0, NULL, NULL};
    if (call(p, &c) == 0)
        pthread_join(p->thread, NULL);
    ipb_resolver_stop(p->res);
    close(p->ep);
    close(p->timer);
    close(p->cmd[0]);
    close(p->cmd[1]);
    if (p->spare >= 0)
        close(p->spare);
    pthread_mutex_destroy(&p->call_lock);
    free(p);
}
