/* The routing of calls: a client's request goes on to its session's worker under an id of
 * ours (a pending request), so that answers and progress find the client that asked, whatever
 * ids clients chose. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_int.h"
#include "log.h"

void ipbd_worker_send(struct ipbd *d, struct ipbd_session *s, json_t *msg, bool *ok) {
    size_t len;
    char *line = jrpc_dump(msg, &len);
    json_decref(msg);
    *ok = line && len <= JRPC_MAX_LINE && ipbd_out_send(d, &s->linkw, &s->out, line, len) == 0;
    free(line);
}

struct ipbd_pending *ipbd_pending_add(struct ipbd_session *s, enum ipbd_pending_kind kind, struct ipbd_client *c,
                                      json_t *id, json_t *token) {
    struct ipbd_pending *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->wid = ++s->next_wid;
    p->kind = kind;
    p->client_id = c ? c->id : 0;
    p->id = json_incref(id);
    p->token = json_incref(token);
    p->next = s->pending;
    s->pending = p;
    if (c)
        c->pending++;
    return p;
}

static struct ipbd_pending *take_pending(struct ipbd_session *s, uint64_t wid) {
    for (struct ipbd_pending **pp = &s->pending; *pp; pp = &(*pp)->next)
        if ((*pp)->wid == wid) {
            struct ipbd_pending *p = *pp;
            *pp = p->next;
            return p;
        }
    return NULL;
}

struct ipbd_pending *ipbd_pending_find(struct ipbd_session *s, uint64_t wid) {
    for (struct ipbd_pending *p = s->pending; p; p = p->next)
        if (p->wid == wid)
            return p;
    return NULL;
}

/* Frees p and tells its client (if still there) that one of its requests is settled. */
static void pending_free(struct ipbd *d, struct ipbd_pending *p) {
    struct ipbd_client *c = ipbd_client_find(d, p->client_id);
    json_decref(p->id);
    json_decref(p->token);
    free(p);
    if (c)
        ipbd_client_done(d, c);
}

void ipbd_pending_fail(struct ipbd *d, struct ipbd_pending *p, int code, const char *msg) {
    struct ipbd_client *c = ipbd_client_find(d, p->client_id);
    if (c)
        ipbd_client_send(d, c, jrpc_error(p->id, code, msg));
    pending_free(d, p);
}

/* A request that could not be sent on: unlinked and answered with an error. */
void ipbd_pending_fail_new(struct ipbd *d, struct ipbd_session *s, struct ipbd_pending *p) {
    take_pending(s, p->wid);
    ipbd_pending_fail(d, p, s->linkw.fd < 0 ? IPBD_SESSION_GONE : JRPC_INVALID_REQUEST,
                      s->linkw.fd < 0
                          ? "The session is not taking requests (its worker is gone)"
                          : "The request is too large for the session (over 16 MiB as the daemon encodes it), "
                            "or the session is not reading");
}

void ipbd_session_forward_call(struct ipbd *d, struct ipbd_session *s, struct ipbd_client *c, json_t *msg) {
    json_t *id = json_object_get(msg, "id");
    json_t *meta = json_object_get(json_object_get(msg, "params"), "_meta");
    json_t *token = json_object_get(meta, "progressToken");
    if (token && !json_is_string(token) && !json_is_integer(token))
        token = NULL;
    struct ipbd_pending *p = ipbd_pending_add(s, P_CALL, c, id, token);
    if (!p) {
        ipbd_client_send(d, c, jrpc_error(id, JRPC_INTERNAL_ERROR, "Out of memory"));
        return;
    }
    json_object_set_new(msg, "id", json_integer((json_int_t)p->wid));
    if (token)
        json_object_set_new(meta, "progressToken", json_integer((json_int_t)p->wid));
    bool ok;
    ipbd_worker_send(d, s, json_incref(msg), &ok);
    if (!ok)
        ipbd_pending_fail_new(d, s, p);
}

void ipbd_session_when_ready(struct ipbd *d, struct ipbd_session *s, struct ipbd_client *c, json_t *id) {
    struct ipbd_pending *p = ipbd_pending_add(s, P_CREATE, c, id, NULL);
    if (!p) {
        ipbd_client_send(d, c, jrpc_error(id, JRPC_INTERNAL_ERROR, "Out of memory"));
        return;
    }
    bool ok;
    ipbd_worker_send(d, s, json_pack("{s:s, s:I, s:s}", "jsonrpc", "2.0", "id", (json_int_t)p->wid, "method", "ping"),
                     &ok);
    if (!ok)
        ipbd_pending_fail_new(d, s, p);
}

/* Cancels the worker's side of p (it answers nothing for a cancelled call) and frees p. */
static void cancel_pending(struct ipbd *d, struct ipbd_session *s, struct ipbd_pending *p, const char *answer) {
    if (p->kind == P_CALL) {
        bool ok;
        ipbd_worker_send(d, s,
                         jrpc_notification("notifications/cancelled",
                                           json_pack("{s:I, s:s}", "requestId", (json_int_t)p->wid, "reason",
                                                     "the client cancelled the request or left")),
                         &ok);
    }
    if (answer)
        ipbd_pending_fail(d, p, JRPC_INTERNAL_ERROR, answer);
    else
        pending_free(d, p);
}

