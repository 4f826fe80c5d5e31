/* Many requests over one connection (stdio, legacy SSE): each call registers its id in a table
 * and waits on its own eventfd; one reader thread per client reads everything the server sends,
 * hands each answer to the call waiting for its id, answers the server's requests, and skips
 * (logs and counts) answers nobody waits for. A call ends on its own answer, its cancel fd, its
 * deadline (both sent notifications/cancelled for its id), or for all at once when the connection
 * fails or the client is shut down. The reader never starts processes. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mcpc_core.h"

__thread bool mcpc_in_reader;

/* How long the reader waits in one recv() before it simply waits again. */
#define READER_WAIT_MS 3600000L
/* While answers wait for the write lock, how often the reader looks whether it is free. */
#define LATER_RETRY_MS 20
/* Answers that may wait for it; past that the reader waits for the lock. */
#define MAX_LATER 256

struct mcpc_later {
    mcpc_later *next;
    size_t len;
    char text[];
};

/* Sends the queued answers, oldest first, if the write lock is free (or, with wait, once it is,
 * until deadline). Returns 0 when none is left, 1 when they still wait, -1 on error. */
static int flush_later(ipb_mcpc *c, bool wait, long deadline, ipb_error **err) {
    if (!c->later_head)
        return 0;
    if (mcpc_write_begin(c, wait ? deadline : 0, -1) != 0) {
        if (wait)
            return mcpc_fail(err, ETIMEDOUT, "answers to the server's requests could not be written in time");
        return 1;
    }
    int r = 0;
    while (c->later_head && r == 0) {
        mcpc_later *l = c->later_head;
        if (c->t->ops->send(c->t, l->text, l->len, MCPC_MSG_RESPONSE, deadline, err) < 0)
            r = -1;
        c->later_head = l->next;
        c->nlater--;
        free(l);
    }
    if (!c->later_head)
        c->later_tail = NULL;
    mcpc_write_end(c);
    return r;
}

int mcpc_mux_answer(ipb_mcpc *c, const char *text, size_t len, long deadline, ipb_error **err) {
    mcpc_later *l = malloc(sizeof(*l) + len);
    if (!l)
        return mcpc_fail(err, ENOMEM, "out of memory");
    l->next = NULL;
    l->len = len;
    memcpy(l->text, text, len);
    if (c->later_tail)
        c->later_tail->next = l;
    else
        c->later_head = l;
    c->later_tail = l;
    c->nlater++;
    return flush_later(c, c->nlater > MAX_LATER, deadline, err) < 0 ? -1 : 0;
}

static void later_free(ipb_mcpc *c) {
    while (c->later_head) {
        mcpc_later *l = c->later_head;
        c->later_head = l->next;
        free(l);
    }
    c->later_tail = NULL;
    c->nlater = 0;
}

struct mcpc_pending {
    mcpc_pending *next;
    json_int_t id;
    int efd;        /* written once the call is done */
    json_t *resp;   /* its answer */
    ipb_error *err; /* or why it cannot get one */
    bool done;
};

static void wake(mcpc_pending *p) {
    uint64_t one = 1;
    ssize_t w = write(p->efd, &one, sizeof(one));
    (void)w; /* an eventfd only fails to count past 2^64-2 */
}

static ipb_error *error_copy(const ipb_error *e) {
    ipb_error *n = calloc(1, sizeof(*n));
    if (!n)
        return NULL;
    n->errnum = e ? e->errnum : EPIPE;
    n->msg = strdup(e && e->msg ? e->msg : "the connection failed");
    return n;
}

/* Under c->lock: why nobody waits for an answer to n. */
static const char *why_unwanted(ipb_mcpc *c, json_int_t n) {
    if (n < 1 || n >= __atomic_load_n(&c->next_id, __ATOMIC_RELAXED))
        return "no request with this id was sent";
    unsigned have = c->gave_up_next < MCPC_GAVE_UP_RING ? c->gave_up_next : MCPC_GAVE_UP_RING;
    for (unsigned i = 0; i < have; i++)
        if (c->gave_up[i] == n)
            return "a late answer to a call given up on (cancelled or timed out)";
    return "answered already, or given up on long ago";
}

