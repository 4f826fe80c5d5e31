/* The legacy HTTP+SSE transport (MCP 2024-11-05): a GET on the URL opens an event stream whose
 * first "endpoint" event names where to POST messages; everything from the server arrives as
 * "message" events on that stream. The stream ending means the connection is gone. The stream
 * and the POSTs run on two multi handles, so that one thread can read the stream while another
 * posts a message (one POST at a time: the core sends whole messages under its write lock). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"
#include "log.h"
#include "mcpc_internal.h"

#define MAX_ENDPOINT 8192

typedef struct sse_transport {
    mcpc_transport base;
    CURLM *multi;      /* the stream (driven by recv()) */
    CURLM *post_multi; /* the POSTs (driven by send()) */
    char *url;
    char *endpoint; /* where messages are POSTed, once the server said */
    struct curl_slist *user_headers;
    httpc_xfer stream; /* the GET */
    httpc_xfer post;   /* one message at a time */
    mcpc_msgq queue;
} sse_transport;

static char *url_part(CURLU *u, CURLUPart part, unsigned flags) {
    char *s = NULL;
    if (curl_url_get(u, part, &s, flags) != CURLUE_OK)
        return NULL;
    return s;
}

static bool same_text(const char *a, const char *b, bool nocase) {
    if (!a || !b)
        return a == b;
    return nocase ? strcasecmp(a, b) == 0 : strcmp(a, b) == 0;
}

/* The endpoint relative to the stream's URL, on the same scheme, host and port. */
static int resolve_endpoint(sse_transport *t, const char *data, size_t len, char *why, size_t why_size) {
    char shown[96];
    mcpc_excerpt(data, len, shown, 80);
    if (len == 0 || len > MAX_ENDPOINT || strlen(data) != len) {
        snprintf(why, why_size, "the server's endpoint event is not a usable URL: '%s'", shown);
        return -EPROTO;
    }
    CURLU *base = curl_url();
    CURLU *u = NULL;
    int rc = -EPROTO;
    char *s1 = NULL, *h1 = NULL, *p1 = NULL, *s2 = NULL, *h2 = NULL, *p2 = NULL, *full = NULL;
    if (!base || curl_url_set(base, CURLUPART_URL, t->url, 0) != CURLUE_OK || !(u = curl_url_dup(base))) {
        snprintf(why, why_size, "cannot parse the server's URL");
        goto out;
    }
    if (curl_url_set(u, CURLUPART_URL, data, 0) != CURLUE_OK) {
        snprintf(why, why_size, "the server's endpoint event is not a usable URL: '%s'", shown);
        goto out;
    }
    s1 = url_part(base, CURLUPART_SCHEME, 0);
    h1 = url_part(base, CURLUPART_HOST, 0);
    p1 = url_part(base, CURLUPART_PORT, CURLU_DEFAULT_PORT);
    s2 = url_part(u, CURLUPART_SCHEME, 0);
    h2 = url_part(u, CURLUPART_HOST, 0);
    p2 = url_part(u, CURLUPART_PORT, CURLU_DEFAULT_PORT);
    if (!same_text(s1, s2, true) || !same_text(h1, h2, true) || !same_text(p1, p2, false)) {
        snprintf(why, why_size,
                 "the server's endpoint event names %s://%s:%s, not the server's own %s://%s:%s; refused",
                 s2 ? s2 : "?", h2 ? h2 : "?", p2 ? p2 : "?", s1 ? s1 : "?", h1 ? h1 : "?", p1 ? p1 : "?");
        goto out;
    }
    full = url_part(u, CURLUPART_URL, 0);
    if (!full || !(t->endpoint = strdup(full))) {
        snprintf(why, why_size, "out of memory");
        rc = -ENOMEM;
        goto out;
    }
    rc = 0;
out:
    curl_free(s1);
    curl_free(h1);
    curl_free(p1);
    curl_free(s2);
    curl_free(h2);
    curl_free(p2);
    curl_free(full);
    curl_url_cleanup(u);
    curl_url_cleanup(base);
    return rc;
}

static int stream_event(httpc_xfer *x, const ipb_sse_event *ev) {
    sse_transport *t = x->owner;
    if (strcmp(ev->type, "endpoint") == 0) {
        if (t->endpoint) {
            log_debug("MCP server '%s': a second endpoint event, ignored", t->base.name);
            return 0;
        }
        int r = resolve_endpoint(t, ev->data, ev->data_len, x->fail_msg, sizeof(x->fail_msg));
        if (r < 0)
            x->fail_errnum = -r;
        return r;
    }
    return httpc_event_message(x, ev);
}

static bool stream_ready(void *ctx) {
    sse_transport *t = ctx;
    return t->endpoint || t->stream.done;
}

static bool post_done(void *ctx) { return ((sse_transport *)ctx)->post.done; }

static bool message_or_end(void *ctx) {
    sse_transport *t = ctx;
    return t->queue.head || t->stream.done;
}

/* The stream is over: why, as an error. */
static int stream_ended(sse_transport *t, ipb_error **err) {
    mcpc_set_broken(&t->base);
    bool broken;
    if (httpc_outcome(&t->stream, "the SSE stream", &broken, err) < 0)
        return -1;
    return mcpc_fail(err, ECONNRESET, "the server ended its SSE stream");
}

