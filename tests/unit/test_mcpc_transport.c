/* Unit tests for one MCP client (mcpclient/) under a transport's own stress: Streamable HTTP
 * whose server forgets the session or sends malformed events, stdio servers that stall our
 * writes, flood us or send values made to be costly. The fixture (the fake server of
 * tests/lib/mcp_servers.py, calls in threads): mcpc_fixture.h; concurrent calls on every
 * transport: test_mcpc_concurrent.c. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mcpc_fixture.h"

END_TEST

/* Streamable HTTP: the server forgets the session; ten calls at once all see 404 (or come after
 * the new session), one new session is started for all of them, and every call is answered. */
START_TEST(http_session_renewed_once) {
    ipb_mcpc *c = connect_fake(1);
    ipb_error *err = NULL;
    json_t *r = ipb_mcpc_call(c, "expire", NULL, -1, 0, &err);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    ck_assert_str_eq(text_of(r), "expired");
    json_decref(r);
    enum { N = 10 };
    call k[N];
    char tags[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(tags[i], sizeof(tags[i]), "r%d", i);
        call_start(&k[i], c, "sleep", sleep_args(0.3, tags[i]), -1, 0);
    }
    for (int i = 0; i < N; i++) {
        call_join(&k[i]);
        char want[24];
        snprintf(want, sizeof(want), "slept 0.3 %.7s", tags[i]);
        expect_text(&k[i], want);
        call_free(&k[i]);
    }
    r = ipb_mcpc_call(c, "expire", NULL, -1, 0, &err);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(r, "structuredContent"), "initializes")), 2);
    json_decref(r);
    ck_assert(ipb_mcpc_alive(c));
    ipb_mcpc_close(c);
}
END_TEST

/* Streamable HTTP: a storm of malformed messages on one call's stream ends that call (EPROTO);
 * another call in flight is answered and the client stays alive. */
START_TEST(http_malformed_storm_ends_one_call) {
    ipb_mcpc *c = connect_fake(1);
    call a, b;
    call_start(&b, c, "sleep", sleep_args(1, "b"), -1, 0);
    wait_until(seen_call, "b", 10000, "the server sees call b");
    call_start(&a, c, "garbage", NULL, -1, 30000);
    call_join(&a);
    expect_errnum(&a, EPROTO);
    ck_assert_msg(strstr(ipb_error_msg(a.err), "malformed"), "%s", ipb_error_msg(a.err));
    ck_assert_msg(a.took_ms < 10000, "the storm took %ld ms to end the call", a.took_ms);
    call_join(&b);
    expect_text(&b, "slept 1 b");
    ck_assert_uint_ge(ipb_mcpc_malformed(c), 100);
    ck_assert(ipb_mcpc_alive(c));
    call_free(&a);
    call_free(&b);
    ipb_mcpc_close(c);
}
END_TEST

/* A one-thread stdio server: "stall" stops reading its stdin for 2 s, then asks us (ping)
 * and writes 4 MiB of notifications before it reads again; "echo" answers its arguments' size. */
static const char STALL_SERVER[] =
    "import json, sys, time\n"
    "def send(m):\n"
    "    sys.stdout.write(json.dumps(m) + '\\n'); sys.stdout.flush()\n"
    "stall_id = None\n"
    "for line in sys.stdin:\n"
    "    m = json.loads(line)\n"
    "    meth, mid, params = m.get('method'), m.get('id'), m.get('params') or {}\n"
    "    if meth == 'initialize':\n"
    "        send({'jsonrpc': '2.0', 'id': mid, 'result': {'protocolVersion': '2025-06-18', 'capabilities': {},\n"
    "              'serverInfo': {'name': 'stall'}}})\n"
    "    elif meth == 'tools/call' and params['name'] == 'stall':\n"
    "        stall_id = mid\n"
    "        time.sleep(2)\n"
    "        send({'jsonrpc': '2.0', 'id': 'p', 'method': 'ping'})\n"
    "        note = json.dumps({'jsonrpc': '2.0', 'method': 'notifications/message',\n"
    "                           'params': {'level': 'info', 'data': 'x' * 65536}})\n"
    "        for i in range(64): sys.stdout.write(note + '\\n')\n"
    "        sys.stdout.flush()\n"
    "    elif meth == 'tools/call':\n"
    "        n = len(json.dumps(params.get('arguments')))\n"
    "        send({'jsonrpc': '2.0', 'id': mid, 'result': {'content': [{'type': 'text', 'text': str(n)}]}})\n"
    "    elif mid == 'p':\n"
    "        send({'jsonrpc': '2.0', 'id': stall_id, 'result': {'content': [{'type': 'text', 'text': 'pinged'}]}})\n";

