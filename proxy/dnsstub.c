/* The DNS stub: answers the sandbox's queries (UDP and TCP, to any resolver address: the
 * redirect brings them all here). A name the policy allows is resolved on the host (pins
 * first) and answered with the addresses that pass the policy; any other name gets NXDOMAIN
 * at once, and no query leaves the host for it, so DNS cannot carry data out. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "proxy_int.h"

#define TTL 30
#define DNS_MAX_PENDING 64
#define DNS_TCP_IDLE_MS 10000
#define DNS_TCP_MAX 4096

void dns_remember(struct sbx *sb, const char *name, const ipb_addr *a, size_t n) {
    long until = proxy_now_ms() + (TTL + 600) * 1000L;
    for (size_t i = 0; i < n; i++) {
        struct memo *m = NULL;
        for (unsigned k = 0; k < MEMO_N; k++)
            if (sb->memo[k].until && ipb_addr_equal(&sb->memo[k].a, &a[i]) && !strcmp(sb->memo[k].name, name))
                m = &sb->memo[k];
        if (!m)
            m = &sb->memo[sb->memo_next++ % MEMO_N];
        m->a = a[i];
        snprintf(m->name, sizeof(m->name), "%s", name);
        m->until = until;
    }
}

const char *dns_recall(struct sbx *sb, const ipb_addr *a) {
    long now = proxy_now_ms();
    for (unsigned k = 0; k < MEMO_N; k++)
        if (sb->memo[k].until > now && ipb_addr_equal(&sb->memo[k].a, a))
            return sb->memo[k].name;
    return NULL;
}

bool dns_gave(struct sbx *sb, const ipb_addr *a, const char *name) {
    long now = proxy_now_ms();
    for (unsigned k = 0; k < MEMO_N; k++)
        if (sb->memo[k].until > now && ipb_addr_equal(&sb->memo[k].a, a) && !strcmp(sb->memo[k].name, name))
            return true;
    return false;
}

static const char *qtype_name(uint16_t t) { return t == IPB_DNS_A ? "A" : t == IPB_DNS_AAAA ? "AAAA" : "other"; }

/* The addresses that pass the policy, remembered for the proxy. */
static size_t filter_answer(struct ipb_proxy *p, struct sbx *sb, const ipb_dns_query *q, const ipb_addr *in, size_t n,
                            bool pinned, ipb_addr *out) {
    size_t k = 0;
    int fam = q->qtype == IPB_DNS_A ? AF_INET : AF_INET6;
    const char *why = NULL;
    const ipb_addr *first = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *w = NULL;
        if (in[i].family != fam)
            continue;
        if (ipb_egress_addr_allowed(p->policy, &in[i], true, pinned, &w))
            out[k++] = in[i];
        else if (!first) {
            first = &in[i];
            why = w;
        }
    }
    if (!k && first) {
        /* Allowed, but nothing it resolves to may be reached: an empty answer, said so. */
        char a[64], note[IPB_EGRESS_NOTE_WHY];
        ipb_addr_format(first, a, sizeof(a));
        snprintf(note, sizeof(note), "the name resolves only to refused addresses (%s: %s)", a, why ? why : "refused");
        proxy_note(p, sb, NOTE_RESOLVED, q->name, strlen(q->name), first, true, 0, note);
    }
    dns_remember(sb, q->name, out, k);
    log_info("egress: sandbox %s: DNS %s %s answered with %zu address%s", sb->label, qtype_name(q->qtype), q->name, k,
             k == 1 ? "" : "es");
    return k;
}

/* The question's name as sent (labels joined by '.', bytes as they are; escaped when noted). */
static size_t raw_name(const ipb_dns_query *q, char *out, size_t cap) {
    size_t o = 0;
    for (size_t off = 0; off < q->question_len && q->question[off];) {
        size_t l = q->question[off];
        if (off + 1 + l > q->question_len)
            break;
        if (o && o < cap - 1)
            out[o++] = '.';
        for (size_t i = 0; i < l && o < cap - 1; i++)
            out[o++] = (char)q->question[off + 1 + i];
        off += 1 + l;
    }
    out[o] = '\0';
    return o;
}

/* Decides a query. Returns an answer's length in ans, or 0 with *pending set to a request
 * that the caller completes and submits, or 0 without one: drop. */
