#include "toolchan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "strbuf.h"
#include "toolmsg.h"

enum conn_state { C_READING, C_QUEUED, C_APPROVING, C_RUNNING, C_WRITING };

typedef struct conn {
    int fd; /* -1 once the caller hung up while its call ran */
    enum conn_state state;
    unsigned long seq; /* arrival order; the call's token for the approve hook */
    bool gone;         /* the caller hung up while its call ran */
    ipb_buf in, out;
    json_t *root; /* the parsed request */
    const char *server, *tool;
    json_t *args;
    ipb_tool_job *job; /* while C_RUNNING */
} conn;

struct ipb_toolchan {
    int listen_fd, epfd;
    ipb_mcp_servers *servers;
    ipb_toolchan_hooks hooks;
    conn *conns[IPB_TOOLCHAN_MAX_CONNS];
    bool in_cell; /* a cell runs: calls may be approved and started */
    unsigned long next_seq;
};

#define TAG_LISTEN 0u
#define TAG_DONE 1u
#define TAG_EXITS 2u
#define TAG_CONN0 3u

static void conn_free(ipb_toolchan *tc, size_t slot) {
    conn *c = tc->conns[slot];
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    ipb_buf_free(&c->in);
    ipb_buf_free(&c->out);
    json_decref(c->root);
    free(c);
    tc->conns[slot] = NULL;
}

static size_t slot_of(ipb_toolchan *tc, conn *c) {
    for (size_t i = 0; i < IPB_TOOLCHAN_MAX_CONNS; i++)
        if (tc->conns[i] == c)
            return i;
    return IPB_TOOLCHAN_MAX_CONNS;
}

static conn *by_seq(ipb_toolchan *tc, unsigned long seq, size_t *slot) {
    for (size_t i = 0; i < IPB_TOOLCHAN_MAX_CONNS; i++) {
        if (tc->conns[i] && tc->conns[i]->seq == seq && tc->conns[i]->state != C_READING) {
            *slot = i;
            return tc->conns[i];
        }
    }
    return NULL;
}

static void watch(ipb_toolchan *tc, size_t slot, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.u64 = TAG_CONN0 + slot};
    if (epoll_ctl(tc->epfd, EPOLL_CTL_MOD, tc->conns[slot]->fd, &ev) < 0)
        log_warn("tool channel: epoll_ctl: %s", strerror(errno));
}

/* Sends what is waiting in out; the connection is closed once all of it went. */
static void flush_out(ipb_toolchan *tc, size_t slot) {
    conn *c = tc->conns[slot];
    while (c->out.len) {
        ssize_t n = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            watch(tc, slot, EPOLLOUT);
            return;
        }
        if (n <= 0) {
            conn_free(tc, slot);
            return;
        }
        ipb_buf_consume(&c->out, (size_t)n);
    }
    conn_free(tc, slot);
}

static void reply(ipb_toolchan *tc, size_t slot, json_t *msg) {
    conn *c = tc->conns[slot];
    char *line = msg ? json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(msg);
    c->state = C_WRITING;
    if (!line || ipb_buf_append(&c->out, line, strlen(line)) < 0 || ipb_buf_append(&c->out, "\n", 1) < 0) {
        free(line);
        conn_free(tc, slot);
        return;
    }
    free(line);
    flush_out(tc, slot);
}

