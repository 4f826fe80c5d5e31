/* Unit tests for concurrent calls on one MCP client (mcpclient/, ipb_mcpc_call), over stdio,
 * Streamable HTTP and legacy SSE, against the fake server of tests/lib/mcp_servers.py with
 * `--tools concurrent` (sleep, hang, ok, stray, late answered concurrently) and `--events` (what
 * the server saw: calls with their ids and arguments, notifications/cancelled). Each call runs in
 * a thread of its own; each test runs once per transport. HTTP servers listen on 127.0.0.1. What one
 * transport does under stress (an HTTP session renewed, stdio writes that stall, floods):
 * test_mcpc_transport.c; the fixture: mcpc_fixture.h. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "mcpc_fixture.h"

/* ---- tests ---- */

#define NCALLS 20

/* 20 calls of sleep(1) from 20 threads on one client: each gets its own answer, and together
 * they take far less than one after the other would (20 s). */
START_TEST(twenty_at_once) {
    if (_i > 0)
        start_http(transport_names[_i]); /* its descriptors are not the client's */
    int fds = count_fds();
    ipb_mcpc *c = connect_fake(_i);
    call k[NCALLS];
    char tags[NCALLS][8];
    long t0 = ipb_now_ms();
    for (int i = 0; i < NCALLS; i++) {
        snprintf(tags[i], sizeof(tags[i]), "t%d", i);
        call_start(&k[i], c, "sleep", sleep_args(1, tags[i]), -1, 0);
    }
    for (int i = 0; i < NCALLS; i++)
        call_join(&k[i]);
    long took = ipb_now_ms() - t0;
    for (int i = 0; i < NCALLS; i++) {
        char want[24];
        snprintf(want, sizeof(want), "slept 1 %.8s", tags[i]);
        expect_text(&k[i], want);
        call_free(&k[i]);
    }
    ck_assert_msg(took < 10000, "%s: 20 concurrent sleep(1) calls took %ld ms", transport_names[_i], took);
    ck_assert_uint_eq(ipb_mcpc_in_flight(c), 0);
    ck_assert_uint_eq(ipb_mcpc_stray(c), 0);
    ck_assert(ipb_mcpc_alive(c));
    ipb_mcpc_close(c);
    ck_assert_int_eq(count_fds(), fds); /* the calls' and the client's descriptors are closed */
}
END_TEST

/* A call that never gets an answer does not hold up another on the same client; cancelling it
 * ends it at once, the server is told for its id only, and the client goes on. */
START_TEST(hang_does_not_block) {
    ipb_mcpc *c = connect_fake(_i);
    int cfd = new_cancel_fd();
    call hang, other;
    call_start(&hang, c, "hang", json_pack("{s:s}", "tag", "h"), cfd, 60000);
    wait_until(seen_call, "h", 10000, "the server sees the hang call");
    call_start(&other, c, "sleep", sleep_args(0.2, "s"), -1, 0);
    call_join(&other);
    expect_text(&other, "slept 0.2 s");
    ck_assert_msg(other.took_ms < 5000, "a sleep(0.2) call took %ld ms next to a hung one", other.took_ms);
    ck_assert(!call_done(&hang));
    ck_assert_uint_eq(ipb_mcpc_in_flight(c), 1);
    long t0 = ipb_now_ms();
    fire(cfd);
    call_join(&hang);
    ck_assert_msg(ipb_now_ms() - t0 < 2000, "the cancelled call ended %ld ms after its cancel", ipb_now_ms() - t0);
    expect_errnum(&hang, ECANCELED);
    struct cancel_seen cs = {call_id("h")};
    wait_until(seen_cancelled, &cs, 10000, "the server gets notifications/cancelled for the hung call");
    ck_assert_int_eq(cancelled_for(call_id("s")), 0);
    ck_assert_uint_eq(ipb_mcpc_cancelled(c), 1);
    ck_assert(ipb_mcpc_alive(c));
    call_free(&hang);
    call_free(&other);
    /* and the client still answers */
    ipb_error *err = NULL;
    json_t *r = ipb_mcpc_call(c, "ok", NULL, -1, 0, &err);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    ck_assert_str_eq(text_of(r), "ok");
    json_decref(r);
    close(cfd);
    ipb_mcpc_close(c);
}
END_TEST

