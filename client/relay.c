/* The bridge's relay between an MCP client on stdio and its daemon session. Bytes go both ways
 * as they come, but tool calls are passed on one at a time: the next when the daemon has
 * answered the one before (or the client cancelled it), so calls not yet started stay here.
 * When stdin ends (no more requests): the running call finishes and its answer is written;
 * a call still held starts only if the client is reading, that is stdout is open and what was
 * written to it has been taken (within RELAY_DRAIN_MS); otherwise the held calls are dropped
 * unstarted and the bridge leaves. The same rule as the embedded supervisor's: EOF on stdin
 * alone ends nothing that runs, and starts nothing that nobody would read. A line from the
 * client longer than JSON-RPC's 16 MiB is answered here (by its id when it can be read) and
 * dropped, as the daemon would: the relay's memory stays bounded, and the call it held is not
 * left waiting for an answer the daemon could not address. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fdio.h"
#include "jsonrpc.h"
#include "log.h"
#include "strbuf.h"

/* How long a client that closed stdin has to take the last answer before held calls start. */
#define RELAY_DRAIN_MS 5000L
/* Calls held at once, and their bytes: past either, a call is answered with an error. */
#define RELAY_HELD_MAX 64u
#define RELAY_HELD_BYTES (64u << 20)

struct held {
    char *line; /* with its '\n' */
    size_t len;
    json_t *id;
    struct held *next;
};

struct relay {
    int fd;
    ipb_buf in, from; /* partial lines from stdin and from the daemon */
    json_t *running;  /* the id of the call passed on and not answered yet */
    struct held *head, *tail;
    unsigned nheld;
    size_t held_bytes;
    bool in_open, shut;
    bool in_discarding;  /* inside an oversized line from the client, dropping to its newline */
    long drain_deadline; /* stdin closed, a call held: the client must read by then */
    bool failed;         /* the daemon or stdout is gone */
};

static long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* Whether the reader of fd has taken everything written to it: a pipe or socket with nothing
 * left in it. Anything else (a file, a terminal) counts as read. */
static bool drained(int fd) {
    struct stat st;
    int n = 0;
    if (fstat(fd, &st) < 0)
        return false;
    if (S_ISFIFO(st.st_mode) && ioctl(fd, FIONREAD, &n) < 0)
        return false;
    if (S_ISSOCK(st.st_mode) && ioctl(fd, SIOCOUTQ, &n) < 0)
        return false;
    return n == 0;
}

/* Whether nobody reads our stdout any more. */
static bool stdout_gone(void) {
    struct pollfd p = {1, POLLOUT, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
}

static void to_daemon(struct relay *r, const char *data, size_t len) {
    if (!r->failed && ipb_write_all(r->fd, data, len) < 0) {
        log_error("ipyboxd closed the connection");
        r->failed = true;
    }
}

static void answer_error_code(struct relay *r, json_t *id, int code, const char *msg) {
    json_t *m = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", "code",
                          code, "message", msg);
    char *s = m ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    if (s && (ipb_write_all(1, s, strlen(s)) < 0 || ipb_write_all(1, "\n", 1) < 0))
        r->failed = true;
    free(s);
}

static void answer_error(struct relay *r, json_t *id, const char *msg) { answer_error_code(r, id, -32603, msg); }

/* A line over the limit, of which text[0..len) is at hand: answered, not passed on. */
static void too_large(struct relay *r, const char *text, size_t len) {
    json_t *id = jrpc_peek_id(text, len);
    answer_error_code(r, id, JRPC_INVALID_REQUEST, JRPC_TOO_LARGE_MSG);
    json_decref(id);
}

static void drop_held(struct relay *r) {
    while (r->head) {
        struct held *h = r->head;
        r->head = h->next;
        free(h->line);
        json_decref(h->id);
        free(h);
    }
    r->tail = NULL;
    r->nheld = 0;
    r->held_bytes = 0;
}

/* Once nothing is running or held and stdin has ended: the daemon is told (half-close) and
 * closes the connection when its last answer is written. */
static void maybe_shut(struct relay *r) {
    if (!r->in_open && !r->running && !r->head && !r->shut) {
        shutdown(r->fd, SHUT_WR);
        r->shut = true;
    }
}

/* Passes on the next held call if none runs and the client still takes what we write. */
static void next_call(struct relay *r) {
    if (r->running || !r->head || r->failed)
        return;
    if (!r->in_open && !drained(1)) {
        if (!r->drain_deadline)
            r->drain_deadline = now_ms() + RELAY_DRAIN_MS;
        if (now_ms() < r->drain_deadline)
            return;
        log_warn("the client closed stdin and is not reading: %u queued call%s not started", r->nheld,
                 r->nheld == 1 ? "" : "s");
        drop_held(r);
        r->drain_deadline = 0;
        maybe_shut(r);
        return;
    }
    r->drain_deadline = 0;
    struct held *h = r->head;
    r->head = h->next;
    if (!r->head)
        r->tail = NULL;
    r->nheld--;
    r->held_bytes -= h->len;
    r->running = h->id;
    to_daemon(r, h->line, h->len);
    free(h->line);
    free(h);
}