void ipbd_session_cancel(struct ipbd *d, struct ipbd_client *c, json_t *request_id) {
    if (!request_id)
        return;
    for (struct ipbd_session *s = d->sessions; s; s = s->next)
        for (struct ipbd_pending **pp = &s->pending; *pp; pp = &(*pp)->next) {
            struct ipbd_pending *p = *pp;
            if (p->client_id == c->id && json_equal(p->id, request_id)) {
                *pp = p->next;
                cancel_pending(d, s, p, NULL);
                return;
            }
        }
}

/* Cancels every request of c in s: answered with an error unless c is gone. */
void ipbd_pending_cancel_client(struct ipbd *d, struct ipbd_session *s, struct ipbd_client *c) {
    for (struct ipbd_pending **pp = &s->pending; *pp;) {
        struct ipbd_pending *p = *pp;
        if (p->client_id != c->id) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        cancel_pending(d, s, p, c->dead ? NULL : "Cancelled: the client left this session");
    }
}

/* An answer or a notification from a worker, routed to the client that asked. */
/* A progress notification as the worker writes it (supervisor/mcp_server.c): this head, our
 * integer token, then the rest. Streamed output is nearly all such lines, each up to tens of
 * KiB of escaped text: the token is swapped in the text and the rest passed on as it is, since
 * parsing and printing it again made the daemon the slowest part of a stream (a third of an
 * embedded session's throughput). Anything else takes the parser. */
static const char PROGRESS_HEAD[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":"
                                    "{\"progressToken\":";

static bool progress_fast(struct ipbd *d, struct ipbd_session *s, const char *line, size_t len) {
    size_t h = sizeof(PROGRESS_HEAD) - 1, i = h;
    if (len <= h || memcmp(line, PROGRESS_HEAD, h))
        return false;
    uint64_t tok = 0;
    while (i < len && i - h < 18 && line[i] >= '0' && line[i] <= '9')
        tok = tok * 10 + (uint64_t)(line[i++] - '0');
    if (i == h || i >= len || line[i] != ',' || (line[h] == '0' && i > h + 1))
        return false;
    struct ipbd_pending *p = ipbd_pending_find(s, tok);
    struct ipbd_client *c = p && p->token ? ipbd_client_find(d, p->client_id) : NULL;
    if (!c)
        return true; /* no one to tell, as below */
    char *t = json_dumps(p->token, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t tl = t ? strlen(t) : 0, n = h + tl + (len - i) + 1;
    char *out = t ? malloc(n) : NULL;
    if (out) {
        memcpy(out, line, h);
        memcpy(out + h, t, tl);
        memcpy(out + h + tl, line + i, len - i);
        out[n - 1] = '\n';
        ipbd_client_send_line(d, c, out, n);
    }
    free(out);
    free(t);
    return true;
}

void ipbd_worker_line(struct ipbd *d, struct ipbd_session *s, const char *line, size_t len) {
    if (progress_fast(d, s, line, len))
        return;
    json_t *m = json_loadb(line, len, JSON_ALLOW_NUL, NULL);
    if (!json_is_object(m)) {
        log_warn("session %s: the worker sent something that is not a JSON object; ignored", s->name);
        json_decref(m);
        return;
    }
    json_t *id = json_object_get(m, "id");
    const char *method = json_string_value(json_object_get(m, "method"));
    if (json_is_integer(id) && !method) {
        struct ipbd_pending *p = take_pending(s, (uint64_t)json_integer_value(id));
        if (!p) {
            json_decref(m); /* answer to a cancelled request */
            return;
        }
        s->ready = true;
        if (p->kind == P_WARM)
            log_debug("warm worker %d: ready", (int)s->pid);
        struct ipbd_client *c = ipbd_client_find(d, p->client_id);
        if (c && p->kind == P_CALL) {
            json_object_set(m, "id", p->id);
            ipbd_client_send(d, c, json_incref(m));
        } else if (c && p->kind == P_CREATE && !s->closing) {
            if (ipbd_client_attach(d, c, s))
                ipbd_client_send(d, c, jrpc_result(p->id, json_pack("{s:s}", "name", s->name)));
        } else if (c && p->kind == P_CREATE) {
            ipbd_client_send(d, c, jrpc_error(p->id, IPBD_SESSION_GONE, "The session was closed while it started"));
        }
        pending_free(d, p);
    } else if (method && id && !strcmp(method, "elicitation/create")) {
        ipbd_ask_client(d, s, m);
    } else if (method && !id && !strcmp(method, "notifications/cancelled")) {
        ipbd_ask_withdrawn(d, s, m);
    } else if (method && id) {
        ipbd_ask_refuse(d, s, id, JRPC_METHOD_NOT_FOUND, "the daemon passes on no such request");
    } else if (method && !strcmp(method, "notifications/progress")) {
        json_t *params = json_object_get(m, "params");
        json_t *tok = json_object_get(params, "progressToken");
        struct ipbd_pending *p = json_is_integer(tok) ? ipbd_pending_find(s, (uint64_t)json_integer_value(tok)) : NULL;
        struct ipbd_client *c = p && p->token ? ipbd_client_find(d, p->client_id) : NULL;
        if (c) {
            json_object_set(params, "progressToken", p->token);
            ipbd_client_send(d, c, json_incref(m));
        }
    }
    json_decref(m);
}
