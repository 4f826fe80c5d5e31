#include "http.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mcpc_internal.h"

#ifndef CURL_WRITEFUNC_ERROR
#define CURL_WRITEFUNC_ERROR 0
#endif

#define ERROR_BODY_MAX 512
#define SESSION_ID_MAX 1024
/* Room for "data: " and a line end around a message of max_message bytes. */
#define SSE_LINE_SLACK 64

/* ---- the message queue ---- */

int mcpc_msgq_push(mcpc_msgq *q, const char *data, size_t len) {
    mcpc_qmsg *m = malloc(sizeof(*m) + len + 1);
    if (!m)
        return -ENOMEM;
    m->next = NULL;
    m->len = len;
    memcpy(m->data, data, len);
    m->data[len] = '\0';
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    q->bytes += len;
    return 0;
}

bool mcpc_msgq_pop(mcpc_msgq *q, char **ret, size_t *ret_len) {
    mcpc_qmsg *m = q->head;
    if (!m)
        return false;
    char *s = malloc(m->len + 1);
    if (!s)
        return false;
    memcpy(s, m->data, m->len + 1);
    *ret = s;
    *ret_len = m->len;
    q->head = m->next;
    if (!q->head)
        q->tail = NULL;
    q->bytes -= m->len;
    free(m);
    return true;
}

void mcpc_msgq_clear(mcpc_msgq *q) {
    while (q->head) {
        mcpc_qmsg *m = q->head;
        q->head = m->next;
        free(m);
    }
    q->tail = NULL;
    q->bytes = 0;
}

/* ---- libcurl ---- */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

int httpc_global_init(ipb_error **err) {
    if (ipb_curl_load(err) < 0)
        return -1;
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return mcpc_fail(err, EIO, "libcurl cannot start: %s", curl_easy_strerror(global_rc));
    return 0;
}

static void fail_xfer(httpc_xfer *x, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail_xfer(httpc_xfer *x, int errnum, const char *fmt, ...) {
    if (x->fail_errnum)
        return;
    x->fail_errnum = errnum;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->fail_msg, sizeof(x->fail_msg), fmt, ap);
    va_end(ap);
}

