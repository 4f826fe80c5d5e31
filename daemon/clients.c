/* Client connections: MCP over newline-delimited JSON-RPC, as on `ipybox mcp`'s stdio. The
 * daemon answers initialize, ping, tools/list and the session methods itself and sends tool
 * calls on to the client's session, which is made on the first call if the client has none. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon_int.h"
#include "log.h"
#include "mcp_server.h"
#include "tools.h"

struct ipbd_client *ipbd_client_find(struct ipbd *d, uint64_t id) {
    for (struct ipbd_client *c = d->clients; c; c = c->next)
        if (c->id == id && !c->dead)
            return c;
    return NULL;
}

void ipbd_client_drop(struct ipbd *d, struct ipbd_client *c) {
    if (c->dead)
        return;
    c->dead = true;
    d->ndropped++;
    /* Its session, and requests still open in sessions it left earlier. */
    for (struct ipbd_session *s = d->sessions; s; s = s->next)
        ipbd_session_detach(d, s, c);
    ipbd_watch_del(d, &c->w);
    log_debug("client %llu (pid %d): gone", (unsigned long long)c->id, (int)c->pid);
}

void ipbd_clients_reap(struct ipbd *d) {
    for (struct ipbd_client **cp = &d->clients; *cp;) {
        struct ipbd_client *c = *cp;
        if (!c->dead) {
            cp = &c->next;
            continue;
        }
        *cp = c->next;
        jrpc_reader_free(&c->rd);
        ipb_buf_free(&c->out.buf);
        free(c->lost);
        free(c);
        d->nclients--;
        d->ndropped--;
        d->active_ms = ipbd_now_ms();
    }
}

/* A client that has sent all it will (EOF) leaves once every answer it waits for is written. */
static void maybe_finish(struct ipbd *d, struct ipbd_client *c) {
    if (!c->dead && c->rd.eof && !c->pending && c->out.off == c->out.buf.len)
        ipbd_client_drop(d, c);
}

void ipbd_client_send_line(struct ipbd *d, struct ipbd_client *c, char *line, size_t len) {
    if (c->dead)
        return;
    if (ipbd_out_send(d, &c->w, &c->out, line, len) < 0) {
        log_warn("client %llu (pid %d): not reading its answers, or gone; disconnected", (unsigned long long)c->id,
                 (int)c->pid);
        ipbd_client_drop(d, c);
    }
}

void ipbd_client_send(struct ipbd *d, struct ipbd_client *c, json_t *msg) {
    size_t len;
    char *line = msg ? jrpc_dump(msg, &len) : NULL;
    json_decref(msg);
    if (line)
        ipbd_client_send_line(d, c, line, len);
    free(line);
}

void ipbd_client_done(struct ipbd *d, struct ipbd_client *c) {
    if (c->pending)
        c->pending--;
    maybe_finish(d, c);
}

void ipbd_client_lost_session(struct ipbd_client *c, const char *why) {
    c->session = NULL;
    free(c->lost);
    c->lost = strdup(why);
}

/* Returns false when the client was dropped on the way (answering its calls in the old
 * session failed). */
bool ipbd_client_attach(struct ipbd *d, struct ipbd_client *c, struct ipbd_session *s) {
    free(c->lost);
    c->lost = NULL;
    c->had_session = true;
    if (c->session == s)
        return true;
    if (c->session)
        ipbd_session_detach(d, c->session, c);
    if (c->dead)
        return false;
    c->session = s;
    s->clients++;
    s->idle_since_ms = 0;
    return true;
}

