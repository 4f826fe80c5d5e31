#include "resolver.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct ipb_resolver {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    ipb_resolve_req *todo, **todo_tail;
    ipb_resolve_req *done;
    bool stopping;
    unsigned live; /* threads still running */
    int efd;
};

static void lookup(ipb_resolve_req *q) {
    struct addrinfo hints = {.ai_family = q->family, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    q->n = 0;
    q->gai_err = getaddrinfo(q->name, NULL, &hints, &res);
    if (q->gai_err)
        return;
    for (struct addrinfo *a = res; a && q->n < IPB_RESOLVE_MAX; a = a->ai_next) {
        ipb_addr x;
        if (!ipb_addr_from_sockaddr(a->ai_addr, &x, NULL))
            continue;
        bool dup = false;
        for (size_t i = 0; i < q->n; i++)
            dup |= ipb_addr_equal(&q->addrs[i], &x);
        if (!dup)
            q->addrs[q->n++] = x;
    }
    freeaddrinfo(res);
}

static void *worker(void *arg) {
    ipb_resolver *r = arg;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (!r->todo && !r->stopping)
            pthread_cond_wait(&r->cond, &r->lock);
        if (r->stopping)
            break;
        ipb_resolve_req *q = r->todo;
        r->todo = q->next;
        if (!r->todo)
            r->todo_tail = &r->todo;
        pthread_mutex_unlock(&r->lock);
        lookup(q);
        pthread_mutex_lock(&r->lock);
        if (r->stopping) {
            free(q);
            break;
        }
        q->next = r->done;
        r->done = q;
        uint64_t one = 1;
        if (write(r->efd, &one, sizeof(one)) < 0) {
            /* The counter cannot overflow in practice; the loop drains the list anyway. */
        }
    }
    bool last = --r->live == 0;
    pthread_mutex_unlock(&r->lock);
    if (last) {
        /* The last thread out frees the resolver: stop() may not wait for a slow lookup. */
        close(r->efd);
        pthread_mutex_destroy(&r->lock);
        pthread_cond_destroy(&r->cond);
        free(r);
    }
    return NULL;
}

int ipb_resolver_start(unsigned threads, ipb_resolver **ret, ipb_error **err) {
    ipb_resolver *r = calloc(1, sizeof(*r));
    if (!r)
        return ipb_error_set(err, ENOMEM, "starting the resolver");
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->todo_tail = &r->todo;
    r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->efd < 0) {
        int e = errno;
        free(r);
        return ipb_error_set(err, e, "starting the resolver: eventfd");
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    /* Threads must not take signals meant for the main thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (unsigned i = 0; i < threads; i++) {
        pthread_t t;
        pthread_mutex_lock(&r->lock);
        if (pthread_create(&t, &attr, worker, r) == 0)
            r->live++;
        pthread_mutex_unlock(&r->lock);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (r->live == 0) {
        close(r->efd);
        free(r);
        return ipb_error_set(err, EAGAIN, "starting the resolver threads");
    }
    *ret = r;
    return 0;
}

int ipb_resolver_fd(const ipb_resolver *r) { return r->efd; }

void ipb_resolver_submit(ipb_resolver *r, ipb_resolve_req *req) {
    req->next = NULL;
    pthread_mutex_lock(&r->lock);
    *r->todo_tail = req;
    r->todo_tail = &req->next;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

void ipb_resolver_cancel(ipb_resolver *r, ipb_resolve_req *req) {
    pthread_mutex_lock(&r->lock);
    for (ipb_resolve_req **pp = &r->todo; *pp; pp = &(*pp)->next) {
        if (*pp != req)
            continue;
        *pp = req->next;
        if (!*pp)
            r->todo_tail = pp;
        req->n = 0;
        req->gai_err = EAI_CANCELED;
        req->next = r->done;
        r->done = req;
        uint64_t one = 1;
        if (write(r->efd, &one, sizeof(one)) < 0) {
            /* as in worker() */
        }
        break;
    }
    pthread_mutex_unlock(&r->lock);
}

ipb_resolve_req *ipb_resolver_take_done(ipb_resolver *r) {
    uint64_t v;
    if (read(r->efd, &v, sizeof(v)) < 0) {
        /* EAGAIN: nothing counted; the list may still hold entries from before. */
    }
    pthread_mutex_lock(&r->lock);
    ipb_resolve_req *d = r->done;
    r->done = NULL;
    pthread_mutex_unlock(&r->lock);
    return d;
}

void ipb_resolver_stop(ipb_resolver *r) {
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    r->stopping = true;
    for (ipb_resolve_req *q = r->todo, *n; q; q = n) {
        n = q->next;
        free(q);
    }
    for (ipb_resolve_req *q = r->done, *n; q; q = n) {
        n = q->next;
        free(q);
    }
    r->todo = r->done = NULL;
    r->todo_tail = &r->todo;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}
