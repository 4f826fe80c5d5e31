/* Sessions: their lives (started, attached, closed, idle, ended) and their workers' events:
 * the link read and routed (routing.c), stderr logged, the exit reaped. A worker is started
 * by worker.c; warm ones are kept by warm.c; approval questions are asks.c's. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_int.h"
#include "log.h"

struct ipbd_session *ipbd_session_find(struct ipbd *d, const char *name) {
    for (struct ipbd_session *s = d->sessions; s; s = s->next)
        if (!s->closing && !s->warm && !strcmp(s->name, name))
            return s;
    return NULL;
}

void ipbd_session_detach(struct ipbd *d, struct ipbd_session *s, struct ipbd_client *c) {
    ipbd_pending_cancel_client(d, s, c);
    ipbd_asks_cancel_client(d, s, c);
    if (c->session == s) {
        c->session = NULL;
        if (s->clients && !--s->clients)
            s->idle_since_ms = ipbd_now_ms();
    }
    if (s->anonymous && s->owner == c->id)
        ipbd_session_close(d, s, "its client left");
}

void ipbd_session_close(struct ipbd *d, struct ipbd_session *s, const char *why) {
    if (s->closing)
        return;
    s->closing = true;
    snprintf(s->last_err, sizeof(s->last_err), "%s", why);
    log_info("session %s: closing (%s)", s->name, why);
    char msg[700];
    snprintf(msg, sizeof(msg), "The session '%s' was closed (%s)", s->name, why);
    for (struct ipbd_client *c = d->clients; c; c = c->next)
        if (c->session == s)
            ipbd_client_lost_session(c, msg);
    s->clients = 0;
    s->idle_since_ms = ipbd_now_ms();
    /* The worker interrupts a running cell, stops its sandbox and exits. */
    if (s->pid > 0)
        kill(s->pid, SIGTERM);
}

struct ipbd_session *ipbd_session_start(struct ipbd *d, const char *name, uint64_t anon_owner, json_t *args,
                                        const char *cwd, ipb_error **err) {
    if (d->stopping) {
        ipb_error_set(err, 0, "the daemon is stopping");
        return NULL;
    }
    unsigned open = ipbd_sessions_count(d, false);
    if (open >= d->cfg->max_sessions) {
        ipb_error_set(err, 0, "the daemon already runs %u sessions, the most it may (ipyboxd --max-sessions)", open);
        return NULL;
    }
    d->active_ms = ipbd_now_ms();
    if (cwd && cwd[0] != '/') {
        ipb_error_set(err, 0, "'cwd' must be an absolute path");
        return NULL;
    }
    /* Without options of its own (cwd then means nothing), a session is what a warm worker
     * already is. */
    bool defaults = !json_array_size(args);
    struct ipbd_session *s = defaults ? ipbd_warm_take(d) : NULL;
    bool was_warm = s != NULL;
    /* Warm workers count against --max-sessions: one gives way to a session that needs a
     * worker of its own. */
    if (!s && open + ipbd_sessions_count(d, true) >= d->cfg->max_sessions)
        ipbd_warm_drop(d, "giving way to a session with options of its own");
    if (!s && !(s = ipbd_worker_start(d, args, defaults ? NULL : cwd, err)))
        return NULL;
    if (name)
        snprintf(s->name, sizeof(s->name), "%s", name);
    else
        snprintf(s->name, sizeof(s->name), "#%u", ++d->anon_seq);
    s->anonymous = !name;
    s->owner = anon_owner;
    s->created_ms = s->idle_since_ms = ipbd_now_ms();
    if (was_warm) /* replaced after this round of events (the loop refills) */
        log_info("session %s: started (warm worker %d, %s)", s->name, (int)s->pid, s->ready ? "ready" : "starting");
    else
        log_info("session %s: started (worker %d)", s->name, (int)s->pid);
    return s;
}

/* Reads the worker's link and routes its lines, until a client they go to is not reading
 * (then the link waits, flow.c). all: the worker has exited; everything it wrote is routed
 * (the clients' own limit, IPBD_OUT_MAX, still holds). */
