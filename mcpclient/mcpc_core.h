/* Inside the MCP client's JSON-RPC core: the client itself, shared by client.c (connect,
 * initialize, requests and their errors, the public calls), exchange.c (messages from the
 * server, one request and its answer on one transport) and mux.c (many requests over one
 * connection: the reader thread and the table of calls waiting for answers). Not for use outside
 * mcpclient/.
 *
 * Threads: any number of callers, plus (stdio, legacy SSE, once initialized) one reader thread.
 * c->lock guards what the reader and callers share (alive, why dead, the waiting calls, the ring
 * of given-up ids); the write turn (mcpc_write_begin/end) makes each message over one connection
 * whole; c->init_lock
 * lets one caller at a time start a new Streamable HTTP session. Counters are atomics. */
#pragma once
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "mcp_client.h"
#include "mcpc_internal.h"

/* Malformed messages tolerated while waiting for one response (stdio and legacy SSE: in a row,
 * whatever call they were meant for). */
#define MCPC_MAX_MALFORMED 100
/* Ids of calls given up on (cancelled, timed out) remembered, to name a late answer as one. */
#define MCPC_GAVE_UP_RING 64
/* Answers nobody waits for logged at info level per client (then at debug level). */
#define MCPC_STRAY_INFO 20
/* Streamable HTTP clones kept for later calls (each keeps its connection open for reuse). */
#define MCPC_IDLE_CLONES 8

typedef struct mcpc_pending mcpc_pending;
typedef struct mcpc_later mcpc_later;

struct ipb_mcpc {
    char *name;
    int transport_kind;
    json_t *params; /* expanded */
    ipb_mcp_limits limits;
    mcpc_transport *t;
    json_int_t next_id; /* atomic */
    char *server_name;
    const char *version; /* one of the known versions (static): read by clones without a lock */
    int cancel_fd;       /* see ipb_mcpc_set_cancel_fd (for ipb_mcpc_call_tool); -1: none */
    int stop_fd;         /* an eventfd, readable once the client is shut down or closing */
    size_t malformed, cancelled, stray, in_flight; /* atomics */

    pthread_mutex_t lock;
    bool alive;
    char *dead_reason; /* why it is no longer alive */
    int dead_errnum;
    mcpc_pending *pending; /* calls waiting for their answer (mux) */
    json_int_t gave_up[MCPC_GAVE_UP_RING];
    unsigned gave_up_next;
    mcpc_transport *idle[MCPC_IDLE_CLONES]; /* Streamable HTTP clones no call uses now */
    int nidle;

    pthread_mutex_t write_lock; /* guards `writing` (a waited-for turn, so that waiting has a deadline) */
    pthread_cond_t write_free;  /* CLOCK_MONOTONIC */
    bool writing;
    pthread_mutex_t init_lock;
    unsigned session_gen; /* new sessions started (atomic; written under init_lock) */

    bool mux; /* a reader thread routes the answers */
    pthread_t reader;
    size_t bad_in_a_row; /* malformed messages since the last good one (the reader's) */
    /* The reader's answers to the server's requests that wait for the write lock, oldest first
     * (the reader's own: it goes on reading meanwhile, so that a caller writing a long request
     * to a server that is itself blocked writing to us is not stuck behind it). */
    mcpc_later *later_head, *later_tail;
    size_t nlater;
};

/* client.c */
/* Makes the client not alive, remembering why (the first reason wins). Takes c->lock. */
void mcpc_mark_dead(ipb_mcpc *c, const ipb_error *e);
/* The turn to write to the one connection: waits for it until deadline (a monotonic time in ms;
 * 0: does not wait), cancel_fd (-1: none) or the client's stop fd being readable. Returns 0,
 * ETIMEDOUT, ECANCELED or ESHUTDOWN. */
int mcpc_write_begin(ipb_mcpc *c, long deadline, int cancel_fd);
void mcpc_write_end(ipb_mcpc *c);
/* Serialises msg and sends it on t (in the write turn with mux, waiting for it at most until
 * deadline). */
int mcpc_send_json(ipb_mcpc *c, mcpc_transport *t, json_t *msg, enum mcpc_msg_kind kind, long deadline,
                   ipb_error **err);
/* The same, also given up (-2, ECANCELED) when cancel_fd becomes readable while waiting for the
 * write turn. Returns 0; -2 when nothing was written (ETIMEDOUT, ECANCELED, ESHUTDOWN); -1. */
int mcpc_send_json_or_cancel(ipb_mcpc *c, mcpc_transport *t, json_t *msg, enum mcpc_msg_kind kind, long deadline,
                             int cancel_fd, ipb_error **err);

/* exchange.c */
/* What to do with a response found among the server's messages (msg: a reference it takes over;
 * id: msg's id): returns 1 when it is the one the caller waits for, 0 when it was skipped. */
typedef int (*mcpc_on_response)(ipb_mcpc *c, void *ctx, json_t *id, json_t *msg);
/* Handles one message text (a message or a batch): requests of the server answered on t,
 * notifications ignored, responses given to on_response, malformed messages skipped, logged and
 * counted (in *bad too). Returns 1 when on_response took one, 0, or -1 on error: EMSGSIZE for a
 * text of more than IPB_JSON_MAX_VALUES values (not parsed; counted as malformed), else an answer
 * to the server that could not be written. */
int mcpc_handle_text(ipb_mcpc *c, mcpc_transport *t, const char *text, size_t len, mcpc_on_response on_response,
                     void *ctx, size_t *bad, long deadline, ipb_error **err);
/* An answer no call takes: logged with its id and why, counted. */
void mcpc_stray(ipb_mcpc *c, json_t *id, const char *why);
/* Tells the server we no longer wait for request id (notifications/cancelled, best effort,
 * within a second), on t; counted. */
void mcpc_send_cancelled(ipb_mcpc *c, mcpc_transport *t, json_int_t id, const char *reason);
/* Remembers id as given up on, so that a late answer to it is named as one. */
void mcpc_gave_up(ipb_mcpc *c, json_int_t id);
/* One request on transport t (cancel and stop fds as set on t): sent, and its response read from
 * t. notifications/cancelled after a cancel or a timeout when cancel_at_server. Returns the
 * response message (result or error) or NULL. */
json_t *mcpc_exchange_direct(ipb_mcpc *c, mcpc_transport *t, json_int_t id, json_t *msg, long deadline,
                             bool cancel_at_server, ipb_error **err);

/* mux.c */
/* In the reader thread: sends text (an answer to a request of the server) now if the write lock
 * is free, else queues it for mcpc_mux_flush (blocking only past a bound). */
int mcpc_mux_answer(ipb_mcpc *c, const char *text, size_t len, long deadline, ipb_error **err);
/* Starts the reader thread (after initialize). Signals are blocked in it. */
int mcpc_mux_start(ipb_mcpc *c, ipb_error **err);
/* Stops it (the stop fd must be readable already) and waits for it. */
void mcpc_mux_join(ipb_mcpc *c);
/* One request through the reader: registered, sent, and waited for until its answer, cancel_fd
 * (ECANCELED), the deadline (ETIMEDOUT; both cancelled at the server), the connection failing or
 * the client being shut down. Returns the response message or NULL. */
json_t *mcpc_exchange_mux(ipb_mcpc *c, json_int_t id, json_t *msg, int cancel_fd, long deadline, ipb_error **err);
/* Ends every waiting call with a copy of e (the connection failed or the client was shut down)
 * and marks the client dead, under c->lock. */
void mcpc_mux_fail_all(ipb_mcpc *c, const ipb_error *e);
