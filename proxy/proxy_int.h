/* Internals shared by the proxy's files (proxy.c: loop, sandboxes, decisions; relay.c: the
 * splice pump; dnsstub.c: the DNS stub). Everything here runs on the loop's thread. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "dnswire.h"
#include "egress_notes.h"
#include "egress.h"
#include "netns.h"
#include "proxy.h"
#include "resolver.h"
#include "sniff.h"

enum wkind { W_CMD, W_RESOLVER, W_TIMER, W_LISTEN, W_DNS_UDP, W_DNS_TCP_LISTEN, W_CLIENT, W_UPSTREAM };

/* What an epoll event points at. */
struct watch {
    uint8_t kind;
    void *owner; /* struct sbx (listeners) or struct conn */
    int fd;
};

#define MEMO_N 256
struct memo {
    ipb_addr a;
    char name[IPB_NAME_MAX + 1];
    long until;
};

struct conn;
struct preq;

struct sbx {
    uint32_t id;
    char label[64];
    struct watch w[IPB_EGRESS_NFDS];
    struct conn *conns;
    unsigned nconns, ndns;
    struct preq *dns_pending; /* UDP queries waiting for the resolver */
    struct memo memo[MEMO_N]; /* addresses the DNS stub gave out, and for which name */
    unsigned memo_next;
    long log_window; /* rate limit for repetitive warnings */
    unsigned log_count, log_dropped;
    bool dead;
    ipb_egress_notes notes; /* refusals for the cell's result (ipb_proxy_take_notes) */
    struct sbx *next;
};

/* C_TUNNEL: a CONNECT answered, its tunnel's first bytes being read and judged. */
enum cstate { C_PEEK, C_RESOLVE, C_CONNECT, C_TUNNEL, C_RELAY, C_DNS };

struct half {
    int pipe[2];
    size_t pending;     /* bytes in the pipe */
    const uint8_t *pre; /* bytes to send before splicing (sniffed request, CONNECT reply) */
    size_t pre_len, pre_off;
    bool eof, shut;
};

struct conn {
    struct ipb_proxy *p;
    struct sbx *sb;
    struct conn *prev, *next;
    struct watch cw, uw;
    enum cstate st;
    long deadline;
    bool have_odst, explicit_, connect_mode, http, dead, on_ready, dns_busy;
    bool tunnel; /* the CONNECT was answered; buf holds the tunnel's first bytes */
    /* Relaying, but the client's first bytes are still to be judged: the connection was
     * opened on its silence (a server-first protocol) while an allowlist is in force, and a
     * name sent later must be allowed too. Until then only upstream -> client moves; buf
     * collects what the client sends. */
    bool judge_late;
    ipb_addr odst;
    uint16_t oport, port;
    uint8_t *buf;
    size_t len;
    ipb_sniff sn;
    char name[IPB_NAME_MAX + 1];
    const char *via; /* how the destination was allowed, for the log */
    ipb_addr cand[IPB_RESOLVE_MAX];
    size_t ncand, cur;
    int conn_errno; /* why the last upstream attempt failed */
    bool pinned;
    bool noted; /* the refusal was noted with its kind (conn_note) */
    struct preq *rq;
    struct half h[2]; /* 0: client -> upstream, 1: upstream -> client */
    struct conn *ready_next, *grave_next;
};

enum rqkind { RQ_CONN, RQ_DNS_UDP, RQ_DNS_TCP };

struct preq {
    ipb_resolve_req r; /* first: the resolver frees requests with free() */
    enum rqkind kind;
    struct conn *conn; /* RQ_CONN, RQ_DNS_TCP; NULL once the connection is gone */
    struct sbx *sb;    /* RQ_DNS_UDP; NULL once the sandbox is gone */
    struct preq *sb_next, **sb_prevp;
    int udp_idx;
    struct sockaddr_storage client;
    socklen_t client_len;
    ipb_dns_query q;
};

