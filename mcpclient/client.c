/* The JSON-RPC side of the MCP client: connect and the initialize handshake, requests with ids
 * and their errors (a deadline's sentence, the client's death when its connection failed, one new
 * Streamable HTTP session when the server forgot ours), tools/list pages and tools/call, and the
 * calls any thread may make at once. How a request reaches its answer: exchange.c (initialize,
 * and each Streamable HTTP call on its own clone of the transport) and mux.c (stdio and legacy
 * SSE after initialize: a reader thread routes answers by id). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mcpc_core.h"

#define MAX_PAGES 100
/* While a call waits for its turn to write, how often it looks at its cancel fd and the stop fd. */
#define WRITE_TURN_SLICE_MS 50
#define MAX_TOOLS 10000

static const char *const known_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL};
#define ASKED_VERSION "2025-06-18"

void mcpc_mark_dead(ipb_mcpc *c, const ipb_error *e) {
    pthread_mutex_lock(&c->lock);
    if (c->alive) {
        c->alive = false;
        free(c->dead_reason);
        c->dead_reason = strdup(ipb_error_msg(e));
        c->dead_errnum = e ? e->errnum : EPIPE;
    }
    pthread_mutex_unlock(&c->lock);
}

/* Whether an error of a request on the client's own transport (initialize; stdio and legacy SSE
 * before the reader runs) leaves the connection unusable. */
static bool fatal(const ipb_error *e, const mcpc_transport *t) {
    if (!t || mcpc_is_broken(t))
        return true;
    int n = e ? e->errnum : 0;
    return n == ETIMEDOUT || n == EMSGSIZE || n == EPIPE || n == ECONNRESET;
}

int mcpc_write_begin(ipb_mcpc *c, long deadline, int cancel_fd) {
    int r = 0;
    pthread_mutex_lock(&c->write_lock);
    while (c->writing && r == 0) {
        long now = ipb_now_ms();
        if (deadline <= now) {
            r = ETIMEDOUT;
            break;
        }
        /* The fds are looked at every WRITE_TURN_SLICE_MS meanwhile. */
        long until = deadline < now + WRITE_TURN_SLICE_MS ? deadline : now + WRITE_TURN_SLICE_MS;
        struct timespec ts = {until / 1000, (until % 1000) * 1000000L};
        pthread_cond_timedwait(&c->write_free, &c->write_lock, &ts);
        if (c->writing && mcpc_cancelled(c->stop_fd))
            r = ESHUTDOWN;
        else if (c->writing && mcpc_cancelled(cancel_fd))
            r = ECANCELED;
    }
    if (!c->writing) {
        c->writing = true;
        r = 0;
    }
    pthread_mutex_unlock(&c->write_lock);
    return r;
}

void mcpc_write_end(ipb_mcpc *c) {
    pthread_mutex_lock(&c->write_lock);
    c->writing = false;
    pthread_cond_signal(&c->write_free);
    pthread_mutex_unlock(&c->write_lock);
}

int mcpc_send_json(ipb_mcpc *c, mcpc_transport *t, json_t *msg, enum mcpc_msg_kind kind, long deadline,
                   ipb_error **err) {
    return mcpc_send_json_or_cancel(c, t, msg, kind, deadline, -1, err);
}

int mcpc_send_json_or_cancel(ipb_mcpc *c, mcpc_transport *t, json_t *msg, enum mcpc_msg_kind kind, long deadline,
                             int cancel_fd, ipb_error **err) {
    char *text = json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (!text)
        return mcpc_fail(err, ENOMEM, "out of memory");
    bool locked = c->mux && t == c->t;
    if (locked && mcpc_in_reader && kind == MCPC_MSG_RESPONSE) {
        int r = mcpc_mux_answer(c, text, strlen(text), deadline, err);
        free(text);
        return r;
    }
    int turn = locked ? mcpc_write_begin(c, deadline, cancel_fd) : 0;
    if (turn != 0) {
        free(text);
        if (turn == ECANCELED)
            mcpc_fail(err, ECANCELED, "the call was cancelled");
        else if (turn == ESHUTDOWN)
            mcpc_fail(err, ESHUTDOWN, "the client was shut down");
        else
            mcpc_fail(err, ETIMEDOUT,
                      "the request could not be written before the deadline (other messages to "
                      "the server were still being written)");
        return -2; /* nothing was written */
    }
    /* Over a pipe, a message begun is written whole: one cut off would corrupt the stream for
     * every call, so a caller's short limit does not cut it (the client's call limit does). */
    long send_deadline = deadline;
    if (locked && c->transport_kind == IPB_MCP_STDIO && send_deadline < ipb_now_ms() + c->limits.call_ms)
        send_deadline = ipb_now_ms() + c->limits.call_ms;
    int r = t->ops->send(t, text, strlen(text), kind, send_deadline, err);
    if (locked)
        mcpc_write_end(c);
    free(text);
    return r < 0 ? -1 : 0;
}