/* stdio: a caller blocked writing a long request to a server that does not read (it is busy
 * writing to us) does not stop the reader: the server's ping is answered once the request is
 * written, its output is read meanwhile, and both calls end well before their limit. */
START_TEST(stdio_long_request_while_the_server_writes) {
    json_t *p = json_pack("{s:s, s:[s, s]}", "command", "/usr/bin/python3", "args", "-c", STALL_SERVER);
    ipb_mcp_limits lim = {10000, 30000, 0};
    ipb_error *err = NULL;
    ipb_mcpc *c = ipb_mcpc_connect("stall", p, &lim, &err);
    json_decref(p);
    ck_assert_msg(c != NULL, "%s", ipb_error_msg(err));
    size_t big = 4 << 20;
    char *blob = malloc(big + 1);
    memset(blob, 'y', big);
    blob[big] = '\0';
    call a, b;
    call_start(&a, c, "stall", NULL, -1, 0);
    usleep(300000); /* the server sleeps, not reading its stdin */
    call_start(&b, c, "echo", json_pack("{s:s}", "blob", blob), -1, 0);
    free(blob);
    call_join(&b);
    call_join(&a);
    expect_text(&a, "pinged");
    char want[32];
    snprintf(want, sizeof(want), "%zu", big + strlen("{\"blob\": \"\"}"));
    expect_text(&b, want);
    ck_assert_msg(a.took_ms < 20000 && b.took_ms < 20000, "the calls took %ld and %ld ms", a.took_ms, b.took_ms);
    ck_assert(ipb_mcpc_alive(c));
    call_free(&a);
    call_free(&b);
    ipb_mcpc_close(c);
}
END_TEST

/* stdio: a call whose own limit passes while its long request is half written still writes it
 * whole (the stream stays sound for the others), then ends with ETIMEDOUT; its late answer is
 * skipped and the client goes on. */
START_TEST(stdio_short_limit_long_request) {
    json_t *p = json_pack("{s:s, s:[s, s]}", "command", "/usr/bin/python3", "args", "-c", STALL_SERVER);
    ipb_mcp_limits lim = {10000, 30000, 0};
    ipb_error *err = NULL;
    ipb_mcpc *c = ipb_mcpc_connect("stall", p, &lim, &err);
    json_decref(p);
    ck_assert_msg(c != NULL, "%s", ipb_error_msg(err));
    size_t big = 4 << 20;
    char *blob = malloc(big + 1);
    memset(blob, 'y', big);
    blob[big] = '\0';
    call a, b;
    call_start(&a, c, "stall", NULL, -1, 0);
    usleep(300000); /* the server sleeps, not reading its stdin */
    call_start(&b, c, "echo", json_pack("{s:s}", "blob", blob), -1, 300);
    free(blob);
    call_join(&b);
    expect_errnum(&b, ETIMEDOUT);
    call_join(&a);
    expect_text(&a, "pinged");
    ck_assert(ipb_mcpc_alive(c));
    void *want[2] = {c, (void *)(uintptr_t)1};
    wait_until(stray_at_least, want, 10000, "the late answer to the long request is skipped");
    json_t *r = ipb_mcpc_call(c, "echo", NULL, -1, 0, &err);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    ck_assert_str_eq(text_of(r), "2"); /* {} */
    json_decref(r);
    call_free(&a);
    call_free(&b);
    ipb_mcpc_close(c);
}
END_TEST

/* stdio: a call waiting for its turn to write (behind a long request the server does not read
 * yet) ends at once when cancelled; nothing of it was sent. */
