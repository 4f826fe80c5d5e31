#include "toolrun.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct ipb_toolrun {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done_fd;   /* eventfd: 1 while a finished job waits to be taken */
    int cancel_fd; /* eventfd: readable once the running job was cancelled */
    void (*fn)(void *);
    void *arg;
    enum { T_IDLE, T_QUEUED, T_RUNNING, T_DONE } state;
    bool stop;
};

static void *thread_main(void *p) {
    ipb_toolrun *t = p;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (t->state != T_QUEUED && !t->stop)
            pthread_cond_wait(&t->cv, &t->mu);
        if (t->state != T_QUEUED)
            break;
        t->state = T_RUNNING;
        pthread_mutex_unlock(&t->mu);
        t->fn(t->arg);
        pthread_mutex_lock(&t->mu);
        t->state = T_DONE;
        uint64_t one = 1;
        (void)!write(t->done_fd, &one, sizeof(one));
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

ipb_toolrun *ipb_toolrun_start(ipb_error **err) {
    ipb_toolrun *t = calloc(1, sizeof(*t));
    if (!t) {
        ipb_error_set(err, ENOMEM, "starting the tool-call thread");
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    t->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (t->done_fd < 0 || t->cancel_fd < 0) {
        ipb_error_set(err, errno, "starting the tool-call thread: eventfd");
        if (t->done_fd >= 0)
            close(t->done_fd);
        if (t->cancel_fd >= 0)
            close(t->cancel_fd);
        free(t);
        return NULL;
    }
    /* The thread takes no signals: the loop's handlers and signalfds stay where they are. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&t->thread, NULL, thread_main, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0) {
        ipb_error_set(err, r, "starting the tool-call thread");
        close(t->done_fd);
        close(t->cancel_fd);
        free(t);
        return NULL;
    }
    return t;
}

int ipb_toolrun_fd(const ipb_toolrun *t) { return t->done_fd; }

bool ipb_toolrun_busy(const ipb_toolrun *t) {
    ipb_toolrun *m = (ipb_toolrun *)t;
    pthread_mutex_lock(&m->mu);
    bool busy = m->state != T_IDLE;
    pthread_mutex_unlock(&m->mu);
    return busy;
}

bool ipb_toolrun_submit(ipb_toolrun *t, void (*fn)(void *), void *arg) {
    pthread_mutex_lock(&t->mu);
    bool ok = t->state == T_IDLE && !t->stop;
    if (ok) {
        uint64_t v;
        (void)!read(t->cancel_fd, &v, sizeof(v)); /* a cancel of the job before does not count */
        t->fn = fn;
        t->arg = arg;
        t->state = T_QUEUED;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    return ok;
}

/* Called with the lock held and state T_DONE. */
static void *take_locked(ipb_toolrun *t) {
    uint64_t v;
    (void)!read(t->done_fd, &v, sizeof(v));
    void *arg = t->arg;
    t->fn = NULL;
    t->arg = NULL;
    t->state = T_IDLE;
    return arg;
}

int ipb_toolrun_cancel_fd(const ipb_toolrun *t) { return t->cancel_fd; }

bool ipb_toolrun_cancel(ipb_toolrun *t) {
    pthread_mutex_lock(&t->mu);
    bool running = t->state == T_QUEUED || t->state == T_RUNNING;
    if (running) {
        uint64_t one = 1;
        (void)!write(t->cancel_fd, &one, sizeof(one));
    }
    pthread_mutex_unlock(&t->mu);
    return running;
}

void *ipb_toolrun_take(ipb_toolrun *t) {
    pthread_mutex_lock(&t->mu);
    void *arg = t->state == T_DONE ? take_locked(t) : NULL;
    pthread_mutex_unlock(&t->mu);
    return arg;
}

void *ipb_toolrun_wait(ipb_toolrun *t, int ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (ms >= 0) {
        until.tv_sec += ms / 1000;
        until.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&t->mu);
    while (t->state == T_QUEUED || t->state == T_RUNNING) {
        if (ms < 0)
            pthread_cond_wait(&t->cv, &t->mu);
        else if (pthread_cond_timedwait(&t->cv, &t->mu, &until) == ETIMEDOUT)
            break;
    }
    void *arg = t->state == T_DONE ? take_locked(t) : NULL;
    pthread_mutex_unlock(&t->mu);
    return arg;
}

void ipb_toolrun_stop(ipb_toolrun *t, void (*discard)(void *)) {
    if (!t)
        return;
    void *arg = ipb_toolrun_wait(t, -1);
    if (arg && discard)
        discard(arg);
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    close(t->done_fd);
    close(t->cancel_fd);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}