struct ipb_proxy {
    ipb_egress_policy *policy;
    unsigned max_conns;
    int ep, cmd[2], timer;
    int spare; /* a descriptor kept for accepting when out of them */
    struct watch w_cmd, w_res, w_timer;
    ipb_resolver *res;
    struct sbx *sbs;
    struct conn *ready, *grave;
    struct sbx *sb_grave;
    uint32_t next_id;
    bool stopping;
    pthread_t thread;
    pthread_mutex_t call_lock;
};

long proxy_now_ms(void);
void proxy_close_conn(struct conn *c);
/* A connection from a sandbox, watched (edge-triggered); NULL (fd closed) on failure. */
struct conn *proxy_new_conn(struct ipb_proxy *p, struct sbx *sb, int fd);
/* A warning, rate-limited per sandbox (at most 20 a second, then a count). */
void proxy_warn(struct sbx *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Which option could lift a refusal: a name entry, an address entry, or none to suggest
 * (NOTE_RESOLVED: an allowed name that resolves only to refused addresses; its reason says
 * so, and an address entry for what it resolves to is not invited). */
enum note_kind { NOTE_OTHER, NOTE_NAME, NOTE_ADDR, NOTE_RESOLVED };
/* Keeps a refusal for the cell's result (egress_notes.h). host: the name (or address literal)
 * refused, or NULL for the address a; dns: a lookup, port unused. The option suggested is
 * checked against the policy (ipb_egress_suggest_entry). */
void proxy_note(struct ipb_proxy *p, struct sbx *sb, enum note_kind k, const char *host, size_t host_len,
                const ipb_addr *a, bool dns, uint16_t port, const char *why);
void proxy_addr_port(const ipb_addr *a, uint16_t port, char *buf, size_t len);
int proxy_watch(struct ipb_proxy *p, struct watch *w, uint32_t events);

/* conn.c */
#define FIRST_BYTE_MS 1000 /* a client that says nothing is judged by its address alone */
#define PEEK_MS 10000      /* the whole request head or ClientHello */
#define RESOLVE_MS 15000
#define CONNECT_MS 10000
/* A new connection from a sandbox's proxy listener. */
void conn_start(struct conn *c);
void conn_client_event(struct conn *c);
void conn_upstream_event(struct conn *c);
void conn_decide(struct conn *c);
void conn_resolved(struct conn *c, const ipb_resolve_req *r);
void conn_try_connect(struct conn *c);
/* Judges the first bytes through an answered CONNECT tunnel (c->sn). */
void tunnel_decide(struct conn *c);
/* Opening on silence: whether the client's later first bytes must still be judged. */
void conn_judge_later(struct conn *c);
/* A relayed connection opened on silence: its client's first bytes, read and judged. */
void conn_late_peek(struct conn *c);
/* Refuses at once: a one-line 403 where HTTP allows, else a plain close. */
void conn_refuse(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Notes the coming refusal with its kind (proxy_note; host NULL: the address a, or the
 * connection's name or destination); conn_refuse alone notes it as NOTE_OTHER. */
void conn_note(struct conn *c, enum note_kind k, const char *host, const ipb_addr *a, const char *why);

/* relay.c */
int relay_start(struct conn *c);
void relay_pump(struct conn *c);

/* dnsstub.c */
void dns_udp_readable(struct ipb_proxy *p, struct sbx *sb, int idx);
void dns_tcp_accept(struct ipb_proxy *p, struct sbx *sb, int fd);
void dns_tcp_readable(struct conn *c);
void dns_resolved(struct ipb_proxy *p, struct preq *q);
void dns_remember(struct sbx *sb, const char *name, const ipb_addr *a, size_t n);
const char *dns_recall(struct sbx *sb, const ipb_addr *a);
/* Whether the DNS stub gave this address out for this name (recently). */
bool dns_gave(struct sbx *sb, const ipb_addr *a, const char *name);
