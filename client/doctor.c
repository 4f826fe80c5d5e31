/* `ipybox doctor`: whether `ipybox mcp` would start here, and what to do where it would not.
 * The host checks run the supervisor's own pieces (the shim's user namespace and network
 * recipe, ulimits' choice); the last check starts a real sandbox with a kernel and runs 1+1. */
#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "daemon.h"
#include "doctor.h"
#include "execute.h"
#include "fdio.h"
#include "log.h"
#include "session.h"
#include "strbuf.h"

#define DAEMON_ANSWER_MS 5000
#define SANDBOX_CELL_TIMEOUT_S 60

static void doctor_usage(FILE *f) {
    fprintf(f,
            "Usage: ipybox doctor [--quick] [OPTIONS]\n\n"
            "Checks whether `ipybox mcp` can start here and says in one line each what works and how to\n"
            "fix what does not: user namespaces (and the sysctls that block them), nftables in a network\n"
            "namespace (the egress proxy needs it), cgroup delegation (whether --memory, --max-processes\n"
            "and --cpu-weight can be enforced), the interpreter (ipykernel; matplotlib and pip), a\n"
            "daemon's socket (as ipybox mcp looks for it) and whether it answers. Last, it starts a\n"
            "sandbox with a kernel and runs 1+1, so that \"would start\" is proven.\n\n"
            "  --quick          skip the sandbox and kernel (the last check)\n\n"
            "It takes ipybox mcp's sandbox options (--python PATH above all) and checks with them.\n"
            "Exit status: 0 when ipybox mcp would start (warnings, for matplotlib, pip, cgroups and the\n"
            "daemon, do not change it), 1 when a needed check failed, 2 on bad usage.\n\n%s",
            ipb_options_help());
}

void doctor_say(doctor *d, enum doctor_level level, const char *check, const char *fmt, ...) {
    static const char *const tag[] = {
        [DOCTOR_OK] = "ok", [DOCTOR_WARN] = "warn", [DOCTOR_FAIL] = "FAIL", [DOCTOR_SKIP] = "skip"};
    if (level == DOCTOR_FAIL)
        d->failed++;
    else if (level == DOCTOR_WARN)
        d->warned++;
    printf("%-5s %s: ", tag[level], check);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* Whether a daemon at fd answers a JSON-RPC ping (one line back) within DAEMON_ANSWER_MS. */
static bool daemon_answers(int fd) {
    static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
    if (ipb_write_all(fd, ping, sizeof(ping) - 1) < 0)
        return false;
    char buf[512];
    size_t got = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long left = DAEMON_ANSWER_MS - ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {fd, POLLIN, 0};
        int pr = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            return false;
        ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    buf[got] = '\0';
    return strstr(buf, "\"result\"") != NULL;
}

/* Connects to the daemon's socket, bounded: connect() on a unix socket whose listen queue is
 * full (a daemon that is stuck and accepts nothing) blocks until there is room, for ever;
 * SO_SNDTIMEO bounds it, and the ping's write too. -1 with errno; ETIMEDOUT when it was the
 * bound. */
static int daemon_connect_bounded(const char *path) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {DAEMON_ANSWER_MS / 1000, (DAEMON_ANSWER_MS % 1000) * 1000};
    if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        errno = e == EAGAIN || e == EINPROGRESS ? ETIMEDOUT : e;
        return -1;
    }
    return fd;
}

/* The sockets ipybox mcp tries, in its order (mcp_cmd.c): the user's daemon, then the system
 * service's. A system socket that is there but cannot be used fails the check: ipybox mcp
 * stops there too, unless IPYBOX_FALLBACK=embedded. */
static void check_daemon(doctor *d) {
    struct passwd *pw = getpwuid(getuid());
    char *paths[2] = {ipbd_default_socket(), pw && pw->pw_name[0] && !strchr(pw->pw_name, '/')
                                                 ? ipb_strdupf("/run/ipybox/%s/ipybox.sock", pw->pw_name)
                                                 : NULL};
    const char *fallback = getenv("IPYBOX_FALLBACK");
    bool may_fall_back = fallback && !strcmp(fallback, "embedded");
    bool found = false;
    for (int i = 0; i < 2 && !found; i++) {
        if (!paths[i])
            continue;
        int fd = daemon_connect_bounded(paths[i]);
        int e = errno;
        bool stuck = fd < 0 && e == ETIMEDOUT;
        const char *not_what = stuck ? "is there but accepts no connection (its queue is full)"
                                     : "accepts connections but does not answer";
        if (fd >= 0 || stuck) {
            bool answers = fd >= 0 && daemon_answers(fd);
            if (fd >= 0)
                close(fd);
            if (answers)
                doctor_say(d, DOCTOR_OK, "daemon", "ipyboxd answers at %s: ipybox mcp will use it", paths[i]);
            else if (i == 1 && !may_fall_back)
                doctor_say(d, DOCTOR_FAIL, "daemon",
                           "the system service's socket %s %s within %d s, and ipybox mcp "
                           "would stop there: systemctl status ipyboxd",
                           paths[i], not_what, DAEMON_ANSWER_MS / 1000);
            else
                doctor_say(d, DOCTOR_WARN, "daemon", "ipyboxd at %s %s within %d s; ipybox mcp would wait for it%s",
                           paths[i], not_what, DAEMON_ANSWER_MS / 1000,
                           stuck ? " (is it stuck? stop it, or remove the socket)" : " (IPYBOX_CONNECT_TIMEOUT)");
            found = true;
        } else if (e != ENOENT && i == 1) {
            doctor_say(d, may_fall_back ? DOCTOR_WARN : DOCTOR_FAIL, "daemon",
                       "the system service's socket %s is there but cannot be used (%s)%s", paths[i], strerror(e),
                       may_fall_back ? "; IPYBOX_FALLBACK=embedded: ipybox mcp runs the embedded supervisor"
                                     : ", so ipybox mcp would stop: ask the administrator (systemctl status ipyboxd, "
                                       "`users =` in ipyboxd.conf), or pass --embedded");
            found = true;
        } else if (e != ENOENT) {
            doctor_say(d, DOCTOR_WARN, "daemon", "no ipyboxd at %s (%s)", paths[i], strerror(e));
        }
    }
    if (!found)
        doctor_say(d, DOCTOR_OK, "daemon",
                   "none running (%s, %s): ipybox mcp runs the embedded supervisor; "
                   "`ipyboxd --user` shares one among clients",
                   paths[0] ? paths[0] : "XDG_RUNTIME_DIR is not set", paths[1] ? paths[1] : "no user name");
    free(paths[0]);
    free(paths[1]);
}