static int mux_response(ipb_mcpc *c, void *ctx, json_t *id, json_t *msg) {
    (void)ctx;
    if (!json_is_integer(id)) {
        mcpc_stray(c, id, "no request with this id was sent");
        json_decref(msg);
        return 0;
    }
    json_int_t n = json_integer_value(id);
    const char *why;
    pthread_mutex_lock(&c->lock);
    mcpc_pending *p = c->pending;
    while (p && p->id != n)
        p = p->next;
    if (p && !p->done) {
        p->resp = msg;
        p->done = true;
        wake(p);
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    why = p ? "a second answer to it" : why_unwanted(c, n);
    pthread_mutex_unlock(&c->lock);
    mcpc_stray(c, id, why);
    json_decref(msg);
    return 0;
}

void mcpc_mux_fail_all(ipb_mcpc *c, const ipb_error *e) {
    pthread_mutex_lock(&c->lock);
    if (c->alive) {
        c->alive = false;
        free(c->dead_reason);
        c->dead_reason = strdup(ipb_error_msg(e));
        c->dead_errnum = e ? e->errnum : EPIPE;
    }
    for (mcpc_pending *p = c->pending; p; p = p->next) {
        if (p->done)
            continue;
        p->err = error_copy(e);
        p->done = true;
        wake(p);
    }
    pthread_mutex_unlock(&c->lock);
}

/* Writing failed over the one connection (a message may be half written): every call ends with
 * EPIPE and this reason, whatever the writer's own error was (its ETIMEDOUT is not theirs), and
 * the transport is stopped. */
static void fail_all_written(ipb_mcpc *c, const ipb_error *e, const char *what) {
    ipb_error *all = NULL;
    mcpc_fail(&all, EPIPE, "%s failed (%s); the connection is closed", what, ipb_error_msg(e));
    mcpc_mux_fail_all(c, all);
    ipb_error_free(all);
    if (c->t->ops->kill)
        c->t->ops->kill(c->t);
}

static void *reader_main(void *arg) {
    ipb_mcpc *c = arg;
    mcpc_transport *t = c->t;
    mcpc_in_reader = true;
    for (;;) {
        char *text = NULL;
        size_t len = 0;
        ipb_error *e = NULL;
        int waiting = flush_later(c, false, ipb_now_ms() + c->limits.call_ms, &e);
        if (waiting < 0) {
            fail_all_written(c, e, "writing an answer to the server's request");
            ipb_error_free(e);
            break;
        }
        if (t->ops->recv(t, ipb_now_ms() + (waiting ? LATER_RETRY_MS : READER_WAIT_MS), &text, &len, &e) < 0) {
            int n = e ? e->errnum : EPIPE;
            if (n == ETIMEDOUT) {
                ipb_error_free(e);
                continue;
            }
            if (n != ESHUTDOWN) /* else: closing, or shut down (the calls were ended then) */
                mcpc_mux_fail_all(c, e);
            ipb_error_free(e);
            break;
        }
        size_t before = c->bad_in_a_row;
        int r = mcpc_handle_text(c, t, text, len, mux_response, NULL, &c->bad_in_a_row,
                                 ipb_now_ms() + c->limits.call_ms, &e);
        free(text);
        if (r < 0 && e && e->errnum == EMSGSIZE) { /* as a message over the size limit */
            mcpc_set_broken(t);
            mcpc_mux_fail_all(c, e);
            ipb_error_free(e);
            if (t->ops->kill)
                t->ops->kill(t);
            break;
        }
        if (r < 0) {
            fail_all_written(c, e, "writing an answer to the server's request");
            ipb_error_free(e);
            break;
        }
        if (c->bad_in_a_row == before) {
            c->bad_in_a_row = 0;
        } else if (c->bad_in_a_row >= MCPC_MAX_MALFORMED) {
            mcpc_set_broken(t);
            mcpc_fail(&e, EPROTO,
                      "the server sent %zu malformed messages and no response (in a row); the connection is closed",
                      c->bad_in_a_row);
            mcpc_mux_fail_all(c, e);
            ipb_error_free(e);
            break;
        }
    }
    later_free(c);
    return NULL;
}

int mcpc_mux_start(ipb_mcpc *c, ipb_error **err) {
    c->t->cancel_fd = -1;
    c->t->stop_fd = c->stop_fd;
    c->t->has_reader = true;
    c->mux = true;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&c->reader, NULL, reader_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0) {
        c->mux = false;
        c->t->has_reader = false;
        return mcpc_fail(err, r, "cannot start the reader thread: %s", strerror(r));
    }
    return 0;
}