/* The result of a response, or an error sentence for a JSON-RPC error. */
static json_t *take_result(json_t *resp, ipb_error **err) {
    json_t *e = json_object_get(resp, "error");
    if (e) {
        json_t *code = json_object_get(e, "code");
        const char *text = json_string_value(json_object_get(e, "message"));
        char shown[260];
        mcpc_excerpt(text ? text : "", text ? strlen(text) : 0, shown, 256);
        if (json_is_integer(code))
            mcpc_fail(err, EREMOTEIO, "the server answered with error %lld: %s", (long long)json_integer_value(code),
                      shown[0] ? shown : "(no message)");
        else
            mcpc_fail(err, EREMOTEIO, "the server answered with an error: %s", shown[0] ? shown : "(no message)");
        return NULL;
    }
    return json_incref(json_object_get(resp, "result"));
}

static int initialize(ipb_mcpc *c, long deadline, ipb_error **err);

/* A Streamable HTTP clone for one call: an idle one (its connection open still) or a new one. */
static mcpc_transport *clone_take(ipb_mcpc *c, ipb_error **err) {
    mcpc_transport *t = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->nidle > 0)
        t = c->idle[--c->nidle];
    pthread_mutex_unlock(&c->lock);
    return t ? t : c->t->ops->clone(c->t, err);
}

/* Back to the idle ones, unless its connection failed or enough are idle. */
static void clone_put(ipb_mcpc *c, mcpc_transport *t) {
    t->cancel_fd = -1;
    if (!mcpc_is_broken(t)) {
        pthread_mutex_lock(&c->lock);
        bool kept = c->nidle < MCPC_IDLE_CLONES;
        if (kept)
            c->idle[c->nidle++] = t;
        pthread_mutex_unlock(&c->lock);
        if (kept)
            return;
    }
    t->ops->close(t, false);
}

/* One request and its answer, by the way the transport and the client's state call for. */
static json_t *exchange(ipb_mcpc *c, const char *method, json_t *params, int cancel_fd, long deadline, bool init,
                        ipb_error **err) {
    json_int_t id = __atomic_fetch_add(&c->next_id, 1, __ATOMIC_RELAXED);
    json_t *msg =
        json_pack("{s:s, s:I, s:s, s:O}", "jsonrpc", "2.0", "id", (json_int_t)id, "method", method, "params", params);
    if (!msg) {
        mcpc_fail(err, ENOMEM, "out of memory");
        return NULL;
    }
    json_t *resp = NULL;
    if (!init && c->mux) {
        resp = mcpc_exchange_mux(c, id, msg, cancel_fd, deadline, err);
    } else if (!init && c->t->ops->clone) {
        mcpc_transport *own = clone_take(c, err);
        if (own) {
            own->cancel_fd = cancel_fd;
            own->stop_fd = c->stop_fd;
            resp = mcpc_exchange_direct(c, own, id, msg, deadline, true, err);
            /* This call's connection failing says the server is gone (or unreachable); a message
             * over the limit or a malformed storm ends only this call's own stream. */
            if (!resp && *err && (mcpc_is_broken(own) || (*err)->errnum == ECONNRESET) && (*err)->errnum != EMSGSIZE)
                mcpc_mark_dead(c, *err);
            /* A call given up on closed its stream; the connection under it goes with it. */
            if (!resp && *err)
                mcpc_set_broken(own);
            clone_put(c, own);
        }
    } else {
        resp = mcpc_exchange_direct(c, c->t, id, msg, deadline, false, err);
        if (!resp && *err && fatal(*err, c->t))
            mcpc_mark_dead(c, *err);
    }
    json_decref(msg);
    if (!resp && *err && (*err)->errnum == ESHUTDOWN) {
        (*err)->errnum = EPIPE;
        mcpc_reword(err, "the client was shut down");
    }
    return resp;
}

/* A new Streamable HTTP session after the server forgot ours (gen: the sessions started when the
 * failed request began): started by the first caller to ask; the others find it done. */
