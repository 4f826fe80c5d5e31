/* The daemon's insides, shared by loop.c (events, signals, the idle sweep), clients.c (client
 * connections and the methods answered by the daemon itself), sessions.c (sessions' lives and
 * their workers' events), worker.c (starting a worker), warm.c (warm workers), routing.c
 * (calls sent on to workers, answers routed back) and asks.c (workers' approval questions).
 * One thread; every fd is non-blocking. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"
#include "jsonrpc.h"
#include "strbuf.h"

/* Backpressure (flow.c): a session's worker is no longer read while a client it sends to has
 * more than IPBD_OUT_HIGH waiting to be written to it, and is read again below IPBD_OUT_LOW. */
#define IPBD_OUT_HIGH (4u << 20)
#define IPBD_OUT_LOW (1u << 20)
/* What one client may have waiting before it is dropped as not reading: reached only by the
 * daemon's own answers to a client that keeps asking without reading, or by one answer larger
 * than that (a worker's output stops at IPBD_OUT_HIGH plus the message that crossed it). */
#define IPBD_OUT_MAX (64u << 20)
/* At most this much is read from a worker's link per event, so that what the daemon holds
 * from a worker is one line plus this. */
#define IPBD_LINK_READ (1u << 20)
/* A connection that has sent no request this long after connecting is dropped (a client that
 * has spoken and then sits idle is not). IPYBOXD_FIRST_REQUEST_MS overrides it (tests). */
#define IPBD_FIRST_REQUEST_MS 10000L
/* Warnings a peer can cause at will are logged at most once per this period (ratelog.c). */
#define IPBD_RATELOG_MS 10000L
/* The longest line a worker may send (a cell's output is capped well below). */
#define IPBD_WORKER_LINE_MAX (256u << 20)

enum ipbd_kind { W_LISTEN, W_CLIENT, W_LINK, W_STDERR, W_SIGNAL, W_TIMER };

struct ipbd_watch {
    enum ipbd_kind kind;
    int fd;
    void *obj;
    uint32_t events; /* as registered */
};

/* A byte stream out, written as far as the peer takes it; the rest waits for EPOLLOUT. */
struct ipbd_out {
    ipb_buf buf;
    size_t off;
};

struct ipbd_client {
    struct ipbd_watch w;
    uint64_t id;
    long connected_ms;
    bool spoke; /* has sent a well-formed request, notification or answer */
    pid_t pid;  /* from SO_PEERCRED, for the log */
    jrpc_reader rd;
    struct ipbd_out out;
    struct ipbd_session *session; /* calls go here; NULL until the first call or an attach */
    unsigned pending;             /* requests sent on to a worker and not answered yet */
    char *lost;                   /* why its session ended (malloc'd), told at its next calls */
    bool had_session;             /* never again a private session made with the defaults: the
                                   * one it had may have carried other options */
    bool elicitation;             /* declared the elicitation capability: approval questions
                                   * about tool calls of its cells are put to it */
    bool dead;
    struct ipbd_client *next;
};

enum ipbd_pending_kind { P_CALL, P_CREATE, P_WARM };

/* A request sent on to a worker under our own id: how to route the answer back. */
struct ipbd_pending {
    uint64_t wid;
    enum ipbd_pending_kind kind;
    uint64_t client_id;
    json_t *id;    /* the client's id */
    json_t *token; /* the client's progress token, or NULL */
    struct ipbd_pending *next;
};

/* One approval question of a worker: the worker's id for it, ours towards the client, and
 * which client. */
struct ipbd_ask {
    json_t *wid, *cid;
    uint64_t client;
    struct ipbd_ask *next;
};

struct ipbd_session {
    char name[IPBD_NAME_MAX + 1];
    bool anonymous;          /* made for one client's first call; ends with that client */
    uint64_t owner;          /* anonymous: that client's id */
    pid_t pid;               /* the worker; 0 once reaped */
    struct ipbd_watch link;  /* the worker's stdout (a socketpair) */
    struct ipbd_watch linkw; /* the worker's stdin (a pipe: its own file description, so the
                               * worker's non-blocking stdin does not make stdout so) */
    struct ipbd_watch errw;  /* the worker's stderr */
    jrpc_reader rd;
    struct ipbd_out out;
    ipb_buf errbuf;         /* a partial stderr line */
    char last_err[512];     /* the worker's last stderr line, for failure messages */
    bool last_err_explains; /* that line is an error or warning, or "cannot ...": worth telling
                               * (a start-up banner or an info line is not) */
    struct ipbd_pending *pending;
    uint64_t next_wid;
    unsigned clients; /* attached clients */
    bool ready;       /* the worker answered its first ping */
    bool paused;      /* its link is off the epoll set: a client is not reading (flow.c) */
    bool warm;        /* started ahead, no client's yet: not listed, not found by
                               * name, never idle; taken by the next session made with the
                               * daemon's options alone */
    bool closing;     /* asked to stop; gone once reaped and its link is closed */
    /* The worker's approval questions (elicitation/create) put to clients and not answered
     * yet: several may be open at once (concurrent tool calls), each its own. */
    struct ipbd_ask *asks;
    long created_ms, idle_since_ms;
    struct ipbd_session *next;
};

