/* The JSON-RPC side of the MCP client: requests with ids, their responses found among what the
 * server sends (its own requests answered, notifications ignored, malformed messages skipped
 * and counted), the initialize handshake, tools/list pages and tools/call. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "mcpc_internal.h"

#define MAX_PAGES 100
#define MAX_TOOLS 10000
/* Malformed messages tolerated while waiting for one response. */
#define MAX_MALFORMED 100

static const char *const known_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL};
#define ASKED_VERSION "2025-06-18"

struct ipb_mcpc {
    char *name;
    int transport_kind;
    json_t *params; /* expanded */
    ipb_mcp_limits limits;
    mcpc_transport *t; /* NULL once closed after an oversized message */
    json_int_t next_id;
    bool alive;
    bool initializing;
    char *server_name;
    char *version;
    size_t malformed;  /* in the life of the client */
    int cancel_fd;     /* see ipb_mcpc_set_cancel_fd; -1: none */
    size_t cancelled;  /* requests cancelled so far */
    char *dead_reason; /* why it is no longer alive */
    int dead_errnum;
    pthread_mutex_t call_lock; /* serialises ipb_mcpc_call (until calls run concurrently) */
    size_t in_flight;
};

static void mark_dead(ipb_mcpc *c, const ipb_error *e) {
    if (!c->alive)
        return;
    c->alive = false;
    free(c->dead_reason);
    c->dead_reason = strdup(ipb_error_msg(e));
    c->dead_errnum = e ? e->errnum : EPIPE;
}

static bool fatal(const ipb_error *e, const mcpc_transport *t) {
    if (!t || t->broken)
        return true;
    int n = e ? e->errnum : 0;
    return n == ETIMEDOUT || n == EMSGSIZE || n == EPIPE || n == ECONNRESET;
}

static int send_json(ipb_mcpc *c, json_t *msg, enum mcpc_msg_kind kind, long deadline, ipb_error **err) {
    char *text = json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (!text)
        return mcpc_fail(err, ENOMEM, "out of memory");
    int r = c->t->ops->send(c->t, text, strlen(text), kind, deadline, err);
    free(text);
    return r < 0 ? -1 : 0;
}

/* Answers a request of the server: ping, and nothing else (this client offers no capabilities). */
static int answer_server(ipb_mcpc *c, json_t *id, const char *method, long deadline, ipb_error **err) {
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
    int r = send_json(c, reply, MCPC_MSG_RESPONSE, deadline, err);
    json_decref(reply);
    return r;
}

static void malformed(ipb_mcpc *c, size_t *count, const char *why, const char *text, size_t len) {
    char shown[96];
    mcpc_excerpt(text, len, shown, 80);
    log_debug("MCP server '%s': skipped a malformed message (%s): %s", c->name, why, shown);
    c->malformed++;
    (*count)++;
}

/* Looks at one message. Returns 1 with *ret the response to want_id, 0 when it was something
 * else, -1 on error. */
static int handle_one(ipb_mcpc *c, json_t *m, json_int_t want_id, size_t *bad, long deadline, json_t **ret,
                      ipb_error **err) {
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
        return answer_server(c, id, json_string_value(method), deadline, err) < 0 ? -1 : 0;
    }
    if (!id || (!json_object_get(m, "result") && !json_object_get(m, "error"))) {
        malformed(c, bad, "neither a request, a notification nor a response", "", 0);
        return 0;
    }
    if (!json_is_integer(id) || json_integer_value(id) != want_id) {
        log_debug("MCP server '%s': a response to an id we are not waiting for, ignored", c->name);
        return 0;
    }
    *ret = json_incref(m);
    return 1;
}

/* Handles one message text (a message or a batch of them). */
static int handle_text(ipb_mcpc *c, const char *text, size_t len, json_int_t want_id, size_t *bad, long deadline,
                       json_t **ret, ipb_error **err) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!root) {
        malformed(c, bad, jerr.text, text, len);
        return 0;
    }
    int r = 0;
    if (json_is_array(root)) {
        if (json_array_size(root) == 0)
            malformed(c, bad, "an empty batch", text, len);
        size_t i;
        json_t *m;
        json_array_foreach(root, i, m) {
            json_t *got = NULL;
            int x = handle_one(c, m, want_id, bad, deadline, &got, err);
            if (x < 0) {
                json_decref(*ret);
                *ret = NULL;
                r = -1;
                break;
            }
            if (x == 1 && !*ret) {
                *ret = got;
                r = 1;
            } else {
                json_decref(got);
            }
        }
    } else {
        r = handle_one(c, root, want_id, bad, deadline, ret, err);
    }
    json_decref(root);
    return r;
}

/* Tells the server that we no longer wait for request id (notifications/cancelled, best
 * effort, within a second). A late answer to it is skipped as one to an id nobody waits for. */
