#include "callpool.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct ipb_call {
    ipb_callpool *pool;
    pthread_t thread;
    void (*fn)(void *, int);
    void *arg;
    int cancel_fd; /* eventfd */
    bool done;
    ipb_call *next;
};

struct ipb_callpool {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a call finished */
    int done_fd;       /* eventfd: readable while a finished call waits */
    ipb_call *calls;   /* started, not taken */
    size_t n;
};

static void *call_main(void *p) {
    ipb_call *c = p;
    c->fn(c->arg, c->cancel_fd);
    ipb_callpool *pool = c->pool;
    pthread_mutex_lock(&pool->mu);
    c->done = true;
    uint64_t one = 1;
    (void)!write(pool->done_fd, &one, sizeof(one));
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

ipb_callpool *ipb_callpool_new(ipb_error **err) {
    ipb_callpool *p = calloc(1, sizeof(*p));
    if (!p) {
        ipb_error_set(err, ENOMEM, "preparing tool calls");
        return NULL;
    }
    p->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (p->done_fd < 0) {
        ipb_error_set(err, errno, "preparing tool calls: eventfd");
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    return p;
}

int ipb_callpool_fd(const ipb_callpool *p) { return p->done_fd; }

ipb_call *ipb_callpool_start(ipb_callpool *p, void (*fn)(void *, int), void *arg, ipb_error **err) {
    ipb_call *c = calloc(1, sizeof(*c));
    if (!c) {
        ipb_error_set(err, ENOMEM, "starting a tool call");
        return NULL;
    }
    c->pool = p;
    c->fn = fn;
    c->arg = arg;
    c->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->cancel_fd < 0) {
        ipb_error_set(err, errno, "starting a tool call: eventfd");
        free(c);
        return NULL;
    }
    pthread_mutex_lock(&p->mu);
    /* The thread takes no signals: the loop's handlers and signalfds stay where they are. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&c->thread, NULL, call_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r == 0) {
        c->next = p->calls;
        p->calls = c;
        p->n++;
    }
    pthread_mutex_unlock(&p->mu);
    if (r != 0) {
        ipb_error_set(err, r, "starting a tool call: a thread");
        close(c->cancel_fd);
        free(c);
        return NULL;
    }
    return c;
}

void ipb_callpool_cancel(ipb_call *c) {
    uint64_t one = 1;
    if (c)
        (void)!write(c->cancel_fd, &one, sizeof(one));
}

void ipb_callpool_cancel_if(ipb_callpool *p, bool (*match)(void *arg, void *ud), void *ud) {
    pthread_mutex_lock(&p->mu);
    for (ipb_call *c = p->calls; c; c = c->next)
        if (!c->done && (!match || match(c->arg, ud)))
            ipb_callpool_cancel(c);
    pthread_mutex_unlock(&p->mu);
}

/* With the lock held: unlinks and returns a finished call. */
static ipb_call *unlink_done(ipb_callpool *p) {
    for (ipb_call **pc = &p->calls; *pc; pc = &(*pc)->next) {
        if ((*pc)->done) {
            ipb_call *c = *pc;
            *pc = c->next;
            p->n--;
            return c;
        }
    }
    return NULL;
}

static void *finish(ipb_call *c) {
    pthread_join(c->thread, NULL);
    close(c->cancel_fd);
    void *arg = c->arg;
    free(c);
    return arg;
}

void *ipb_callpool_take(ipb_callpool *p) {
    pthread_mutex_lock(&p->mu);
    ipb_call *c = unlink_done(p);
    bool more = false;
    for (ipb_call *o = p->calls; o && !more; o = o->next)
        more = o->done;
    if (!more) {
        uint64_t v;
        (void)!read(p->done_fd, &v, sizeof(v));
    }
    pthread_mutex_unlock(&p->mu);
    return c ? finish(c) : NULL;
}

size_t ipb_callpool_count(ipb_callpool *p) {
    pthread_mutex_lock(&p->mu);
    size_t n = p->n;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void ipb_callpool_drain(ipb_callpool *p, void (*done)(void *, void *), void *ud) {
    ipb_callpool_cancel_if(p, NULL, NULL);
    pthread_mutex_lock(&p->mu);
    while (p->calls) {
        ipb_call *c = unlink_done(p);
        if (!c) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        pthread_mutex_unlock(&p->mu);
        void *arg = finish(c);
        if (done)
            done(ud, arg);
        pthread_mutex_lock(&p->mu);
    }
    uint64_t v;
    (void)!read(p->done_fd, &v, sizeof(v));
    pthread_mutex_unlock(&p->mu);
}

void ipb_callpool_free(ipb_callpool *p, void (*done)(void *, void *), void *ud) {
    if (!p)
        return;
    ipb_callpool_drain(p, done, ud);
    close(p->done_fd);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
