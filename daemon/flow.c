/* Backpressure from clients to workers. A session's worker link is read only while every
 * client it is sending to (the one whose call runs, whose call waits for an answer, or who is
 * asked an approval question) has at most IPBD_OUT_HIGH bytes unwritten; past that the link is
 * taken off the epoll set, the worker's writes fill the socket and it blocks (or queues within
 * its own bound), and reading resumes once those clients are down to IPBD_OUT_LOW. The daemon
 * goes on serving everything else meanwhile: pings, notifications/cancelled and every other
 * session. What one client can hold: IPBD_OUT_HIGH plus the one message that crossed it. */
#include <sys/epoll.h>

#include "daemon_int.h"
#include "log.h"

size_t ipbd_out_queued(const struct ipbd_out *o) { return o->buf.len - o->off; }

static bool over(struct ipbd *d, uint64_t client_id, size_t mark) {
    struct ipbd_client *c = client_id ? ipbd_client_find(d, client_id) : NULL;
    return c && ipbd_out_queued(&c->out) > mark;
}

bool ipbd_flow_blocked(struct ipbd *d, const struct ipbd_session *s) {
    size_t mark = s->paused ? IPBD_OUT_LOW : IPBD_OUT_HIGH;
    for (const struct ipbd_pending *p = s->pending; p; p = p->next)
        if (over(d, p->client_id, mark))
            return true;
    for (const struct ipbd_ask *a = s->asks; a; a = a->next)
        if (over(d, a->client, mark))
            return true;
    return false;
}

void ipbd_flow_pause(struct ipbd *d, struct ipbd_session *s) {
    if (s->paused || s->link.fd < 0)
        return;
    /* Off the set, not merely without EPOLLIN: a worker that ends would report EPOLLHUP
     * at every wait. Its exit (SIGCHLD) reads what is left. */
    epoll_ctl(d->ep, EPOLL_CTL_DEL, s->link.fd, NULL);
    s->paused = true;
    log_debug("session %s: a client is not reading; the worker's output waits", s->name);
}

void ipbd_flow_resume(struct ipbd *d, struct ipbd_session *s) {
    if (!s->paused || s->link.fd < 0)
        return;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->link};
    epoll_ctl(d->ep, EPOLL_CTL_ADD, s->link.fd, &ev);
    s->link.events = EPOLLIN;
    s->paused = false;
    log_debug("session %s: its clients read again; the worker's output flows", s->name);
}
