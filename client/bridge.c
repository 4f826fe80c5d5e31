/* `ipybox mcp` with a daemon: one createSession for this connection (carrying the sandbox
 * options given on our command line and our working directory), then the relay between stdio
 * and the daemon's socket (relay.c). The daemon closes the session when we disconnect. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fdio.h"
#include "log.h"

#define BRIDGE_ID "ipybox-mcp-bridge"

static int answer_timeout_ms(void);

int cli_connect_timeout_ms(void) {
    int ms = answer_timeout_ms();
    return ms < CLI_CONNECT_TIMEOUT_MS ? ms : CLI_CONNECT_TIMEOUT_MS;
}

int cli_daemon_connect(const char *path) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* A daemon whose listen queue is full (it does not accept) would hold a blocking connect
     * forever; a unix socket's connect waits at most SO_SNDTIMEO, then fails with EAGAIN
     * (a non-blocking one fails at once, and poll cannot wait for room in that queue). */
    int ms = cli_connect_timeout_ms();
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno == EAGAIN || errno == EINPROGRESS ? ETIMEDOUT : errno;
        close(fd);
        errno = e;
        return -1;
    }
    struct timeval none = {0, 0}; /* writes to the daemon block as before */
    if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none)) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* How long the daemon may take to answer createSession: IPYBOX_CONNECT_TIMEOUT seconds
 * (default 180: a session's sandbox and kernel start before the answer, and on a loaded host
 * the monitor's queue of spawns and the kernel's start each take their time). */
static int answer_timeout_ms(void) {
    const char *v = getenv("IPYBOX_CONNECT_TIMEOUT");
    char *end = NULL;
    double t = v && *v ? strtod(v, &end) : 180;
    if (end && (*end || t <= 0 || t > 86400))
        t = 180;
    return (int)(t * 1000);
}

/* The daemon's answer to our createSession: the first line it sends. -1: refused or closed;
 * -2: no answer in time. */
static int session_answer(int fd, const char *path, char **ret_rest, size_t *ret_rest_len) {
    char *buf = NULL;
    size_t len = 0;
    char *nl = NULL;
    int timeout = answer_timeout_ms();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!nl) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long left = timeout - ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {fd, POLLIN, 0};
        int pr = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0) {
            log_error("ipyboxd at %s did not answer within %d s (IPYBOX_CONNECT_TIMEOUT)", path, timeout / 1000);
            free(buf);
            return -2;
        }
        char *n = realloc(buf, len + 65536);
        if (!n) {
            free(buf);
            return -1;
        }
        buf = n;
        ssize_t k = read(fd, buf + len, 65536);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            log_error("ipyboxd at %s closed the connection before starting a session", path);
            free(buf);
            return -1;
        }
        len += (size_t)k;
        nl = memchr(buf, '\n', len);
    }
    json_t *m = json_loadb(buf, (size_t)(nl - buf), 0, NULL);
    const char *name = json_string_value(json_object_get(json_object_get(m, "result"), "name"));
    const char *why = json_string_value(json_object_get(json_object_get(m, "error"), "message"));
    if (!name) {
        log_error("ipyboxd at %s: %s", path, why ? why : "an answer that is not a session");
        json_decref(m);
        free(buf);
        return -1;
    }
    fprintf(stderr, "ipybox mcp: using ipyboxd at %s (session %s)\n", path, name);
    json_decref(m);
    *ret_rest_len = len - (size_t)(nl + 1 - buf);
    *ret_rest = *ret_rest_len ? memmove(buf, nl + 1, *ret_rest_len) : NULL;
    if (!*ret_rest)
        free(buf);
    return 0;
}

int cli_bridge(int fd, const char *path, int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    json_t *args = json_array();
    for (int i = 0; i < argc; i++)
        json_array_append_new(args, json_string(argv[i]));
    char cwd[PATH_MAX];
    json_t *req =
        json_pack("{s:s, s:s, s:s, s:{s:o, s:s?}}", "jsonrpc", "2.0", "id", BRIDGE_ID, "method", "ipybox/createSession",
                  "params", "args", args, "cwd", getcwd(cwd, sizeof(cwd)) ? cwd : NULL);
    char *line = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    int ok = line && ipb_write_all(fd, line, strlen(line)) == 0 && ipb_write_all(fd, "\n", 1) == 0;
    free(line);
    char *rest = NULL;
    size_t rest_len = 0;
    int a = ok ? session_answer(fd, path, &rest, &rest_len) : -1;
    if (a < 0) {
        if (!ok)
            log_error("cannot write to ipyboxd at %s: %s", path, strerror(errno));
        close(fd);
        return a == -2 ? CLI_BRIDGE_NO_ANSWER : 1;
    }
    if (rest && ipb_write_all(1, rest, rest_len) < 0) {
        free(rest);
        close(fd);
        return 1;
    }
    free(rest);
    cli_relay(fd);
    close(fd);
    return 0;
}
