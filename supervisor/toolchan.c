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

enum conn_state { C_READING, C_QUEUED, C_APPROVING, C_APPROVED, C_RUNNING, C_WRITING };

typedef struct conn {
    int fd;
    enum conn_state state;
    unsigned long seq;
    bool gone;          /* the caller hung up while its call ran */
    ipb_buf in, out;
    json_t *root;       /* the parsed request */
    const char *server, *tool;
    json_t *args;
} conn;

struct ipb_toolchan {
    int listen_fd, epfd;
    ipb_mcp_servers *servers;
    ipb_toolchan_hooks hooks;
    conn *conns[IPB_TOOLCHAN_MAX_CONNS];
    conn *current;      /* being approved or run */
    bool in_cell;       /* a cell runs: calls may be approved and started */
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
    if (tc->current == c)
        tc->current = NULL;
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
    if (tc->current == c)
        tc->current = NULL;
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

static void on_request(ipb_toolchan *tc, size_t slot, size_t len) {
    conn *c = tc->conns[slot];
    (void)len;
    if (check_request(tc, slot) < 0)
        return;
    /* While it waits, only the line is kept: a parsed tree can be tens of times larger. It is
     * parsed (and checked against the registry) again when its turn comes. */
    json_decref(c->root);
    c->root = NULL;
    c->server = c->tool = NULL;
    c->args = NULL;
    c->state = C_QUEUED;
    c->seq = tc->next_seq++;
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
            on_request(tc, slot, c->in.len);
            return;
        }
    }
}

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
                                       "(16 waiting)\"}}\n";
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
    if (slot < IPB_TOOLCHAN_MAX_CONNS && c->state == C_RUNNING) {
        if (j->err)
            log_info("tool call %s/%s: %s", c->server, c->tool, ipb_error_msg(j->err));
        if (c->gone)
            conn_free(tc, slot);
        else
            reply(tc, slot, ipb_toolmsg_reply(j->result, j->err));
    }
    ipb_tool_job_free(j);
}

static void orphan_done(void *ud, ipb_tool_job *j) { on_job_done(ud, j); }

static void start_job(ipb_toolchan *tc, conn *c) {
    size_t slot = slot_of(tc, c);
    ipb_tool_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->tool = strdup(c->tool))) {
        free(j);
        reply_error(tc, slot, "failed", "out of memory");
        return;
    }
    j->entry = ipb_mcp_servers_get(tc->servers, c->server);
    j->args = json_incref(c->args);
    j->limits = &tc->servers->limits;
    j->cancel_fd = ipb_toolrun_cancel_fd(tc->servers->run);
    j->ud = c;
    if (!ipb_toolrun_submit(tc->servers->run, ipb_tool_job_run, j)) {
        ipb_tool_job_free(j);
        c->state = C_APPROVED; /* the thread is still busy: started once it is free */
        return;
    }
    c->state = C_RUNNING;
}

/* The decision on the current call (no advance). */
static void decide_current(ipb_toolchan *tc, bool approved, const char *why) {
    conn *c = tc->current;
    if (!c || c->state != C_APPROVING)
        return;
    size_t slot = slot_of(tc, c);
    if (!approved) {
        log_info("tool call %s/%s rejected%s%s", c->server, c->tool, why ? ": " : "", why ? why : "");
        reply_error(tc, slot, "rejected", "the call of tool '%s' of MCP server '%s' was rejected%s%s", c->tool,
                    c->server, why ? ": " : "", why ? why : "");
        return;
    }
    log_debug("tool call %s/%s approved", c->server, c->tool);
    if (!ipb_toolrun_busy(tc->servers->run))
        start_job(tc, c);
    else
        c->state = C_APPROVED;
}

/* Takes waiting calls in arrival order until one waits for a decision or runs. */
static void advance(ipb_toolchan *tc) {
    for (;;) {
        if (tc->current) {
            if (tc->current->state == C_APPROVED && !ipb_toolrun_busy(tc->servers->run))
                start_job(tc, tc->current);
            return;
        }
        if (!tc->in_cell)
            return;
        conn *next = NULL;
        for (size_t i = 0; i < IPB_TOOLCHAN_MAX_CONNS; i++) {
            conn *c = tc->conns[i];
            if (c && c->state == C_QUEUED && (!next || c->seq < next->seq))
                next = c;
        }
        if (!next)
            return;
        if (check_request(tc, slot_of(tc, next)) < 0) /* the registry may have changed */
            continue;
        tc->current = next;
        next->state = C_APPROVING;
        char *why = NULL;
        enum ipb_approval a = tc->hooks.approve
                                  ? tc->hooks.approve(tc->hooks.ud, next->server, next->tool, next->args, &why)
                                  : IPB_REJECTED;
        if (a == IPB_APPROVAL_PENDING)
            return;
        decide_current(tc, a == IPB_APPROVED, why);
        free(why);
    }
}