static int renew_session(ipb_mcpc *c, unsigned gen, const ipb_error *why, ipb_error **err) {
    pthread_mutex_lock(&c->init_lock);
    int r = 0;
    if (__atomic_load_n(&c->session_gen, __ATOMIC_ACQUIRE) == gen) {
        log_info("MCP server '%s': %s; starting a new session", c->name, ipb_error_msg(why));
        c->t->ops->reset_session(c->t);
        r = initialize(c, ipb_now_ms() + c->limits.connect_ms, err);
        if (r == 0)
            __atomic_add_fetch(&c->session_gen, 1, __ATOMIC_RELEASE);
        /* Idle clones carry the old session's protocol version: new ones take the new one. */
        mcpc_transport *old[MCPC_IDLE_CLONES];
        pthread_mutex_lock(&c->lock);
        int n = c->nidle;
        memcpy(old, c->idle, sizeof(old[0]) * (size_t)n);
        c->nidle = 0;
        pthread_mutex_unlock(&c->lock);
        for (int i = 0; i < n; i++)
            old[i]->ops->close(old[i], false);
    }
    pthread_mutex_unlock(&c->init_lock);
    return r;
}

static bool is_alive(ipb_mcpc *c, ipb_error **err) {
    pthread_mutex_lock(&c->lock);
    bool alive = c->alive;
    if (!alive)
        mcpc_fail(err, c->dead_errnum ? c->dead_errnum : EPIPE, "MCP server '%s': the connection is closed (%s)",
                  c->name, c->dead_reason ? c->dead_reason : "unknown reason");
    pthread_mutex_unlock(&c->lock);
    return alive;
}

/* A request with everything around it: the deadline's sentence, one new session when a
 * Streamable HTTP server forgot ours. init: initialize itself, on the client's own transport.
 * Returns the result. */
static json_t *request(ipb_mcpc *c, const char *what, const char *method, json_t *params, int cancel_fd, long deadline,
                       long limit_ms, bool init, ipb_error **err) {
    if (!is_alive(c, err))
        return NULL;
    bool renewed = false;
    for (;;) {
        unsigned gen = __atomic_load_n(&c->session_gen, __ATOMIC_ACQUIRE);
        ipb_error *e = NULL;
        json_t *resp = exchange(c, method, params, cancel_fd, deadline, init, &e);
        if (resp) {
            json_t *result = take_result(resp, err);
            json_decref(resp);
            if (!result)
                ipb_error_wrap(err, "MCP server '%s': %s", c->name, what);
            return result;
        }
        if (e && e->errnum == ESTALE && !renewed && !init && c->t->ops->reset_session) {
            /* The server forgot the session (restarted, or expired it): a new one, once. */
            renewed = true;
            ipb_error *ie = NULL;
            if (renew_session(c, gen, e, &ie) == 0) {
                ipb_error_free(e);
                deadline = ipb_now_ms() + limit_ms;
                continue;
            }
            ipb_error_free(e);
            e = ie;
            /* initialize's sentence names the server already */
            char prefix[300];
            snprintf(prefix, sizeof(prefix), "MCP server '%s': ", c->name);
            const char *inner = ipb_error_msg(e);
            if (strncmp(inner, prefix, strlen(prefix)) == 0)
                inner += strlen(prefix);
            mcpc_reword(&e, "the server ended the session and a new one failed: %s", inner);
            mcpc_mark_dead(c, e);
            ipb_error_wrap(&e, "MCP server '%s': %s", c->name, what);
            *err = e;
            return NULL;
        }
        if (e && e->errnum == ETIMEDOUT)
            mcpc_reword(&e, "no answer within %ld ms", limit_ms);
        ipb_error_wrap(&e, "MCP server '%s': %s", c->name, what);
        *err = e;
        return NULL;
    }
}

/* The known version v is (static, so that it is never freed under a reader), or NULL. */
static const char *known_version(const char *v) {
    for (const char *const *k = known_versions; *k; k++)
        if (strcmp(v, *k) == 0)
            return *k;
    return NULL;
}

