/* Unit tests for concurrent calls on one MCP client (mcpclient/, ipb_mcpc_call), over stdio,
 * Streamable HTTP and legacy SSE, against the fake server of tests/lib/mcp_servers.py with
 * `--tools concurrent` (sleep, hang, ok, stray, late answered concurrently) and `--events` (what
 * the server saw: calls with their ids and arguments, notifications/cancelled). Each call runs in
 * a thread of its own; each test runs once per transport. HTTP servers listen on 127.0.0.1. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "mcp_client.h"
#include "run_suite.h"

static const char *const transport_names[] = {"stdio", "http", "sse"};

static char tmpdir[96];
static char events[128];
static char pidfile[128];
static char script[PATH_MAX];
static pid_t http_pid; /* the fake HTTP server, 0 for stdio */
static int http_port;

/* tests/lib/mcp_servers.py: from the current directory, else next to the test binary's tree. */
static void find_script(void) {
    if (access("tests/lib/mcp_servers.py", R_OK) == 0) {
        ck_assert_ptr_nonnull(realpath("tests/lib/mcp_servers.py", script));
        return;
    }
    char exe[PATH_MAX - 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    ck_assert_int_gt(n, 0);
    exe[n] = '\0';
    for (int up = 0; up < 5; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash)
            break;
        *slash = '\0';
        snprintf(script, sizeof(script), "%s/tests/lib/mcp_servers.py", exe);
        if (access(script, R_OK) == 0)
            return;
    }
    ck_abort_msg("tests/lib/mcp_servers.py not found (run from the source tree)");
}

static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t len = sizeof(a);
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
    close(s);
    return ntohs(a.sin_port);
}

static bool listening(int port) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = connect(s, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(s);
    return ok;
}

/* The fake server over HTTP ("http" or "sse") on 127.0.0.1, in its own process group. */
static void start_http(const char *transport) {
    http_port = free_port();
    char port[16], log[160];
    snprintf(port, sizeof(port), "%d", http_port);
    snprintf(log, sizeof(log), "%s/server.log", tmpdir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test (no teardown) leaves no server behind */
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl("/usr/bin/python3", "python3", script, "fake", "--transport", transport, "--port", port, "--tools",
              "concurrent", "--events", events, (char *)NULL);
        _exit(127);
    }
    http_pid = pid;
    for (int i = 0; i < 1000 && !listening(http_port); i++)
        usleep(10000);
    ck_assert_msg(listening(http_port), "the fake %s server did not listen on port %d", transport, http_port);
}

/* Every test's directory is made in basedir, which the suite's process removes at the end (a
 * failed test ends its own process without its teardown). */
static char basedir[64];

static void suite_setup(void) {
    snprintf(basedir, sizeof(basedir), "/tmp/test-mcpcc.XXXXXX");
    if (!mkdtemp(basedir)) {
        perror("mkdtemp");
        exit(1);
    }
}

static void suite_teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", basedir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", basedir);
}

static void setup(void) {
    snprintf(tmpdir, sizeof(tmpdir), "%s/t.XXXXXX", basedir);
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(events, sizeof(events), "%s/events", tmpdir);
    snprintf(pidfile, sizeof(pidfile), "%s/server.pid", tmpdir);
    find_script();
    http_pid = 0;
    signal(SIGPIPE, SIG_IGN);
}

