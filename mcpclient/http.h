/* What the two HTTP transports share: libcurl set up once per process, transfers on a multi
 * handle driven until a condition or a deadline, response bodies read under a cap (JSON, an
 * event stream, or the start of an error page), and a queue of the messages that arrived. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "curl_load.h"
#include "error.h"
#include "mcp_client.h"
#include "sse.h"
#include "strbuf.h"

/* Messages from the server, oldest first. */
typedef struct mcpc_qmsg {
    struct mcpc_qmsg *next;
    size_t len;
    char data[]; /* NUL-terminated */
} mcpc_qmsg;

typedef struct mcpc_msgq {
    mcpc_qmsg *head, *tail;
    size_t bytes;
} mcpc_msgq;

/* A stream stops being read (paused) while this much waits in the queue. */
#define MCPC_QUEUE_SOFT_MAX ((size_t)1 << 20)

int mcpc_msgq_push(mcpc_msgq *q, const char *data, size_t len);
/* Takes the oldest message (malloc'd, NUL-terminated). Returns false when empty. */
bool mcpc_msgq_pop(mcpc_msgq *q, char **ret, size_t *ret_len);
void mcpc_msgq_clear(mcpc_msgq *q);

/* What a response body may be. */
enum httpc_expect {
    HTTPC_EXPECT_NONE,   /* nothing (202 to a notification): a body is ignored */
    HTTPC_EXPECT_ANSWER, /* JSON, or an event stream of messages, or nothing (202) */
    HTTPC_EXPECT_STREAM, /* an event stream (legacy SSE's GET) */
};

enum httpc_mode { HTTPC_MODE_UNSET, HTTPC_MODE_IGNORE, HTTPC_MODE_JSON, HTTPC_MODE_SSE, HTTPC_MODE_ERROR };

typedef struct httpc_xfer httpc_xfer;
/* An event of a stream. Returns 0, or a negative errno after setting x->fail_* to stop. */
typedef int (*httpc_event_fn)(httpc_xfer *x, const ipb_sse_event *ev);

struct httpc_xfer {
    CURL *easy;
    CURLM *multi;               /* the multi handle it runs on */
    struct curl_slist *headers; /* owned */
    char *post;                 /* the request body, owned */
    bool with_session;          /* the request carried an Mcp-Session-Id (set by its transport) */
    bool in_multi, done, paused;
    CURLcode result;
    char errbuf[CURL_ERROR_SIZE];
    /* the response */
    long status;
    char content_type[128];
    char *session_id; /* Mcp-Session-Id of the response, owned */
    bool session_id_bad;
    enum httpc_expect expect;
    enum httpc_mode mode;
    ipb_buf body; /* JSON, or the start of an error page */
    ipb_sse sse;
    size_t max_message;
    int fail_errnum; /* why a callback stopped the transfer */
    char fail_msg[256];
    /* for event streams */
    mcpc_msgq *queue;
    httpc_event_fn on_event; /* NULL: "message" events go to the queue */
    void *owner;             /* the transport */
};

/* The default for events: a non-empty "message" event goes to x->queue (its size checked). */
int httpc_event_message(httpc_xfer *x, const ipb_sse_event *ev);

/* curl_global_init() once per process. */
int httpc_global_init(ipb_error **err);

/* Prepares x for a new transfer: the URL, our fixed options (no redirects, http and https only,
 * no signals, the connect timeout), callbacks, and timeout_ms as the overall limit (0: none).
 * method: "POST" (with body), "GET" or "DELETE". headers are taken over. */
int httpc_prepare(httpc_xfer *x, const char *method, const char *url, const char *body, size_t body_len,
                  struct curl_slist *headers, const ipb_mcp_limits *limits, long timeout_ms, enum httpc_expect expect,
                  ipb_error **err);
int httpc_start(httpc_xfer *x, ipb_error **err);
/* Takes x off its multi handle (aborting it if it still runs). */
void httpc_stop(httpc_xfer *x);
void httpc_free(httpc_xfer *x);
/* Resumes a paused stream when the queue has room again. */
void httpc_resume(httpc_xfer *x);

/* Drives the transfers of m until stop(ctx) is true (0) or the deadline passes (-1, ETIMEDOUT
 * with the sentence `waiting_for`). */
int httpc_drive(CURLM *m, long deadline, bool (*stop)(void *ctx), void *ctx, const char *waiting_for, ipb_error **err);
/* The same, ended with ECANCELED as soon as cancel_fd (-1: none) is readable, and with ESHUTDOWN
 * as soon as stop_fd (-1: none) is. */
int httpc_drive_cancellable(CURLM *m, long deadline, int cancel_fd, int stop_fd, bool (*stop)(void *ctx), void *ctx,
                            const char *waiting_for, ipb_error **err);

/* The outcome of a finished transfer as 0 or an error sentence starting with what (NULL: nothing):
 * libcurl's errors, what a callback stopped it for, or an HTTP status outside 2xx with the start
 * of the body. *ret_broken: the connection itself failed. */
int httpc_outcome(httpc_xfer *x, const char *what, bool *ret_broken, ipb_error **err);

/* "Name: value" lines for the headers in params (already expanded) plus Expect: (no
 * 100-continue). NULL on out of memory. */
struct curl_slist *httpc_user_headers(json_t *headers_obj);
/* A copy of list with more lines appended (NULL terminated). */
struct curl_slist *httpc_headers_with(const struct curl_slist *list, ...) __attribute__((sentinel));