static int initialize(ipb_mcpc *c, long deadline, ipb_error **err) {
    json_t *params = json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", ASKED_VERSION, "capabilities",
                               "clientInfo", "name", "ipybox", "version", IPYBOX_VERSION);
    if (!params)
        return mcpc_fail(err, ENOMEM, "out of memory");
    json_t *result = request(c, "initialize", "initialize", params, -1, deadline, c->limits.connect_ms, true, err);
    json_decref(params);
    if (!result)
        return -1;
    const char *version = json_string_value(json_object_get(result, "protocolVersion"));
    json_t *info = json_object_get(result, "serverInfo");
    const char *sname = json_string_value(json_object_get(info, "name"));
    int r = 0;
    if (!json_is_object(result)) {
        r = mcpc_fail(err, EPROTO, "MCP server '%s': the initialize result is not an object", c->name);
    } else if (!version) {
        r = mcpc_fail(err, EPROTO, "MCP server '%s': the initialize result has no protocolVersion", c->name);
    } else if (!known_version(version)) {
        char shown[64];
        mcpc_excerpt(version, strlen(version), shown, 40);
        r = mcpc_fail(err, EPROTONOSUPPORT,
                      "MCP server '%s' speaks MCP version %s, which this client does not know (it knows 2025-11-25, "
                      "2025-06-18, 2025-03-26 and 2024-11-05)",
                      c->name, shown);
    }
    if (r == 0) {
        /* A new session keeps the first name (others may read it meanwhile). */
        if (!c->server_name && !(c->server_name = strdup(sname ? sname : "")))
            r = mcpc_fail(err, ENOMEM, "out of memory");
        c->version = known_version(version);
        __atomic_store_n(&c->t->protocol_version, c->version, __ATOMIC_RELEASE);
    }
    json_decref(result);
    if (r < 0)
        return -1;
    json_t *note = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", "notifications/initialized");
    if (!note)
        return mcpc_fail(err, ENOMEM, "out of memory");
    ipb_error *e = NULL;
    r = mcpc_send_json(c, c->t, note, MCPC_MSG_NOTIFICATION, deadline, &e);
    json_decref(note);
    if (r < 0) {
        if (e->errnum == ETIMEDOUT)
            mcpc_reword(&e, "no answer within %d ms", c->limits.connect_ms);
        if (fatal(e, c->t))
            mcpc_mark_dead(c, e);
        ipb_error_wrap(&e, "MCP server '%s': notifications/initialized", c->name);
        *err = e;
        return -1;
    }
    return 0;
}

static void limits_or_defaults(const ipb_mcp_limits *in, ipb_mcp_limits *out) {
    out->connect_ms = in && in->connect_ms > 0 ? in->connect_ms : MCPC_DEFAULT_CONNECT_MS;
    out->call_ms = in && in->call_ms > 0 ? in->call_ms : MCPC_DEFAULT_CALL_MS;
    out->max_message = in && in->max_message > 0 ? in->max_message : MCPC_DEFAULT_MAX_MESSAGE;
}

static void client_free(ipb_mcpc *c, bool graceful) {
    if (!c)
        return;
    if (c->mux) {
        uint64_t one = 1;
        ssize_t w = write(c->stop_fd, &one, sizeof(one));
        (void)w;
        mcpc_mux_join(c);
    }
    for (int i = 0; i < c->nidle; i++)
        c->idle[i]->ops->close(c->idle[i], false);
    if (c->t)
        c->t->ops->close(c->t, graceful);
    if (c->stop_fd >= 0)
        close(c->stop_fd);
    json_decref(c->params);
    free(c->server_name);
    free(c->dead_reason);
    free(c->name);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->write_lock);
    pthread_cond_destroy(&c->write_free);
    pthread_mutex_destroy(&c->init_lock);
    free(c);
}