static void reply_error(struct ipbd *d, struct ipbd_client *c, json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void reply_error(struct ipbd *d, struct ipbd_client *c, json_t *id, int code, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ipbd_client_send(d, c, jrpc_error(id, code, msg));
}

/* A name from a client, or NULL (with an error answered) when absent-but-required or bad. */
static const char *name_param(struct ipbd *d, struct ipbd_client *c, json_t *id, json_t *params, bool required,
                              bool *bad) {
    json_t *v = json_object_get(params, "name");
    *bad = false;
    if (!v || json_is_null(v)) {
        if (required) {
            reply_error(d, c, id, JRPC_INVALID_PARAMS, "Invalid params: 'name' (the session's name) is required");
            *bad = true;
        }
        return NULL;
    }
    const char *name = json_string_value(v);
    if (!name || strlen(name) != json_string_length(v) || !ipbd_valid_name(name)) {
        reply_error(d, c, id, JRPC_INVALID_PARAMS,
                    "Invalid params: a session name is 1 to %d letters, digits, '.', '_' or '-', not starting with "
                    "'.' or '-'",
                    IPBD_NAME_MAX);
        *bad = true;
        return NULL;
    }
    return name;
}

static void create_session(struct ipbd *d, struct ipbd_client *c, json_t *id, json_t *params) {
    bool bad;
    const char *name = name_param(d, c, id, params, false, &bad);
    if (bad)
        return;
    if (name && ipbd_session_find(d, name))
        return reply_error(d, c, id, JRPC_INVALID_PARAMS, "A session named '%s' exists (ipybox/attachSession joins it)",
                           name);
    json_t *args = json_object_get(params, "args");
    json_t *cwd = json_object_get(params, "cwd");
    if ((args && !json_is_array(args)) || (cwd && !json_is_string(cwd)))
        return reply_error(d, c, id, JRPC_INVALID_PARAMS,
                           "Invalid params: 'args' is an array of sandbox options, 'cwd' an absolute path");
    ipb_error *err = NULL;
    struct ipbd_session *s = ipbd_session_start(d, name, name ? 0 : c->id, args, json_string_value(cwd), &err);
    if (!s) {
        reply_error(d, c, id, JRPC_INVALID_PARAMS, "Cannot create the session: %s", ipb_error_msg(err));
        ipb_error_free(err);
        return;
    }
    /* Attached once the session is up (sessions.c): one that cannot start leaves the
     * connection with the session it had. */
    ipbd_session_when_ready(d, s, c, id);
}

static void attach_session(struct ipbd *d, struct ipbd_client *c, json_t *id, json_t *params) {
    bool bad;
    const char *name = name_param(d, c, id, params, true, &bad);
    if (bad)
        return;
    struct ipbd_session *s = ipbd_session_find(d, name);
    if (!s || s->anonymous)
        return reply_error(d, c, id, JRPC_INVALID_PARAMS, "No session named '%s' (ipybox/listSessions lists them)",
                           name);
    if (ipbd_client_attach(d, c, s))
        ipbd_client_send(d, c, jrpc_result(id, json_pack("{s:s}", "name", s->name)));
}

static void close_session(struct ipbd *d, struct ipbd_client *c, json_t *id, json_t *params) {
    bool bad;
    const char *name = name_param(d, c, id, params, false, &bad);
    if (bad)
        return;
    struct ipbd_session *s = name ? ipbd_session_find(d, name) : c->session;
    if (s && s->anonymous && s->owner != c->id)
        s = NULL;
    if (!s && name)
        return reply_error(d, c, id, JRPC_INVALID_PARAMS, "No session named '%s'", name);
    if (!s)
        return reply_error(d, c, id, JRPC_INVALID_PARAMS, "This connection has no session; name one");
    json_t *result = json_pack("{s:s}", "name", s->name);
    ipbd_session_close(d, s, "closed by a client");
    ipbd_client_send(d, c, jrpc_result(id, result));
}

static void tools_call(struct ipbd *d, struct ipbd_client *c, jrpc_msg *m) {
    if (!c->session && c->had_session)
        return reply_error(d, c, m->id, IPBD_SESSION_GONE,
                           "%s. Make or join another with ipybox/createSession or ipybox/attachSession (no new "
                           "session is made for this connection by itself: it would lack the options of the old one)",
                           c->lost ? c->lost : "This connection's session has ended");
    if (!c->session) {
        ipb_error *err = NULL;
        struct ipbd_session *s = ipbd_session_start(d, NULL, c->id, NULL, NULL, &err);
        if (!s) {
            reply_error(d, c, m->id, JRPC_INTERNAL_ERROR, "Cannot start a session: %s", ipb_error_msg(err));
            ipb_error_free(err);
            return;
        }
        if (!ipbd_client_attach(d, c, s))
            return;
    }
    ipbd_session_forward_call(d, c->session, c, m->root);
}

static void request(struct ipbd *d, struct ipbd_client *c, jrpc_msg *m) {
    const char *method = m->method;
    json_t *params = json_is_object(m->params) ? m->params : NULL;
    if (!strcmp(method, "initialize")) {
        c->elicitation = json_is_object(json_object_get(json_object_get(params, "capabilities"), "elicitation"));
        ipbd_client_send(d, c, jrpc_result(m->id, ipb_mcp_initialize_result(params)));
    } else if (!strcmp(method, "ping"))
        ipbd_client_send(d, c, jrpc_result(m->id, json_object()));
    else if (!strcmp(method, "tools/list"))
        ipbd_client_send(d, c, jrpc_result(m->id, json_pack("{s:o}", "tools", ipb_tools_list())));
    else if (!strcmp(method, "tools/call"))
        tools_call(d, c, m);
    else if (!strcmp(method, "ipybox/createSession"))
        create_session(d, c, m->id, params);
    else if (!strcmp(method, "ipybox/attachSession"))
        attach_session(d, c, m->id, params);
    else if (!strcmp(method, "ipybox/closeSession"))
        close_session(d, c, m->id, params);
    else if (!strcmp(method, "ipybox/listSessions"))
        ipbd_client_send(d, c, jrpc_result(m->id, json_pack("{s:o}", "sessions", ipbd_sessions_list(d, c))));
    else
        reply_error(d, c, m->id, JRPC_METHOD_NOT_FOUND, "Method not found: '%.200s'", method);
}

static void line(struct ipbd *d, struct ipbd_client *c, const char *text, size_t len) {
    jrpc_msg m;
    jrpc_parse(text, len, &m);
    if (m.kind != JRPC_INVALID)
        c->spoke = true;
    switch (m.kind) {
    case JRPC_INVALID:
        ipbd_client_send(d, c, jrpc_error(m.id, m.error_code, m.error_msg));
        break;
    case JRPC_RESPONSE:
        /* The only requests clients get are their workers' approval questions. */
        if (c->session)
            ipbd_session_answer(d, c, m.root);
        break;
    case JRPC_NOTIFICATION:
        if (!strcmp(m.method, "notifications/cancelled"))
            ipbd_session_cancel(d, c, json_object_get(m.params, "requestId"));
        break;
    case JRPC_REQUEST:
        request(d, c, &m);
        break;
    }
    jrpc_msg_free(&m);
}

static void readable(struct ipbd *d, struct ipbd_client *c) {
    int r = jrpc_reader_fill(&c->rd, c->w.fd);
    for (;;) {
        char *text;
        size_t len;
        int k = jrpc_reader_next(&c->rd, &text, &len);
        if (k == 0 || c->dead)
            break;
        if (k == -E2BIG) {
            json_t *id = jrpc_reader_take_dropped_id(&c->rd);
            ipbd_client_send(d, c, jrpc_error(id, JRPC_INVALID_REQUEST, JRPC_TOO_LARGE_MSG));
            json_decref(id);
            continue;
        }
        if (k < 0)
            break;
        if (len)
            line(d, c, text, len);
    }
    if (c->dead)
        return;
    if (r < 0) {
        ipbd_client_drop(d, c);
        return;
    }
    if (c->rd.eof) {
        /* No more requests; answers still due are written (the peer may have shut down only
         * its writing side). */
        ipbd_watch_mod(d, &c->w, c->w.events & ~(uint32_t)(EPOLLIN | EPOLLRDHUP));
        maybe_finish(d, c);
    }
}

void ipbd_client_event(struct ipbd *d, struct ipbd_client *c, uint32_t events) {
    if (c->dead)
        return;
    if (events & EPOLLOUT) {
        if (ipbd_out_flush(d, &c->w, &c->out) < 0) {
            ipbd_client_drop(d, c);
            return;
        }
        maybe_finish(d, c);
    }
    if (!c->dead && !c->rd.eof && events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
        readable(d, c);
    else if (!c->dead && c->rd.eof && events & (EPOLLHUP | EPOLLERR))
        ipbd_client_drop(d, c); /* gone both ways: nobody to answer */
}

/* At --max-clients, a connection that has not spoken yet (the oldest) gives way to a new one:
 * connections left idle cannot lock a real client out. NULL when every one has spoken. */
static struct ipbd_client *silent_oldest(struct ipbd *d) {
    struct ipbd_client *pick = NULL;
    for (struct ipbd_client *c = d->clients; c; c = c->next)
        if (!c->dead && !c->spoke && (!pick || c->connected_ms <= pick->connected_ms))
            pick = c;
    return pick;
}

void ipbd_clients_sweep(struct ipbd *d) {
    long now = ipbd_now_ms();
    for (struct ipbd_client *c = d->clients; c; c = c->next)
        if (!c->dead && !c->spoke && now - c->connected_ms >= d->first_request_ms) {
            ipbd_ratelog(&d->dropped_idle, "client %llu (pid %d): dropped: no request within %ld ms of connecting",
                         (unsigned long long)c->id, (int)c->pid, d->first_request_ms);
            ipbd_client_drop(d, c);
        }
    ipbd_ratelog_flush(&d->refused_cap);
    ipbd_ratelog_flush(&d->refused_uid);
    ipbd_ratelog_flush(&d->dropped_idle);
}

void ipbd_client_accept(struct ipbd *d) {
    for (int i = 0; i < 64; i++) {
        int fd = accept4(d->listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR)
                log_warn("accept: %s", strerror(errno));
            return;
        }
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 || cred.uid != d->cfg->uid) {
            ipbd_ratelog(&d->refused_uid, "refused a connection from uid %d: this daemon serves uid %d only",
                         cl == sizeof(cred) ? (int)cred.uid : -1, (int)d->cfg->uid);
            close(fd);
            continue;
        }
        if (d->nclients - d->ndropped >= d->cfg->max_clients) {
            struct ipbd_client *old = silent_oldest(d);
            if (old) {
                ipbd_ratelog(&d->dropped_idle,
                             "client %llu (pid %d): dropped to make room (%u connections, the most allowed; it had "
                             "sent no request)",
                             (unsigned long long)old->id, (int)old->pid, d->nclients - d->ndropped);
                ipbd_client_drop(d, old);
            }
        }
        struct ipbd_client *c = d->nclients - d->ndropped < d->cfg->max_clients ? calloc(1, sizeof(*c)) : NULL;
        if (!c) {
            ipbd_ratelog(&d->refused_cap,
                         "refused a connection from pid %d: %u clients are connected, the most allowed "
                         "(ipyboxd --max-clients)",
                         (int)cred.pid, d->nclients - d->ndropped);
            close(fd);
            continue;
        }
        c->w = (struct ipbd_watch){W_CLIENT, fd, c, 0};
        c->id = d->next_client_id++;
        c->pid = cred.pid;
        c->connected_ms = ipbd_now_ms();
        if (ipbd_watch_add(d, &c->w, EPOLLIN | EPOLLRDHUP) < 0) {
            close(fd);
            free(c);
            continue;
        }
        c->next = d->clients;
        d->clients = c;
        d->nclients++;
        d->active_ms = ipbd_now_ms();
        log_debug("client %llu (pid %d): connected", (unsigned long long)c->id, (int)cred.pid);
    }
}