static size_t dns_query(struct ipb_proxy *p, struct sbx *sb, const uint8_t *msg, size_t len, uint8_t *ans, size_t cap,
                        struct preq **pending) {
    *pending = NULL;
    ipb_dns_query q;
    int rcode;
    int r = ipb_dns_parse_query(msg, len, &q, &rcode);
    if (r < 0)
        return 0;
    if (r > 0)
        return ipb_dns_build_answer(&q, rcode, NULL, 0, TTL, ans, cap);
    if (q.qclass != IPB_DNS_CLASS_IN)
        return ipb_dns_build_answer(&q, IPB_DNS_REFUSED, NULL, 0, TTL, ans, cap);
    const char *why = NULL;
    if (!q.name_ok) {
        proxy_warn(sb, "DNS: refused a query for a malformed name");
        char raw[IPB_NAME_MAX + 2];
        size_t rlen = raw_name(&q, raw, sizeof(raw));
        proxy_note(p, sb, NOTE_OTHER, raw, rlen, NULL, true, 0, "not a valid host name");
        return ipb_dns_build_answer(&q, IPB_DNS_NXDOMAIN, NULL, 0, TTL, ans, cap);
    }
    if (!ipb_egress_name_allowed(p->policy, q.name, &why)) {
        proxy_warn(sb, "DNS: refused %s %s: %s (answered NXDOMAIN, nothing sent upstream)", qtype_name(q.qtype), q.name,
                   why ? why : "not allowed");
        proxy_note(p, sb, NOTE_NAME, q.name, strlen(q.name), NULL, true, 0, why ? why : "not allowed");
        return ipb_dns_build_answer(&q, IPB_DNS_NXDOMAIN, NULL, 0, TTL, ans, cap);
    }
    if (q.qtype != IPB_DNS_A && q.qtype != IPB_DNS_AAAA)
        return ipb_dns_build_answer(&q, IPB_DNS_NOERROR, NULL, 0, TTL, ans, cap);
    ipb_addr pins[IPB_RESOLVE_MAX], ok[IPB_RESOLVE_MAX];
    size_t np = ipb_egress_pins(p->policy, q.name, pins, IPB_RESOLVE_MAX);
    if (np) {
        if (np > IPB_RESOLVE_MAX)
            np = IPB_RESOLVE_MAX;
        size_t k = filter_answer(p, sb, &q, pins, np, true, ok);
        return ipb_dns_build_answer(&q, IPB_DNS_NOERROR, ok, k, TTL, ans, cap);
    }
    if (sb->ndns >= DNS_MAX_PENDING) {
        proxy_warn(sb, "DNS: %u queries are waiting already; answered SERVFAIL", sb->ndns);
        return ipb_dns_build_answer(&q, IPB_DNS_SERVFAIL, NULL, 0, TTL, ans, cap);
    }
    struct preq *rq = calloc(1, sizeof(*rq));
    if (!rq)
        return ipb_dns_build_answer(&q, IPB_DNS_SERVFAIL, NULL, 0, TTL, ans, cap);
    snprintf(rq->r.name, sizeof(rq->r.name), "%s", q.name);
    rq->r.family = q.qtype == IPB_DNS_A ? AF_INET : AF_INET6;
    rq->q = q;
    *pending = rq;
    return 0;
}

static size_t answer_resolved(struct ipb_proxy *p, struct sbx *sb, struct preq *q, uint8_t *ans, size_t cap) {
    int rcode = IPB_DNS_NOERROR;
    size_t k = 0;
    ipb_addr ok[IPB_RESOLVE_MAX];
    switch (q->r.gai_err) {
    case 0:
        k = filter_answer(p, sb, &q->q, q->r.addrs, q->r.n, false, ok);
        break;
    case EAI_NONAME:
        rcode = IPB_DNS_NXDOMAIN;
        break;
    case EAI_NODATA:
    case EAI_ADDRFAMILY:
        break;
    default:
        rcode = IPB_DNS_SERVFAIL;
    }
    return ipb_dns_build_answer(&q->q, rcode, ok, k, TTL, ans, cap);
}

