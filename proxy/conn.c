/* A connection's life in the proxy: its original destination, the sniffed name, the decision
 * (ipb_egress_decide: a visible name decides, the dialled address only when there is none),
 * the upstream connect, a CONNECT tunnel's own first bytes, and refusals. The loop (proxy.c)
 * calls in on events and deadlines; the relay (relay.c) takes over once connected. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "proxy_int.h"

/* From <linux/netfilter_ipv4.h> and <linux/netfilter_ipv6/ip6_tables.h>, which do not mix
 * well with the libc headers. */
#define IPB_SO_ORIGINAL_DST 80
#define IPB_IP6T_SO_ORIGINAL_DST 80

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
    if (c->rq) {
        c->rq->conn = NULL;
        ipb_resolver_cancel(c->p->res, &c->rq->r);
    }
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

/* A short answer to the client, best effort: it is closed next anyway. */
static void tell_client(struct conn *c, const char *msg, size_t len) {
    if (send(c->cw.fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        /* The client went away; nothing to tell. */
    }
}

void conn_note(struct conn *c, enum note_kind k, const char *host, const ipb_addr *a, const char *why) {
    uint16_t port = c->port ? c->port : c->oport;
    c->noted = true;
    if (!host && !a) {
        if (c->name[0]) {
            host = c->name;
        } else if (c->have_odst) {
            a = &c->odst;
        } else {
            host = "127.0.0.1"; /* made to the proxy's own port, nothing named yet */
            port = 1023;
        }
    }
    proxy_note(c->p, c->sb, k, host, host ? strlen(host) : 0, a, false, port, why);
}

/* Refuses at once: a one-line 403 where HTTP allows, else a plain close. */
void conn_refuse(struct conn *c, const char *fmt, ...) {
    char why[300], dst[80];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    dest_text(c, dst, sizeof(dst));
    proxy_warn(c->sb, "refused a connection to %s%s%s: %s", dst, c->name[0] ? " for " : "", c->name, why);
    if (!c->noted)
        conn_note(c, NOTE_OTHER, NULL, NULL, why);
    if (c->tunnel ? c->http : (c->http || c->connect_mode || c->explicit_)) {
        char resp[512];
        int body = (int)strlen(why) + 9;
        int n = snprintf(resp, sizeof(resp),
                         "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                         "Connection: close\r\n\r\nipybox: %s\n",
                         body, why);
        if (n > 0 && (size_t)n < sizeof(resp))
            tell_client(c, resp, (size_t)n);
    }
    proxy_close_conn(c);
}

static void fail_upstream(struct conn *c, const char *why) {
    char dst[80];
    dest_text(c, dst, sizeof(dst));
    proxy_warn(c->sb, "cannot reach %s%s%s: %s", dst, c->name[0] ? " for " : "", c->name, why);
    if (c->connect_mode) {
        static const char r[] = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        tell_client(c, r, sizeof(r) - 1);
    }
    proxy_close_conn(c);
}

void conn_try_connect(struct conn *c) {
    int last = ECONNREFUSED;
    while (c->cur < c->ncand) {
        const ipb_addr *a = &c->cand[c->cur];
        struct sockaddr_storage ss;
        socklen_t sl = ipb_addr_to_sockaddr(a, c->port, &ss);
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

static void peek_readable(struct conn *c);

/* What the DNS stub gave out to this sandbox. */
static const char *memo_recall(void *ctx, const ipb_addr *a) { return dns_recall(ctx, a); }
static bool memo_gave(void *ctx, const ipb_addr *a, const char *name) { return dns_gave(ctx, a, name); }
static ipb_egress_memo memo_of(struct conn *c) {
    return (ipb_egress_memo){.recall = memo_recall, .gave = memo_gave, .ctx = c->sb};
}

/* ---- CONNECT tunnels

 * An allowed CONNECT is answered once its upstream connection is made; what the client then
 * sends through the tunnel is read and judged like a connection of its own before any of it
 * goes on: a TLS server name, an HTTP Host or a nested CONNECT authority must be allowed too
 * (an address literal must be allowed on its own, or be the address connected to). The
 * tunnel still goes only to the checked address of the CONNECT's name. Bytes that carry no
 * name go through; so does a tunnel whose server speaks first, before the client said
 * anything (or after FIRST_BYTE_MS of silence). */

static const char connect_ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

static void tunnel_open(struct conn *c) {
    if (relay_start(c) < 0) {
        proxy_close_conn(c);
        return;
    }
    relay_pump(c);
    if (!c->dead && c->judge_late)
        conn_late_peek(c); /* what the client sent meanwhile: its edge may be spent */
}

static void tunnel_start(struct conn *c) {
    if (send(c->cw.fd, connect_ok, sizeof(connect_ok) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) !=
        (ssize_t)(sizeof(connect_ok) - 1)) {
        proxy_close_conn(c); /* a fresh socket takes 39 bytes; the client is gone */
        return;
    }
    c->tunnel = true;
    c->http = false;
    /* Bytes sent after the CONNECT head, without waiting for the answer, are the tunnel's. */
    size_t head = c->sn.head_len;
    memmove(c->buf, c->buf + head, c->len - head);
    c->len -= head;
    memset(&c->sn, 0, sizeof(c->sn));
    c->st = C_TUNNEL;
    c->deadline = proxy_now_ms() + (c->len ? PEEK_MS : FIRST_BYTE_MS);
    if (c->len) {
        enum ipb_sniff_kind k = ipb_sniff_bytes(c->buf, c->len, &c->sn);
        if (k == IPB_SNIFF_MORE && (c->h[0].eof || c->len >= IPB_SNIFF_MAX)) {
            conn_refuse(c, "inside the CONNECT tunnel: the first request ended before its head was complete");
            return;
        }
        if (k != IPB_SNIFF_MORE) {
            tunnel_decide(c);
            return;
        }
    }
    if (c->h[0].eof && !c->len) {
        tunnel_open(c); /* nothing to judge: the relay carries the close */
        return;
    }
    /* More may already wait in the socket: edge-triggered, so read now. */
    peek_readable(c);
}

static const char *name_kind(const ipb_sniff *s) {
    return s->kind == IPB_SNIFF_TLS       ? "the TLS server name"
           : s->kind == IPB_SNIFF_CONNECT ? "the CONNECT authority"
                                          : "the Host";
}

/* A name the client sent once its upstream was chosen (inside a tunnel, or after a silent
 * start): it must be allowed, or be an address literal of the address connected to. */
static bool later_name_ok(struct conn *c, const char **ret_why) {
    const ipb_sniff *s = &c->sn;
    ipb_egress_verdict v;
    ipb_egress_memo m = memo_of(c);
    if (ipb_egress_decide(c->p->policy, s->host, NULL, &m, &v))
        return true;
    ipb_addr lit;
    if (ipb_addr_parse(s->host, strlen(s->host), &lit) && ipb_addr_equal(&lit, &c->cand[c->cur]))
        return true;
    *ret_why = v.why;
    return false;
}

void tunnel_decide(struct conn *c) {
    ipb_sniff *s = &c->sn;
    c->http = s->kind == IPB_SNIFF_HTTP || s->kind == IPB_SNIFF_CONNECT;
    if (s->kind == IPB_SNIFF_BAD) {
        conn_refuse(c, "inside the CONNECT tunnel: %s", s->why);
        return;
    }
    const char *why;
    if (!s->host[0] || later_name_ok(c, &why)) {
        tunnel_open(c);
        return;
    }
    conn_note(c, NOTE_NAME, s->host, NULL, why);
    conn_refuse(c, "%s inside the CONNECT tunnel, %s: %s", name_kind(s), s->host, why);
}

/* With an allowlist in force, a connection opened on its client's silence is judged again by
 * the first bytes the client sends later: waiting a second must not turn the rule "the name
 * decides" into "the address decides". Without a list every name is allowed anyway. */
void conn_judge_later(struct conn *c) { c->judge_late = c->p->policy->n_rules > 0; }

static void late_release(struct conn *c) {
    c->judge_late = false;
    c->h[0].pre = c->buf;
    c->h[0].pre_len = c->len;
    c->h[0].pre_off = 0;
    relay_pump(c);
}

/* What the client sent, added to buf up to IPB_SNIFF_MAX without waiting; *eof when it ended
 * its side. -1 on a socket error. */
static int read_head(struct conn *c, bool *eof) {
    while (c->len < IPB_SNIFF_MAX) {
        ssize_t n = recv(c->cw.fd, c->buf + c->len, IPB_SNIFF_MAX - c->len, MSG_DONTWAIT);
        if (n > 0) {
            c->len += (size_t)n;
            continue;
        }
        if (n == 0) {
            *eof = true;
            return 0;
        }
        if (errno == EINTR)
            continue;
        return errno == EAGAIN ? 0 : -1;
    }
    return 0;
}

void conn_late_peek(struct conn *c) {
    bool eof = false;
    size_t before = c->len;
    if (read_head(c, &eof) < 0) {
        proxy_close_conn(c);
        return;
    }
    if (c->len == 0) {
        if (eof)
            late_release(c); /* nothing was said: the relay carries the close */
        return;
    }
    if (before == 0)
        c->deadline = proxy_now_ms() + PEEK_MS;
    enum ipb_sniff_kind k = ipb_sniff_bytes(c->buf, c->len, &c->sn);
    if (k == IPB_SNIFF_MORE) {
        if (!eof && c->len < IPB_SNIFF_MAX)
            return;
        conn_refuse(c, "after a silent start: the first request ended before its head was complete");
        return;
    }
    const ipb_sniff *s = &c->sn;
    c->http = s->kind == IPB_SNIFF_HTTP || s->kind == IPB_SNIFF_CONNECT;
    if (s->kind == IPB_SNIFF_BAD) {
        conn_refuse(c, "after a silent start: %s", s->why);
        return;
    }
    const char *why;
    if (s->host[0] && !later_name_ok(c, &why)) {
        conn_note(c, NOTE_NAME, s->host, NULL, why);
        conn_refuse(c, "%s sent after a silent start, %s: %s", name_kind(s), s->host, why);
        return;
    }
    late_release(c);
}

/* The upstream of a tunnel that is waiting for the client's first bytes became readable:
 * when the client has said nothing yet, the server speaks first, and no name can come. */
static void tunnel_upstream_event(struct conn *c) {
    char b;
    if (c->len == 0 && (recv(c->uw.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 || errno != EAGAIN)) {
        conn_judge_later(c);
        tunnel_open(c);
    }
}

static void connected(struct conn *c) {
    char dst[80], via[80];
    dest_text(c, dst, sizeof(dst));
    proxy_addr_port(&c->cand[c->cur], c->port, via, sizeof(via));
    log_info("egress: sandbox %s: allowed %s%s%s (%s) via %s", c->sb->label, dst, c->name[0] ? " for " : "", c->name,
             c->via, via);
    if (c->connect_mode) {
        tunnel_start(c);
        return;
    }
    if (relay_start(c) < 0) {
        proxy_close_conn(c);
        return;
    }
    relay_pump(c);
    if (!c->dead && c->judge_late)
        conn_late_peek(c); /* what the client sent meanwhile: its edge may be spent */
}

void conn_upstream_event(struct conn *c) {
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
        conn_try_connect(c);
        return;
    }
    if (c->st == C_TUNNEL)
        tunnel_upstream_event(c);
    else if (c->st == C_RELAY)
        relay_pump(c);
}

static void use_addresses(struct conn *c, const ipb_addr *a, size_t n, const char *via) {
    memcpy(c->cand, a, n * sizeof(*a));
    c->ncand = n;
    c->cur = 0;
    c->via = via;
    /* The dialled address first when it is among the checked ones. */
    for (size_t i = 1; c->have_odst && i < n; i++)
        if (ipb_addr_equal(&c->cand[i], &c->odst)) {
            ipb_addr t = c->cand[0];
            c->cand[0] = c->cand[i];
            c->cand[i] = t;
        }
    conn_try_connect(c);
}

/* Acts on a verdict: connects to the address it names, or resolves its name (pins first) and
 * connects only to the answers that pass the policy, or refuses with its reason. */
static void follow(struct conn *c, const ipb_egress_verdict *v) {
    const ipb_egress_policy *pol = c->p->policy;
    snprintf(c->name, sizeof(c->name), "%s", v->name);
    if (v->route == IPB_EGRESS_REFUSE) {
        if (v->addr.family) {
            char t[64];
            ipb_addr_format(&v->addr, t, sizeof(t));
            conn_note(c, NOTE_ADDR, NULL, &v->addr, v->why);
            conn_refuse(c, "address %s: %s", t, v->why);
        } else {
            if (v->name[0])
                conn_note(c, NOTE_NAME, v->name, NULL, v->why);
            else if (c->sn.host[0])
                conn_note(c, NOTE_OTHER, c->sn.host, NULL, v->why); /* a malformed name, as sent */
            conn_refuse(c, "%s", v->why);
        }
        return;
    }
    if (v->route == IPB_EGRESS_TO_ADDR) {
        use_addresses(c, &v->addr, 1, v->why);
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

void conn_resolved(struct conn *c, const ipb_resolve_req *r) {
    if (r->gai_err) {
        char why[160];
        snprintf(why, sizeof(why), "the host cannot resolve the name (%s)", gai_strerror(r->gai_err));
        conn_note(c, NOTE_OTHER, NULL, NULL, why);
        conn_refuse(c, "cannot resolve %s: %s", c->name, gai_strerror(r->gai_err));
        return;
    }
    ipb_addr ok[IPB_RESOLVE_MAX];
    size_t n = 0;
    const char *why = NULL;
    const ipb_addr *first = NULL;
    for (size_t i = 0; i < r->n; i++) {
        const char *w = NULL;
        if (ipb_egress_addr_allowed(c->p->policy, &r->addrs[i], true, false, &w))
            ok[n++] = r->addrs[i];
        else if (!why) {
            why = w;
            first = &r->addrs[i];
        }
    }
    if (!n) {
        char a[64] = "", note[IPB_EGRESS_NOTE_WHY];
        if (first)
            ipb_addr_format(first, a, sizeof(a));
        snprintf(note, sizeof(note), "the name resolves only to refused addresses (%s%s%s)", a, a[0] ? ": " : "",
                 why ? why : "none");
        conn_note(c, NOTE_RESOLVED, c->name, first, note);
        conn_refuse(c, "%s resolves only to refused addresses (%s)", c->name, why ? why : "none");
        return;
    }
    use_addresses(c, ok, n, "allowed name");
}

void conn_decide(struct conn *c) {
    ipb_sniff *s = &c->sn;
    c->connect_mode = s->kind == IPB_SNIFF_CONNECT;
    c->http = s->kind == IPB_SNIFF_HTTP;
    if (s->kind == IPB_SNIFF_BAD) {
        /* Only TLS (first byte 0x16) and HTTP requests are judged malformed: answer HTTP. */
        c->http = c->len && c->buf[0] != 0x16;
        conn_refuse(c, "%s", s->why);
        return;
    }
    if (c->connect_mode)
        c->port = s->port;
    else if (c->explicit_)
        c->port = s->port ? s->port : 80;
    else
        c->port = c->oport;
    if (c->explicit_ && !c->connect_mode && !(c->http && s->host[0])) {
        conn_refuse(c, "a connection made to the proxy itself must begin with CONNECT or an HTTP request with a Host");
        return;
    }
    /* The name the bytes carry decides (ipb_egress_decide); the dialled address only when
     * they carry none. */
    ipb_egress_verdict v;
    ipb_egress_memo m = memo_of(c);
    ipb_egress_decide(c->p->policy, s->host, c->have_odst ? &c->odst : NULL, &m, &v);
    follow(c, &v);
}

static void peek_readable(struct conn *c) {
    bool eof = false;
    size_t before = c->len;
    if (read_head(c, &eof) < 0) {
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
        if (!eof && c->len < IPB_SNIFF_MAX)
            return;
        /* What began as a request (or a TLS hello) and ended unfinished is not "no name": a
         * server may still act on it. */
        conn_refuse(c, "%sthe first request ended before its head was complete",
                    c->st == C_TUNNEL ? "inside the CONNECT tunnel: " : "");
        return;
    }
    if (c->st == C_TUNNEL)
        tunnel_decide(c);
    else
        conn_decide(c);
}

void conn_client_event(struct conn *c) {
    switch (c->st) {
    case C_PEEK:
    case C_TUNNEL:
        peek_readable(c);
        break;
    case C_RELAY:
        if (c->judge_late)
            conn_late_peek(c);
        else
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

/* Where the sandbox meant to go. A connection made to the proxy's own address has no other
 * destination: it is explicit (CONNECT or absolute-form HTTP). */
static void original_dst(struct conn *c) {
    struct sockaddr_storage ss, local;
    socklen_t l = sizeof(ss), ll = sizeof(local);
    ipb_addr self;
    uint16_t self_port;
    int r = getsockname(c->cw.fd, (struct sockaddr *)&local, &ll);
    if (r == 0 && local.ss_family == AF_INET)
        r = getsockopt(c->cw.fd, SOL_IP, IPB_SO_ORIGINAL_DST, &ss, &l);
    else if (r == 0)
        r = getsockopt(c->cw.fd, SOL_IPV6, IPB_IP6T_SO_ORIGINAL_DST, &ss, &l);
    c->have_odst = r == 0 && ipb_addr_from_sockaddr((struct sockaddr *)&ss, &c->odst, &c->oport) &&
                   ipb_addr_from_sockaddr((struct sockaddr *)&local, &self, &self_port) &&
                   !(ipb_addr_equal(&c->odst, &self) && c->oport == self_port);
    c->explicit_ = !c->have_odst;
}

void conn_start(struct conn *c) {
    c->st = C_PEEK;
    c->deadline = proxy_now_ms() + FIRST_BYTE_MS;
    original_dst(c);
    /* With no list, a public address may go wherever its bytes say nothing against: it
     * needs no sniffing, and server-first protocols (SSH, SMTP) need not wait. With a list,
     * every connection is judged by its first bytes, as the name they carry decides (an
     * address allowed on its own decides only for bytes that carry no name). */
    if (c->have_odst && ipb_egress_unread_ok(c->p->policy, &c->odst)) {
        c->port = c->oport;
        use_addresses(c, &c->odst, 1, "public address");
        return;
    }
    c->buf = malloc(IPB_SNIFF_MAX);
    if (!c->buf) {
        proxy_close_conn(c);
        return;
    }
    peek_readable(c);
}
