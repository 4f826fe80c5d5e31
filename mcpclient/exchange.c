/* Messages from the server, and one request with its answer on one transport: the server's own
 * requests answered (ping; nothing else is offered), notifications ignored, malformed messages
 * skipped and counted, answers nobody waits for skipped, logged and counted. Used by initialize
 * (before any reader thread), by each Streamable HTTP call on its own clone, and by the reader
 * thread of mux.c for what arrives over one connection. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "jsonlimit.h"
#include "log.h"
#include "mcpc_core.h"

/* Answers a request of the server: ping, and nothing else (this client offers no capabilities). */
static int answer_server(ipb_mcpc *c, mcpc_transport *t, json_t *id, const char *method, long deadline,
                         ipb_error **err) {
    json_t *reply;
    if (strcmp(method, "ping") == 0) {
        reply = json_pack("{s:s, s:O, s:{}}", "jsonrpc", "2.0", "id", id, "result");
    } else {
        log_debug("MCP server '%s': asked for %s, which this client does not offer", c->name, method);
        reply = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code", -32601, "message",
                          "Method not found");
    }
    if (!reply)
        return mcpc_fail(err, ENOMEM, "out of memory");
    int r = mcpc_send_json(c, t, reply, MCPC_MSG_RESPONSE, deadline, err);
    json_decref(reply);
    return r;
}

static void malformed(ipb_mcpc *c, size_t *count, const char *why, const char *text, size_t len) {
    char shown[96];
    mcpc_excerpt(text, len, shown, 80);
    log_debug("MCP server '%s': skipped a malformed message (%s): %s", c->name, why, shown);
    __atomic_add_fetch(&c->malformed, 1, __ATOMIC_RELAXED);
    (*count)++;
}

void mcpc_stray(ipb_mcpc *c, json_t *id, const char *why) {
    char *text = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY);
    char shown[72];
    mcpc_excerpt(text ? text : "?", text ? strlen(text) : 1, shown, 64);
    free(text);
    /* A server that floods them does not flood the log: the first ones at info level. */
    size_t n = __atomic_add_fetch(&c->stray, 1, __ATOMIC_RELAXED);
    if (n < MCPC_STRAY_INFO)
        log_info("MCP server '%s': skipped an answer to id %s (%s)", c->name, shown, why);
    else if (n == MCPC_STRAY_INFO)
        log_info("MCP server '%s': skipped an answer to id %s (%s); more such answers are logged at debug level",
                 c->name, shown, why);
    else
        log_debug("MCP server '%s': skipped an answer to id %s (%s)", c->name, shown, why);
}

void mcpc_gave_up(ipb_mcpc *c, json_int_t id) {
    pthread_mutex_lock(&c->lock);
    c->gave_up[c->gave_up_next++ % MCPC_GAVE_UP_RING] = id;
    pthread_mutex_unlock(&c->lock);
}

/* Looks at one message. Returns 2 for a response, 0 for anything else, -1 on error. */
static int handle_one(ipb_mcpc *c, mcpc_transport *t, json_t *m, size_t *bad, long deadline, ipb_error **err) {
    if (!json_is_object(m)) {
        malformed(c, bad, "not an object", "", 0);
        return 0;
    }
    json_t *jv = json_object_get(m, "jsonrpc");
    if (jv && !(json_is_string(jv) && strcmp(json_string_value(jv), "2.0") == 0)) {
        malformed(c, bad, "jsonrpc is not \"2.0\"", "", 0);
        return 0;
    }
    json_t *id = json_object_get(m, "id");
    json_t *method = json_object_get(m, "method");
    if (method) {
        if (!json_is_string(method)) {
            malformed(c, bad, "method is not a string", "", 0);
            return 0;
        }
        if (!id) /* a notification: progress, logging, list changes; nothing to do */
            return 0;
        if (!json_is_string(id) && !json_is_integer(id)) {
            malformed(c, bad, "a request id that is not a string or an integer", "", 0);
            return 0;
        }
        return answer_server(c, t, id, json_string_value(method), deadline, err) < 0 ? -1 : 0;
    }
    if (!id || (!json_object_get(m, "result") && !json_object_get(m, "error"))) {
        malformed(c, bad, "neither a request, a notification nor a response", "", 0);
        return 0;
    }
    return 2;
}

