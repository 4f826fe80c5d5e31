#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
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

#include "cleanup.h"
#include "log.h"
#include "proxy_int.h"

/* From <linux/netfilter_ipv4.h> and <linux/netfilter_ipv6/ip6_tables.h>, which do not mix
 * well with the libc headers. */
#define IPB_SO_ORIGINAL_DST 80
#define IPB_IP6T_SO_ORIGINAL_DST 80

#define FIRST_BYTE_MS 1000   /* a client that says nothing is judged by its address alone */
#define PEEK_MS 10000        /* the whole request head or ClientHello */
#define RESOLVE_MS 15000
#define CONNECT_MS 10000
#define DNS_MAX_PENDING 64   /* per sandbox */

enum cmd_op { CMD_ATTACH = 1, CMD_DETACH, CMD_STOP };
struct cmd {
    enum cmd_op op;
    struct sbx *sb;
    uint32_t id;
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
            log_warn("egress: sandbox %s: %u more refusals not logged in the last second", sb->label,
                     sb->log_dropped);
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
    for (struct ifaddrs *i = ifa; i && n < 64; i = i->ifa_next) {
        if (!i->ifa_addr)
            continue;
        if (i->ifa_addr->sa_family == AF_INET) {
            list[n].family = AF_INET;
            memset(list[n].b, 0, 16);
            memcpy(list[n].b, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
            n++;
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            list[n].family = AF_INET6;
            memcpy(list[n].b, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
            n++;
        }
    }
    freeifaddrs(ifa);
    ipb_egress_set_host_addrs(p->policy, list, n);
}

/* ---- connections ---- */

void proxy_close_conn(struct conn *c) {
    if (c->dead)
        return;
    c->dead = true;
    if (c->cw.fd >= 0)
        close(c->cw.fd);
    if (c->uw.fd >= 0)
        close(c->uw.fd);
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 2; i++)
            if (c->h[d].pipe[i] >= 0)
                close(c->h[d].pipe[i]);
    c->cw.fd = c->uw.fd = -1;
    struct sbx *sb = c->sb;
    if (c->rq)
        c->rq->conn = NULL;
    c->rq = NULL;
    if (c->dns_busy)
        sb->ndns--;
    c->dns_busy = false;
    if (c->prev)
        c->prev->next = c->next;
    else
        sb->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    sb->nconns--;
    c->grave_next = c->p->grave;
    c->p->grave = c;
}

static void dest_text(struct conn *c, char *buf, size_t len) {
    if (c->have_odst)
        proxy_addr_port(&c->odst, c->oport, buf, len);
    else
        snprintf(buf, len, "the proxy itself");
}

/* Refuses at once: a one-line 403 where HTTP allows, else a plain close. */
static void refuse(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(struct conn *c, const char *fmt, ...) {
    char why[300], dst[80];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    dest_text(c, dst, sizeof(dst));
    proxy_warn(c->sb, "refused a connection to %s%s%s: %s", dst, c->name[0] ? " for " : "", c->name, why);
    if (c->http || c->connect_mode || c->explicit_) {
        char resp[512];
        int body = (int)strlen(why) + 9;
        int n = snprintf(resp, sizeof(resp),
                         "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                         "Connection: close\r\n\r\nipybox: %s\n",
                         body, why);
        if (n > 0 && (size_t)n < sizeof(resp) && send(c->cw.fd, resp, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
            /* The client went away; nothing to tell. */
        }
    }
    proxy_close_conn(c);
}

static void fail_upstream(struct conn *c, const char *why) {
    char dst[80];
    dest_text(c, dst, sizeof(dst));
    proxy_warn(c->sb, "cannot reach %s%s%s: %s", dst, c->name[0] ? " for " : "", c->name, why);
    if (c->connect_mode) {
        static const char r[] = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        if (send(c->cw.fd, r, sizeof(r) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
            /* nothing to tell */
        }
    }
    proxy_close_conn(c);
}

static void try_connect(struct conn *c) {
    int last = ECONNREFUSED;
    while (c->cur < c->ncand) {
        const ipb_addr *a = &c->cand[c->cur];
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof(ss));
        socklen_t sl;
        if (a->family == AF_INET) {
            struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
            s4->sin_family = AF_INET;
            s4->sin_port = htons(c->port);
            memcpy(&s4->sin_addr, a->b, 4);
            sl = sizeof(*s4);
        } else {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
            s6->sin6_family = AF_INET6;
            s6->sin6_port = htons(c->port);
            memcpy(&s6->sin6_addr, a->b, 16);
            sl = sizeof(*s6);
        }
        int fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            last = errno;
        if (fd >= 0 && (connect(fd, (struct sockaddr *)&ss, sl) == 0 || (last = errno) == EINPROGRESS)) {
            c->uw.fd = fd;
            c->st = C_CONNECT;
            c->deadline = proxy_now_ms() + CONNECT_MS;
            if (proxy_watch(c->p, &c->uw, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET) == 0)
                return;
        }
        if (fd >= 0)
            close(fd);
        c->uw.fd = -1;
        c->cur++;
    }
    fail_upstream(c, strerror(c->conn_errno ? c->conn_errno : last));
}

static void connected(struct conn *c) {
    char dst[80], via[80];
    dest_text(c, dst, sizeof(dst));
    proxy_addr_port(&c->cand[c->cur], c->port, via, sizeof(via));
    log_info("egress: sandbox %s: allowed %s%s%s (%s) via %s", c->sb->label, dst, c->name[0] ? " for " : "",
             c->name, c->via, via);
    if (relay_start(c) < 0) {
        proxy_close_conn(c);
        return;
    }
    relay_pump(c);
}

static void upstream_event(struct conn *c) {
    if (c->st == C_CONNECT) {
        int e = 0;
        socklen_t l = sizeof(e);
        if (getsockopt(c->uw.fd, SOL_SOCKET, SO_ERROR, &e, &l) < 0)
            e = errno;
        if (e == 0) {
            connected(c);
            return;
        }
        if (e == EINPROGRESS || e == EALREADY)
            return;
        c->conn_errno = e;
        close(c->uw.fd);
        c->uw.fd = -1;
        c->cur++;
        try_connect(c);
        return;
    }
    if (c->st == C_RELAY)
        relay_pump(c);
}

static void use_addresses(struct conn *c, const ipb_addr *a, size_t n, const char *via) {
    memcpy(c->cand, a, n * sizeof(*a));
    c->ncand = n;
    c->cur = 0;
    c->via = via;
    /* The dialled address first when it is among the checked ones. */
    for (size_t i = 1; c->have_odst && i < n; i++)
        if (c->cand[i].family == c->odst.family && !memcmp(c->cand[i].b, c->odst.b, 16)) {
            ipb_addr t = c->cand[0];
            c->cand[0] = c->cand[i];
            c->cand[i] = t;
        }
    try_connect(c);
}

/* Whether an address may be reached on its own: an address entry (or, with no list, any
 * public address), a --resolve pin of an allowed name, or an answer the DNS stub gave for an
 * allowed name (then c->name is that name). Returns how it was allowed, or NULL with *why. */
static const char *addr_verdict(struct conn *c, const ipb_addr *a, const char **why) {
    const ipb_egress_policy *pol = c->p->policy;
    *why = NULL;
    if (ipb_egress_addr_allowed(pol, a, false, false, why))
        return pol->n_rules ? "address allowed" : "public address";
    for (size_t i = 0; i < pol->n_pins; i++)
        if (pol->pins[i].addr.family == a->family && !memcmp(pol->pins[i].addr.b, a->b, 16) &&
            ipb_egress_name_allowed(pol, pol->pins[i].name, NULL)) {
            snprintf(c->name, sizeof(c->name), "%s", pol->pins[i].name);
            return "pinned address of an allowed name";
        }
    const char *name = dns_recall(c->sb, a);
    if (name) {
        snprintf(c->name, sizeof(c->name), "%s", name);
        return "address the DNS stub gave for an allowed name";
    }
    return NULL;
}

static void decide_addr(struct conn *c, const ipb_addr *a) {
    const char *why;
    const char *via = addr_verdict(c, a, &why);
    if (via) {
        use_addresses(c, a, 1, via);
        return;
    }
    char t[64];
    ipb_addr_format(a, t, sizeof(t));
    refuse(c, "address %s: %s", t, why ? why : "not allowed");
}

static void resolved(struct conn *c, const ipb_resolve_req *r) {
    if (r->gai_err) {
        refuse(c, "cannot resolve %s: %s", c->name, gai_strerror(r->gai_err));
        return;
    }
    ipb_addr ok[IPB_RESOLVE_MAX];
    size_t n = 0;
    const char *why = NULL;
    for (size_t i = 0; i < r->n; i++) {
        const char *w = NULL;
        if (ipb_egress_addr_allowed(c->p->policy, &r->addrs[i], true, false, &w))
            ok[n++] = r->addrs[i];
        else if (!why)
            why = w;
    }
    if (!n) {
        refuse(c, "%s resolves only to refused addresses (%s)", c->name, why ? why : "none");
        return;
    }
    use_addresses(c, ok, n, "allowed name");
}

static void decide(struct conn *c) {
    ipb_sniff *s = &c->sn;
    const ipb_egress_policy *pol = c->p->policy;
    c->connect_mode = s->kind == IPB_SNIFF_CONNECT;
    c->http = s->kind == IPB_SNIFF_HTTP;
    if (s->kind == IPB_SNIFF_BAD) {
        /* Only TLS (first byte 0x16) and HTTP requests are judged malformed: answer HTTP. */
        c->http = c->len && c->buf[0] != 0x16;
        refuse(c, "%s", s->why);
        return;
    }
    if (c->connect_mode)
        c->port = s->port;
    else if (c->explicit_)
        c->port = s->port ? s->port : 80;
    else
        c->port = c->oport;
    if (c->explicit_ && !c->connect_mode && !(c->http && s->host[0])) {
        refuse(c, "a connection made to the proxy itself must begin with CONNECT or an HTTP request with a Host");
        return;
    }
    if (!s->host[0]) {
        decide_addr(c, &c->odst);
        return;
    }
    ipb_addr lit;
    if (ipb_addr_parse(s->host, strlen(s->host), &lit)) {
        decide_addr(c, &lit);
        return;
    }
    if (!ipb_name_normalize(s->host, strlen(s->host), c->name)) {
        refuse(c, "malformed host name");
        return;
    }
    const char *why = NULL;
    if (!ipb_egress_name_allowed(pol, c->name, &why)) {
        /* A name outside the list may still go to an address an address entry allows. */
        const char *w2 = NULL;
        if (!c->explicit_ && !c->connect_mode && pol->n_rules &&
            ipb_egress_addr_allowed(pol, &c->odst, false, false, &w2)) {
            use_addresses(c, &c->odst, 1, "address allowed");
            return;
        }
        refuse(c, "%s", why ? why : "name not allowed");
        return;
    }
    ipb_addr pins[IPB_RESOLVE_MAX];
    size_t np = ipb_egress_pins(pol, c->name, pins, IPB_RESOLVE_MAX);
    if (np) {
        use_addresses(c, pins, np < IPB_RESOLVE_MAX ? np : IPB_RESOLVE_MAX, "pinned name");
        return;
    }
    struct preq *q = calloc(1, sizeof(*q));
    if (!q) {
        proxy_close_conn(c);
        return;
    }
    snprintf(q->r.name, sizeof(q->r.name), "%s", c->name);
    q->r.family = AF_UNSPEC;
    q->kind = RQ_CONN;
    q->conn = c;
    c->rq = q;
    c->st = C_RESOLVE;
    c->deadline = proxy_now_ms() + RESOLVE_MS;
    ipb_resolver_submit(c->p->res, &q->r);
}

static void peek_readable(struct conn *c) {
    bool eof = false;
    size_t before = c->len;
    while (c->len < IPB_SNIFF_MAX) {
        ssize_t n = recv(c->cw.fd, c->buf + c->len, IPB_SNIFF_MAX - c->len, MSG_DONTWAIT);
        if (n > 0) {
            c->len += (size_t)n;
            continue;
        }
        if (n == 0) {
            eof = true;
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN)
            break;
        proxy_close_conn(c);
        return;
    }
    if (eof && c->len == 0) {
        proxy_close_conn(c);
        return;
    }
    c->h[0].eof = eof;
    if (c->len == 0)
        return;
    if (before == 0)
        c->deadline = proxy_now_ms() + PEEK_MS;
    enum ipb_sniff_kind k = ipb_sniff_bytes(c->buf, c->len, &c->sn);
    if (k == IPB_SNIFF_MORE) {
        if (eof || c->len >= IPB_SNIFF_MAX) {
            c->sn.kind = IPB_SNIFF_OTHER;
        } else {
            return;
        }
    }
    decide(c);
}

static void client_event(struct conn *c) {
    switch (c->st) {
    case C_PEEK:
        peek_readable(c);
        break;
    case C_RELAY:
        relay_pump(c);
        break;
    case C_DNS:
        dns_tcp_readable(c);
        break;
    default:
        /* Resolving or connecting: the bytes wait in the socket; the relay reads them. */
        break;
    }
}

struct conn *proxy_new_conn(struct ipb_proxy *p, struct sbx *sb, int fd) {
    struct conn *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return NULL;
    }
    c->p = p;
    c->sb = sb;
    c->cw = (struct watch){W_CLIENT, c, fd};
    c->uw = (struct watch){W_UPSTREAM, c, -1};
    for (int d = 0; d < 2; d++)
        c->h[d].pipe[0] = c->h[d].pipe[1] = -1;
    c->next = sb->conns;
    if (sb->conns)
        sb->conns->prev = c;
    sb->conns = c;
    sb->nconns++;
    if (proxy_watch(p, &c->cw, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET) < 0) {
        proxy_close_conn(c);
        return NULL;
    }
    return c;
}

static bool original_dst(int fd, int family, ipb_addr *a, uint16_t *port) {
    struct sockaddr_storage ss;
    socklen_t l = sizeof(ss);
    memset(&ss, 0, sizeof(ss));
    if (family == AF_INET) {
        if (getsockopt(fd, SOL_IP, IPB_SO_ORIGINAL_DST, &ss, &l) < 0)
            return false;
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        a->family = AF_INET;
        memset(a->b, 0, 16);
        memcpy(a->b, &s4->sin_addr, 4);
        *port = ntohs(s4->sin_port);
    } else {
        if (getsockopt(fd, SOL_IPV6, IPB_IP6T_SO_ORIGINAL_DST, &ss, &l) < 0)
            return false;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        a->family = AF_INET6;
        memcpy(a->b, &s6->sin6_addr, 16);
        *port = ntohs(s6->sin6_port);
    }
    return true;
}

/* The cap: a connection over it is closed at once, and said so (rate-limited). */
static bool over_cap(struct ipb_proxy *p, struct sbx *sb, int fd) {
    if (sb->nconns < p->max_conns)
        return false;
    proxy_warn(sb, "refused a connection: %u connections are open, the most a sandbox may have", sb->nconns);
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

static void listener_readable(struct ipb_proxy *p, struct sbx *sb, int idx) {
    int family = idx == IPB_EGRESS_PROXY6 ? AF_INET6 : AF_INET;
    for (int i = 0; i < 64; i++) {
        int fd = accept_conn(p, sb, sb->w[idx].fd);
        if (fd < 0)
            return;
        if (over_cap(p, sb, fd))
            continue;
        struct conn *c = proxy_new_conn(p, sb, fd);
        if (!c)
            continue;
        c->st = C_PEEK;
        c->deadline = proxy_now_ms() + FIRST_BYTE_MS;
        c->buf = malloc(IPB_SNIFF_MAX);
        if (!c->buf) {
            proxy_close_conn(c);
            continue;
        }
        c->have_odst = original_dst(fd, family, &c->odst, &c->oport);
        c->explicit_ = !c->have_odst;
        /* A destination allowed by its address needs no sniffing: whatever name the bytes
         * carry, they go to that address, and server-first protocols (SSH, SMTP) need not
         * wait. Everything else is judged by its first bytes. */
        const char *why, *via = c->have_odst ? addr_verdict(c, &c->odst, &why) : NULL;
        if (via) {
            c->port = c->oport;
            use_addresses(c, &c->odst, 1, via);
            continue;
        }
        peek_readable(c);
    }
}

static void dns_tcp_listener_readable(struct ipb_proxy *p, struct sbx *sb, int idx) {
    for (int i = 0; i < 64; i++) {
        int fd = accept_conn(p, sb, sb->w[idx].fd);
        if (fd < 0)
            return;
        if (over_cap(p, sb, fd))
            continue;
        dns_tcp_accept(p, sb, fd);
    }
}

static void sweep_deadlines(struct ipb_proxy *p) {
    long now = proxy_now_ms();
    for (struct sbx *sb = p->sbs; sb; sb = sb->next)
        for (struct conn *c = sb->conns, *n; c; c = n) {
            n = c->next;
            if (c->st == C_RELAY || c->deadline > now)
                continue;
            switch (c->st) {
            case C_PEEK:
                if (c->len == 0) {
                    /* It says nothing: a server-first protocol; judge the address alone. */
                    c->sn.kind = IPB_SNIFF_OTHER;
                    if (c->explicit_)
                        refuse(c, "nothing was sent to the proxy");
                    else
                        decide(c);
                } else {
                    refuse(c, "the request did not arrive whole within %d s", PEEK_MS / 1000);
                }
                break;
            case C_RESOLVE:
                refuse(c, "resolving %s took too long", c->name);
                break;
            case C_CONNECT:
                c->conn_errno = ETIMEDOUT;
                close(c->uw.fd);
                c->uw.fd = -1;
                c->cur++;
                try_connect(c);
                break;
            case C_DNS:
                proxy_close_conn(c);
                break;
            case C_RELAY:
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
                resolved(c, &q->r);
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

static void sbx_detach(struct ipb_proxy *p, struct sbx *sb) {
    while (sb->conns)
        proxy_close_conn(sb->conns);
    for (struct preq *q = sb->dns_pending; q; q = q->sb_next)
        q->sb = NULL;
    sb->dns_pending = NULL;
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
        [IPB_EGRESS_PROXY4] = W_LISTEN,          [IPB_EGRESS_PROXY6] = W_LISTEN,
        [IPB_EGRESS_DNS_TCP4] = W_DNS_TCP_LISTEN, [IPB_EGRESS_DNS_TCP6] = W_DNS_TCP_LISTEN,
        [IPB_EGRESS_DNS_UDP4] = W_DNS_UDP,       [IPB_EGRESS_DNS_UDP6] = W_DNS_UDP,
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
                if (w->kind == W_LISTEN)
                    listener_readable(p, sb, idx);
                else if (w->kind == W_DNS_TCP_LISTEN)
                    dns_tcp_listener_readable(p, sb, idx);
                else
                    dns_udp_readable(p, sb, idx);
                break;
            }
            case W_CLIENT:
            case W_UPSTREAM: {
                struct conn *c = w->owner;
                if (c->dead)
                    break;
                if (w->kind == W_CLIENT)
                    client_event(c);
                else
                    upstream_event(c);
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
    struct cmd c = {CMD_ATTACH, sb, sb->id};
    if (call(p, &c) < 0) {
        sbx_free_fds(sb);
        free(sb);
        return ipb_error_set(err, EIO, "the egress proxy is not running");
    }
    *ret_id = sb->id;
    return 0;
}

void ipb_proxy_detach(ipb_proxy *p, uint32_t id) {
    if (!p || !id)
        return;
    struct cmd c = {CMD_DETACH, NULL, id};
    call(p, &c);
}

void ipb_proxy_stop(ipb_proxy *p) {
    if (!p)
        return;
    struct cmd c = {CMD_STOP, NULL, 0};
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
