#include "transfer.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "files.h"

/* A commit can only begin while RUNNING, and abandoning only succeeds before it does (or,
 * after a long wait, while COMMITTING): the two sides agree through one atomic state. */
enum { T_RUNNING, T_COMMITTING, T_DONE, T_ABANDONED };

/* How long a timed-out or cancelled call still waits for a rename already under way. */
#define COMMIT_GRACE_MS 5000

typedef struct job {
    atomic_int state;
    atomic_int refs; /* the caller and the thread: the last one frees */
    int done_fd;     /* eventfd, written by the thread when it is finished */
    bool download;
    char *local_path, *relpath;
    int ws_fd;
    ipb_host_dirs dirs;
    int src_fd;
    ipb_error *err;
} job;

static atomic_int stuck;

int ipb_transfer_stuck(void) { return atomic_load(&stuck); }

static void job_release(job *j) {
    if (atomic_fetch_sub(&j->refs, 1) != 1)
        return;
    if (j->src_fd >= 0)
        close(j->src_fd);
    if (j->ws_fd >= 0)
        close(j->ws_fd);
    if (j->done_fd >= 0)
        close(j->done_fd);
    ipb_host_dirs_free(&j->dirs);
    free(j->local_path);
    free(j->relpath);
    ipb_error_free(j->err);
    free(j);
}

static bool begin_commit(void *ud) {
    job *j = ud;
    /* The source is closed before anything is put in place: a close that blocks (a FUSE
     * file system that does not answer FLUSH) then blocks while the call can still be
     * abandoned with nothing left behind. */
    if (j->src_fd >= 0) {
        close(j->src_fd);
        j->src_fd = -1;
    }
    int expect = T_RUNNING;
    return atomic_compare_exchange_strong(&j->state, &expect, T_COMMITTING);
}

static void *worker(void *arg) {
    job *j = arg;
    ipb_commit_gate gate = {begin_commit, j};
    if (j->download) {
        if (ipb_ws_open_read(j->ws_fd, j->relpath, &j->src_fd, &j->err) == 0)
            ipb_host_write_from(&j->dirs, j->local_path, j->src_fd, &gate, &j->err);
    } else {
        if (ipb_host_open_read(&j->dirs, j->local_path, &j->src_fd, &j->err) == 0)
            ipb_ws_copy_in(j->ws_fd, j->relpath, j->src_fd, &gate, &j->err);
    }
    if (j->src_fd >= 0) {
        close(j->src_fd);
        j->src_fd = -1;
    }
    int expect = T_RUNNING;
    if (!atomic_compare_exchange_strong(&j->state, &expect, T_DONE)) {
        expect = T_COMMITTING;
        if (!atomic_compare_exchange_strong(&j->state, &expect, T_DONE))
            atomic_fetch_sub(&stuck, 1); /* abandoned: nobody waits for us */
    }
    uint64_t one = 1;
    if (write(j->done_fd, &one, sizeof(one)) < 0) {
        /* an eventfd takes this write; nothing to do if it did not */
    }
    job_release(j);
    return NULL;
}

static job *job_new(const ipb_transfer_req *req, ipb_error **err) {
    job *j = calloc(1, sizeof(*j));
    if (!j) {
        ipb_error_set(err, ENOMEM, "starting the transfer");
        return NULL;
    }
    atomic_init(&j->state, T_RUNNING);
    atomic_init(&j->refs, 1);
    j->src_fd = -1;
    j->download = req->download;
    j->ws_fd = fcntl(req->ws_fd, F_DUPFD_CLOEXEC, 3);
    j->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    j->local_path = strdup(req->local_path);
    j->relpath = strdup(req->relpath);
    if (j->ws_fd < 0 || j->done_fd < 0 || !j->local_path || !j->relpath) {
        ipb_error_set(err, errno, "starting the transfer");
        job_release(j);
        return NULL;
    }
    if (ipb_host_dirs_dup(req->dirs, &j->dirs, err) < 0) {
        job_release(j);
        return NULL;
    }
    return j;
}

