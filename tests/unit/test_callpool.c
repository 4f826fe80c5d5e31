/* Unit tests for supervisor/callpool.c: calls on threads of their own, each cancelled alone,
 * taken through one fd, drained on the pool's end. */
#include <check.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "callpool.h"
#include "run_suite.h"

typedef struct job {
    int id;
    bool cancelled; /* its cancel fd became readable */
    int waited_ms;  /* how long it waits for that at most (0: returns at once) */
} job;

static atomic_int running;

static void job_run(void *arg, int cancel_fd) {
    job *j = arg;
    atomic_fetch_add(&running, 1);
    struct pollfd p = {cancel_fd, POLLIN, 0};
    j->cancelled = j->waited_ms && poll(&p, 1, j->waited_ms) == 1;
    atomic_fetch_sub(&running, 1);
}

static bool readable(int fd, int ms) {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, ms) == 1;
}

static bool is_id(void *arg, void *ud) { return ((job *)arg)->id == *(int *)ud; }

START_TEST(calls_run_at_once_and_are_cancelled_alone) {
    ipb_error *err = NULL;
    ipb_callpool *p = ipb_callpool_new(&err);
    ck_assert_ptr_nonnull(p);
    job jobs[8];
    ipb_call *calls[8];
    for (int i = 0; i < 8; i++) {
        jobs[i] = (job){.id = i, .waited_ms = 60000};
        calls[i] = ipb_callpool_start(p, job_run, &jobs[i], &err);
        ck_assert_ptr_nonnull(calls[i]);
    }
    /* All eight wait at once: none would end for a minute by itself. */
    for (int t = 0; t < 1000 && atomic_load(&running) < 8; t++)
        usleep(10000);
    ck_assert_int_eq(atomic_load(&running), 8);
    ck_assert(!readable(ipb_callpool_fd(p), 0));
    ck_assert_int_eq(ipb_callpool_count(p), 8);
    /* One cancelled: it alone ends and is taken. */
    ipb_callpool_cancel(calls[3]);
    ck_assert(readable(ipb_callpool_fd(p), 10000));
    job *j = ipb_callpool_take(p);
    ck_assert_ptr_eq(j, &jobs[3]);
    ck_assert(j->cancelled);
    ck_assert_ptr_null(ipb_callpool_take(p));
    ck_assert(!readable(ipb_callpool_fd(p), 0));
    ck_assert_int_eq(ipb_callpool_count(p), 7);
    /* By a predicate. */
    int five = 5;
    ipb_callpool_cancel_if(p, is_id, &five);
    ck_assert(readable(ipb_callpool_fd(p), 10000));
    ck_assert_ptr_eq(ipb_callpool_take(p), &jobs[5]);
    ck_assert_int_eq(atomic_load(&running), 6);
    /* The pool's end cancels and hands over the rest. */
    ipb_callpool_free(p, NULL, NULL);
    ck_assert_int_eq(atomic_load(&running), 0);
    for (int i = 0; i < 8; i++)
        ck_assert(jobs[i].cancelled);
}
END_TEST

static int drained;
static void count(void *ud, void *arg) {
    (void)ud;
    (void)arg;
    drained++;
}

START_TEST(finished_calls_stay_until_taken_and_drain_hands_them_over) {
    ipb_error *err = NULL;
    ipb_callpool *p = ipb_callpool_new(&err);
    job quick[3] = {{.id = 0}, {.id = 1}, {.id = 2}};
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_nonnull(ipb_callpool_start(p, job_run, &quick[i], &err));
    for (int t = 0; t < 1000 && !(readable(ipb_callpool_fd(p), 10) && atomic_load(&running) == 0); t++)
        ;
    /* Taking one leaves the fd readable while others wait. */
    ck_assert_ptr_nonnull(ipb_callpool_take(p));
    for (int t = 0; t < 1000 && ipb_callpool_count(p) == 2 && !readable(ipb_callpool_fd(p), 0); t++)
        usleep(10000);
    ck_assert(readable(ipb_callpool_fd(p), 0));
    drained = 0;
    ipb_callpool_drain(p, count, NULL);
    ck_assert_int_eq(drained, 2);
    ck_assert_int_eq(ipb_callpool_count(p), 0);
    ck_assert(!readable(ipb_callpool_fd(p), 0));
    ipb_callpool_free(p, NULL, NULL);
}
END_TEST

static Suite *callpool_suite(void) {
    Suite *s = suite_create("callpool");
    TCase *t = tcase_create("calls");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, calls_run_at_once_and_are_cancelled_alone);
    tcase_add_test(t, finished_calls_stay_until_taken_and_drain_hands_them_over);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return ipb_run_suite(callpool_suite()); }