/* One line from the client (with its '\n'). */
static void client_line(struct relay *r, char *line, size_t len) {
    if (len > JRPC_MAX_LINE + 1) {
        too_large(r, line, len);
        return;
    }
    json_t *m = json_loadb(line, len, 0, NULL);
    const char *method = json_string_value(json_object_get(m, "method"));
    json_t *id = json_object_get(m, "id");
    if (method && !strcmp(method, "tools/call") && id && !json_is_null(id)) {
        if (!r->running && !r->head) {
            r->running = json_incref(id);
            to_daemon(r, line, len);
        } else if (r->nheld >= RELAY_HELD_MAX || r->held_bytes + len > RELAY_HELD_BYTES) {
            answer_error(r, id, "Too many queued tool calls (64)");
        } else {
            struct held *h = calloc(1, sizeof(*h));
            char *copy = malloc(len);
            if (!h || !copy) {
                free(h);
                free(copy);
                answer_error(r, id, "Out of memory");
            } else {
                memcpy(copy, line, len);
                *h = (struct held){copy, len, json_incref(id), NULL};
                if (r->tail)
                    r->tail->next = h;
                else
                    r->head = h;
                r->tail = h;
                r->nheld++;
                r->held_bytes += len;
            }
        }
    } else if (method && !strcmp(method, "notifications/cancelled")) {
        json_t *rid = json_object_get(json_object_get(m, "params"), "requestId");
        bool was_held = false;
        for (struct held **hp = &r->head, *prev = NULL; rid && *hp; prev = *hp, hp = &(*hp)->next)
            if (json_equal((*hp)->id, rid)) {
                struct held *h = *hp;
                *hp = h->next;
                if (r->tail == h)
                    r->tail = prev;
                r->nheld--;
                r->held_bytes -= h->len;
                free(h->line);
                json_decref(h->id);
                free(h);
                was_held = true; /* never started: nothing to tell the daemon */
                break;
            }
        if (!was_held)
            to_daemon(r, line, len);
        if (r->running && rid && json_equal(rid, r->running)) {
            json_decref(r->running); /* a cancelled call is not answered */
            r->running = NULL;
            next_call(r);
        }
    } else {
        to_daemon(r, line, len);
    }
    json_decref(m);
}

/* One line from the daemon: the answer to the running call lets the next one go. */
static void daemon_line(struct relay *r, const char *line, size_t len) {
    static const char notification[] = "{\"jsonrpc\":\"2.0\",\"method\":";
    if (!r->running || (len >= sizeof(notification) - 1 && !memcmp(line, notification, sizeof(notification) - 1)))
        return; /* progress and the like: not an answer, and not worth parsing */
    json_t *m = json_loadb(line, len, 0, NULL);
    if (json_is_object(m) && !json_object_get(m, "method") && json_equal(json_object_get(m, "id"), r->running)) {
        json_decref(r->running);
        r->running = NULL;
        next_call(r);
        maybe_shut(r);
    }
    json_decref(m);
}

/* Splits buf into lines for fn; the partial rest stays. */
static void lines(struct relay *r, ipb_buf *buf, void (*fn)(struct relay *, char *, size_t), bool keep_nl) {
    size_t start = 0;
    for (;;) {
        char *nl = start < buf->len ? memchr(buf->data + start, '\n', buf->len - start) : NULL;
        if (!nl)
            break;
        size_t end = (size_t)(nl - buf->data) + 1;
        fn(r, buf->data + start, keep_nl ? end - start : end - start - 1);
        start = end;
    }
    ipb_buf_consume(buf, start);
}

static void daemon_line_cb(struct relay *r, char *line, size_t len) { daemon_line(r, line, len); }

int cli_relay(int fd) {
    struct relay r = {.fd = fd, .in_open = true};
    char buf[65536];
    while (!r.failed) {
        int timeout = -1;
        if (r.drain_deadline) {
            next_call(&r); /* the client may have read meanwhile */
            timeout = 50;
        }
        /* With stdin open, a client that stops reading is found when a write fails; once it
         * is closed, stdout is watched (POLLERR: the reader is gone) so leaving is not put off
         * until the running call's answer. */
        struct pollfd p[3] = {{r.in_open ? 0 : -1, POLLIN, 0}, {fd, POLLIN, 0}, {r.in_open ? -1 : 1, 0, 0}};
        if (poll(p, 3, timeout) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[2].revents & (POLLERR | POLLHUP))
            break; /* nobody reads: leaving cancels what runs */
        if (p[0].revents) {
            ssize_t n = read(0, buf, sizeof(buf));
            if (n < 0 && errno == EINTR)
                continue;
            if (n > 0) {
                const char *data = buf;
                size_t len = (size_t)n;
                if (r.in_discarding) {
                    const char *nl = memchr(data, '\n', len);
                    r.in_discarding = !nl;
                    len = nl ? len - (size_t)(nl + 1 - data) : 0;
                    data = nl ? nl + 1 : data;
                }
                ipb_buf_append(&r.in, data, len);
                lines(&r, &r.in, client_line, true);
                if (r.in.len > JRPC_MAX_LINE) {
                    too_large(&r, r.in.data, r.in.len);
                    ipb_buf_free(&r.in);
                    r.in_discarding = true;
                }
            } else {
                /* No more requests. Nobody reading either: leaving cancels what runs. */
                r.in_open = false;
                if (r.in.len) {
                    ipb_buf_append(&r.in, "\n", 1);
                    lines(&r, &r.in, client_line, true);
                }
                if (stdout_gone())
                    break;
                next_call(&r);
                maybe_shut(&r);
            }
        }
        if (p[1].revents) {
            ssize_t n = read(fd, buf, sizeof(buf));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                if (r.in_open)
                    log_error("ipyboxd closed the connection");
                break;
            }
            if (ipb_write_all(1, buf, (size_t)n) < 0)
                break; /* the MCP client is gone */
            ipb_buf_append(&r.from, buf, (size_t)n);
            lines(&r, &r.from, daemon_line_cb, false);
        }
    }
    drop_held(&r);
    json_decref(r.running);
    ipb_buf_free(&r.in);
    ipb_buf_free(&r.from);
    return 0;
}