static void reply_error(ipb_toolchan *tc, size_t slot, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void reply_error(ipb_toolchan *tc, size_t slot, const char *kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = ipb_vstrdupf(fmt, ap);
    va_end(ap);
    reply(tc, slot, ipb_toolmsg_error(kind, m));
    free(m);
}

/* Checks the request; a refusal is answered at once. Returns 0 when it stands. */
static int check_request(ipb_toolchan *tc, size_t slot) {
    conn *c = tc->conns[slot];
    json_decref(c->root);
    c->root = NULL;
    char *why = ipb_toolmsg_parse(c->in.data, c->in.len, tc->servers, &c->root, &c->server, &c->tool, &c->args);
    if (why) {
        log_info("tool channel: call refused: %s", why);
        reply(tc, slot, ipb_toolmsg_error("refused", why));
        free(why);
        return -1;
    }
    return 0;
}

static void on_request(ipb_toolchan *tc, size_t slot) {
    conn *c = tc->conns[slot];
    if (check_request(tc, slot) < 0)
        return;
    /* While it waits, only the line is kept: a parsed tree can be tens of times larger. It is
     * parsed (and checked against the registry) again when its turn comes. */
    json_decref(c->root);
    c->root = NULL;
    c->server = c->tool = NULL;
    c->args = NULL;
    c->state = C_QUEUED;
    c->seq = ++tc->next_seq;
    watch(tc, slot, 0); /* from now on only a hang-up matters */
}

static void on_readable(ipb_toolchan *tc, size_t slot) {
    conn *c = tc->conns[slot];
    char buf[65536];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            conn_free(tc, slot);
            return;
        }
        const char *nl = memchr(buf, '\n', (size_t)n);
        size_t take = nl ? (size_t)(nl - buf) : (size_t)n;
        if (c->in.len + take > IPB_TOOLCHAN_MAX_REQUEST) {
            reply_error(tc, slot, "refused", "the tool call is over %u MiB", IPB_TOOLCHAN_MAX_REQUEST >> 20);
            return;
        }
        if (ipb_buf_append(&c->in, buf, take) < 0) {
            conn_free(tc, slot);
            return;
        }
        if (nl) {
            on_request(tc, slot);
            return;
        }
    }
}

#define STR_(x) #x
#define STR(x) STR_(x)

