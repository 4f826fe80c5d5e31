/* Sessions: one worker process each (`ipybox mcp --embedded`, re-executed from our own
 * binary, with a pipe as stdin and a socketpair as stdout), and the routing of calls to it. A call goes on under an id of
 * ours, so that answers and progress find the client that asked, whatever ids clients chose. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_int.h"
#include "fdio.h"
#include "log.h"
#include "mcp_server.h"
#include "mon_proto.h"
#include "monclient.h"
#include "record.h"

struct ipbd_session *ipbd_session_find(struct ipbd *d, const char *name) {
    for (struct ipbd_session *s = d->sessions; s; s = s->next)
        if (!s->closing && !s->warm && !strcmp(s->name, name))
            return s;
    return NULL;
}

static void send_worker(struct ipbd *d, struct ipbd_session *s, json_t *msg, bool *ok) {
    size_t len;
    char *line = jrpc_dump(msg, &len);
    json_decref(msg);
    *ok = line && len <= JRPC_MAX_LINE && ipbd_out_send(d, &s->linkw, &s->out, line, len) == 0;
    free(line);
}

/* Unlinks and frees the question at *pp. */
static void ask_drop(struct ipbd_ask **pp) {
    struct ipbd_ask *a = *pp;
    *pp = a->next;
    json_decref(a->wid);
    json_decref(a->cid);
    free(a);
}

static void ask_clear_all(struct ipbd_session *s) {
    while (s->asks)
        ask_drop(&s->asks);
}

/* The question whose id is `id` on the worker's side (wid) or towards the client (cid). */
static struct ipbd_ask **ask_find(struct ipbd_session *s, json_t *id, bool cid) {
    for (struct ipbd_ask **pp = &s->asks; *pp; pp = &(*pp)->next)
        if (id && json_equal(id, cid ? (*pp)->cid : (*pp)->wid))
            return pp;
    return NULL;
}

/* Answers the worker's question ourselves: the client cannot be asked (the worker then applies
 * --approve-tools alone) or went away. */
static void ask_refuse(struct ipbd *d, struct ipbd_session *s, json_t *wid, int code, const char *why) {
    bool ok;
    send_worker(d, s, jrpc_error(wid, code, why), &ok);
}