/* A warning logged at a bounded rate: what the suppressed ones are called in the count. */
struct ipbd_ratelog {
    const char *what;
    long last_ms;
    unsigned suppressed;
};

struct ipbd {
    const ipbd_config *cfg;
    int monitor_fd; /* cfg->monitor_fd, or the channel to the private monitor started
                               * in place of one that was gone (root's daemon only) */
    int ep;
    struct ipbd_watch listen, sig, timer;
    struct ipbd_client *clients;
    struct ipbd_session *sessions;
    unsigned nclients, nsessions, anon_seq;
    unsigned ndropped;     /* clients dropped this round, freed by ipbd_clients_reap() */
    long first_request_ms; /* IPBD_FIRST_REQUEST_MS or the environment's */
    struct ipbd_ratelog refused_cap, refused_uid, dropped_idle;
    long warm_after_ms;     /* no warm worker is started before then (after failures) */
    unsigned warm_failures; /* warm workers that failed since one was last taken */
    long active_ms;         /* a client was last connected then (0: never); warm workers are
                               * kept only while one is, or was within --idle-timeout */
    uint64_t next_client_id;
    uint64_t next_ask;
    bool stopping;
};

/* loop.c */
int ipbd_watch_add(struct ipbd *d, struct ipbd_watch *w, uint32_t events);
void ipbd_watch_mod(struct ipbd *d, struct ipbd_watch *w, uint32_t events);
void ipbd_watch_del(struct ipbd *d, struct ipbd_watch *w);
/* Queues bytes on a stream and writes what the peer takes now. Returns -1 when the stream
 * is broken or over IPBD_OUT_MAX (the caller drops the peer). */
int ipbd_out_send(struct ipbd *d, struct ipbd_watch *w, struct ipbd_out *o, const char *data, size_t len);
/* Writes what is queued; called on EPOLLOUT. Returns -1 when the stream is broken. */
int ipbd_out_flush(struct ipbd *d, struct ipbd_watch *w, struct ipbd_out *o);

/* flow.c */
size_t ipbd_out_queued(const struct ipbd_out *o);
/* Whether s's output must wait for a client that is not reading. */
bool ipbd_flow_blocked(struct ipbd *d, const struct ipbd_session *s);
void ipbd_flow_pause(struct ipbd *d, struct ipbd_session *s);
void ipbd_flow_resume(struct ipbd *d, struct ipbd_session *s);

/* clients.c */
void ipbd_client_accept(struct ipbd *d);
void ipbd_client_event(struct ipbd *d, struct ipbd_client *c, uint32_t events);
struct ipbd_client *ipbd_client_find(struct ipbd *d, uint64_t id);
/* Sends a JSON-RPC message (stolen) to a client; a client that cannot take it is dropped. */
void ipbd_client_send(struct ipbd *d, struct ipbd_client *c, json_t *msg);
void ipbd_client_send_line(struct ipbd *d, struct ipbd_client *c, char *line, size_t len);
/* A pending request of this client was answered or abandoned. */
void ipbd_client_done(struct ipbd *d, struct ipbd_client *c);
void ipbd_client_drop(struct ipbd *d, struct ipbd_client *c);
/* The client's session is gone (closed, or its worker ended): detaches it and keeps why; its
 * calls are refused with that reason until it creates or attaches a session. */
void ipbd_client_lost_session(struct ipbd_client *c, const char *why);
/* Makes s the client's session (leaving the one it had). False when the client was dropped on
 * the way (answering its calls in the old session failed). */
bool ipbd_client_attach(struct ipbd *d, struct ipbd_client *c, struct ipbd_session *s);
void ipbd_clients_reap(struct ipbd *d);
/* On the timer: drops connections that sent no request within the deadline; flushes the
 * rate-limited warnings. */
void ipbd_clients_sweep(struct ipbd *d);