static void link_readable(struct ipbd *d, struct ipbd_session *s, bool all) {
    int r = jrpc_reader_fill_max(&s->rd, s->link.fd, all ? SIZE_MAX : IPBD_LINK_READ);
    for (;;) {
        if (!all && ipbd_flow_blocked(d, s)) {
            ipbd_flow_pause(d, s);
            return;
        }
        char *line;
        size_t len;
        int k = jrpc_reader_next(&s->rd, &line, &len);
        if (k == 0)
            break;
        if (k < 0) {
            log_warn("session %s: a message from the worker was too large and was dropped", s->name);
            continue;
        }
        if (len)
            ipbd_worker_line(d, s, line, len);
    }
    if (r < 0 || s->rd.eof) {
        ipbd_watch_del(d, &s->link);
        ipbd_watch_del(d, &s->linkw);
        jrpc_reader_free(&s->rd);
        ipb_buf_free(&s->out.buf);
    }
}

void ipbd_sessions_flow(struct ipbd *d) {
    for (struct ipbd_session *s = d->sessions; s; s = s->next)
        if (s->paused && s->link.fd >= 0 && !ipbd_flow_blocked(d, s)) {
            ipbd_flow_resume(d, s);
            link_readable(d, s, false); /* the lines it holds first; more when the socket has them */
        }
}

/* The worker's stderr goes to ours, line by line with the session's name; its last line is
 * what a client is told when the session cannot start or ends. */
static void stderr_readable(struct ipbd *d, struct ipbd_session *s) {
    char chunk[4096];
    for (;;) {
        ssize_t n = read(s->errw.fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                ipbd_watch_del(d, &s->errw);
            break;
        }
        ipb_buf_append(&s->errbuf, chunk, (size_t)n);
        for (;;) {
            char *nl = s->errbuf.len ? memchr(s->errbuf.data, '\n', s->errbuf.len) : NULL;
            if (!nl && s->errbuf.len < 4096)
                break;
            size_t l = nl ? (size_t)(nl - s->errbuf.data) : s->errbuf.len;
            const char *text = s->errbuf.data;
            /* "ipybox mcp: " from the supervisor, "ipybox: " from the option parser. */
            static const char *const prefixes[] = {"ipybox mcp: ", "ipybox: "};
            for (size_t i = 0; i < sizeof(prefixes) / sizeof(*prefixes); i++) {
                size_t pl = strlen(prefixes[i]);
                if (l >= pl && !memcmp(text, prefixes[i], pl)) {
                    text += pl;
                    l -= pl;
                    break;
                }
            }
            /* Its own level, where it says one ("warning: ...", "error: ..."). */
            enum ipb_log_level level = IPB_LOG_INFO;
            if (l >= 9 && !memcmp(text, "warning: ", 9))
                level = IPB_LOG_WARN, text += 9, l -= 9;
            else if (l >= 7 && !memcmp(text, "error: ", 7))
                level = IPB_LOG_ERROR, text += 7, l -= 7;
            ipb_log(level, "session %s: %.*s", s->name, (int)l, text);
            if (!s->closing) {
                snprintf(s->last_err, sizeof(s->last_err), "%.*s", (int)l, text);
                s->last_err_explains = level != IPB_LOG_INFO || (l >= 7 && !memcmp(text, "cannot ", 7));
            }
            ipb_buf_consume(&s->errbuf, nl ? (size_t)(nl - s->errbuf.data) + 1 : s->errbuf.len);
        }
    }
}

void ipbd_session_event(struct ipbd *d, struct ipbd_watch *w, uint32_t events) {
    struct ipbd_session *s = w->obj;
    if (w->kind == W_STDERR) {
        stderr_readable(d, s);
        return;
    }
    if (w == &s->linkw) {
        /* The worker's stdin: writable again, or its reader is gone (the worker is ending;
         * its stdout's end and its exit settle the rest). */
        if (!(events & EPOLLOUT) || ipbd_out_flush(d, &s->linkw, &s->out) < 0)
            ipbd_watch_del(d, &s->linkw);
        return;
    }
    if (s->link.fd >= 0 && !s->paused && events & (EPOLLIN | EPOLLHUP | EPOLLERR))
        link_readable(d, s, false);
}

/* How the worker ended, from its wait status: "was killed by signal 9 (Killed)", "exited with
 * status 1". */