static struct ipbd_pending *add_pending(struct ipbd_session *s, enum ipbd_pending_kind kind, struct ipbd_client *c,
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

static struct ipbd_pending *find_pending(struct ipbd_session *s, uint64_t wid) {
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

static void pending_fail(struct ipbd *d, struct ipbd_pending *p, int code, const char *msg) {
    struct ipbd_client *c = ipbd_client_find(d, p->client_id);
    if (c)
        ipbd_client_send(d, c, jrpc_error(p->id, code, msg));
    pending_free(d, p);
}

/* A request that could not be sent on: unlinked and answered with an error. */
static void fail_new(struct ipbd *d, struct ipbd_session *s, struct ipbd_pending *p) {
    take_pending(s, p->wid);
    pending_fail(d, p, s->linkw.fd < 0 ? IPBD_SESSION_GONE : JRPC_INVALID_REQUEST,
                 s->linkw.fd < 0 ? "The session is not taking requests (its worker is gone)"
                                 : "The request is too large for the session (over 16 MiB as the daemon encodes it), "
                                   "or the session is not reading");
}

void ipbd_session_forward_call(struct ipbd *d, struct ipbd_session *s, struct ipbd_client *c, json_t *msg) {
    json_t *id = json_object_get(msg, "id");
    json_t *meta = json_object_get(json_object_get(msg, "params"), "_meta");
    json_t *token = json_object_get(meta, "progressToken");
    if (token && !json_is_string(token) && !json_is_integer(token))
        token = NULL;
    struct ipbd_pending *p = add_pending(s, P_CALL, c, id, token);
    if (!p) {
        ipbd_client_send(d, c, jrpc_error(id, JRPC_INTERNAL_ERROR, "Out of memory"));
        return;
    }
    json_object_set_new(msg, "id", json_integer((json_int_t)p->wid));
    if (token)
        json_object_set_new(meta, "progressToken", json_integer((json_int_t)p->wid));
    bool ok;
    send_worker(d, s, json_incref(msg), &ok);
    if (!ok)
        fail_new(d, s, p);
}

void ipbd_session_when_ready(struct ipbd *d, struct ipbd_session *s, struct ipbd_client *c, json_t *id) {
    struct ipbd_pending *p = add_pending(s, P_CREATE, c, id, NULL);
    if (!p) {
        ipbd_client_send(d, c, jrpc_error(id, JRPC_INTERNAL_ERROR, "Out of memory"));
        return;
    }
    bool ok;
    send_worker(d, s, json_pack("{s:s, s:I, s:s}", "jsonrpc", "2.0", "id", (json_int_t)p->wid, "method", "ping"), &ok);
    if (!ok)
        fail_new(d, s, p);
}

/* Cancels the worker's side of p (it answers nothing for a cancelled call) and frees p. */
static void cancel_pending(struct ipbd *d, struct ipbd_session *s, struct ipbd_pending *p, const char *answer) {
    if (p->kind == P_CALL) {
        bool ok;
        send_worker(d, s,
                    jrpc_notification("notifications/cancelled",
                                      json_pack("{s:I, s:s}", "requestId", (json_int_t)p->wid, "reason",
                                                "the client cancelled the request or left")),
                    &ok);
    }
    if (answer)
        pending_fail(d, p, JRPC_INTERNAL_ERROR, answer);
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

void ipbd_session_detach(struct ipbd *d, struct ipbd_session *s, struct ipbd_client *c) {
    for (struct ipbd_pending **pp = &s->pending; *pp;) {
        struct ipbd_pending *p = *pp;
        if (p->client_id != c->id) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        cancel_pending(d, s, p, c->dead ? NULL : "Cancelled: the client left this session");
    }
    for (struct ipbd_ask **pp = &s->asks; *pp;) {
        if ((*pp)->client != c->id) {
            pp = &(*pp)->next;
            continue;
        }
        ask_refuse(d, s, (*pp)->wid, -32000, "the client that was asked left the session");
        ask_drop(pp);
    }
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

/* Where the worker's own arguments end and the client's begin is not a boundary the worker
 * sees: both are sandbox options, the client's after (so they add to or override ours). */
static char **worker_argv(struct ipbd *d, json_t *args, ipb_error **err) {
    size_t n = 0, extra = json_array_size(args);
    for (char **a = d->cfg->session_args; a && *a; a++)
        n++;
    char **argv = calloc(n + extra + 4, sizeof(char *));
    if (!argv) {
        ipb_error_set(err, ENOMEM, "session arguments");
        return NULL;
    }
    size_t k = 0;
    argv[k++] = (char *)"ipybox";
    argv[k++] = (char *)"mcp";
    argv[k++] = (char *)"--embedded";
    for (size_t i = 0; i < n; i++)
        argv[k++] = d->cfg->session_args[i];
    for (size_t i = 0; i < extra; i++) {
        json_t *v = json_array_get(args, i);
        const char *a = json_string_value(v);
        if (!a || strlen(a) != json_string_length(v)) {
            ipb_error_set(err, 0, "'args' must be an array of strings (sandbox options, as on the command line)");
            free(argv);
            return NULL;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "--embedded") || !strncmp(a, "--connect", 9)) {
            ipb_error_set(err, 0, "'%s' is not a sandbox option", a);
            free(argv);
            return NULL;
        }
        argv[k++] = (char *)a;
    }
    return argv;
}

/* Whose monitor it is, for messages. */
static const char *monitor_name(const struct ipbd *d) {
    return d->cfg->frontend ? "the ipyboxd service's monitor" : "the private monitor of root's ipyboxd";
}

/* System service (or root's daemon): a channel of its own to the monitor for the worker
 * (ADOPT: the monitor makes it and sends us its other end). Returns that end, or -1. */
static int monitor_channel(struct ipbd *d, ipb_error **err) {
    static uint32_t seq;
    struct ipbm_msg m = {.magic = IPBM_MAGIC, .type = IPBM_ADOPT, .id = ++seq};
    int r = ipbm_send(d->monitor_fd, &m, NULL, 0, MSG_DONTWAIT);
    if ((r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN) && !d->cfg->frontend) {
        /* Root's private monitor is gone (killed, say; the sandboxes it ran went with it):
         * another is started as the first was. The system service's monitor is the
         * service's own: a frontend whose monitor is gone ends with it (its parent-death
         * signal), and the service's manager starts the service again. */
        int fd = ipb_monitor_private_replace(d->monitor_fd, err);
        if (fd < 0) /* the old channel stays (dead): the next session tries again */
            return ipb_error_wrap(err, "the private monitor of root's ipyboxd is gone");
        d->monitor_fd = fd;
        r = ipbm_send(d->monitor_fd, &m, NULL, 0, MSG_DONTWAIT);
    }
    if (r < 0)
        return ipb_error_set(err, -r, "%s is gone", monitor_name(d));
    long deadline = ipbd_now_ms() + 10000;
    for (;;) {
        long left = deadline - ipbd_now_ms();
        struct pollfd p = {d->monitor_fd, POLLIN, 0};
        int n = poll(&p, 1, left > 0 ? (int)left : 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            return ipb_error_set(err, ETIMEDOUT, "%s did not answer for a channel", monitor_name(d));
        struct ipbm_msg rep;
        int fd[2];
        unsigned nfds = 0;
        r = n < 0 ? -errno : ipbm_recv(d->monitor_fd, &rep, fd, 2, &nfds, MSG_DONTWAIT);
        if (r == -EAGAIN)
            continue;
        bool mine = r == 1 && rep.id == m.id;
        if (mine && rep.type == IPBM_ADOPTED && nfds == 1 && ipbm_is_seqpacket(fd[0])) {
            if (!d->cfg->frontend)
                ipb_monitor_private_served();
            return fd[0];
        }
        ipb_record_close_fds(fd, nfds);
        if (r <= 0)
            return ipb_error_set(err, r < 0 ? -r : EPIPE, "%s is gone", monitor_name(d));
        if (mine && rep.type == IPBM_ERROR)
            return ipb_error_set(err, rep.err, "%s", rep.text);
        if (mine)
            return ipb_error_set(err, EPROTO, "%s answered something unexpected", monitor_name(d));
        /* An answer to an earlier request that timed out: skipped. */
    }
}

static pid_t spawn_worker(struct ipbd *d, char **argv, const char *cwd, int in_fd, int out_fd, int err_fd,
                          ipb_error **err) {
    pid_t parent = getpid();
    int mon = -1;
    if (d->monitor_fd >= 0 && (mon = monitor_channel(d, err)) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        if (mon >= 0)
            close(mon);
        return ipb_error_set(err, errno, "fork");
    }
    if (pid > 0) {
        if (mon >= 0)
            close(mon);
        return pid;
    }
    /* The child: its own process group (a terminal's ^C goes to the daemon, which decides),
     * killed when the daemon dies, with the daemon's blocked signals unblocked. */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        _exit(126);
    if (mon >= 0 && (dup2(mon, 3) < 0 || setenv(IPB_MONITOR_FD_ENV, "3", 1) < 0))
        _exit(126);
    if (cwd && chdir(cwd) < 0) {
        dprintf(2, "ipybox mcp: cannot start: the directory '%s' is not usable: %s\n", cwd, strerror(errno));
        _exit(126);
    }
    execv(d->cfg->self_exe, argv);
    dprintf(2, "ipybox mcp: cannot start: executing %s: %s\n", d->cfg->self_exe, strerror(errno));
    _exit(127);
}

/* A session object with its worker started (named by the caller). */
static struct ipbd_session *start_worker(struct ipbd *d, json_t *args, const char *cwd, ipb_error **err) {
    char **argv = worker_argv(d, args, err);
    if (!argv)
        return NULL;
    struct ipbd_session *s = calloc(1, sizeof(*s));
    int sp[2] = {-1, -1}, ep[2] = {-1, -1}, ip[2] = {-1, -1};
    if (!s || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 || pipe2(ep, O_CLOEXEC) < 0 ||
        pipe2(ip, O_CLOEXEC) < 0) {
        ipb_error_set(err, errno ? errno : ENOMEM, "creating a session's channels");
        goto fail;
    }
    pid_t pid = spawn_worker(d, argv, cwd, ip[0], sp[1], ep[1], err);
    close(sp[1]);
    close(ep[1]);
    close(ip[0]);
    sp[1] = ep[1] = ip[0] = -1;
    if (pid < 0)
        goto fail;
    free(argv);
    s->pid = pid;
    s->rd.max = IPBD_WORKER_LINE_MAX;
    s->created_ms = s->idle_since_ms = ipbd_now_ms();
    s->link = (struct ipbd_watch){W_LINK, sp[0], s, 0};
    s->linkw = (struct ipbd_watch){W_LINK, ip[1], s, 0};
    s->errw = (struct ipbd_watch){W_STDERR, ep[0], s, 0};
    ipb_set_nonblock(sp[0], 1);
    ipb_set_nonblock(ip[1], 1);
    ipb_set_nonblock(ep[0], 1);
    ipbd_watch_add(d, &s->link, EPOLLIN);
    ipbd_watch_add(d, &s->linkw, 0);
    ipbd_watch_add(d, &s->errw, EPOLLIN);
    s->next = d->sessions;
    d->sessions = s;
    d->nsessions++;
    return s;
fail:
    for (int i = 0; i < 2; i++) {
        if (sp[i] >= 0)
            close(sp[i]);
        if (ep[i] >= 0)
            close(ep[i]);
        if (ip[i] >= 0)
            close(ip[i]);
    }
    free(argv);
    free(s);
    return NULL;
}

static unsigned count_sessions(struct ipbd *d, bool warm) {
    /* Sessions being closed are on their way out (their workers exit within seconds) and do
     * not count: a client that closes one may make another at once. */
    unsigned n = 0;
    for (struct ipbd_session *o = d->sessions; o; o = o->next)
        n += !o->closing && o->warm == warm;
    return n;
}

/* A warm worker for a session made with the daemon's options alone: a ready one first. */
static struct ipbd_session *take_warm(struct ipbd *d) {
    struct ipbd_session *best = NULL;
    for (struct ipbd_session *s = d->sessions; s; s = s->next)
        if (s->warm && !s->closing && s->linkw.fd >= 0 && (!best || (s->ready && !best->ready)))
            best = s;
    if (best) {
        best->warm = false;
        d->warm_failures = 0; /* one served: failures count afresh */
    }
    return best;
}

/* Closes a warm worker (one still starting first); false when there is none. */
static bool drop_warm(struct ipbd *d, const char *why) {
    struct ipbd_session *pick = NULL;
    for (struct ipbd_session *s = d->sessions; s; s = s->next)
        if (s->warm && !s->closing && (!pick || (!s->ready && pick->ready)))
            pick = s;
    if (pick)
        ipbd_session_close(d, pick, why);
    return pick != NULL;
}

/* A warm worker could not start or ended while waiting: the next one waits 1 s, doubling to a
 * minute, so that a broken setup does not start sandboxes over and over. */
static void warm_failed(struct ipbd *d, const char *why) {
    d->warm_failures++;
    long pause = d->warm_failures > 6 ? 60000 : 1000L << (d->warm_failures - 1);
    d->warm_after_ms = ipbd_now_ms() + pause;
    if (d->warm_failures <= 6 || d->warm_failures % 10 == 0)
        log_warn("a warm worker %s; the next in %ld s", why, pause / 1000);
}

struct ipbd_session *ipbd_session_start(struct ipbd *d, const char *name, uint64_t anon_owner, json_t *args,
                                        const char *cwd, ipb_error **err) {
    if (d->stopping) {
        ipb_error_set(err, 0, "the daemon is stopping");
        return NULL;
    }
    unsigned open = count_sessions(d, false);
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
    struct ipbd_session *s = defaults ? take_warm(d) : NULL;
    bool was_warm = s != NULL;
    /* Warm workers count against --max-sessions: one gives way to a session that needs a
     * worker of its own. */
    if (!s && open + count_sessions(d, true) >= d->cfg->max_sessions)
        drop_warm(d, "giving way to a session with options of its own");
    if (!s && !(s = start_worker(d, args, defaults ? NULL : cwd, err)))
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

void ipbd_warm_fill(struct ipbd *d) {
    if (!d->cfg->warm || d->stopping)
        return;
    long now = ipbd_now_ms();
    if (!d->nclients && (!d->active_ms || now - d->active_ms >= d->cfg->idle_timeout_ms)) {
        /* Nobody has used the daemon lately: no sandbox waits for them. */
        while (drop_warm(d, "no client for --idle-timeout"))
            ;
        return;
    }
    if (now < d->warm_after_ms)
        return;
    unsigned warm = count_sessions(d, true);
    while (warm < d->cfg->warm && count_sessions(d, false) + warm < d->cfg->max_sessions) {
        ipb_error *err = NULL;
        struct ipbd_session *s = start_worker(d, NULL, NULL, &err);
        if (!s) {
            char why[600];
            snprintf(why, sizeof(why), "could not start: %s", ipb_error_msg(err));
            ipb_error_free(err);
            warm_failed(d, why);
            return;
        }
        s->warm = true;
        snprintf(s->name, sizeof(s->name), "(warm %d)", (int)s->pid);
        log_debug("warm worker %d: starting", (int)s->pid);
        /* Answered once its sandbox is up. */
        struct ipbd_pending *p = add_pending(s, P_WARM, NULL, NULL, NULL);
        bool ok = false;
        if (p)
            send_worker(d, s, json_pack("{s:s, s:I, s:s}", "jsonrpc", "2.0", "id", (json_int_t)p->wid, "method", "ping"),
                        &ok);
        if (p && !ok)
            fail_new(d, s, p);
        warm++;
    }
}

/* --- approval questions: the worker asks the client whose call runs the cell ------------- */

static void ask_client(struct ipbd *d, struct ipbd_session *s, json_t *m) {
    json_t *wid = json_object_get(m, "id");
    json_t *meta = json_object_get(json_object_get(m, "params"), "_meta");
    json_t *call = json_object_get(meta, IPB_META_CALL_ID);
    struct ipbd_pending *p = json_is_integer(call) ? find_pending(s, (uint64_t)json_integer_value(call)) : NULL;
    struct ipbd_client *c = p && p->kind == P_CALL ? ipbd_client_find(d, p->client_id) : NULL;
    if (!c || c->dead || !c->elicitation) {
        ask_refuse(d, s, wid, JRPC_METHOD_NOT_FOUND,
                   c ? "the client did not declare the elicitation capability" : "no client is waiting on this call");
        return;
    }
    /* Several questions may be open at once (calls run concurrently); each is answered or
     * withdrawn alone. A repeated worker id replaces the older question. */
    struct ipbd_ask **old = ask_find(s, wid, false);
    if (old)
        ask_drop(old);
    struct ipbd_ask *a = calloc(1, sizeof(*a));
    if (!a) {
        ask_refuse(d, s, wid, -32000, "out of memory");
        return;
    }
    json_object_del(meta, IPB_META_CALL_ID);
    a->wid = json_incref(wid);
    a->cid = json_sprintf("ipyboxd-ask-%llu", (unsigned long long)++d->next_ask);
    a->client = c->id;
    a->next = s->asks;
    s->asks = a;
    json_object_set(m, "id", a->cid);
    ipbd_client_send(d, c, json_incref(m));
}

void ipbd_session_answer(struct ipbd *d, struct ipbd_client *c, json_t *msg) {
    struct ipbd_session *s = c->session;
    json_t *id = json_object_get(msg, "id");
    struct ipbd_ask **pp = s ? ask_find(s, id, true) : NULL;
    if (!pp || (*pp)->client != c->id)
        return; /* not ours, or too late */
    json_object_set(msg, "id", (*pp)->wid);
    ask_drop(pp);
    bool ok;
    send_worker(d, s, json_incref(msg), &ok);
}

/* An answer or a notification from a worker, routed to the client that asked. */
static void worker_line(struct ipbd *d, struct ipbd_session *s, const char *line, size_t len) {
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
        ask_client(d, s, m);
    } else if (method && !id && !strcmp(method, "notifications/cancelled")) {
        /* The worker withdrew its question (the cell ended or was interrupted). */
        json_t *params = json_object_get(m, "params");
        struct ipbd_ask **pp = ask_find(s, json_object_get(params, "requestId"), false);
        struct ipbd_client *c = pp ? ipbd_client_find(d, (*pp)->client) : NULL;
        if (c) {
            json_object_set(params, "requestId", (*pp)->cid);
            ipbd_client_send(d, c, json_incref(m));
        }
        if (pp)
            ask_drop(pp);
    } else if (method && id) {
        ask_refuse(d, s, id, JRPC_METHOD_NOT_FOUND, "the daemon passes on no such request");
    } else if (method && !strcmp(method, "notifications/progress")) {
        json_t *params = json_object_get(m, "params");
        json_t *tok = json_object_get(params, "progressToken");
        struct ipbd_pending *p = json_is_integer(tok) ? find_pending(s, (uint64_t)json_integer_value(tok)) : NULL;
        struct ipbd_client *c = p && p->token ? ipbd_client_find(d, p->client_id) : NULL;
        if (c) {
            json_object_set(params, "progressToken", p->token);
            ipbd_client_send(d, c, json_incref(m));
        }
    }
    json_decref(m);
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
            worker_line(d, s, line, len);
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
        snprintf(why, sizeof(why), "The session '%s' %s: %s", s->name, s->ready ? "ended unexpectedly" : "could not start",
                 detail);
    if (s->warm && !s->closing) {
        char wf[800];
        snprintf(wf, sizeof(wf), "%s: %s", s->ready ? "ended while waiting" : "could not start", detail);
        warm_failed(d, wf);
    } else if (!s->closing) {
        char how[128];
        describe_status(status, how, sizeof(how));
        log_warn("session %s: the worker %s", s->name, how);
    }
    while (s->pending) {
        struct ipbd_pending *p = s->pending;
        s->pending = p->next;
        pending_fail(d, p, s->ready || s->closing ? IPBD_SESSION_GONE : JRPC_INVALID_PARAMS, why);
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
    ask_clear_all(s);
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
        json_array_append_new(
            a, json_pack("{s:s, s:b, s:b, s:i, s:b, s:b, s:I, s:I}", "name", s->name, "anonymous", s->anonymous,
                         "attached", c->session == s, "clients", (int)s->clients, "busy", s->pending != NULL, "ready",
                         s->ready, "ageSeconds", (json_int_t)((now - s->created_ms) / 1000), "idleSeconds",
                         (json_int_t)(s->clients ? 0 : (now - s->idle_since_ms) / 1000)));
    }
    return a;
}