static void on_accept(ipb_toolchan *tc) {
    for (;;) {
        int fd = accept4(tc->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        size_t slot = 0;
        while (slot < IPB_TOOLCHAN_MAX_CONNS && tc->conns[slot])
            slot++;
        conn *c = slot < IPB_TOOLCHAN_MAX_CONNS ? calloc(1, sizeof(*c)) : NULL;
        if (!c) {
            static const char busy[] = "{\"error\":{\"kind\":\"refused\",\"message\":\"too many tool calls at once "
                                       "(" STR(IPB_TOOLCHAN_MAX_CONNS) " running or waiting, the most a session "
                                                                       "takes)\"}}\n";
            log_info("tool channel: a call refused: %d calls run or wait already", IPB_TOOLCHAN_MAX_CONNS);
            (void)!send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->state = C_READING;
        tc->conns[slot] = c;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG_CONN0 + slot};
        if (epoll_ctl(tc->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
            conn_free(tc, slot);
    }
}

static void on_job_done(ipb_toolchan *tc, ipb_tool_job *j) {
    conn *c = j->ud;
    size_t slot = slot_of(tc, c);
    if (slot < IPB_TOOLCHAN_MAX_CONNS && c->state == C_RUNNING && c->job == j) {
        if (j->err)
            log_info("tool call %s/%s: %s", c->server, c->tool, ipb_error_msg(j->err));
        c->job = NULL;
        if (c->gone)
            conn_free(tc, slot);
        else
            reply(tc, slot, ipb_toolmsg_reply(j->result, j->err));
    }
    ipb_tool_job_free(j);
}

static void orphan_done(void *ud, ipb_tool_job *j) { on_job_done(ud, j); }

/* An approved call starts on a thread of its own; a built-in server answers at once. */
static void start_call(ipb_toolchan *tc, size_t slot) {
    conn *c = tc->conns[slot];
    ipb_mcp_server_entry *e = ipb_mcp_servers_get(tc->servers, c->server);
    if (e && e->local_call) {
        ipb_error *err = NULL;
        json_t *result = e->local_call(e, c->tool, c->args, &err);
        if (err)
            log_info("tool call %s/%s: %s", c->server, c->tool, ipb_error_msg(err));
        reply(tc, slot, ipb_toolmsg_reply(result, err));
        json_decref(result);
        ipb_error_free(err);
        return;
    }
    ipb_tool_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->tool = strdup(c->tool))) {
        free(j);
        reply_error(tc, slot, "failed", "out of memory");
        return;
    }
    j->entry = e;
    j->args = json_incref(c->args);
    j->limits = &tc->servers->limits;
    j->ud = c;
    ipb_error *err = NULL;
    if (!e || ipb_tool_job_start(tc->servers, j, &err) < 0) {
        log_info("tool call %s/%s not started: %s", c->server, c->tool, err ? ipb_error_msg(err) : "no server");
        bool busy = err && err->errnum == EBUSY;
        reply_error(tc, slot, busy ? "refused" : "failed", "%s",
                    err ? ipb_error_msg(err) : "the server is not registered");
        ipb_error_free(err);
        ipb_tool_job_free(j);
        return;
    }
    c->job = j;
    c->state = C_RUNNING;
}

static void decide_slot(ipb_toolchan *tc, size_t slot, bool approved, const char *why) {
    conn *c = tc->conns[slot];
    if (!approved) {
        log_info("tool call %s/%s rejected%s%s", c->server, c->tool, why ? ": " : "", why ? why : "");
        reply_error(tc, slot, "rejected", "the call of tool '%s' of MCP server '%s' was rejected%s%s", c->tool,
                    c->server, why ? ": " : "", why ? why : "");
        return;
    }
    log_debug("tool call %s/%s approved", c->server, c->tool);
    start_call(tc, slot);
}

/* While a cell runs, every waiting call is put to the approve hook, in arrival order; each
 * decision (now or later) starts or refuses that call alone. */
static void advance(ipb_toolchan *tc) {
    while (tc->in_cell) {
        size_t slot = IPB_TOOLCHAN_MAX_CONNS;
        for (size_t i = 0; i < IPB_TOOLCHAN_MAX_CONNS; i++) {
            conn *c = tc->conns[i];
            if (c && c->state == C_QUEUED && (slot == IPB_TOOLCHAN_MAX_CONNS || c->seq < tc->conns[slot]->seq))
                slot = i;
        }
        if (slot == IPB_TOOLCHAN_MAX_CONNS)
            return;
        if (check_request(tc, slot) < 0) /* the registry may have changed */
            continue;
        conn *c = tc->conns[slot];
        c->state = C_APPROVING;
        char *why = NULL;
        enum ipb_approval a = tc->hooks.approve
                                  ? tc->hooks.approve(tc->hooks.ud, c->seq, c->server, c->tool, c->args, &why)
                                  : IPB_REJECTED;
        if (a != IPB_APPROVAL_PENDING)
            decide_slot(tc, slot, a == IPB_APPROVED, why);
        free(why);
    }
}

void ipb_toolchan_decide(ipb_toolchan *tc, unsigned long call, bool approved, const char *why) {
    size_t slot;
    conn *c = by_seq(tc, call, &slot);
    if (c && c->state == C_APPROVING)
        decide_slot(tc, slot, approved, why);
    advance(tc);
}

bool ipb_toolchan_waiting(const ipb_toolchan *tc) {
    for (size_t i = 0; tc && i < IPB_TOOLCHAN_MAX_CONNS; i++)
        if (tc->conns[i] && tc->conns[i]->state == C_APPROVING)
            return true;
    return false;
}

/* The caller hung up (an interrupted cell, a timeout, a reset or a dead kernel close its
 * socket; so does the generated API's own call_timeout). */
static void on_hangup(ipb_toolchan *tc, size_t slot) {
    conn *c = tc->conns[slot];
    if (c->state == C_APPROVING && tc->hooks.withdraw)
        tc->hooks.withdraw(tc->hooks.ud, c->seq);
    if (c->state != C_RUNNING) {
        conn_free(tc, slot);
        return;
    }
    /* Nobody waits for the answer: this call alone is cancelled at its server; the conn is
     * kept (without its socket) until the call's thread is done with it. */
    log_info("tool call %s/%s: the caller is gone; cancelling it", c->server, c->tool);
    c->gone = true;
    epoll_ctl(tc->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    ipb_tool_job_cancel(c->job);
}

void ipb_toolchan_pump(ipb_toolchan *tc, bool in_cell) {
    tc->in_cell = in_cell;
    struct epoll_event evs[32];
    int n = epoll_wait(tc->epfd, evs, 32, 0);
    for (int i = 0; i < n; i++) {
        uint64_t tag = evs[i].data.u64;
        if (tag == TAG_LISTEN) {
            on_accept(tc);
        } else if (tag == TAG_DONE) {
            ipb_tool_job *j;
            while ((j = ipb_mcp_servers_take(tc->servers)))
                on_job_done(tc, j);
            ipb_mcp_servers_reap(tc->servers); /* exits seen while calls ran */
        } else if (tag == TAG_EXITS) {
            ipb_mcp_servers_reap(tc->servers);
        } else {
            size_t slot = (size_t)(tag - TAG_CONN0);
            conn *c = slot < IPB_TOOLCHAN_MAX_CONNS ? tc->conns[slot] : NULL;
            if (!c || c->fd < 0)
                continue;
            if (c->state == C_READING && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
                on_readable(tc, slot);
            } else if (c->state == C_WRITING) {
                if (evs[i].events & (EPOLLHUP | EPOLLERR))
                    conn_free(tc, slot);
                else
                    flush_out(tc, slot);
            } else if (evs[i].events & (EPOLLHUP | EPOLLERR)) {
                on_hangup(tc, slot);
            }
        }
    }
    advance(tc);
}

void ipb_toolchan_cell_ended(ipb_toolchan *tc) {
    if (!tc)
        return;
    ipb_toolchan_pump(tc, false);
    for (size_t i = 0; i < IPB_TOOLCHAN_MAX_CONNS; i++) {
        conn *c = tc->conns[i];
        if (!c || c->state != C_APPROVING)
            continue;
        if (tc->hooks.withdraw)
            tc->hooks.withdraw(tc->hooks.ud, c->seq);
        /* Asked again in the next cell. */
        json_decref(c->root);
        c->root = NULL;
        c->state = C_QUEUED;
    }
}

void ipb_toolchan_interrupted(ipb_toolchan *tc) {
    if (!tc)
        return;
    tc->in_cell = false;
    for (size_t i = 0; i < IPB_TOOLCHAN_MAX_CONNS; i++) {
        conn *c = tc->conns[i];
        if (!c || c->state != C_APPROVING)
            continue;
        if (tc->hooks.withdraw)
            tc->hooks.withdraw(tc->hooks.ud, c->seq);
        decide_slot(tc, i, false, "the cell was interrupted while the application was asked");
    }
}

void ipb_toolchan_set_hooks(ipb_toolchan *tc, const ipb_toolchan_hooks *hooks) { tc->hooks = *hooks; }

int ipb_toolchan_fd(const ipb_toolchan *tc) { return tc->epfd; }

ipb_toolchan *ipb_toolchan_open(ipb_mcp_servers *servers, ipb_error **err) {
    ipb_toolchan *tc = calloc(1, sizeof(*tc));
    if (!tc) {
        ipb_error_set(err, ENOMEM, "the tool channel");
        return NULL;
    }
    tc->servers = servers;
    tc->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    tc->epfd = tc->listen_fd < 0 ? -1 : epoll_create1(EPOLL_CLOEXEC);
    if (tc->epfd < 0) { /* before unlinkat() below sets errno again */
        ipb_error_set(err, errno, "creating the tool channel's socket");
        ipb_toolchan_close(tc);
        return NULL;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    /* Through the directory's fd: the session directory's path may be longer than a socket
     * address holds. */
    snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", servers->dir_fd, IPB_TOOLCHAN_SOCKET);
    (void)unlinkat(servers->dir_fd, IPB_TOOLCHAN_SOCKET, 0);
    struct epoll_event l = {.events = EPOLLIN, .data.u64 = TAG_LISTEN};
    struct epoll_event d = {.events = EPOLLIN, .data.u64 = TAG_DONE};
    struct epoll_event x = {.events = EPOLLIN, .data.u64 = TAG_EXITS};
    if (tc->listen_fd < 0 || tc->epfd < 0 || bind(tc->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        fchmodat(servers->dir_fd, IPB_TOOLCHAN_SOCKET, 0666, 0) < 0 ||
        listen(tc->listen_fd, IPB_TOOLCHAN_MAX_CONNS) < 0 ||
        epoll_ctl(tc->epfd, EPOLL_CTL_ADD, tc->listen_fd, &l) < 0 ||
        epoll_ctl(tc->epfd, EPOLL_CTL_ADD, ipb_mcp_servers_done_fd(servers), &d) < 0 ||
        epoll_ctl(tc->epfd, EPOLL_CTL_ADD, ipb_mcp_servers_fd(servers), &x) < 0) {
        ipb_error_set(err, errno, "creating the tool channel's socket");
        ipb_toolchan_close(tc);
        return NULL;
    }
    servers->job_done = orphan_done;
    servers->job_done_ud = tc;
    return tc;
}

void ipb_toolchan_close(ipb_toolchan *tc) {
    if (!tc)
        return;
    for (size_t i = 0; i < IPB_TOOLCHAN_MAX_CONNS; i++)
        conn_free(tc, i);
    if (tc->servers && tc->servers->job_done_ud == tc) {
        tc->servers->job_done = NULL;
        tc->servers->job_done_ud = NULL;
    }
    if (tc->listen_fd >= 0)
        close(tc->listen_fd);
    if (tc->epfd >= 0)
        close(tc->epfd);
    free(tc);
}