void ipb_toolchan_decide(ipb_toolchan *tc, bool approved, const char *why) {
    decide_current(tc, approved, why);
    advance(tc);
}

bool ipb_toolchan_waiting(const ipb_toolchan *tc) { return tc && tc->current && tc->current->state == C_APPROVING; }

void ipb_toolchan_pump(ipb_toolchan *tc, bool in_cell) {
    tc->in_cell = in_cell;
    struct epoll_event evs[32];
    int n = epoll_wait(tc->epfd, evs, 32, 0);
    for (int i = 0; i < n; i++) {
        uint64_t tag = evs[i].data.u64;
        if (tag == TAG_LISTEN) {
            on_accept(tc);
        } else if (tag == TAG_DONE) {
            ipb_tool_job *j = ipb_toolrun_take(tc->servers->run);
            if (j)
                on_job_done(tc, j);
            ipb_mcp_servers_reap(tc->servers); /* exits seen while the thread was busy */
        } else if (tag == TAG_EXITS) {
            ipb_mcp_servers_reap(tc->servers);
        } else {
            size_t slot = (size_t)(tag - TAG_CONN0);
            conn *c = slot < IPB_TOOLCHAN_MAX_CONNS ? tc->conns[slot] : NULL;
            if (!c)
                continue;
            if (c->state == C_READING && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
                on_readable(tc, slot);
            } else if (c->state == C_WRITING) {
                if (evs[i].events & (EPOLLHUP | EPOLLERR))
                    conn_free(tc, slot);
                else
                    flush_out(tc, slot);
            } else if (evs[i].events & (EPOLLHUP | EPOLLERR)) {
                /* The caller is gone (an interrupted cell closes its socket). */
                if (c->state == C_APPROVING && tc->hooks.withdraw)
                    tc->hooks.withdraw(tc->hooks.ud);
                if (c->state == C_RUNNING) {
                    /* Nobody waits for the answer: the call is cancelled at the server. */
                    log_info("tool call %s/%s: the caller is gone; cancelling it", c->server, c->tool);
                    c->gone = true;
                    watch(tc, slot, 0);
                    epoll_ctl(tc->epfd, EPOLL_CTL_DEL, c->fd, NULL);
                    ipb_toolrun_cancel(tc->servers->run);
                } else {
                    conn_free(tc, slot);
                }
            }
        }
    }
    advance(tc);
}

void ipb_toolchan_cell_ended(ipb_toolchan *tc) {
    if (!tc)
        return;
    ipb_toolchan_pump(tc, false);
    conn *c = tc->current;
    if (c && c->state == C_APPROVING) {
        if (tc->hooks.withdraw)
            tc->hooks.withdraw(tc->hooks.ud);
        /* Asked again in the next cell. */
        json_decref(c->root);
        c->root = NULL;
        c->state = C_QUEUED;
        tc->current = NULL;
    }
}

void ipb_toolchan_interrupted(ipb_toolchan *tc) {
    if (!tc)
        return;
    tc->in_cell = false;
    conn *c = tc->current;
    if (c && c->state == C_APPROVING) {
        if (tc->hooks.withdraw)
            tc->hooks.withdraw(tc->hooks.ud);
        decide_current(tc, false, "the cell was interrupted while the application was asked");
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
        fchmodat(servers->dir_fd, IPB_TOOLCHAN_SOCKET, 0666, 0) < 0 || listen(tc->listen_fd, 16) < 0 ||
        epoll_ctl(tc->epfd, EPOLL_CTL_ADD, tc->listen_fd, &l) < 0 ||
        epoll_ctl(tc->epfd, EPOLL_CTL_ADD, ipb_toolrun_fd(servers->run), &d) < 0 ||
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