/* A sandbox as ipybox mcp makes one (its proxy, session, kernel), 1+1 in it, and all gone. */
static bool check_sandbox(doctor *d, ipb_options *o) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ipb_error *err = NULL;
    ipb_proxy *proxy = NULL;
    ipb_session s;
    if (ipb_proxy_start(&o->egress, o->max_connections, &proxy, &err) < 0 || ipb_session_open(&s, o, proxy, &err) < 0) {
        doctor_say(d, DOCTOR_FAIL, "sandbox", "cannot start a sandbox with a kernel: %s", ipb_error_msg(err));
        ipb_error_free(err);
        ipb_proxy_stop(proxy);
        return false;
    }
    ipb_exec_result res;
    memset(&res, 0, sizeof(res));
    bool ok = false;
    if (ipb_session_ensure_kernel(&s, &err) < 0 ||
        ipb_execute(&s.kernel, "1+1", SANDBOX_CELL_TIMEOUT_S, 4096, NULL, &res, &err) < 0) {
        doctor_say(d, DOCTOR_FAIL, "sandbox", "the kernel did not run 1+1: %s", ipb_error_msg(err));
        ipb_error_free(err);
    } else if (res.outcome != IPB_EXEC_OK || !res.text || strncmp(res.text, "2", 1) != 0 ||
               res.text[1 + strspn(res.text + 1, "\n")] != '\0') {
        doctor_say(d, DOCTOR_FAIL, "sandbox", "the kernel answered 1+1 with '%.200s'%s%s", res.text ? res.text : "",
                   res.note ? ": " : "", res.note ? res.note : "");
    } else {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        doctor_say(d, DOCTOR_OK, "sandbox", "a kernel (%s) in a sandbox answered 1+1 = 2, %ld ms after the start",
                   o->python, ms);
        ok = true;
    }
    ipb_exec_result_free(&res);
    ipb_session_close(&s);
    ipb_proxy_stop(proxy);
    return ok;
}

static volatile sig_atomic_t interrupted;
static void on_interrupt(int sig) {
    (void)sig;
    interrupted = 1;
}

/* --quick is ours; the rest are sandbox options, kept in order. */
static void take_quick(int *argc, char **argv, bool *quick) {
    int k = 0;
    for (int i = 0; i < *argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            *quick = true;
        else
            argv[k++] = argv[i];
    }
    *argc = k;
}

int cmd_doctor(int argc, char **argv) {
    ipb_options o;
    int next = 0;
    bool quick = false;
    take_quick(&argc, argv, &quick);
    int r = cli_parse_options(&o, argc, argv, "ipybox doctor", doctor_usage, &next);
    if (r) {
        ipb_options_free(&o);
        return r - 1;
    }
    if (next < argc) {
        log_error("unexpected argument '%s' (see ipybox doctor --help)", argv[next]);
        ipb_options_free(&o);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    doctor d = {0};
    bool userns = doctor_check_userns(&d);
    bool nft = doctor_check_nftables(&d, userns);
    doctor_check_cgroups(&d, &o);
    bool python = doctor_check_python(&d, o.python);
    check_daemon(&d);
    if (quick)
        doctor_say(&d, DOCTOR_SKIP, "sandbox", "not started (--quick)");
    else if (!userns || !nft || !python)
        doctor_say(&d, DOCTOR_SKIP, "sandbox", "not started: a needed check above failed");
    else {
        /* The sandbox check ends (its cell is bounded) and cleans up before a ^C or a TERM
         * takes effect: killed inside it, the doctor would leave its session directory and
         * workspace behind. */
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_interrupt;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        check_sandbox(&d, &o);
        if (interrupted) {
            fprintf(stderr, "ipybox doctor: interrupted (the sandbox it started is removed)\n");
            ipb_options_free(&o);
            return 130;
        }
    }
    if (d.failed)
        printf("ipybox mcp would not start: %d check%s failed (FAIL above)\n", d.failed, d.failed == 1 ? "" : "s");
    else
        printf("ipybox mcp would start%s%s\n", quick ? " (the sandbox itself was not tried: --quick)" : "",
               d.warned ? "; the warnings above are about optional parts" : "");
    ipb_options_free(&o);
    return d.failed ? 1 : 0;
}
