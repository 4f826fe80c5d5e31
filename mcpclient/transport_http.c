/* The Streamable HTTP transport (MCP 2025-03-26 and later): each message is a POST to one URL.
 * A request's answer is JSON or an event stream carrying the response (and, before it, requests
 * and notifications of the server); notifications and our responses get 202. The session id
 * the server gives with the initialize answer goes with every later POST. Concurrent calls each
 * use a clone: its own multi handle and transfers, the session shared under a lock. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "http.h"
#include "log.h"
#include "mcpc_internal.h"

#define MAX_REPLIES 8

/* What the transport and its clones share. */
typedef struct http_shared {
    pthread_mutex_t lock; /* session_id */
    char *url;
    struct curl_slist *user_headers;
    char *session_id;
} http_shared;

typedef struct http_transport {
    mcpc_transport base;
    http_shared *s; /* owned by the transport mcpc_http_open() made, borrowed by its clones */
    bool is_clone;
    bool fresh; /* after reset_session: the session in s is forgotten (under s->lock) */
    CURLM *multi;
    httpc_xfer req;   /* the last request and the answer we read from it */
    bool req_handled; /* its end was turned into messages or an error */
    httpc_xfer other; /* notifications, one at a time */
    /* Our answers to the server's requests, sent while its stream goes on being read: a server
     * may wait for one before it goes on, and may send more meanwhile. */
    httpc_xfer *replies[MAX_REPLIES];
    int nreplies;
    mcpc_msgq queue;
} http_transport;

/* The headers of a POST; *with_session: they carry the session id. */
static struct curl_slist *post_headers(http_transport *t, bool *with_session) {
    struct curl_slist *h = httpc_headers_with(t->s->user_headers, "Content-Type: application/json",
                                              "Accept: application/json, text/event-stream", (const char *)NULL);
    char line[1200];
    line[0] = '\0';
    pthread_mutex_lock(&t->s->lock);
    if (t->s->session_id && !t->fresh)
        snprintf(line, sizeof(line), "Mcp-Session-Id: %s", t->s->session_id);
    pthread_mutex_unlock(&t->s->lock);
    *with_session = line[0] != '\0';
    if (h && line[0]) {
        struct curl_slist *n = curl_slist_append(h, line);
        if (!n)
            goto fail;
        h = n;
    }
    if (h && t->base.protocol_version) {
        snprintf(line, sizeof(line), "MCP-Protocol-Version: %s", t->base.protocol_version);
        struct curl_slist *n = curl_slist_append(h, line);
        if (!n)
            goto fail;
        h = n;
    }
    return h;
fail:
    curl_slist_free_all(h);
    return NULL;
}

static bool other_done(void *ctx) { return ((http_transport *)ctx)->other.done; }

/* The session id from an answer, the first time there is one; after reset_session, the one of
 * the new session's first answer (or none) replaces the forgotten one. */
static int take_session(http_transport *t, httpc_xfer *x, ipb_error **err) {
    if (x->session_id_bad)
        return mcpc_fail(err, EPROTO, "the server sent an invalid Mcp-Session-Id (visible ASCII, at most 1024 bytes)");
    int r = 0;
    pthread_mutex_lock(&t->s->lock);
    if (t->fresh) {
        free(t->s->session_id);
        t->s->session_id = NULL;
        t->fresh = false;
    }
    if (x->session_id && !t->s->session_id && !(t->s->session_id = strdup(x->session_id)))
        r = mcpc_fail(err, ENOMEM, "out of memory");
    pthread_mutex_unlock(&t->s->lock);
    return r;
}

/* A 404 to a POST that carried our session id: the server ended the session. */
static bool session_gone(httpc_xfer *x) { return x->with_session && x->status == 404; }

/* Takes the replies that are done off the list; how they went is only logged (the answer to
 * our request tells whether the server got what it needed). */
static void reap_replies(http_transport *t) {
    for (int i = 0; i < t->nreplies;) {
        httpc_xfer *x = t->replies[i];
        if (!x->done) {
            i++;
            continue;
        }
        bool broken = false;
        ipb_error *e = NULL;
        httpc_stop(x);
        if (httpc_outcome(x, "sending a response", &broken, &e) < 0)
            log_debug("MCP server '%s': %s", t->base.name, ipb_error_msg(e));
        ipb_error_free(e);
        httpc_free(x);
        free(x);
        t->replies[i] = t->replies[--t->nreplies];
    }
}

static bool reply_slot_free(void *ctx) {
    http_transport *t = ctx;
    reap_replies(t);
    return t->nreplies < MAX_REPLIES;
}