static void teardown(void) {
    if (http_pid > 0) {
        kill(-http_pid, SIGKILL);
        waitpid(http_pid, NULL, 0);
        http_pid = 0;
    }
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static ipb_mcpc *connect_fake(int transport) {
    json_t *p;
    if (transport == 0) {
        p = json_pack("{s:s, s:[s, s, s, s, s, s, s, s, s, s]}", "command", "/usr/bin/python3", "args", script, "fake",
                      "--transport", "stdio", "--tools", "concurrent", "--events", events, "--pid-file", pidfile);
    } else {
        if (!http_pid)
            start_http(transport_names[transport]);
        char url[64];
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/%s", http_port, transport == 1 ? "mcp" : "sse");
        p = json_pack("{s:s}", "url", url);
    }
    ipb_error *err = NULL;
    ipb_mcpc *c = ipb_mcpc_connect("fake", p, NULL, &err);
    json_decref(p);
    ck_assert_msg(c != NULL, "connect (%s): %s", transport_names[transport], ipb_error_msg(err));
    return c;
}

/* ---- calls in threads ---- */

typedef struct call {
    ipb_mcpc *c;
    const char *tool;
    json_t *args;
    int cancel_fd;
    int timeout_ms;
    pthread_t th;
    json_t *result;
    ipb_error *err;
    long took_ms;
    int done; /* atomic */
} call;

static void *call_main(void *arg) {
    call *k = arg;
    long t0 = ipb_now_ms();
    k->result = ipb_mcpc_call(k->c, k->tool, k->args, k->cancel_fd, k->timeout_ms, &k->err);
    k->took_ms = ipb_now_ms() - t0;
    __atomic_store_n(&k->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Starts tool(args) in a thread; args is taken over. */
static void call_start(call *k, ipb_mcpc *c, const char *tool, json_t *args, int cancel_fd, int timeout_ms) {
    memset(k, 0, sizeof(*k));
    k->c = c;
    k->tool = tool;
    k->args = args;
    k->cancel_fd = cancel_fd;
    k->timeout_ms = timeout_ms;
    ck_assert_int_eq(pthread_create(&k->th, NULL, call_main, k), 0);
}

static void call_join(call *k) {
    pthread_join(k->th, NULL);
    json_decref(k->args);
    k->args = NULL;
}

static void call_free(call *k) {
    json_decref(k->result);
    ipb_error_free(k->err);
    k->result = NULL;
    k->err = NULL;
}

static bool call_done(call *k) { return __atomic_load_n(&k->done, __ATOMIC_ACQUIRE) != 0; }

static const char *text_of(json_t *result) {
    return json_string_value(json_object_get(json_array_get(json_object_get(result, "content"), 0), "text"));
}

static json_t *sleep_args(double seconds, const char *tag) { return json_pack("{s:f, s:s}", "seconds", seconds, "tag", tag); }

static void expect_text(call *k, const char *want) {
    ck_assert_msg(k->result != NULL, "%s: %s", k->tool, ipb_error_msg(k->err));
    const char *t = text_of(k->result);
    ck_assert_msg(t && strcmp(t, want) == 0, "%s: got '%s', want '%s'", k->tool, t ? t : "(none)", want);
}

static void expect_errnum(call *k, int errnum) {
    ck_assert_msg(k->result == NULL, "%s answered: %s", k->tool, text_of(k->result));
    ck_assert_msg(k->err && k->err->errnum == errnum, "%s: errnum %d (%s), want %d", k->tool,
                  k->err ? k->err->errnum : 0, ipb_error_msg(k->err), errnum);
}

static void wait_until(bool (*cond)(const void *), const void *ctx, long ms, const char *what) {
    long end = ipb_now_ms() + ms;
    while (!cond(ctx) && ipb_now_ms() < end)
        usleep(10000);
    ck_assert_msg(cond(ctx), "not within %ld ms: %s", ms, what);
}

/* ---- the server's events ---- */

/* The events the server wrote so far (an array). */
static json_t *read_events(void) {
    json_t *all = json_array();
    FILE *f = fopen(events, "r");
    if (!f)
        return all;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *e = json_loads(line, 0, NULL);
        if (e)
            json_array_append_new(all, e);
    }
    free(line);
    fclose(f);
    return all;
}

/* The id of the call the server saw with arguments.tag == tag, or -1. */
static json_int_t call_id(const char *tag) {
    json_t *all = read_events();
    json_int_t id = -1;
    size_t i;
    json_t *e;
    json_array_foreach(all, i, e) {
        const char *t = json_string_value(json_object_get(json_object_get(e, "arguments"), "tag"));
        if (strcmp(json_string_value(json_object_get(e, "event")), "call") == 0 && t && strcmp(t, tag) == 0)
            id = json_integer_value(json_object_get(e, "id"));
    }
    json_decref(all);
    return id;
}

/* notifications/cancelled the server got for request id. */
static int cancelled_for(json_int_t id) {
    json_t *all = read_events();
    int n = 0;
    size_t i;
    json_t *e;
    json_array_foreach(all, i, e) {
        json_t *rid = json_object_get(e, "requestId");
        if (strcmp(json_string_value(json_object_get(e, "event")), "cancelled") == 0 && json_is_integer(rid) &&
            json_integer_value(rid) == id)
            n++;
    }
    json_decref(all);
    return n;
}

static bool seen_call(const void *tag) { return call_id(tag) > 0; }

struct cancel_seen {
    json_int_t id;
};
static bool seen_cancelled(const void *ctx) { return cancelled_for(((const struct cancel_seen *)ctx)->id) > 0; }

static int new_cancel_fd(void) {
    int fd = eventfd(0, EFD_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    return fd;
}

static void fire(int fd) {
    uint64_t one = 1;
    ck_assert_int_eq(write(fd, &one, sizeof(one)), 8);
}

/* Open descriptors of this process. */
static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

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

static bool stray_at_least(const void *ctx) {
    void *const *v = ctx;
    return ipb_mcpc_stray(v[0]) >= (size_t)(uintptr_t)v[1];
}

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
    "        send(json.dumps({'jsonrpc': '2.0', 'id': mid, 'result': {'content': [{'type': 'text', 'text': 'ok'}]}}))\n";

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
    "        sys.stdout.write(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {'protocolVersion': '2025-06-18',\n"
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

int main(void) { return ipb_run_suite(mcpc_concurrent_suite()); }
