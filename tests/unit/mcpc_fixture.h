/* The fixture of the concurrent-call suites of mcpclient/ (test_mcpc_concurrent.c,
 * test_mcpc_transport.c): the fake server of tests/lib/mcp_servers.py with `--tools concurrent`
 * and `--events`, over stdio, Streamable HTTP or legacy SSE (HTTP servers listen on 127.0.0.1);
 * calls each in a thread of their own; the server's events read back. */
#pragma once
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
static __attribute__((unused)) void find_script(void) {
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

static __attribute__((unused)) int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t len = sizeof(a);
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
    close(s);
    return ntohs(a.sin_port);
}

static __attribute__((unused)) bool listening(int port) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = connect(s, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(s);
    return ok;
}

/* The fake server over HTTP ("http" or "sse") on 127.0.0.1, in its own process group. */
static __attribute__((unused)) void start_http(const char *transport) {
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

static __attribute__((unused)) void suite_setup(void) {
    snprintf(basedir, sizeof(basedir), "/tmp/test-mcpcc.XXXXXX");
    if (!mkdtemp(basedir)) {
        perror("mkdtemp");
        exit(1);
    }
}

static __attribute__((unused)) void suite_teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", basedir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", basedir);
}

static __attribute__((unused)) void setup(void) {
    snprintf(tmpdir, sizeof(tmpdir), "%s/t.XXXXXX", basedir);
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(events, sizeof(events), "%s/events", tmpdir);
    snprintf(pidfile, sizeof(pidfile), "%s/server.pid", tmpdir);
    find_script();
    http_pid = 0;
    signal(SIGPIPE, SIG_IGN);
}

static __attribute__((unused)) void teardown(void) {
    if (http_pid > 0) {
        kill(-http_pid, SIGKILL);
        waitpid(http_pid, NULL, 0);
        http_pid = 0;
    }
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static __attribute__((unused)) ipb_mcpc *connect_fake(int transport) {
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

static __attribute__((unused)) void *call_main(void *arg) {
    call *k = arg;
    long t0 = ipb_now_ms();
    k->result = ipb_mcpc_call(k->c, k->tool, k->args, k->cancel_fd, k->timeout_ms, &k->err);
    k->took_ms = ipb_now_ms() - t0;
    __atomic_store_n(&k->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Starts tool(args) in a thread; args is taken over. */
static __attribute__((unused)) void call_start(call *k, ipb_mcpc *c, const char *tool, json_t *args, int cancel_fd,
                                               int timeout_ms) {
    memset(k, 0, sizeof(*k));
    k->c = c;
    k->tool = tool;
    k->args = args;
    k->cancel_fd = cancel_fd;
    k->timeout_ms = timeout_ms;
    ck_assert_int_eq(pthread_create(&k->th, NULL, call_main, k), 0);
}

static __attribute__((unused)) void call_join(call *k) {
    pthread_join(k->th, NULL);
    json_decref(k->args);
    k->args = NULL;
}

static __attribute__((unused)) void call_free(call *k) {
    json_decref(k->result);
    ipb_error_free(k->err);
    k->result = NULL;
    k->err = NULL;
}

static __attribute__((unused)) bool call_done(call *k) { return __atomic_load_n(&k->done, __ATOMIC_ACQUIRE) != 0; }

static __attribute__((unused)) const char *text_of(json_t *result) {
    return json_string_value(json_object_get(json_array_get(json_object_get(result, "content"), 0), "text"));
}

static __attribute__((unused)) json_t *sleep_args(double seconds, const char *tag) {
    return json_pack("{s:f, s:s}", "seconds", seconds, "tag", tag);
}

static __attribute__((unused)) void expect_text(call *k, const char *want) {
    ck_assert_msg(k->result != NULL, "%s: %s", k->tool, ipb_error_msg(k->err));
    const char *t = text_of(k->result);
    ck_assert_msg(t && strcmp(t, want) == 0, "%s: got '%s', want '%s'", k->tool, t ? t : "(none)", want);
}

static __attribute__((unused)) void expect_errnum(call *k, int errnum) {
    ck_assert_msg(k->result == NULL, "%s answered: %s", k->tool, text_of(k->result));
    ck_assert_msg(k->err && k->err->errnum == errnum, "%s: errnum %d (%s), want %d", k->tool,
                  k->err ? k->err->errnum : 0, ipb_error_msg(k->err), errnum);
}

static __attribute__((unused)) void wait_until(bool (*cond)(const void *), const void *ctx, long ms, const char *what) {
    long end = ipb_now_ms() + ms;
    while (!cond(ctx) && ipb_now_ms() < end)
        usleep(10000);
    ck_assert_msg(cond(ctx), "not within %ld ms: %s", ms, what);
}

/* ---- the server's events ---- */

/* The events the server wrote so far (an array). */
static __attribute__((unused)) json_t *read_events(void) {
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
static __attribute__((unused)) json_int_t call_id(const char *tag) {
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
static __attribute__((unused)) int cancelled_for(json_int_t id) {
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

static __attribute__((unused)) bool seen_call(const void *tag) { return call_id(tag) > 0; }

struct cancel_seen {
    json_int_t id;
};
static __attribute__((unused)) bool seen_cancelled(const void *ctx) {
    return cancelled_for(((const struct cancel_seen *)ctx)->id) > 0;
}

static __attribute__((unused)) int new_cancel_fd(void) {
    int fd = eventfd(0, EFD_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    return fd;
}

static __attribute__((unused)) void fire(int fd) {
    uint64_t one = 1;
    ck_assert_int_eq(write(fd, &one, sizeof(one)), 8);
}

/* Open descriptors of this process. */
static __attribute__((unused)) int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* ipb_mcpc_stray(v[0]) has reached v[1]. */
static __attribute__((unused)) bool stray_at_least(const void *ctx) {
    void *const *v = ctx;
    return ipb_mcpc_stray(v[0]) >= (size_t)(uintptr_t)v[1];
}