START_TEST(stdio_cancel_while_waiting_to_write) {
    json_t *p = json_pack("{s:s, s:[s, s]}", "command", "/usr/bin/python3", "args", "-c", STALL_SERVER);
    ipb_mcp_limits lim = {10000, 30000, 0};
    ipb_error *err = NULL;
    ipb_mcpc *c = ipb_mcpc_connect("stall", p, &lim, &err);
    json_decref(p);
    ck_assert_msg(c != NULL, "%s", ipb_error_msg(err));
    size_t big = 4 << 20;
    char *blob = malloc(big + 1);
    memset(blob, 'y', big);
    blob[big] = '\0';
    int cfd = new_cancel_fd();
    call a, b, w;
    call_start(&a, c, "stall", NULL, -1, 0);
    usleep(300000); /* the server sleeps, not reading its stdin */
    call_start(&b, c, "echo", json_pack("{s:s}", "blob", blob), -1, 0);
    free(blob);
    usleep(200000); /* b is writing; w waits for its turn */
    call_start(&w, c, "echo", json_pack("{s:s}", "tag", "w"), cfd, 0);
    usleep(100000);
    fire(cfd);
    call_join(&w);
    expect_errnum(&w, ECANCELED);
    /* the server reads nothing before 2 s: w ended without waiting for b's write */
    ck_assert_msg(w.took_ms < 1000, "the waiting call ended %ld ms after it started", w.took_ms);
    ck_assert_msg(!call_done(&b), "the long request was written before the server read again");
    call_join(&b);
    call_join(&a);
    expect_text(&a, "pinged");
    ck_assert_uint_eq(ipb_mcpc_cancelled(c), 0); /* nothing of w reached the server */
    ck_assert(ipb_mcpc_alive(c));
    call_free(&a);
    call_free(&b);
    call_free(&w);
    close(cfd);
    ipb_mcpc_close(c);
}
END_TEST

/* A stdio server whose "tree" answer is 4.5 MB of empty arrays (1.5 million values, under the
 * 16 MiB message limit) and whose "echo" answers normally. */
static const char TREE_SERVER[] =
    "import json, sys\n"
    "def send(m):\n"
    "    sys.stdout.write(m + '\\n'); sys.stdout.flush()\n"
    "for line in sys.stdin:\n"
    "    m = json.loads(line)\n"
    "    meth, mid, params = m.get('method'), m.get('id'), m.get('params') or {}\n"
    "    if meth == 'initialize':\n"
    "        send(json.dumps({'jsonrpc': '2.0', 'id': mid, 'result': {'protocolVersion': '2025-06-18',\n"
    "             'capabilities': {}, 'serverInfo': {'name': 'tree'}}}))\n"
    "    elif meth == 'tools/call' and params['name'] == 'tree':\n"
    "        send('{\"jsonrpc\": \"2.0\", \"id\": %d, \"result\": {\"content\": [], \"x\": [' % mid\n"
    "             + '[],' * 1500000 + '[]]}}')\n"
    "    elif meth == 'tools/call':\n"
    "        send(json.dumps({'jsonrpc': '2.0', 'id': mid, 'result': {'content': [{'type': 'text', 'text': "
    "'ok'}]}}))\n";

/* kB from a line of /proc/self/status. */
static long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            kb = strtol(line + n + 1, NULL, 10);
    fclose(f);
    ck_assert_int_ge(kb, 0);
    return kb;
}

/* A server message made of 1.5 million tiny values (about 150 MB once parsed by jansson) is
 * counted before parsing and refused like a message over the size limit: the call ends at once
 * with EMSGSIZE, the server is stopped, and the client's peak memory grows by far less than the
 * parsed tree would take. */