void mcpc_mux_join(ipb_mcpc *c) {
    if (!c->mux)
        return;
    pthread_join(c->reader, NULL);
    c->mux = false;
}

static void unlink_pending(ipb_mcpc *c, mcpc_pending *p) {
    for (mcpc_pending **pp = &c->pending; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            return;
        }
    }
}

/* Whether a failed send leaves the connection unusable: over stdio a message may be half written;
 * over legacy SSE each message is a POST of its own, and only a failed connection counts. */
static bool send_failure_fatal(ipb_mcpc *c, const ipb_error *e) {
    if (c->transport_kind == IPB_MCP_STDIO || mcpc_is_broken(c->t))
        return true;
    int n = e ? e->errnum : 0;
    return n == EPIPE || n == ECONNRESET || n == ECONNREFUSED;
}

json_t *mcpc_exchange_mux(ipb_mcpc *c, json_int_t id, json_t *msg, int cancel_fd, long deadline, ipb_error **err) {
    mcpc_pending *p = calloc(1, sizeof(*p));
    if (!p) {
        mcpc_fail(err, ENOMEM, "out of memory");
        return NULL;
    }
    p->id = id;
    p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (p->efd < 0) {
        ipb_error_set(err, errno, "cannot make an eventfd for the call");
        free(p);
        return NULL;
    }
    json_t *resp = NULL;
    pthread_mutex_lock(&c->lock);
    if (!c->alive) {
        mcpc_fail(err, c->dead_errnum ? c->dead_errnum : EPIPE, "the connection is closed (%s)",
                  c->dead_reason ? c->dead_reason : "unknown reason");
        pthread_mutex_unlock(&c->lock);
        goto out;
    }
    p->next = c->pending;
    c->pending = p;
    pthread_mutex_unlock(&c->lock);

    ipb_error *e = NULL;
    int r = mcpc_send_json_or_cancel(c, c->t, msg, MCPC_MSG_REQUEST, deadline, cancel_fd, &e);
    if (r < 0) {
        pthread_mutex_lock(&c->lock);
        unlink_pending(c, p);
        pthread_mutex_unlock(&c->lock);
        if (r == -1 && send_failure_fatal(c, e))
            fail_all_written(c, e, "writing a request");
        *err = e;
        goto out;
    }

    bool cancelled = false, stopped = false;
    for (;;) {
        struct pollfd pf[3] = {
            {p->efd, POLLIN, 0}, {c->stop_fd, POLLIN, 0}, {cancel_fd, cancel_fd >= 0 ? POLLIN : 0, 0}};
        long left = mcpc_ms_left(deadline);
        int n = poll(pf, 3, left > 1000000 ? 1000000 : (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            ipb_error_set(err, errno, "poll failed");
            break;
        }
        if (pf[0].revents & POLLIN)
            break;
        if (pf[1].revents & POLLIN) {
            stopped = true;
            break;
        }
        if (pf[2].revents & POLLIN) {
            cancelled = true;
            break;
        }
        if (n == 0 && mcpc_ms_left(deadline) == 0)
            break;
    }
    pthread_mutex_lock(&c->lock);
    unlink_pending(c, p);
    bool done = p->done;
    pthread_mutex_unlock(&c->lock);
    if (*err)
        goto out;
    if (done) { /* its answer, or why there is none, wins over a cancel at the same moment */
        resp = p->resp;
        p->resp = NULL;
        if (!resp) {
            *err = p->err;
            p->err = NULL;
            if (!*err)
                mcpc_fail(err, ENOMEM, "out of memory");
        }
        goto out;
    }
    if (stopped) {
        mcpc_fail(err, EPIPE, "the client was shut down");
        goto out;
    }
    mcpc_gave_up(c, id);
    mcpc_send_cancelled(c, c->t, id, cancelled ? "the caller is gone" : "the caller's time is up");
    if (cancelled)
        mcpc_fail(err, ECANCELED, "the call was cancelled");
    else
        mcpc_fail(err, ETIMEDOUT, "no answer before the deadline");
out:
    json_decref(p->resp);
    ipb_error_free(p->err);
    close(p->efd);
    free(p);
    return resp;
}