static int send_reply(http_transport *t, const char *msg, size_t len, long deadline, ipb_error **err) {
    if (!reply_slot_free(t) && httpc_drive(t->multi, deadline, reply_slot_free, t,
                                           "the server did not accept our responses before the deadline", err) < 0)
        return -1;
    httpc_xfer *x = calloc(1, sizeof(*x));
    bool with = false;
    struct curl_slist *h = x ? post_headers(t, &with) : NULL;
    if (!h) {
        free(x);
        return mcpc_fail(err, ENOMEM, "out of memory");
    }
    x->multi = t->multi;
    x->owner = t;
    if (httpc_prepare(x, "POST", t->s->url, msg, len, h, &t->base.limits, mcpc_ms_left(deadline) + 1000,
                      HTTPC_EXPECT_NONE, err) < 0 ||
        httpc_start(x, err) < 0) {
        httpc_free(x);
        free(x);
        return -1;
    }
    t->replies[t->nreplies++] = x;
    return 1;
}

static int http_send(mcpc_transport *base, const char *msg, size_t len, enum mcpc_msg_kind kind, long deadline,
                     ipb_error **err) {
    http_transport *t = (http_transport *)base;
    if (kind == MCPC_MSG_RESPONSE)
        return send_reply(t, msg, len, deadline, err);
    bool request = kind == MCPC_MSG_REQUEST;
    httpc_xfer *x = request ? &t->req : &t->other;
    bool with = false;
    struct curl_slist *h = post_headers(t, &with);
    if (!h)
        return mcpc_fail(err, ENOMEM, "out of memory");
    if (request) {
        /* A new exchange: what is left of the last answer is no longer wanted. */
        mcpc_msgq_clear(&t->queue);
        t->req_handled = false;
    }
    long timeout = mcpc_ms_left(deadline) + 1000;
    if (httpc_prepare(x, "POST", t->s->url, msg, len, h, &base->limits, timeout,
                      request ? HTTPC_EXPECT_ANSWER : HTTPC_EXPECT_NONE, err) < 0)
        return -1;
    x->with_session = with;
    if (httpc_start(x, err) < 0)
        return -1;
    if (request)
        return 1; /* the answer is read by recv() */
    if (httpc_drive(t->multi, deadline, other_done, t, "the server did not accept a message before the deadline", err) <
        0)
        return -1;
    bool broken = false;
    bool gone = session_gone(x);
    httpc_stop(x);
    if (httpc_outcome(x, "sending a notification", &broken, err) < 0) {
        if (gone) {
            mcpc_reword(err, "the server ended the session (HTTP 404 to a message with its Mcp-Session-Id)");
            (*err)->errnum = ESTALE;
        }
        if (broken)
            mcpc_set_broken(base);
        return -1;
    }
    return take_session(t, x, err) < 0 ? -1 : 1;
}

static bool have_message_or_end(void *ctx) {
    http_transport *t = ctx;
    reap_replies(t);
    return t->queue.head || t->req.done;
}

/* The request's transfer ended: its JSON body becomes a message, or its end an error. */
static int finish_request(http_transport *t, ipb_error **err) {
    httpc_xfer *x = &t->req;
    t->req_handled = true;
    bool broken = false, gone = session_gone(x);
    httpc_stop(x);
    if (httpc_outcome(x, NULL, &broken, err) < 0) {
        if (broken || (*err)->errnum == EMSGSIZE)
            mcpc_set_broken(&t->base);
        if (gone) {
            mcpc_reword(err, "the server ended the session (HTTP 404 to a request with its Mcp-Session-Id)");
            (*err)->errnum = ESTALE;
        }
        return -1;
    }
    if (take_session(t, x, err) < 0)
        return -1;
    if (x->mode == HTTPC_MODE_JSON) {
        if (mcpc_msgq_push(&t->queue, x->body.data ? x->body.data : "", x->body.len) < 0)
            return mcpc_fail(err, ENOMEM, "out of memory");
        ipb_buf_free(&x->body);
    }
    return 0;
}

static int http_recv(mcpc_transport *base, long deadline, char **ret_msg, size_t *ret_len, ipb_error **err) {
    http_transport *t = (http_transport *)base;
    for (;;) {
        if (mcpc_msgq_pop(&t->queue, ret_msg, ret_len)) {
            httpc_resume(&t->req);
            /* The session id comes with the answer's headers, before its stream ends. */
            if (take_session(t, &t->req, err) < 0)
                return -1;
            return 1;
        }
        if (t->req_handled || !t->req.easy) {
            /* Streamable HTTP servers answer each request in its own response. */
            if (t->req.status == 202 || t->req.status == 204)
                return mcpc_fail(err, EPROTO, "the server accepted the request (HTTP %ld) but sent no answer",
                                 t->req.status);
            return mcpc_fail(err, EPROTO, "the server's answer ended before the response");
        }
        if (t->req.done) {
            if (finish_request(t, err) < 0)
                return -1;
            continue;
        }
        if (httpc_drive_cancellable(t->multi, deadline, base->cancel_fd, base->stop_fd, have_message_or_end, t,
                                    "no answer before the deadline", err) < 0) {
            int e = *err ? (*err)->errnum : 0;
            if (e == ECANCELED || e == ESHUTDOWN || e == ETIMEDOUT)
                httpc_stop(&t->req); /* the answer's stream is closed */
            return -1;
        }
    }
}