static int sse_send(mcpc_transport *base, const char *msg, size_t len, enum mcpc_msg_kind kind, long deadline,
                    ipb_error **err) {
    sse_transport *t = (sse_transport *)base;
    (void)kind;
    if (!base->has_reader && t->stream.done) /* else the reader thread looks after the stream */
        return stream_ended(t, err);
    struct curl_slist *h = httpc_headers_with(t->user_headers, "Content-Type: application/json", (const char *)NULL);
    if (!h)
        return mcpc_fail(err, ENOMEM, "out of memory");
    if (httpc_prepare(&t->post, "POST", t->endpoint, msg, len, h, &base->limits, mcpc_ms_left(deadline) + 1000,
                      HTTPC_EXPECT_NONE, err) < 0 ||
        httpc_start(&t->post, err) < 0)
        return -1;
    if (httpc_drive_cancellable(t->post_multi, deadline, -1, base->stop_fd, post_done, t,
                                "the server did not accept a message before the deadline", err) < 0)
        return -1;
    httpc_stop(&t->post);
    bool broken = false;
    if (httpc_outcome(&t->post, "posting a message", &broken, err) < 0) {
        if (broken)
            mcpc_set_broken(base);
        return -1;
    }
    return 1;
}

static int sse_recv(mcpc_transport *base, long deadline, char **ret_msg, size_t *ret_len, ipb_error **err) {
    sse_transport *t = (sse_transport *)base;
    for (;;) {
        if (mcpc_msgq_pop(&t->queue, ret_msg, ret_len)) {
            httpc_resume(&t->stream);
            return 1;
        }
        if (t->stream.done) {
            int r = stream_ended(t, err);
            if ((*err)->errnum == EMSGSIZE)
                mcpc_set_broken(base);
            return r;
        }
        if (httpc_drive_cancellable(t->multi, deadline, base->cancel_fd, base->stop_fd, message_or_end, t,
                                    "no answer before the deadline", err) < 0)
            return -1;
    }
}

static void sse_close(mcpc_transport *base, bool graceful) {
    sse_transport *t = (sse_transport *)base;
    (void)graceful; /* closing the stream ends the session */
    httpc_free(&t->post);
    httpc_free(&t->stream);
    if (t->multi)
        curl_multi_cleanup(t->multi);
    if (t->post_multi)
        curl_multi_cleanup(t->post_multi);
    curl_slist_free_all(t->user_headers);
    mcpc_msgq_clear(&t->queue);
    free(t->endpoint);
    free(t->url);
    free(t);
}

static const mcpc_transport_ops sse_ops = {
    .send = sse_send,
    .recv = sse_recv,
    .reset_session = NULL,
    .close = sse_close,
    .clone = NULL,
    .kill = NULL, /* the reader sees the client's stop fd; close ends the stream */
};

mcpc_transport *mcpc_sse_open(const char *name, json_t *params, const ipb_mcp_limits *limits, long deadline,
                              ipb_error **err) {
    if (httpc_global_init(err) < 0)
        return NULL;
    sse_transport *t = calloc(1, sizeof(*t));
    if (!t) {
        mcpc_fail(err, ENOMEM, "out of memory");
        return NULL;
    }
    t->base.ops = &sse_ops;
    t->base.name = name;
    t->base.limits = *limits;
    t->url = strdup(json_string_value(json_object_get(params, "url")));
    t->user_headers = httpc_user_headers(json_object_get(params, "headers"));
    t->multi = curl_multi_init();
    t->post_multi = curl_multi_init();
    t->base.cancel_fd = t->base.stop_fd = -1;
    struct curl_slist *h = t->user_headers ? httpc_headers_with(t->user_headers, "Accept: text/event-stream",
                                                                "Cache-Control: no-cache", (const char *)NULL)
                                           : NULL;
    if (!t->url || !t->user_headers || !t->multi || !t->post_multi || !h) {
        curl_slist_free_all(h);
        mcpc_fail(err, ENOMEM, "out of memory");
        goto fail;
    }
    t->stream.multi = t->multi;
    t->post.multi = t->post_multi;
    t->stream.queue = &t->queue;
    t->post.queue = NULL; /* its body is ignored */
    t->stream.owner = t->post.owner = t;
    t->stream.on_event = stream_event;
    /* The stream stays open for the whole connection: no overall timeout. */
    if (httpc_prepare(&t->stream, "GET", t->url, NULL, 0, h, limits, 0, HTTPC_EXPECT_STREAM, err) < 0 ||
        httpc_start(&t->stream, err) < 0)
        goto fail;
    if (httpc_drive(t->multi, deadline, stream_ready, t, "the server sent no endpoint event before the deadline", err) <
        0)
        goto fail;
    if (!t->endpoint) {
        stream_ended(t, err);
        goto fail;
    }
    log_debug("MCP server '%s': messages go to %s", name, t->endpoint);
    return &t->base;
fail:
    sse_close(&t->base, false);
    return NULL;
}