void dns_udp_readable(struct ipb_proxy *p, struct sbx *sb, int idx) {
    int fd = sb->w[idx].fd;
    for (int i = 0; i < 64; i++) {
        uint8_t msg[1500], ans[512];
        struct sockaddr_storage from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(fd, msg, sizeof(msg), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
        if (n < 0)
            return;
        struct preq *rq;
        size_t al = dns_query(p, sb, msg, (size_t)n, ans, sizeof(ans), &rq);
        if (al) {
            if (sendto(fd, ans, al, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&from, fl) < 0) {
                /* A UDP answer lost: the client asks again. */
            }
            continue;
        }
        if (!rq)
            continue;
        rq->kind = RQ_DNS_UDP;
        rq->sb = sb;
        rq->udp_idx = idx;
        rq->client = from;
        rq->client_len = fl;
        rq->sb_next = sb->dns_pending;
        if (sb->dns_pending)
            sb->dns_pending->sb_prevp = &rq->sb_next;
        rq->sb_prevp = &sb->dns_pending;
        sb->dns_pending = rq;
        sb->ndns++;
        ipb_resolver_submit(p->res, &rq->r);
    }
}

void dns_tcp_accept(struct ipb_proxy *p, struct sbx *sb, int fd) {
    struct conn *c = proxy_new_conn(p, sb, fd);
    if (!c)
        return;
    c->st = C_DNS;
    c->deadline = proxy_now_ms() + DNS_TCP_IDLE_MS;
    c->buf = malloc(DNS_TCP_MAX + 2);
    if (!c->buf)
        proxy_close_conn(c);
}

static void dns_tcp_send(struct conn *c, const uint8_t *ans, size_t al) {
    uint8_t out[2 + 512];
    out[0] = (uint8_t)(al >> 8);
    out[1] = (uint8_t)al;
    memcpy(out + 2, ans, al);
    /* A fresh connection's send buffer holds a 514-byte answer; a client that does not read
     * its answers loses the connection. */
    if (send(c->cw.fd, out, al + 2, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)(al + 2))
        proxy_close_conn(c);
}

/* Serves the complete queries in the buffer, one at a time. */
static void dns_tcp_serve(struct conn *c) {
    while (!c->dead && !c->dns_busy && c->len >= 2) {
        size_t ml = (size_t)c->buf[0] << 8 | c->buf[1];
        if (ml == 0 || ml > DNS_TCP_MAX) {
            proxy_close_conn(c);
            return;
        }
        if (c->len < 2 + ml)
            return;
        uint8_t ans[512];
        struct preq *rq;
        size_t al = dns_query(c->p, c->sb, c->buf + 2, ml, ans, sizeof(ans), &rq);
        memmove(c->buf, c->buf + 2 + ml, c->len - 2 - ml);
        c->len -= 2 + ml;
        c->deadline = proxy_now_ms() + DNS_TCP_IDLE_MS;
        if (al) {
            dns_tcp_send(c, ans, al);
        } else if (rq) {
            rq->kind = RQ_DNS_TCP;
            rq->conn = c;
            c->rq = rq;
            c->dns_busy = true;
            c->sb->ndns++;
            ipb_resolver_submit(c->p->res, &rq->r);
        }
    }
}

void dns_tcp_readable(struct conn *c) {
    for (;;) {
        if (c->len >= DNS_TCP_MAX + 2) {
            proxy_close_conn(c);
            return;
        }
        ssize_t n = recv(c->cw.fd, c->buf + c->len, DNS_TCP_MAX + 2 - c->len, MSG_DONTWAIT);
        if (n > 0) {
            c->len += (size_t)n;
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            proxy_close_conn(c);
            return;
        }
        if (errno == EAGAIN)
            break;
    }
    dns_tcp_serve(c);
}

void dns_resolved(struct ipb_proxy *p, struct preq *q) {
    uint8_t ans[512];
    if (q->kind == RQ_DNS_UDP) {
        struct sbx *sb = q->sb;
        if (sb) {
            *q->sb_prevp = q->sb_next;
            if (q->sb_next)
                q->sb_next->sb_prevp = q->sb_prevp;
            sb->ndns--;
            size_t al = answer_resolved(p, sb, q, ans, sizeof(ans));
            if (al && sendto(sb->w[q->udp_idx].fd, ans, al, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&q->client,
                             q->client_len) < 0) {
                /* lost; the client asks again */
            }
        }
    } else {
        struct conn *c = q->conn;
        if (c) {
            c->rq = NULL;
            c->dns_busy = false;
            c->sb->ndns--;
            size_t al = answer_resolved(p, c->sb, q, ans, sizeof(ans));
            if (al)
                dns_tcp_send(c, ans, al);
            dns_tcp_serve(c);
        }
    }
    free(q);
}