/* The next request of this transport (initialize) goes without the session id, and its answer's
 * session replaces the forgotten one; meanwhile the clones still send the old one (and get 404,
 * and wait for the new session in the core) rather than none. */
static void http_reset_session(mcpc_transport *base) {
    http_transport *t = (http_transport *)base;
    pthread_mutex_lock(&t->s->lock);
    t->fresh = true;
    pthread_mutex_unlock(&t->s->lock);
}

static void shared_free(http_shared *s) {
    if (!s)
        return;
    curl_slist_free_all(s->user_headers);
    free(s->session_id);
    free(s->url);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static void http_close(mcpc_transport *base, bool graceful) {
    http_transport *t = (http_transport *)base;
    httpc_stop(&t->req);
    for (int i = 0; i < t->nreplies; i++) {
        httpc_free(t->replies[i]);
        free(t->replies[i]);
    }
    t->nreplies = 0;
    if (graceful && !t->is_clone && t->s && t->s->session_id && t->multi) {
        /* Ends the session on the server; a server that does not support it answers 405. */
        long deadline = ipb_now_ms() + MCPC_DELETE_MS;
        bool with = false;
        struct curl_slist *h = post_headers(t, &with);
        ipb_error *e = NULL;
        if (h &&
            httpc_prepare(&t->other, "DELETE", t->s->url, NULL, 0, h, &base->limits, MCPC_DELETE_MS, HTTPC_EXPECT_NONE,
                          &e) == 0 &&
            httpc_start(&t->other, &e) == 0)
            httpc_drive(t->multi, deadline, other_done, t, "no answer to DELETE", &e);
        if (e)
            log_debug("MCP server '%s': ending the session: %s", base->name, ipb_error_msg(e));
        ipb_error_free(e);
    }
    httpc_free(&t->req);
    httpc_free(&t->other);
    if (t->multi)
        curl_multi_cleanup(t->multi);
    mcpc_msgq_clear(&t->queue);
    if (!t->is_clone)
        shared_free(t->s);
    free(t);
}

static mcpc_transport *http_new(const mcpc_transport *like, http_shared *s, bool is_clone, ipb_error **err);

static mcpc_transport *http_clone(mcpc_transport *base, ipb_error **err) {
    http_transport *t = (http_transport *)base;
    return http_new(base, t->s, true, err);
}

static const mcpc_transport_ops http_ops = {
    .send = http_send,
    .recv = http_recv,
    .reset_session = http_reset_session,
    .close = http_close,
    .clone = http_clone,
    .kill = NULL, /* each call's transfers see the client's stop fd */
};

/* A transport on s: the first one (like: its name, limits and protocol version) or a clone. */
static mcpc_transport *http_new(const mcpc_transport *like, http_shared *s, bool is_clone, ipb_error **err) {
    http_transport *t = calloc(1, sizeof(*t));
    if (!t) {
        if (!is_clone)
            shared_free(s);
        mcpc_fail(err, ENOMEM, "out of memory");
        return NULL;
    }
    t->base.ops = &http_ops;
    t->base.name = like->name;
    t->base.limits = like->limits;
    t->base.protocol_version = __atomic_load_n(&like->protocol_version, __ATOMIC_ACQUIRE);
    t->base.cancel_fd = t->base.stop_fd = -1;
    t->s = s;
    t->is_clone = is_clone;
    t->multi = curl_multi_init();
    if (!t->multi) {
        mcpc_fail(err, ENOMEM, "out of memory");
        http_close(&t->base, false);
        return NULL;
    }
    t->req.multi = t->other.multi = t->multi;
    t->req.queue = t->other.queue = &t->queue;
    t->req.owner = t->other.owner = t;
    return &t->base;
}

mcpc_transport *mcpc_http_open(const char *name, json_t *params, const ipb_mcp_limits *limits, long deadline,
                               ipb_error **err) {
    (void)deadline; /* nothing to open: the first POST connects */
    if (httpc_global_init(err) < 0)
        return NULL;
    http_shared *s = calloc(1, sizeof(*s));
    if (!s) {
        mcpc_fail(err, ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->url = strdup(json_string_value(json_object_get(params, "url")));
    s->user_headers = httpc_user_headers(json_object_get(params, "headers"));
    if (!s->url || !s->user_headers) {
        shared_free(s);
        mcpc_fail(err, ENOMEM, "out of memory");
        return NULL;
    }
    mcpc_transport like = {.name = name, .limits = *limits};
    return http_new(&like, s, false, err);
}