/* Two sleeping calls; one is cancelled: it ends with ECANCELED, the server sees
 * notifications/cancelled for its id (and not the other's), the other still gets its answer. */
START_TEST(cancel_one_of_two) {
    ipb_mcpc *c = connect_fake(_i);
    int cfd = new_cancel_fd();
    call a, b;
    call_start(&a, c, "sleep", sleep_args(30, "a"), cfd, 0);
    call_start(&b, c, "sleep", sleep_args(2, "b"), -1, 0);
    wait_until(seen_call, "a", 10000, "the server sees call a");
    wait_until(seen_call, "b", 10000, "the server sees call b");
    fire(cfd);
    long t0 = ipb_now_ms();
    while (!call_done(&a) && ipb_now_ms() - t0 < 2000)
        usleep(5000);
    ck_assert_msg(call_done(&a), "the cancelled call did not end within 2 s");
    ck_assert(!call_done(&b));
    call_join(&a);
    expect_errnum(&a, ECANCELED);
    ck_assert_msg(strstr(ipb_error_msg(a.err), "cancelled") && strstr(ipb_error_msg(a.err), "tools/call sleep"), "%s",
                  ipb_error_msg(a.err));
    call_join(&b);
    expect_text(&b, "slept 2 b");
    struct cancel_seen cs = {call_id("a")};
    wait_until(seen_cancelled, &cs, 10000, "notifications/cancelled for call a");
    ck_assert_int_eq(cancelled_for(call_id("a")), 1);
    ck_assert_int_eq(cancelled_for(call_id("b")), 0);
    ck_assert(ipb_mcpc_alive(c));
    call_free(&a);
    call_free(&b);
    close(cfd);
    ipb_mcpc_close(c);
}
END_TEST

/* A call's own limit ends it alone (ETIMEDOUT, cancelled at the server); the client lives on. */
START_TEST(timeout_ends_one) {
    ipb_mcpc *c = connect_fake(_i);
    call a, b;
    call_start(&b, c, "sleep", sleep_args(2, "b"), -1, 0);
    call_start(&a, c, "sleep", sleep_args(30, "a"), -1, 500);
    call_join(&a);
    expect_errnum(&a, ETIMEDOUT);
    ck_assert_msg(strstr(ipb_error_msg(a.err), "no answer within 500 ms"), "%s", ipb_error_msg(a.err));
    ck_assert_msg(a.took_ms >= 490 && a.took_ms < 5000, "the 500 ms limit ended the call after %ld ms", a.took_ms);
    ck_assert(!call_done(&b));
    call_join(&b);
    expect_text(&b, "slept 2 b");
    struct cancel_seen cs = {call_id("a")};
    wait_until(seen_cancelled, &cs, 10000, "notifications/cancelled for the call that timed out");
    ck_assert_int_eq(cancelled_for(call_id("b")), 0);
    ck_assert(ipb_mcpc_alive(c));
    call_free(&a);
    call_free(&b);
    ipb_mcpc_close(c);
}
END_TEST

/* Answers nobody waits for (an id never sent, a second answer, a cancelled call's late answer)
 * are skipped and counted, and the right answers still arrive. */
START_TEST(stray_and_late_answers) {
    ipb_mcpc *c = connect_fake(_i);
    ipb_error *err = NULL;
    json_t *r = ipb_mcpc_call(c, "stray", NULL, -1, 0, &err);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    ck_assert_str_eq(text_of(r), "first");
    json_decref(r);
    /* stdio and SSE read the second answer too; a Streamable HTTP call stops reading its stream
     * at its answer */
    void *want[2] = {c, (void *)(uintptr_t)(_i == 1 ? 1 : 2)};
    wait_until(stray_at_least, want, 10000, "the stray answers are counted");
    r = ipb_mcpc_call(c, "ok", NULL, -1, 0, &err);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    ck_assert_str_eq(text_of(r), "ok");
    json_decref(r);
    if (_i != 1) {
        /* late: answers only once cancelled (over Streamable HTTP on a stream already closed) */
        size_t before = ipb_mcpc_stray(c);
        int cfd = new_cancel_fd();
        call late, other;
        call_start(&late, c, "late", json_pack("{s:s}", "tag", "late"), cfd, 0);
        call_start(&other, c, "sleep", sleep_args(1, "o"), -1, 0);
        wait_until(seen_call, "late", 10000, "the server sees the late call");
        fire(cfd);
        call_join(&late);
        expect_errnum(&late, ECANCELED);
        void *more[2] = {c, (void *)(uintptr_t)(before + 1)};
        wait_until(stray_at_least, more, 10000, "the late answer is skipped and counted");
        call_join(&other);
        expect_text(&other, "slept 1 o");
        call_free(&late);
        call_free(&other);
        close(cfd);
    }
    ck_assert(ipb_mcpc_alive(c));
    ipb_mcpc_close(c);
}
END_TEST