ipb_mcpc *ipb_mcpc_connect(const char *name, json_t *params, const ipb_mcp_limits *limits, ipb_error **err) {
    long start = ipb_now_ms();
    ipb_mcp_limits lim;
    limits_or_defaults(limits, &lim);
    long deadline = start + lim.connect_ms;
    const char *label = name && *name ? name : "(unnamed)";
    if (ipb_mcp_params_check(params, err) < 0) {
        ipb_error_wrap(err, "MCP server '%s'", label);
        return NULL;
    }
    json_t *expanded = mcpc_params_expand(params, err);
    if (!expanded) {
        ipb_error_wrap(err, "MCP server '%s'", label);
        return NULL;
    }
    /* Filled placeholders may have brought line breaks into a header or changed the URL. */
    int kind = ipb_mcp_params_check(expanded, err);
    if (kind < 0) {
        ipb_error_wrap(err, "MCP server '%s': after filling ${...} placeholders", label);
        json_decref(expanded);
        return NULL;
    }
    ipb_mcpc *c = calloc(1, sizeof(*c));
    if (!c || !(c->name = strdup(label))) {
        free(c);
        json_decref(expanded);
        mcpc_fail(err, ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->write_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->write_free, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&c->init_lock, NULL);
    c->params = expanded;
    c->limits = lim;
    c->transport_kind = kind;
    c->next_id = 1;
    c->alive = true;
    c->cancel_fd = -1;
    c->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->stop_fd < 0) {
        ipb_error_set(err, errno, "MCP server '%s': cannot make an eventfd", c->name);
        client_free(c, false);
        return NULL;
    }
    /* The process starts here, in the caller's thread (PR_SET_PDEATHSIG follows that thread). */
    if (kind == IPB_MCP_STDIO)
        c->t = mcpc_stdio_open(c->name, expanded, &lim, deadline, err);
    else if (kind == IPB_MCP_HTTP)
        c->t = mcpc_http_open(c->name, expanded, &lim, deadline, err);
    else
        c->t = mcpc_sse_open(c->name, expanded, &lim, deadline, err);
    if (!c->t) {
        ipb_error_wrap(err, "MCP server '%s': cannot connect", c->name);
        client_free(c, false);
        return NULL;
    }
    c->t->cancel_fd = -1;
    c->t->stop_fd = -1;
    if (initialize(c, deadline, err) < 0) {
        client_free(c, false);
        return NULL;
    }
    c->t->stop_fd = c->stop_fd; /* a later new session, and the reader, end at a shutdown */
    /* One connection for every call: from now on a reader thread takes what arrives. */
    if (!c->t->ops->clone && mcpc_mux_start(c, err) < 0) {
        ipb_error_wrap(err, "MCP server '%s'", c->name);
        client_free(c, false);
        return NULL;
    }
    log_debug("MCP server '%s': connected to %s (MCP %s) in %ld ms", c->name, c->server_name, c->version,
              ipb_now_ms() - start);
    return c;
}

json_t *ipb_mcpc_list_tools(ipb_mcpc *c, ipb_error **err) {
    json_t *tools = json_array();
    char *cursor = NULL;
    if (!tools) {
        mcpc_fail(err, ENOMEM, "out of memory");
        return NULL;
    }
    for (int page = 0;; page++) {
        if (page == MAX_PAGES) {
            mcpc_fail(err, EPROTO, "MCP server '%s': tools/list: more than %d pages", c->name, MAX_PAGES);
            goto fail;
        }
        json_t *params = cursor ? json_pack("{s:s}", "cursor", cursor) : json_object();
        json_t *result = params ? request(c, "tools/list", "tools/list", params, -1, ipb_now_ms() + c->limits.call_ms,
                                          c->limits.call_ms, false, err)
                                : NULL;
        json_decref(params);
        if (!params)
            mcpc_fail(err, ENOMEM, "out of memory");
        if (!result)
            goto fail;
        json_t *list = json_object_get(result, "tools");
        json_t *next = json_object_get(result, "nextCursor");
        const char *problem = NULL;
        if (!json_is_object(result))
            problem = "the result is not an object";
        else if (!json_is_array(list))
            problem = "the result has no array 'tools'";
        else if (next && !json_is_null(next) && !json_is_string(next))
            problem = "nextCursor is not a string";
        if (problem) {
            json_decref(result);
            mcpc_fail(err, EPROTO, "MCP server '%s': tools/list: %s", c->name, problem);
            goto fail;
        }
        if (json_array_size(tools) + json_array_size(list) > MAX_TOOLS) {
            json_decref(result);
            mcpc_fail(err, EPROTO, "MCP server '%s': tools/list: more than %d tools", c->name, MAX_TOOLS);
            goto fail;
        }
        json_array_extend(tools, list);
        free(cursor);
        cursor = json_is_string(next) ? strdup(json_string_value(next)) : NULL;
        json_decref(result);
        if (!cursor)
            break;
    }
    return tools;
fail:
    free(cursor);
    json_decref(tools);
    return NULL;
}