static bool ct_is(const char *ct, const char *type) {
    size_t n = strlen(type);
    return strncasecmp(ct, type, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

int httpc_event_message(httpc_xfer *x, const ipb_sse_event *ev) {
    if (strcmp(ev->type, "message") != 0 || ev->data_len == 0)
        return 0; /* other events, and the empty ones a server sends to prime reconnection */
    if (ev->data_len > x->max_message) {
        fail_xfer(x, EMSGSIZE, "the server sent a message longer than the limit of %zu bytes", x->max_message);
        return -EMSGSIZE;
    }
    if (mcpc_msgq_push(x->queue, ev->data, ev->data_len) < 0) {
        fail_xfer(x, ENOMEM, "out of memory");
        return -ENOMEM;
    }
    return 0;
}

static int on_sse_event(void *ctx, const ipb_sse_event *ev) {
    httpc_xfer *x = ctx;
    return x->on_event ? x->on_event(x, ev) : httpc_event_message(x, ev);
}

static void decide_mode(httpc_xfer *x) {
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
    if (x->status < 200 || x->status >= 300)
        x->mode = HTTPC_MODE_ERROR;
    else if (x->expect == HTTPC_EXPECT_NONE)
        x->mode = HTTPC_MODE_IGNORE;
    else if (ct_is(x->content_type, "text/event-stream"))
        x->mode = HTTPC_MODE_SSE;
    else if (x->expect == HTTPC_EXPECT_ANSWER && ct_is(x->content_type, "application/json"))
        x->mode = HTTPC_MODE_JSON;
    else if (x->expect == HTTPC_EXPECT_ANSWER && (x->status == 202 || x->status == 204))
        x->mode = HTTPC_MODE_IGNORE;
    else {
        char ct[64];
        mcpc_excerpt(x->content_type, strlen(x->content_type), ct, 48);
        fail_xfer(x, EPROTO, "the server answered with Content-Type '%s', expected %s", ct,
                  x->expect == HTTPC_EXPECT_STREAM ? "text/event-stream" : "application/json or text/event-stream");
        x->mode = HTTPC_MODE_ERROR;
    }
    if (x->mode == HTTPC_MODE_SSE)
        ipb_sse_init(&x->sse, x->max_message + SSE_LINE_SLACK);
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud) {
    httpc_xfer *x = ud;
    size_t n = size * nmemb;
    if (x->mode == HTTPC_MODE_UNSET)
        decide_mode(x);
    switch (x->mode) {
    case HTTPC_MODE_IGNORE:
        return n;
    case HTTPC_MODE_ERROR:
        if (x->fail_errnum)
            return CURL_WRITEFUNC_ERROR;
        if (x->body.len < ERROR_BODY_MAX) {
            size_t take = ERROR_BODY_MAX - x->body.len;
            ipb_buf_append(&x->body, ptr, n < take ? n : take);
            return n;
        }
        return CURL_WRITEFUNC_ERROR; /* enough of it for a sentence */
    case HTTPC_MODE_JSON:
        if (x->body.len + n > x->max_message) {
            fail_xfer(x, EMSGSIZE, "the server sent a message longer than the limit of %zu bytes", x->max_message);
            return CURL_WRITEFUNC_ERROR;
        }
        if (ipb_buf_append(&x->body, ptr, n) < 0) {
            fail_xfer(x, ENOMEM, "out of memory");
            return CURL_WRITEFUNC_ERROR;
        }
        return n;
    case HTTPC_MODE_SSE: {
        /* Messages nobody has taken yet: read no more until they are (httpc_resume()). */
        if (x->queue && x->queue->bytes >= MCPC_QUEUE_SOFT_MAX) {
            x->paused = true;
            return CURL_WRITEFUNC_PAUSE;
        }
        int r = ipb_sse_feed(&x->sse, ptr, n, on_sse_event, x);
        if (r == -EMSGSIZE)
            fail_xfer(x, EMSGSIZE, "the server sent an event longer than the limit of %zu bytes", x->max_message);
        else if (r < 0)
            fail_xfer(x, -r, "reading the event stream failed: %s", strerror(-r));
        return r < 0 ? CURL_WRITEFUNC_ERROR : n;
    }
    default:
        return CURL_WRITEFUNC_ERROR;
    }
}

/* Copies the value of a header line into out (trimmed), or returns false if name differs. */
static bool header_value(const char *line, size_t len, const char *name, const char **ret, size_t *ret_len) {
    size_t n = strlen(name);
    if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':')
        return false;
    const char *v = line + n + 1;
    const char *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *ret = v;
    *ret_len = (size_t)(end - v);
    return true;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *ud) {
    httpc_xfer *x = ud;
    size_t len = size * nitems;
    const char *v;
    size_t vlen;
    if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
        /* A new response (after a 100 Continue): forget the headers of the last one. */
        x->content_type[0] = '\0';
        free(x->session_id);
        x->session_id = NULL;
        x->session_id_bad = false;
    } else if (header_value(buf, len, "content-type", &v, &vlen)) {
        if (vlen >= sizeof(x->content_type))
            vlen = sizeof(x->content_type) - 1;
        memcpy(x->content_type, v, vlen);
        x->content_type[vlen] = '\0';
    } else if (header_value(buf, len, "mcp-session-id", &v, &vlen)) {
        /* Visible ASCII only (the spec), and not a novel. */
        bool ok = vlen > 0 && vlen <= SESSION_ID_MAX;
        for (size_t i = 0; ok && i < vlen; i++)
            ok = v[i] >= 0x21 && v[i] <= 0x7e;
        free(x->session_id);
        x->session_id = ok ? strndup(v, vlen) : NULL;
        x->session_id_bad = !ok;
    }
    return len;
}