static void describe_status(int status, char *out, size_t size) {
    if (WIFSIGNALED(status))
        snprintf(out, size, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(out, size, "exited with status %d", WEXITSTATUS(status));
}

/* Why a worker ended: its wait status, with its last stderr line when that line explains (an
 * error, "cannot start: ..."), never a mere banner. */
static void end_detail(const struct ipbd_session *s, int status, char *out, size_t size) {
    char how[128];
    describe_status(status, how, sizeof(how));
    if (s->last_err_explains && WIFEXITED(status))
        snprintf(out, size, "%s (its worker %s)", s->last_err, how);
    else if (s->last_err_explains)
        snprintf(out, size, "its worker %s; its last error: %s", how, s->last_err);
    else
        snprintf(out, size, "its worker %s", how);
}

/* A session whose worker has exited and whose channel is closed: every open request fails
 * with the reason, its clients are detached, and it is freed. */
static void finish(struct ipbd *d, struct ipbd_session *s, int status) {
    if (s->errw.fd >= 0)
        stderr_readable(d, s); /* its last words may be the reason */
    char detail[700], why[800];
    end_detail(s, status, detail, sizeof(detail));
    if (s->closing)
        snprintf(why, sizeof(why), "The session '%s' was closed: %s", s->name, s->last_err);
    else
        snprintf(why, sizeof(why), "The session '%s' %s: %s", s->name,
                 s->ready ? "ended unexpectedly" : "could not start", detail);
    if (s->warm && !s->closing) {
        char wf[800];
        snprintf(wf, sizeof(wf), "%s: %s", s->ready ? "ended while waiting" : "could not start", detail);
        ipbd_warm_failed(d, wf);
    } else if (!s->closing) {
        char how[128];
        describe_status(status, how, sizeof(how));
        log_warn("session %s: the worker %s", s->name, how);
    }
    while (s->pending) {
        struct ipbd_pending *p = s->pending;
        s->pending = p->next;
        ipbd_pending_fail(d, p, s->ready || s->closing ? IPBD_SESSION_GONE : JRPC_INVALID_PARAMS, why);
    }
    for (struct ipbd_client *c = d->clients; c; c = c->next)
        if (c->session == s)
            ipbd_client_lost_session(c, why);
    ipbd_watch_del(d, &s->errw);
    ipbd_watch_del(d, &s->link);
    ipbd_watch_del(d, &s->linkw);
    jrpc_reader_free(&s->rd);
    ipb_buf_free(&s->out.buf);
    ipb_buf_free(&s->errbuf);
    ipbd_asks_clear(s);
    log_info("session %s: ended", s->name);
    d->nsessions--;
    free(s);
}

void ipbd_sessions_reap(struct ipbd *d) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (struct ipbd_session **sp = &d->sessions; *sp; sp = &(*sp)->next) {
            struct ipbd_session *s = *sp;
            if (s->pid != pid)
                continue;
            s->pid = 0;
            /* What the worker wrote before it ended still counts. */
            if (s->link.fd >= 0)
                link_readable(d, s, true);
            *sp = s->next;
            finish(d, s, status);
            break;
        }
    }
}

void ipbd_sessions_sweep(struct ipbd *d) {
    long now = ipbd_now_ms();
    for (struct ipbd_session *s = d->sessions; s; s = s->next)
        if (!s->anonymous && !s->warm && !s->closing && !s->clients && !s->pending &&
            now - s->idle_since_ms >= d->cfg->idle_timeout_ms) {
            char why[96];
            snprintf(why, sizeof(why), "no client for %ld s (ipyboxd --idle-timeout)", d->cfg->idle_timeout_ms / 1000);
            ipbd_session_close(d, s, why);
        }
}

json_t *ipbd_sessions_list(struct ipbd *d, const struct ipbd_client *c) {
    json_t *a = json_array();
    long now = ipbd_now_ms();
    for (struct ipbd_session *s = d->sessions; s; s = s->next) {
        if (s->closing || s->warm || (s->anonymous && s->owner != c->id))
            continue;
        json_array_append_new(a, json_pack("{s:s, s:b, s:b, s:i, s:b, s:b, s:I, s:I}", "name", s->name, "anonymous",
                                           s->anonymous, "attached", c->session == s, "clients", (int)s->clients,
                                           "busy", s->pending != NULL, "ready", s->ready, "ageSeconds",
                                           (json_int_t)((now - s->created_ms) / 1000), "idleSeconds",
                                           (json_int_t)(s->clients ? 0 : (now - s->idle_since_ms) / 1000)));
    }
    return a;
}