static void send_cancelled(ipb_mcpc *c, json_int_t id) {
    json_t *note = json_pack("{s:s, s:s, s:{s:I, s:s}}", "jsonrpc", "2.0", "method", "notifications/cancelled",
                             "params", "requestId", (json_int_t)id, "reason", "the caller is gone");
    ipb_error *e = NULL;
    if (note && send_json(c, note, MCPC_MSG_NOTIFICATION, ipb_now_ms() + 1000, &e) < 0)
        log_debug("MCP server '%s': notifications/cancelled: %s", c->name, ipb_error_msg(e));
    ipb_error_free(e);
    json_decref(note);
    c->cancelled++;
}

/* One request: sent, and its response waited for. Returns the response message (result or
 * error) or NULL. */
static json_t *exchange(ipb_mcpc *c, const char *method, json_t *params, long deadline, ipb_error **err) {
    json_int_t id = c->next_id++;
    json_t *msg =
        json_pack("{s:s, s:I, s:s, s:O}", "jsonrpc", "2.0", "id", (json_int_t)id, "method", method, "params", params);
    if (!msg) {
        mcpc_fail(err, ENOMEM, "out of memory");
        return NULL;
    }
    int r = send_json(c, msg, MCPC_MSG_REQUEST, deadline, err);
    json_decref(msg);
    if (r < 0)
        return NULL;
    size_t bad = 0;
    for (;;) {
        char *text = NULL;
        size_t len = 0;
        if (c->t->ops->recv(c->t, deadline, &text, &len, err) < 0) {
            if (*err && (*err)->errnum == ECANCELED)
                send_cancelled(c, id);
            return NULL;
        }
        json_t *resp = NULL;
        r = handle_text(c, text, len, id, &bad, deadline, &resp, err);
        free(text);
        if (r < 0)
            return NULL;
        if (r == 1)
            return resp;
        if (bad >= MAX_MALFORMED) {
            c->t->broken = true;
            mcpc_fail(err, EPROTO, "the server sent %zu malformed messages and no response", bad);
            return NULL;
        }
    }
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

/* A request with everything around it: the deadline's sentence, the client's death on fatal
 * errors, one new session when a Streamable HTTP server forgot ours. Returns the result. */
static json_t *request(ipb_mcpc *c, const char *what, const char *method, json_t *params, long deadline, long limit_ms,
                       ipb_error **err) {
    if (!c->alive) {
        mcpc_fail(err, c->dead_errnum ? c->dead_errnum : EPIPE, "MCP server '%s': the connection is closed (%s)",
                  c->name, c->dead_reason ? c->dead_reason : "unknown reason");
        return NULL;
    }
    bool renewed = false;
    for (;;) {
        ipb_error *e = NULL;
        json_t *resp = exchange(c, method, params, deadline, &e);
        if (resp) {
            json_t *result = take_result(resp, err);
            json_decref(resp);
            if (!result)
                ipb_error_wrap(err, "MCP server '%s': %s", c->name, what);
            return result;
        }
        if (e && e->errnum == ESTALE && !renewed && !c->initializing && c->t->ops->reset_session) {
            /* The server forgot the session (restarted, or expired it): a new one, once. */
            log_info("MCP server '%s': %s; starting a new session", c->name, ipb_error_msg(e));
            ipb_error_free(e);
            e = NULL;
            renewed = true;
            c->t->ops->reset_session(c->t);
            if (initialize(c, ipb_now_ms() + c->limits.connect_ms, &e) == 0) {
                deadline = ipb_now_ms() + limit_ms;
                continue;
            }
            /* initialize's sentence names the server already */
            char prefix[300];
            snprintf(prefix, sizeof(prefix), "MCP server '%s': ", c->name);
            const char *inner = ipb_error_msg(e);
            if (strncmp(inner, prefix, strlen(prefix)) == 0)
                inner += strlen(prefix);
            mcpc_reword(&e, "the server ended the session and a new one failed: %s", inner);
            mark_dead(c, e);
            ipb_error_wrap(&e, "MCP server '%s': %s", c->name, what);
            *err = e;
            return NULL;
        }
        if (e && e->errnum == ETIMEDOUT)
            mcpc_reword(&e, "no answer within %ld ms", limit_ms);
        if (e && fatal(e, c->t)) {
            mark_dead(c, e);
            if (e->errnum == EMSGSIZE && c->t) {
                /* Nothing more is read from a server that sent too much (stdio: it was killed). */
                c->t->ops->close(c->t, false);
                c->t = NULL;
            }
        }
        ipb_error_wrap(&e, "MCP server '%s': %s", c->name, what);
        *err = e;
        return NULL;
    }
}

static bool known_version(const char *v) {
    for (const char *const *k = known_versions; *k; k++)
        if (strcmp(v, *k) == 0)
            return true;
    return false;
}

static int initialize(ipb_mcpc *c, long deadline, ipb_error **err) {
    json_t *params = json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", ASKED_VERSION, "capabilities",
                               "clientInfo", "name", "ipybox", "version", IPYBOX_VERSION);
    if (!params)
        return mcpc_fail(err, ENOMEM, "out of memory");
    c->initializing = true;
    json_t *result = request(c, "initialize", "initialize", params, deadline, c->limits.connect_ms, err);
    json_decref(params);
    c->initializing = false;
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
        free(c->version);
        free(c->server_name);
        c->version = strdup(version);
        c->server_name = strdup(sname ? sname : "");
        if (!c->version || !c->server_name)
            r = mcpc_fail(err, ENOMEM, "out of memory");
        c->t->protocol_version = c->version;
    }
    json_decref(result);
    if (r < 0)
        return -1;
    json_t *note = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", "notifications/initialized");
    if (!note)
        return mcpc_fail(err, ENOMEM, "out of memory");
    ipb_error *e = NULL;
    r = send_json(c, note, MCPC_MSG_NOTIFICATION, deadline, &e);
    json_decref(note);
    if (r < 0) {
        if (e->errnum == ETIMEDOUT)
            mcpc_reword(&e, "no answer within %d ms", c->limits.connect_ms);
        if (fatal(e, c->t))
            mark_dead(c, e);
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
    if (c->t)
        c->t->ops->close(c->t, graceful);
    json_decref(c->params);
    free(c->server_name);
    free(c->version);
    free(c->dead_reason);
    free(c->name);
    pthread_mutex_destroy(&c->call_lock);
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
    pthread_mutex_init(&c->call_lock, NULL);
    c->params = expanded;
    c->limits = lim;
    c->transport_kind = kind;
    c->next_id = 1;
    c->alive = true;
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
    c->cancel_fd = c->t->cancel_fd = -1;
    if (initialize(c, deadline, err) < 0) {
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
        json_t *result = params ? request(c, "tools/list", "tools/list", params, ipb_now_ms() + c->limits.call_ms,
                                          c->limits.call_ms, err)
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

json_t *ipb_mcpc_call_tool(ipb_mcpc *c, const char *tool, json_t *arguments, ipb_error **err) {
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
    json_t *result = request(c, what, "tools/call", params, ipb_now_ms() + c->limits.call_ms, c->limits.call_ms, err);
    json_decref(params);
    if (result && !json_is_object(result)) {
        json_decref(result);
        mcpc_fail(err, EPROTO, "MCP server '%s': %s: the result is not an object", c->name, what);
        return NULL;
    }
    return result;
}

bool ipb_mcpc_alive(ipb_mcpc *c) {
    /* A stdio server that exited since the last call is found here, so that the next call goes
     * to a new one instead of failing on the dead one. */
    if (c && c->alive && c->t && c->t->ops->gone && c->t->ops->gone(c->t))
        c->alive = false;
    return c && c->alive;
}

const char *ipb_mcpc_server_name(const ipb_mcpc *c) { return c ? c->server_name : NULL; }

const char *ipb_mcpc_protocol_version(const ipb_mcpc *c) { return c ? c->version : NULL; }

size_t ipb_mcpc_malformed(const ipb_mcpc *c) { return c ? c->malformed : 0; }

void ipb_mcpc_close(ipb_mcpc *c) { client_free(c, true); }

void ipb_mcpc_abort(ipb_mcpc *c) { client_free(c, false); }

int ipb_mcpc_exit_fd(const ipb_mcpc *c) {
    return c && c->t && c->t->ops->exit_fd ? c->t->ops->exit_fd(c->t) : -1;
}

void ipb_mcpc_set_cancel_fd(ipb_mcpc *c, int fd) {
    if (!c)
        return;
    c->cancel_fd = fd;
    if (c->t)
        c->t->cancel_fd = fd;
}

size_t ipb_mcpc_cancelled(const ipb_mcpc *c) { return c ? c->cancelled : 0; }

json_t *ipb_mcpc_call(ipb_mcpc *c, const char *tool, json_t *arguments, int cancel_fd, int timeout_ms,
                      ipb_error **err) {
    pthread_mutex_lock(&c->call_lock);
    c->in_flight++;
    int saved = c->limits.call_ms;
    if (timeout_ms > 0)
        c->limits.call_ms = timeout_ms;
    ipb_mcpc_set_cancel_fd(c, cancel_fd);
    json_t *r = ipb_mcpc_call_tool(c, tool, arguments, err);
    ipb_mcpc_set_cancel_fd(c, -1);
    c->limits.call_ms = saved;
    c->in_flight--;
    pthread_mutex_unlock(&c->call_lock);
    return r;
}

size_t ipb_mcpc_in_flight(ipb_mcpc *c) { return c ? __atomic_load_n(&c->in_flight, __ATOMIC_RELAXED) : 0; }

void ipb_mcpc_shutdown(ipb_mcpc *c) { (void)c; /* stub: the concurrent client makes this real */ }