json_t *ipb_mcpc_call(ipb_mcpc *c, const char *tool, json_t *arguments, int cancel_fd, int timeout_ms,
                      ipb_error **err) {
    if (!tool || !*tool) {
        mcpc_fail(err, EINVAL, "MCP server '%s': tools/call needs a tool name", c->name);
        return NULL;
    }
    if (arguments && !json_is_object(arguments)) {
        mcpc_fail(err, EINVAL, "MCP server '%s': tools/call %s: the arguments must be an object", c->name, tool);
        return NULL;
    }
    json_t *params = arguments ? json_pack("{s:s, s:O}", "name", tool, "arguments", arguments)
                               : json_pack("{s:s, s:{}}", "name", tool, "arguments");
    if (!params) {
        mcpc_fail(err, ENOMEM, "out of memory");
        return NULL;
    }
    char what[160];
    char shown[100];
    mcpc_excerpt(tool, strlen(tool), shown, 96);
    snprintf(what, sizeof(what), "tools/call %s", shown);
    long limit = timeout_ms > 0 ? timeout_ms : c->limits.call_ms;
    __atomic_add_fetch(&c->in_flight, 1, __ATOMIC_RELAXED);
    json_t *result = request(c, what, "tools/call", params, cancel_fd, ipb_now_ms() + limit, limit, false, err);
    __atomic_sub_fetch(&c->in_flight, 1, __ATOMIC_RELAXED);
    json_decref(params);
    if (result && !json_is_object(result)) {
        json_decref(result);
        mcpc_fail(err, EPROTO, "MCP server '%s': %s: the result is not an object", c->name, what);
        return NULL;
    }
    return result;
}

json_t *ipb_mcpc_call_tool(ipb_mcpc *c, const char *tool, json_t *arguments, ipb_error **err) {
    json_t *r = ipb_mcpc_call(c, tool, arguments, c->cancel_fd, 0, err);
    /* One call at a time: a server that serves calls one after another may still be busy with
     * this one, so its callers connect again (as before calls ran concurrently). */
    if (!r && *err && (*err)->errnum == ETIMEDOUT)
        mcpc_mark_dead(c, *err);
    return r;
}

bool ipb_mcpc_alive(ipb_mcpc *c) {
    if (!c)
        return false;
    /* A stdio server that exited since the last call is found here, so that the next call goes
     * to a new one instead of failing on the dead one. */
    pthread_mutex_lock(&c->lock);
    if (c->alive && c->t && c->t->ops->gone && c->t->ops->gone(c->t)) {
        c->alive = false;
        free(c->dead_reason);
        c->dead_reason = strdup("the server process exited");
        c->dead_errnum = EPIPE;
    }
    bool alive = c->alive;
    pthread_mutex_unlock(&c->lock);
    return alive;
}

const char *ipb_mcpc_server_name(const ipb_mcpc *c) { return c ? c->server_name : NULL; }

const char *ipb_mcpc_protocol_version(const ipb_mcpc *c) { return c ? c->version : NULL; }

size_t ipb_mcpc_malformed(const ipb_mcpc *c) { return c ? __atomic_load_n(&c->malformed, __ATOMIC_RELAXED) : 0; }

void ipb_mcpc_close(ipb_mcpc *c) { client_free(c, true); }

void ipb_mcpc_abort(ipb_mcpc *c) { client_free(c, false); }

int ipb_mcpc_exit_fd(const ipb_mcpc *c) { return c && c->t && c->t->ops->exit_fd ? c->t->ops->exit_fd(c->t) : -1; }

void ipb_mcpc_set_cancel_fd(ipb_mcpc *c, int fd) {
    if (c)
        c->cancel_fd = fd;
}

size_t ipb_mcpc_cancelled(const ipb_mcpc *c) { return c ? __atomic_load_n(&c->cancelled, __ATOMIC_RELAXED) : 0; }

size_t ipb_mcpc_stray(const ipb_mcpc *c) { return c ? __atomic_load_n(&c->stray, __ATOMIC_RELAXED) : 0; }

size_t ipb_mcpc_in_flight(ipb_mcpc *c) { return c ? __atomic_load_n(&c->in_flight, __ATOMIC_RELAXED) : 0; }

void ipb_mcpc_shutdown(ipb_mcpc *c) {
    if (!c)
        return;
    ipb_error e = {EPIPE, (char *)"the client was shut down"};
    if (c->mux)
        mcpc_mux_fail_all(c, &e); /* the calls waiting on the reader end now */
    else
        mcpc_mark_dead(c, &e);
    /* Streamable HTTP calls and the reader thread see this at once; a call still waiting to write
     * its request sees the client dead once it may (stdio: at once, the server being killed). */
    uint64_t one = 1;
    ssize_t w = write(c->stop_fd, &one, sizeof(one));
    (void)w;
    if (c->t && c->t->ops->kill)
        c->t->ops->kill(c->t);
}