START_TEST(stdio_many_tiny_values_not_parsed) {
    json_t *p = json_pack("{s:s, s:[s, s]}", "command", "/usr/bin/python3", "args", "-c", TREE_SERVER);
    ipb_mcp_limits lim = {10000, 30000, 0};
    ipb_error *err = NULL;
    ipb_mcpc *c = ipb_mcpc_connect("tree", p, &lim, &err);
    json_decref(p);
    ck_assert_msg(c != NULL, "%s", ipb_error_msg(err));
    json_t *r = ipb_mcpc_call(c, "echo", NULL, -1, 0, &err);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    ck_assert_str_eq(text_of(r), "ok");
    json_decref(r);
    long peak0 = status_kb("VmHWM");
    size_t bad0 = ipb_mcpc_malformed(c);
    long t0 = ipb_now_ms();
    r = ipb_mcpc_call(c, "tree", NULL, -1, 0, &err);
    long took = ipb_now_ms() - t0;
    ck_assert_msg(r == NULL, "the tree was parsed and handed over");
    ck_assert_msg(err && err->errnum == EMSGSIZE, "errnum %d (%s)", err ? err->errnum : 0, ipb_error_msg(err));
    ck_assert_msg(strstr(ipb_error_msg(err), "JSON values"), "%s", ipb_error_msg(err));
    ck_assert_msg(took < 20000, "the call ended after %ld ms (its limit: 30 s)", took);
    ipb_error_free(err);
    ck_assert_uint_eq(ipb_mcpc_malformed(c), bad0 + 1);
    long grew = status_kb("VmHWM") - peak0;
    ck_assert_msg(grew < 64 * 1024, "the peak memory grew by %ld kB", grew);
    ck_assert(!ipb_mcpc_alive(c));
    ipb_mcpc_close(c);
}
END_TEST

/* A stdio server that, once called, sends a flood of requests (ping) and never reads its stdin
 * again, so that our answers fill the pipe. */
static const char PING_FLOOD_SERVER[] =
    "import json, sys, time\n"
    "for line in sys.stdin:\n"
    "    m = json.loads(line)\n"
    "    if m.get('method') == 'initialize':\n"
    "        sys.stdout.write(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {'protocolVersion': "
    "'2025-06-18',\n"
    "                         'capabilities': {}, 'serverInfo': {'name': 'flood'}}}) + '\\n'); sys.stdout.flush()\n"
    "    elif m.get('method') == 'tools/call':\n"
    "        for i in range(200000):\n"
    "            sys.stdout.write('{\"jsonrpc\": \"2.0\", \"id\": %d, \"method\": \"ping\"}\\n' % i)\n"
    "        sys.stdout.flush()\n"
    "        time.sleep(3600)\n";

/* A call to that server ends on its own limit, and closing the client (which kills the server)
 * does not wait for the reader blocked on the full pipe any longer than its grace time. */
START_TEST(stdio_ping_flood_without_reading) {
    json_t *p = json_pack("{s:s, s:[s, s]}", "command", "/usr/bin/python3", "args", "-c", PING_FLOOD_SERVER);
    ipb_mcp_limits lim = {10000, 30000, 0};
    ipb_error *err = NULL;
    ipb_mcpc *c = ipb_mcpc_connect("flood", p, &lim, &err);
    json_decref(p);
    ck_assert_msg(c != NULL, "%s", ipb_error_msg(err));
    long t0 = ipb_now_ms();
    json_t *r = ipb_mcpc_call(c, "x", NULL, -1, 2000, &err);
    long took = ipb_now_ms() - t0;
    ck_assert_msg(r == NULL, "the flood answered");
    ck_assert_msg(err && err->errnum == ETIMEDOUT, "errnum %d (%s)", err ? err->errnum : 0, ipb_error_msg(err));
    ck_assert_msg(took < 15000, "the call ended %ld ms after it started", took);
    ipb_error_free(err);
    t0 = ipb_now_ms();
    ipb_mcpc_close(c);
    took = ipb_now_ms() - t0;
    ck_assert_msg(took < 15000, "closing took %ld ms", took);
}
END_TEST

static Suite *mcpc_transport_suite(void) {
    Suite *s = suite_create("mcpc_transport");
    TCase *t = tcase_create("transport");
    tcase_add_unchecked_fixture(t, suite_setup, suite_teardown);
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 90);
    tcase_add_test(t, http_session_renewed_once);
    tcase_add_test(t, http_malformed_storm_ends_one_call);
    tcase_add_test(t, stdio_long_request_while_the_server_writes);
    tcase_add_test(t, stdio_short_limit_long_request);
    tcase_add_test(t, stdio_cancel_while_waiting_to_write);
    tcase_add_test(t, stdio_many_tiny_values_not_parsed);
    tcase_add_test(t, stdio_ping_flood_without_reading);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return ipb_run_suite(mcpc_transport_suite()); }