int mcpc_handle_text(ipb_mcpc *c, mcpc_transport *t, const char *text, size_t len, mcpc_on_response on_response,
                     void *ctx, size_t *bad, long deadline, ipb_error **err) {
    /* Counted before parsing: a message of tiny values would cost 20-40 times its size as a
     * tree (see jsonlimit.h). Such a message is refused like one over the size limit (whose
     * call cannot be told without parsing it): the calls waiting on this stream end at once. */
    if (!ipb_json_values_ok(text, len, IPB_JSON_MAX_VALUES)) {
        __atomic_add_fetch(&c->malformed, 1, __ATOMIC_RELAXED);
        return mcpc_fail(err, EMSGSIZE, "the server sent a message of more than %zu JSON values (%zu bytes)",
                         IPB_JSON_MAX_VALUES, len);
    }
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!root) {
        malformed(c, bad, jerr.text, text, len);
        return 0;
    }
    /* The responses are handed on only once this thread no longer holds the message they came
     * in (each then has one reference, the receiver's), so that no reference count is shared
     * with the thread that takes one. */
    bool batch = json_is_array(root);
    size_t n = batch ? json_array_size(root) : 1;
    json_t **resp = calloc(n ? n : 1, sizeof(*resp));
    size_t nresp = 0;
    int r = 0;
    if (!resp) {
        json_decref(root);
        return mcpc_fail(err, ENOMEM, "out of memory");
    }
    if (batch && n == 0)
        malformed(c, bad, "an empty batch", text, len);
    for (size_t i = 0; i < n; i++) {
        json_t *m = batch ? json_array_get(root, i) : root;
        int x = handle_one(c, t, m, bad, deadline, err);
        if (x < 0) {
            r = -1;
            break;
        }
        if (x == 2)
            resp[nresp++] = json_incref(m);
    }
    json_decref(root);
    for (size_t i = 0; i < nresp; i++) {
        if (r < 0)
            json_decref(resp[i]);
        else if (on_response(c, ctx, json_object_get(resp[i], "id"), resp[i]) == 1)
            r = 1;
    }
    free(resp);
    return r;
}

void mcpc_send_cancelled(ipb_mcpc *c, mcpc_transport *t, json_int_t id, const char *reason) {
    json_t *note = json_pack("{s:s, s:s, s:{s:I, s:s}}", "jsonrpc", "2.0", "method", "notifications/cancelled",
                             "params", "requestId", (json_int_t)id, "reason", reason);
    ipb_error *e = NULL;
    if (note && mcpc_send_json(c, t, note, MCPC_MSG_NOTIFICATION, ipb_now_ms() + 1000, &e) < 0)
        log_debug("MCP server '%s': notifications/cancelled: %s", c->name, ipb_error_msg(e));
    ipb_error_free(e);
    json_decref(note);
    __atomic_add_fetch(&c->cancelled, 1, __ATOMIC_RELAXED);
}

struct direct_wait {
    json_int_t want;
    json_t *got;
};

static int direct_response(ipb_mcpc *c, void *ctx, json_t *id, json_t *msg) {
    struct direct_wait *w = ctx;
    if (!json_is_integer(id) || json_integer_value(id) != w->want) {
        mcpc_stray(c, id, "not the id of the request waiting on this stream");
        json_decref(msg);
        return 0;
    }
    if (w->got) {
        mcpc_stray(c, id, "a second answer to it");
        json_decref(msg);
        return 0;
    }
    w->got = msg;
    return 1;
}

json_t *mcpc_exchange_direct(ipb_mcpc *c, mcpc_transport *t, json_int_t id, json_t *msg, long deadline,
                             bool cancel_at_server, ipb_error **err) {
    if (mcpc_send_json(c, t, msg, MCPC_MSG_REQUEST, deadline, err) < 0)
        return NULL;
    struct direct_wait w = {id, NULL};
    size_t bad = 0;
    for (;;) {
        char *text = NULL;
        size_t len = 0;
        if (t->ops->recv(t, deadline, &text, &len, err) < 0) {
            int e = *err ? (*err)->errnum : 0;
            if (cancel_at_server && (e == ECANCELED || e == ETIMEDOUT)) {
                mcpc_send_cancelled(c, t, id, e == ECANCELED ? "the caller is gone" : "the caller's time is up");
                mcpc_gave_up(c, id);
            }
            return NULL;
        }
        int r = mcpc_handle_text(c, t, text, len, direct_response, &w, &bad, deadline, err);
        free(text);
        if (r < 0) {
            json_decref(w.got);
            return NULL;
        }
        if (r == 1)
            return w.got;
        if (bad >= MCPC_MAX_MALFORMED) {
            /* The connection's framing cannot be trusted any more; a Streamable HTTP call's own
             * stream is only this call's. */
            if (t == c->t)
                mcpc_set_broken(t);
            mcpc_fail(err, EPROTO, "the server sent %zu malformed messages and no response", bad);
            return NULL;
        }
    }
}