int httpc_prepare(httpc_xfer *x, const char *method, const char *url, const char *body, size_t body_len,
                  struct curl_slist *headers, const ipb_mcp_limits *limits, long timeout_ms, enum httpc_expect expect,
                  ipb_error **err) {
    httpc_stop(x);
    if (!x->easy && !(x->easy = curl_easy_init())) {
        curl_slist_free_all(headers);
        return mcpc_fail(err, ENOMEM, "cannot make a libcurl handle");
    }
    curl_easy_reset(x->easy);
    curl_slist_free_all(x->headers);
    x->headers = headers;
    free(x->post);
    x->post = NULL;
    if (body && !(x->post = malloc(body_len ? body_len : 1)))
        return mcpc_fail(err, ENOMEM, "out of memory");
    if (body)
        memcpy(x->post, body, body_len);
    x->done = x->paused = false;
    x->result = CURLE_OK;
    x->errbuf[0] = '\0';
    x->status = 0;
    x->content_type[0] = '\0';
    free(x->session_id);
    x->session_id = NULL;
    x->session_id_bad = false;
    x->expect = expect;
    if (x->mode == HTTPC_MODE_SSE)
        ipb_sse_free(&x->sse);
    x->mode = HTTPC_MODE_UNSET;
    ipb_buf_reset(&x->body);
    x->max_message = limits->max_message;
    x->fail_errnum = 0;
    x->fail_msg[0] = '\0';

    CURL *e = x->easy;
    int bad = 0;
    bad |= curl_easy_setopt(e, CURLOPT_URL, url);
    bad |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    bad |= curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    bad |= curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    bad |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    bad |= curl_easy_setopt(e, CURLOPT_NOPROGRESS, 1L);
    bad |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)limits->connect_ms);
    bad |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 0L);
    bad |= curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    bad |= curl_easy_setopt(e, CURLOPT_USERAGENT, "ipybox/" IPYBOX_VERSION);
    bad |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    bad |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    bad |= curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    bad |= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    bad |= curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    bad |= curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    bad |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    if (strcmp(method, "POST") == 0) {
        bad |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
        bad |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->post ? x->post : "");
    } else if (strcmp(method, "DELETE") == 0) {
        bad |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
    } else {
        bad |= curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
    if (bad)
        return mcpc_fail(err, EINVAL, "libcurl refused an option (libcurl %s is too old? 7.85 or later is needed)",
                         curl_version_info(CURLVERSION_NOW)->version);
    return 0;
}

int httpc_start(httpc_xfer *x, ipb_error **err) {
    CURLMcode mc = curl_multi_add_handle(x->multi, x->easy);
    if (mc != CURLM_OK)
        return mcpc_fail(err, EIO, "libcurl cannot start a transfer: %s", curl_multi_strerror(mc));
    x->in_multi = true;
    return 0;
}

void httpc_stop(httpc_xfer *x) {
    if (x->in_multi)
        curl_multi_remove_handle(x->multi, x->easy);
    x->in_multi = false;
    x->paused = false;
}

void httpc_free(httpc_xfer *x) {
    httpc_stop(x);
    if (x->easy)
        curl_easy_cleanup(x->easy);
    x->easy = NULL;
    curl_slist_free_all(x->headers);
    x->headers = NULL;
    free(x->post);
    x->post = NULL;
    free(x->session_id);
    x->session_id = NULL;
    if (x->mode == HTTPC_MODE_SSE)
        ipb_sse_free(&x->sse);
    x->mode = HTTPC_MODE_UNSET;
    ipb_buf_free(&x->body);
}

void httpc_resume(httpc_xfer *x) {
    if (x->paused && x->in_multi && !x->done && (!x->queue || x->queue->bytes < MCPC_QUEUE_SOFT_MAX)) {
        x->paused = false;
        curl_easy_pause(x->easy, CURLPAUSE_CONT);
    }
}

int httpc_drive(CURLM *m, long deadline, bool (*stop)(void *ctx), void *ctx, const char *waiting_for, ipb_error **err) {
    return httpc_drive_cancellable(m, deadline, -1, -1, stop, ctx, waiting_for, err);
}

int httpc_drive_cancellable(CURLM *m, long deadline, int cancel_fd, int stop_fd, bool (*stop)(void *ctx), void *ctx,
                            const char *waiting_for, ipb_error **err) {
    for (;;) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(m, &running);
        if (mc != CURLM_OK)
            return mcpc_fail(err, EIO, "libcurl failed: %s", curl_multi_strerror(mc));
        CURLMsg *msg;
        int queued;
        while ((msg = curl_multi_info_read(m, &queued))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            httpc_xfer *x = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            if (x) {
                x->done = true;
                x->result = msg->data.result;
            }
        }
        if (stop(ctx))
            return 0;
        long left = mcpc_ms_left(deadline);
        if (left == 0)
            return mcpc_fail(err, ETIMEDOUT, "%s", waiting_for);
        if (mcpc_cancelled(stop_fd))
            return mcpc_fail(err, ESHUTDOWN, "the client was shut down");
        if (mcpc_cancelled(cancel_fd))
            return mcpc_fail(err, ECANCELED, "the call was cancelled");
        struct curl_waitfd extra[2];
        unsigned n = 0;
        if (cancel_fd >= 0)
            extra[n++] = (struct curl_waitfd){.fd = cancel_fd, .events = CURL_WAIT_POLLIN};
        if (stop_fd >= 0)
            extra[n++] = (struct curl_waitfd){.fd = stop_fd, .events = CURL_WAIT_POLLIN};
        mc = curl_multi_poll(m, n ? extra : NULL, n, left > 1000 ? 1000 : (int)left, NULL);
        if (mc != CURLM_OK)
            return mcpc_fail(err, EIO, "libcurl failed: %s", curl_multi_strerror(mc));
    }
}