static int start_thread(job *j, ipb_error **err) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* Signals stay with the main thread, whose poll they must interrupt. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_fetch_add(&j->refs, 1);
    pthread_t t;
    int r = pthread_create(&t, &attr, worker, j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (r != 0) {
        atomic_fetch_sub(&j->refs, 1);
        return ipb_error_set(err, r, "starting a thread for the transfer");
    }
    return 0;
}

int ipb_transfer_run(const ipb_transfer_req *req, int timeout_ms, const ipb_exec_hooks *h,
                     enum ipb_transfer_outcome *ret_outcome, ipb_error **err) {
    *ret_outcome = IPB_TRANSFER_DONE;
    int n_stuck = ipb_transfer_stuck();
    if (n_stuck >= IPB_TRANSFER_STUCK_MAX)
        return ipb_error_set(err, 0,
                             "%d earlier transfers are still waiting on the host's file system (one that "
                             "does not answer?); no new ones start until they return",
                             n_stuck);
    job *j = job_new(req, err);
    if (!j)
        return -1;
    if (start_thread(j, err) < 0) {
        job_release(j);
        return -1;
    }
    long now = ipb_now_ms();
    long deadline = now + timeout_ms;
    long commit_deadline = 0;
    bool watch_extra = h && h->extra_fd >= 0 && h->on_extra;
    enum ipb_transfer_outcome outcome = IPB_TRANSFER_DONE;
    bool abandoned = false, while_committing = false;
    for (;;) {
        long left = (commit_deadline ? commit_deadline : deadline) - now;
        long tick = ipb_exec_tick_wait(h);
        if (tick >= 0 && left > tick)
            left = tick;
        struct pollfd p[2] = {{j->done_fd, POLLIN, 0}, {watch_extra ? h->extra_fd : -1, POLLIN, 0}};
        /* poll cannot fail here but for EINTR; if it did, the transfer is abandoned below */
        bool poll_failed = poll(p, 2, left > 0 ? (int)left : 0) < 0 && errno != EINTR;
        if (poll_failed)
            p[0].revents = p[1].revents = 0;
        if (p[0].revents)
            break;
        if (p[1].revents && !h->on_extra(h->ud))
            watch_extra = false;
        if (h && h->on_tick)
            h->on_tick(h->ud);
        now = ipb_now_ms();
        bool cancel = h && h->cancelled && h->cancelled(h->ud);
        if (!cancel && !poll_failed && now < deadline)
            continue;
        outcome = cancel ? IPB_TRANSFER_CANCELLED : IPB_TRANSFER_TIMEOUT;
        int expect = T_RUNNING;
        if (atomic_compare_exchange_strong(&j->state, &expect, T_ABANDONED)) {
            abandoned = true;
            atomic_fetch_add(&stuck, 1);
            break;
        }
        if (expect == T_COMMITTING) {
            /* The file is being renamed into place: that is quick, unless the file system
             * does not answer. */
            if (!commit_deadline)
                commit_deadline = now + COMMIT_GRACE_MS;
            if (now >= commit_deadline) {
                expect = T_COMMITTING;
                if (atomic_compare_exchange_strong(&j->state, &expect, T_ABANDONED)) {
                    abandoned = while_committing = true;
                    atomic_fetch_add(&stuck, 1);
                    break;
                }
            }
        }
        /* T_DONE: the next poll sees it. */
    }
    int r = 0;
    if (abandoned) {
        *ret_outcome = outcome;
        if (while_committing)
            r = ipb_error_set(err, 0,
                              "the transfer was abandoned (%s) while its file was being renamed into place: "
                              "%s may or may not have been written",
                              outcome == IPB_TRANSFER_CANCELLED ? "cancelled" : "out of time",
                              req->download ? req->local_path : req->app_path);
        else if (outcome == IPB_TRANSFER_CANCELLED)
            r = ipb_error_set(err, 0, "the transfer was cancelled; nothing was written");
        else
            r = ipb_error_set(err, 0,
                              "the transfer did not finish within %g s (a file system that does not "
                              "answer?) and was abandoned; nothing was written (its temporary file is "
                              "removed once the stuck operation returns)",
                              timeout_ms / 1000.0);
    } else if (j->err) {
        *err = j->err;
        j->err = NULL;
        r = -1;
    }
    job_release(j);
    return r;
}