/* ratelog.c */
void ipbd_ratelog(struct ipbd_ratelog *rl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ipbd_ratelog_flush(struct ipbd_ratelog *rl);

/* sessions.c (ipbd_session_forward_call, _when_ready and _cancel: routing.c; ipbd_session_answer:
 * asks.c; ipbd_warm_fill: warm.c) */
/* Starts a worker for a new session. args: the client's sandbox options (may be NULL), cwd:
 * where relative paths in them are meant (may be NULL). */
struct ipbd_session *ipbd_session_start(struct ipbd *d, const char *name, uint64_t anon_owner, json_t *args,
                                        const char *cwd, ipb_error **err);
struct ipbd_session *ipbd_session_find(struct ipbd *d, const char *name);
/* Sends a tools/call (msg: the client's request, modified in place) on to the session's
 * worker. Answers the client with an error if it cannot. */
void ipbd_session_forward_call(struct ipbd *d, struct ipbd_session *s, struct ipbd_client *c, json_t *msg);
/* A client's answer to a question (elicitation) its session's worker asked through us. */
void ipbd_session_answer(struct ipbd *d, struct ipbd_client *c, json_t *msg);
/* Tells the worker about a client's notifications/cancelled for one of its requests. */
void ipbd_session_cancel(struct ipbd *d, struct ipbd_client *c, json_t *request_id);
/* Sends a ping that is answered once the worker's sandbox is up; the client is then attached to
 * s and gets the result (a session that cannot start leaves it attached to the one it had). */
void ipbd_session_when_ready(struct ipbd *d, struct ipbd_session *s, struct ipbd_client *c, json_t *id);
/* The client no longer uses s (detach or disconnect): its requests are cancelled; an anonymous
 * session of that client is closed. */
void ipbd_session_detach(struct ipbd *d, struct ipbd_session *s, struct ipbd_client *c);
void ipbd_session_close(struct ipbd *d, struct ipbd_session *s, const char *why);
void ipbd_session_event(struct ipbd *d, struct ipbd_watch *w, uint32_t events);
void ipbd_sessions_reap(struct ipbd *d); /* after SIGCHLD */
/* After each round of events: sessions whose clients read again are read again. */
void ipbd_sessions_flow(struct ipbd *d);
void ipbd_sessions_sweep(struct ipbd *d); /* idle sessions */
/* Starts warm workers until --warm of them run (within --max-sessions), unless they keep
 * failing (then after a pause that grows to a minute). */
void ipbd_warm_fill(struct ipbd *d);
json_t *ipbd_sessions_list(struct ipbd *d, const struct ipbd_client *c);

/* worker.c */
/* A session object with its worker started, linked into d->sessions (its name is the
 * caller's to set). args, cwd: as for ipbd_session_start. */
struct ipbd_session *ipbd_worker_start(struct ipbd *d, json_t *args, const char *cwd, ipb_error **err);

/* warm.c */
/* Sessions not being closed, warm ones or the others. */
unsigned ipbd_sessions_count(struct ipbd *d, bool warm);
/* A warm worker for a session made with the daemon's options alone (a ready one first), no
 * longer warm; NULL when there is none. */
struct ipbd_session *ipbd_warm_take(struct ipbd *d);
/* Closes a warm worker (one still starting first); false when there is none. */
bool ipbd_warm_drop(struct ipbd *d, const char *why);
/* A warm worker could not start or ended while waiting: the next one waits (ipbd_warm_fill). */
void ipbd_warm_failed(struct ipbd *d, const char *why);

/* routing.c */
/* Sends a message (stolen) to the worker; *ok: whether it was queued. */
void ipbd_worker_send(struct ipbd *d, struct ipbd_session *s, json_t *msg, bool *ok);
/* A request to s's worker under a new id of ours, for client c (NULL: the daemon's own) whose
 * id and progress token were id and token. NULL when out of memory. */
struct ipbd_pending *ipbd_pending_add(struct ipbd_session *s, enum ipbd_pending_kind kind, struct ipbd_client *c,
                                      json_t *id, json_t *token);
struct ipbd_pending *ipbd_pending_find(struct ipbd_session *s, uint64_t wid);
/* Answers p's client (if still there) with an error and frees p (already unlinked). */
void ipbd_pending_fail(struct ipbd *d, struct ipbd_pending *p, int code, const char *msg);
/* A request that could not be sent on: unlinked and answered with an error. */
void ipbd_pending_fail_new(struct ipbd *d, struct ipbd_session *s, struct ipbd_pending *p);
/* Cancels every request of c in s (c left it). */
void ipbd_pending_cancel_client(struct ipbd *d, struct ipbd_session *s, struct ipbd_client *c);
/* One line from s's worker: an answer or a notification, routed to the client that asked. */
void ipbd_worker_line(struct ipbd *d, struct ipbd_session *s, const char *line, size_t len);

/* asks.c */
/* The worker's elicitation/create m: put to the client whose call runs the cell, or refused. */
void ipbd_ask_client(struct ipbd *d, struct ipbd_session *s, json_t *m);
/* Answers a request of the worker's (id wid) ourselves, with an error. */
void ipbd_ask_refuse(struct ipbd *d, struct ipbd_session *s, json_t *wid, int code, const char *why);
/* The worker's notifications/cancelled m for one of its questions. */
void ipbd_ask_withdrawn(struct ipbd *d, struct ipbd_session *s, json_t *m);
/* Refuses the questions put to c in s (c left it). */
void ipbd_asks_cancel_client(struct ipbd *d, struct ipbd_session *s, struct ipbd_client *c);
void ipbd_asks_clear(struct ipbd_session *s);

long ipbd_now_ms(void);