static bool in_flight_is(const void *ctx) {
    void *const *v = ctx;
    return ipb_mcpc_in_flight(v[0]) == (size_t)(uintptr_t)v[1];
}

static bool process_gone(pid_t pid) { return kill(pid, 0) < 0 && errno == ESRCH; }

/* ipb_mcpc_shutdown() from another thread ends every call in flight at once; the client is no
 * longer alive (stdio: the server is killed), and close then is quick. */
START_TEST(shutdown_ends_all) {
    ipb_mcpc *c = connect_fake(_i);
    enum { N = 5 };
    call k[N];
    char tags[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(tags[i], sizeof(tags[i]), "x%d", i);
        if (i % 2)
            call_start(&k[i], c, "hang", json_pack("{s:s}", "tag", tags[i]), -1, 60000);
        else
            call_start(&k[i], c, "sleep", sleep_args(60, tags[i]), -1, 60000);
    }
    for (int i = 0; i < N; i++)
        wait_until(seen_call, tags[i], 10000, "the server sees every call");
    void *want[2] = {c, (void *)(uintptr_t)N};
    wait_until(in_flight_is, want, 5000, "every call in flight");
    long t0 = ipb_now_ms();
    ipb_mcpc_shutdown(c);
    for (int i = 0; i < N; i++) {
        call_join(&k[i]);
        expect_errnum(&k[i], EPIPE);
        ck_assert_msg(strstr(ipb_error_msg(k[i].err), "shut down"), "%s", ipb_error_msg(k[i].err));
        call_free(&k[i]);
    }
    ck_assert_msg(ipb_now_ms() - t0 < 3000, "the calls ended %ld ms after the shutdown", ipb_now_ms() - t0);
    ck_assert(!ipb_mcpc_alive(c));
    ck_assert_uint_eq(ipb_mcpc_in_flight(c), 0);
    /* a call now fails at once */
    ipb_error *err = NULL;
    ck_assert_ptr_null(ipb_mcpc_call(c, "ok", NULL, -1, 0, &err));
    ck_assert_int_eq(err->errnum, EPIPE);
    ipb_error_free(err);
    pid_t pid = 0;
    if (_i == 0) {
        FILE *f = fopen(pidfile, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fscanf(f, "%d", &pid), 1);
        fclose(f);
    }
    t0 = ipb_now_ms();
    ipb_mcpc_close(c);
    ck_assert_msg(ipb_now_ms() - t0 < 3000, "close after shutdown took %ld ms", ipb_now_ms() - t0);
    if (pid > 0)
        ck_assert(process_gone(pid));
}
END_TEST

/* Streamable HTTP: the server forgets the session; ten calls at once all see 404 (or come after
 * the new session), one new session is started for all of them, and every call is answered. */

static Suite *mcpc_concurrent_suite(void) {
    Suite *s = suite_create("mcpc_concurrent");
    TCase *t = tcase_create("concurrent");
    tcase_add_unchecked_fixture(t, suite_setup, suite_teardown);
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 90);
    tcase_add_loop_test(t, twenty_at_once, 0, 3);
    tcase_add_loop_test(t, hang_does_not_block, 0, 3);
    tcase_add_loop_test(t, cancel_one_of_two, 0, 3);
    tcase_add_loop_test(t, timeout_ends_one, 0, 3);
    tcase_add_loop_test(t, stray_and_late_answers, 0, 3);
    tcase_add_loop_test(t, shutdown_ends_all, 0, 3);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return ipb_run_suite(mcpc_concurrent_suite()); }