static int curl_errnum(CURLcode rc) {
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        return ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return EHOSTUNREACH;
    case CURLE_OPERATION_TIMEDOUT:
        return ETIMEDOUT;
    case CURLE_OUT_OF_MEMORY:
        return ENOMEM;
    case CURLE_UNSUPPORTED_PROTOCOL:
        return EPROTONOSUPPORT;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
        return EPROTO;
    default:
        return ECONNRESET;
    }
}

static const char *reason_phrase(long status) {
    switch (status) {
    case 400:
        return " Bad Request";
    case 401:
        return " Unauthorized";
    case 403:
        return " Forbidden";
    case 404:
        return " Not Found";
    case 405:
        return " Method Not Allowed";
    case 406:
        return " Not Acceptable";
    case 409:
        return " Conflict";
    case 413:
        return " Content Too Large";
    case 429:
        return " Too Many Requests";
    case 500:
        return " Internal Server Error";
    case 502:
        return " Bad Gateway";
    case 503:
        return " Service Unavailable";
    case 504:
        return " Gateway Timeout";
    default:
        return "";
    }
}

int httpc_outcome(httpc_xfer *x, const char *what, bool *ret_broken, ipb_error **err) {
    *ret_broken = false;
    char prefix[96] = "";
    if (what)
        snprintf(prefix, sizeof(prefix), "%s: ", what);
    if (!x->status)
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
    /* An HTTP error first: its body was cut on purpose. */
    if (x->status && (x->status < 200 || x->status >= 300)) {
        char body[ERROR_BODY_MAX + 4];
        mcpc_excerpt(x->body.data ? x->body.data : "", x->body.len, body, 200);
        int e = x->status == 401 || x->status == 403 ? EACCES : x->status == 404 ? ENOENT : EPROTO;
        const char *redirect = x->status >= 300 && x->status < 400 ? " (redirects are not followed)" : "";
        if (*body)
            return mcpc_fail(err, e, "%sthe server answered HTTP %ld%s%s: %s", prefix, x->status,
                             reason_phrase(x->status), redirect, body);
        return mcpc_fail(err, e, "%sthe server answered HTTP %ld%s%s", prefix, x->status, reason_phrase(x->status),
                         redirect);
    }
    if (x->fail_errnum)
        return mcpc_fail(err, x->fail_errnum, "%s%s", prefix, x->fail_msg);
    if (x->result != CURLE_OK) {
        *ret_broken = true;
        return mcpc_fail(err, curl_errnum(x->result), "%s%s%s%s", prefix, curl_easy_strerror(x->result),
                         x->errbuf[0] ? ": " : "", x->errbuf);
    }
    return 0;
}

struct curl_slist *httpc_user_headers(json_t *headers_obj) {
    struct curl_slist *l = NULL;
    const char *k;
    json_t *v;
    json_object_foreach(headers_obj, k, v) {
        char *line = ipb_strdupf("%s: %s", k, json_string_value(v));
        struct curl_slist *n = line ? curl_slist_append(l, line) : NULL;
        free(line);
        if (!n) {
            curl_slist_free_all(l);
            return NULL;
        }
        l = n;
    }
    /* No "Expect: 100-continue" wait before large bodies. */
    struct curl_slist *n = curl_slist_append(l, "Expect:");
    if (!n)
        curl_slist_free_all(l);
    return n;
}

struct curl_slist *httpc_headers_with(const struct curl_slist *list, ...) {
    struct curl_slist *out = NULL, *n;
    for (const struct curl_slist *p = list; p; p = p->next) {
        if (!(n = curl_slist_append(out, p->data)))
            goto fail;
        out = n;
    }
    va_list ap;
    va_start(ap, list);
    const char *line;
    while ((line = va_arg(ap, const char *))) {
        if (!(n = curl_slist_append(out, line))) {
            va_end(ap);
            goto fail;
        }
        out = n;
    }
    va_end(ap);
    return out;
fail:
    curl_slist_free_all(out);
    return NULL;
}
