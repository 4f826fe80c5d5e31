/* The relay: each direction moves bytes socket -> pipe -> socket with splice(), so they never
 * pass through user space. Sockets are edge-triggered; a pump runs each direction until it
 * would block, or until its budget is spent (then the connection waits its turn on the ready
 * list, so one fast transfer cannot starve the others). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy_int.h"

#define PIPE_SIZE (1024 * 1024)
#define BUDGET (4 * 1024 * 1024)

int relay_start(struct conn *c) {
    for (int d = 0; d < 2; d++) {
        if (pipe2(c->h[d].pipe, O_NONBLOCK | O_CLOEXEC) < 0)
            return -1;
        fcntl(c->h[d].pipe[1], F_SETPIPE_SZ, PIPE_SIZE);
    }
    struct half *up = &c->h[0];
    /* A CONNECT was answered before its tunnel's first bytes were read (conn.c); buf
     * holds just those. Otherwise buf holds what was sniffed. */
    up->pre = c->buf;
    up->pre_len = c->len;
    c->st = C_RELAY;
    return 0;
}

/* 1: blocked (wait for an event), 0: budget spent, -1: the connection is over. */
static int pump_half(struct conn *c, int d, size_t *budget) {
    struct half *h = &c->h[d];
    int src = d == 0 ? c->cw.fd : c->uw.fd;
    int dst = d == 0 ? c->uw.fd : c->cw.fd;
    for (;;) {
        if (h->pre_off < h->pre_len) {
            ssize_t n = send(dst, h->pre + h->pre_off, h->pre_len - h->pre_off, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n < 0)
                return errno == EAGAIN ? 1 : errno == EINTR ? 0 : -1;
            h->pre_off += (size_t)n;
            continue;
        }
        if (h->pending) {
            ssize_t n = splice(h->pipe[0], NULL, dst, NULL, h->pending, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n < 0)
                return errno == EAGAIN ? 1 : errno == EINTR ? 0 : -1;
            h->pending -= (size_t)n;
            continue;
        }
        if (h->eof) {
            if (!h->shut) {
                shutdown(dst, SHUT_WR);
                h->shut = true;
            }
            return 1;
        }
        if (*budget == 0)
            return 0;
        ssize_t n = splice(src, NULL, h->pipe[1], NULL, PIPE_SIZE, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n == 0) {
            h->eof = true;
            continue;
        }
        if (n < 0) {
            if (errno == EAGAIN)
                return 1;
            if (errno == EINTR)
                return 0;
            return -1;
        }
        h->pending += (size_t)n;
        *budget = *budget > (size_t)n ? *budget - (size_t)n : 0;
    }
}

void relay_pump(struct conn *c) {
    if (c->dead || c->st != C_RELAY)
        return;
    size_t budget = BUDGET;
    bool again = false;
    for (int d = 0; d < 2; d++) {
        if (d == 0 && c->judge_late)
            continue; /* conn_late_peek reads the client until its first bytes are judged */
        int r = pump_half(c, d, &budget);
        if (r < 0) {
            proxy_close_conn(c);
            return;
        }
        if (r == 0)
            again = true;
        budget = BUDGET;
    }
    if (c->h[0].shut && c->h[1].shut) {
        proxy_close_conn(c);
        return;
    }
    if (again && !c->on_ready) {
        c->on_ready = true;
        c->ready_next = c->p->ready;
        c->p->ready = c;
    }
}
