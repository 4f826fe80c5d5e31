/* Inside the MCP client: the transport interface the JSON-RPC core (client.c) drives, the
 * transports' constructors, and small helpers they share. Not for use outside mcpclient/. */
#pragma once
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "mcp_client.h"

#include "version.h"

#define MCPC_DEFAULT_CONNECT_MS 30000
#define MCPC_DEFAULT_CALL_MS 120000
#define MCPC_DEFAULT_MAX_MESSAGE ((size_t)16 << 20)
/* How long ipb_mcpc_close() gives a stdio server after closing its stdin, and after SIGTERM. */
#define MCPC_CLOSE_GRACE_MS 2000
/* The HTTP session DELETE at close. */
#define MCPC_DELETE_MS 2000

/* What is being sent, so that a transport knows whether an answer follows. */
enum mcpc_msg_kind {
    MCPC_MSG_REQUEST,      /* an answer with its id will come back through recv() */
    MCPC_MSG_NOTIFICATION, /* no answer */
    MCPC_MSG_RESPONSE,     /* our answer to a request of the server; no answer */
};

typedef struct mcpc_transport mcpc_transport;

/* Threads. stdio and legacy SSE carry every request over one connection: after initialize, one
 * reader thread of the client calls recv() (and send() for its answers to the server's
 * requests) while callers call send() under the client's write lock; kill() may come from any
 * thread. Streamable HTTP: each call gets its own clone() (its own transfers) and uses only
 * that, from one thread; the clones share the session. */

/* Errors from send() and recv() carry an errnum the core acts on:
 *   ETIMEDOUT  the deadline passed (the core rewrites the sentence with the limit's name)
 *   ECANCELED  t->cancel_fd became readable;  ESHUTDOWN  t->stop_fd became readable
 *   EMSGSIZE   the server sent a message over limits.max_message
 *   EPIPE, ECONNRESET, ECONNREFUSED, ...  the connection or process is gone
 *   ESTALE     Streamable HTTP: the server no longer knows our session (HTTP 404)
 * A transport that can no longer be used sets t->broken. */
typedef struct mcpc_transport_ops {
    /* Sends one JSON-RPC message (serialised, no newline). Waits at most until deadline (a
     * monotonic time in ms, see clock.h). For HTTP, a request's answer is read by recv(). */
    int (*send)(mcpc_transport *t, const char *msg, size_t len, enum mcpc_msg_kind kind, long deadline,
                ipb_error **err);
    /* The next message from the server, as malloc'd text (NUL-terminated, *ret_len bytes).
     * Returns 1, or -1 with *err set. */
    int (*recv)(mcpc_transport *t, long deadline, char **ret_msg, size_t *ret_len, ipb_error **err);
    /* Forgets the HTTP session (after ESTALE), so that the next message of this transport starts
     * a new one, which then replaces the old one for its clones too. NULL for transports without
     * sessions. */
    void (*reset_session)(mcpc_transport *t);
    /* Ends the transport and frees it. graceful: as ipb_mcpc_close() describes; else at once
     * (stdio: SIGKILL to the process group and reaped). */
    void (*close)(mcpc_transport *t, bool graceful);
    /* Without waiting: whether the server is known to be gone (stdio: its process exited).
     * NULL: cannot be told before the next message. */
    bool (*gone)(mcpc_transport *t);
    /* An fd that becomes readable (POLLIN) once the server is gone (stdio: its pidfd), or -1.
     * NULL: none. */
    int (*exit_fd)(mcpc_transport *t);
    /* A transport for one exchange on its own (its own HTTP transfers), sharing the session and
     * settings of t, which must outlive it; closed with close(). NULL: the transport has one
     * connection (stdio, legacy SSE). */
    mcpc_transport *(*clone)(mcpc_transport *t, ipb_error **err);
    /* From any thread, while others use t: ends the connection at once (stdio: SIGKILL to the
     * process group; its reaping is left to recv() and close()). NULL: nothing to do. */
    void (*kill)(mcpc_transport *t);
} mcpc_transport_ops;

struct mcpc_transport {
    const mcpc_transport_ops *ops;
    const char *name; /* the client's label, for log lines (owned by the client) */
    ipb_mcp_limits limits;
    const char *protocol_version; /* set by the core after initialize; NULL before (owned by the client) */
    /* While readable, recv() ends at once with ECANCELED (-1: none; set by the core). */
    int cancel_fd;
    /* While readable, recv() ends at once with ESHUTDOWN (-1: none; the client's stop eventfd). */
    int stop_fd;
    /* Set once a reader thread owns what arrives: stdio: only it reads the server's output
     * (send() in other threads waits for room in the pipe without reading meanwhile); legacy
     * SSE: only it looks at the stream. */
    bool has_reader;
    bool broken;
};

/* t->broken is written by the reader thread and read by callers: atomically. */
static inline void mcpc_set_broken(mcpc_transport *t) { __atomic_store_n(&t->broken, true, __ATOMIC_RELAXED); }
static inline bool mcpc_is_broken(const mcpc_transport *t) { return __atomic_load_n(&t->broken, __ATOMIC_RELAXED); }

/* True in the client's reader threads (each only ever uses its own client's transport). */
extern __thread bool mcpc_in_reader;

/* Constructors: params as checked and expanded (every placeholder filled). The deadline covers
 * starting the process or opening the stream. */
mcpc_transport *mcpc_stdio_open(const char *name, json_t *params, const ipb_mcp_limits *limits, long deadline,
                                ipb_error **err);
mcpc_transport *mcpc_http_open(const char *name, json_t *params, const ipb_mcp_limits *limits, long deadline,
                               ipb_error **err);
mcpc_transport *mcpc_sse_open(const char *name, json_t *params, const ipb_mcp_limits *limits, long deadline,
                              ipb_error **err);

/* A deep copy of checked params with ${VAR} filled in every string value (not in keys). */
json_t *mcpc_params_expand(json_t *params, ipb_error **err);

/* Sets *err to exactly the formatted sentence (no strerror suffix) with errnum as its cause.
 * Returns -1. */
int mcpc_fail(ipb_error **err, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Replaces the sentence of an existing error, keeping its errnum. */
void mcpc_reword(ipb_error **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether fd (-1: none) is readable now. */
bool mcpc_cancelled(int fd);
/* Milliseconds left until deadline (at least 0). */
long mcpc_ms_left(long deadline);
/* A printable excerpt of untrusted bytes for an error sentence: at most max bytes, control
 * characters and non-ASCII shown as '?', "..." when cut. Writes into out (size max + 4). */
void mcpc_excerpt(const char *s, size_t len, char *out, size_t max);
