/* `ipybox mcp`: the MCP server for desktop agents, with the supervisor embedded. */
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "daemon.h"
#include "log.h"
#include "mcp_server.h"
#include "session.h"
#include "statedir.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static void mcp_usage(FILE *f) {
    fprintf(f,
            "Usage: ipybox mcp [OPTIONS]\n\n"
            "MCP server on stdin/stdout (newline-delimited JSON-RPC) with a stateful IPython kernel in a\n"
            "sandbox. Tools: execute_ipython_cell(code, timeout=120, max_output_chars),\n"
            "upload_file(relpath, local_path, timeout), download_file(relpath, local_path, timeout),\n"
            "reset(), register_mcp_server(server_name, server_params) (docs/tools.md). stdout carries\n"
            "only JSON-RPC; logs go to stderr.\n\n"
            "The kernel runs in its own user, mount, pid, network, IPC, UTS and cgroup namespaces, as\n"
            "an unprivileged user of a nested user namespace, with no capabilities, no_new_privs and a\n"
            "seccomp filter. It sees the host's system directories read-only, /app (the workspace)\n"
            "read-write, and small private /tmp and /dev/shm. Its TCP connections go through ipybox's\n"
            "egress proxy and its DNS queries to ipybox's stub, both enforcing --allowed-domain;\n"
            "nothing else leaves.\n\n"
            "When an ipyboxd daemon is listening at $XDG_RUNTIME_DIR/ipybox/ipybox.sock (without\n"
            "XDG_RUNTIME_DIR: /run/user/$UID/ipybox/ipybox.sock, when that directory is yours alone),\n"
            "ipybox mcp asks it for a session with these options and relays stdio to it (the session\n"
            "ends when this process does); otherwise it runs the supervisor itself. It says which on\n"
            "stderr.\n"
            "On a host with the system service, its socket /run/ipybox/<user>/ipybox.sock comes next;\n"
            "when that socket is there but cannot be used (permission, nothing listening, no answer in\n"
            "IPYBOX_CONNECT_TIMEOUT seconds, default 180), ipybox mcp stops with an error rather than\n"
            "run without the administrator's limits.\n"
            "  --connect PATH   use the daemon at PATH (an error if it does not answer)\n"
            "  --embedded       run the supervisor in this process even if a daemon is there\n"
            "  IPYBOX_FALLBACK=embedded (environment): run embedded when the service cannot be used\n\n"
            "Client configuration:  {\"command\": \"ipybox\", \"args\": [\"mcp\"]}\n\n%s",
            ipb_options_help());
}

/* --connect PATH and --embedded are ours; the rest are sandbox options, kept in order. */
static int take_daemon_options(int *argc, char **argv, const char **connect, bool *embedded) {
    int k = 0;
    for (int i = 0; i < *argc; i++) {
        if (!strcmp(argv[i], "--embedded")) {
            *embedded = true;
        } else if (!strcmp(argv[i], "--connect")) {
            if (i + 1 >= *argc) {
                log_error("--connect needs a value (the daemon's socket)");
                return -1;
            }
            *connect = argv[++i];
        } else if (!strncmp(argv[i], "--connect=", 10)) {
            *connect = argv[i] + 10;
        } else {
            argv[k++] = argv[i];
        }
    }
    *argc = k;
    return 0;
}

/* The system service's socket for this user: /run/ipybox/<user>/ipybox.sock. malloc'd. */
static char *system_socket(void) {
    struct passwd *pw = getpwuid(getuid());
    if (!pw || !pw->pw_name[0] || strchr(pw->pw_name, '/'))
        return NULL;
    return ipb_strdupf("/run/ipybox/%s/ipybox.sock", pw->pw_name);
}

/* What to tell a user whose system socket is there but cannot be used. */
static const char *system_socket_hint(int e) {
    switch (e) {
    case EACCES:
    case EPERM:
        return "the socket or its directory is not open to you: ask the administrator (ipyboxd(8): `users =`)";
    case ECONNREFUSED:
        return "nothing listens there: the service is stopped or restarting (systemctl status ipyboxd)";
    default:
        return "ask the administrator (systemctl status ipyboxd)";
    }
}

/* The user asked, in the client's configuration, to run embedded when the service cannot be
 * used: IPYBOX_FALLBACK=embedded. */
static bool fallback_allowed(void) {
    const char *v = getenv("IPYBOX_FALLBACK");
    return v && !strcmp(v, "embedded");
}

/* find_daemon's result for a daemon that did not take the connection in time (its listen
 * queue is full): as one that does not answer createSession. */
#define DAEMON_NO_ANSWER (-3)

static void say_no_accept(const char *path) {
    log_error("ipyboxd at %s did not accept the connection within %g s (its listen queue is full: the daemon "
              "is stuck or overloaded)",
              path, cli_connect_timeout_ms() / 1000.0);
}

/* A daemon to use: the one named, else the user's own daemon, else the system service's
 * socket for this user. Returns a connected fd, -1 to run embedded, -2 when the daemon
 * named, or the system service's socket that is there, cannot be used: the embedded
 * supervisor would run without the administrator's limits, so only --embedded or
 * IPYBOX_FALLBACK=embedded choose it then; DAEMON_NO_ANSWER when a daemon did not take the
 * connection in time (*ret_path: its socket). */
static int find_daemon(const char *connect, char **ret_path) {
    if (connect) {
        *ret_path = strdup(connect);
        int fd = *ret_path ? cli_daemon_connect(*ret_path) : -1;
        if (fd < 0 && *ret_path && errno == ETIMEDOUT) {
            say_no_accept(connect);
            return DAEMON_NO_ANSWER;
        }
        if (fd < 0)
            log_error("cannot reach ipyboxd at %s: %s", connect, strerror(errno));
        return fd >= 0 ? fd : -2;
    }
    char *paths[2] = {ipbd_default_socket(), system_socket()};
    char why[2][128] = {"", "no user name"};
    snprintf(why[0], sizeof(why[0]), "XDG_RUNTIME_DIR is not set and /run/user/%u is missing or not yours alone",
             (unsigned)geteuid());
    int system_errno = 0;
    *ret_path = NULL;
    int fd = -1;
    for (int i = 0; i < 2 && fd < 0; i++) {
        if (!paths[i])
            continue;
        fd = cli_daemon_connect(paths[i]);
        if (fd >= 0 || errno == ETIMEDOUT) {
            if (fd < 0) {
                say_no_accept(paths[i]);
                fd = DAEMON_NO_ANSWER;
            }
            *ret_path = paths[i];
            paths[i] = NULL;
            break;
        } else {
            if (i == 1 && errno != ENOENT)
                system_errno = errno;
            snprintf(why[i], sizeof(why[i]), "%s", errno == ENOENT ? "no socket" : strerror(errno));
        }
    }
    if (fd == DAEMON_NO_ANSWER) {
        /* said */
    } else if (fd < 0 && system_errno && !fallback_allowed()) {
        fprintf(stderr,
                "ipybox mcp: the system service's socket %s is there but cannot be used (%s): %s. Not running "
                "the embedded supervisor, which would run without the administrator's limits; to run it "
                "anyway, pass --embedded or set IPYBOX_FALLBACK=embedded\n",
                paths[1], why[1], system_socket_hint(system_errno));
        fd = -2;
    } else if (fd < 0) {
        fprintf(stderr, "ipybox mcp: no ipyboxd at %s (%s) or %s (%s); running the embedded supervisor\n",
                paths[0] ? paths[0] : "$XDG_RUNTIME_DIR/ipybox/ipybox.sock", why[0],
                paths[1] ? paths[1] : "/run/ipybox/<user>/ipybox.sock", why[1]);
    }
    free(paths[0]);
    free(paths[1]);
    return fd;
}

int cmd_mcp(int argc, char **argv) {
    ipb_options o;
    ipb_error *err = NULL;
    int next = 0;
    const char *connect = NULL;
    bool embedded = false;
    if (take_daemon_options(&argc, argv, &connect, &embedded) < 0)
        return 2;
    int r = cli_parse_options(&o, argc, argv, "ipybox mcp", mcp_usage, &next);
    if (r) {
        ipb_options_free(&o);
        return r - 1;
    }
    if (next < argc) {
        log_error("unexpected argument '%s' (see ipybox mcp --help)", argv[next]);
        ipb_options_free(&o);
        return 2;
    }
    if (!embedded) {
        char *path = NULL;
        int fd = find_daemon(connect, &path);
        if (fd != -1) {
            r = fd >= 0 ? cli_bridge(fd, path, argc, argv) : fd == DAEMON_NO_ANSWER ? CLI_BRIDGE_NO_ANSWER : 1;
            if (r != CLI_BRIDGE_NO_ANSWER || !fallback_allowed()) {
                free(path);
                ipb_options_free(&o);
                return r == CLI_BRIDGE_NO_ANSWER ? 1 : r;
            }
            fprintf(stderr, "ipybox mcp: running the embedded supervisor instead (IPYBOX_FALLBACK=embedded)\n");
        }
        free(path);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: waits return EINTR and see the flag */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int stale = ipb_session_dirs_reap_stale();
    if (stale)
        log_info("removed %d session director%s left by an earlier run", stale, stale == 1 ? "y" : "ies");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ipb_proxy *proxy = NULL;
    ipb_session s;
    if (ipb_proxy_start(&o.egress, o.max_connections, &proxy, &err) < 0 || ipb_session_open(&s, &o, proxy, &err) < 0) {
        fprintf(stderr, "ipybox mcp: cannot start: %s\n", ipb_error_msg(err));
        ipb_error_free(err);
        ipb_proxy_stop(proxy);
        ipb_options_free(&o);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    fprintf(stderr,
            "ipybox mcp: ready in %ld ms (embedded supervisor): kernel %s as an unprivileged user in its own "
            "user/mount/pid/net/ipc/uts/cgroup namespaces, no capabilities, seccomp; egress: %s; /app = %s\n",
            ms, o.python,
            o.egress.n_rules ? "the --allowed-domain list, through ipybox's proxy"
                             : "public destinations, through ipybox's proxy",
            s.dirs.workspace);
    ipb_mcp_server srv = {.in_fd = 0, .out_fd = 1, .session = &s, .stop = &stop_requested};
    ipb_mcp_serve(&srv);
    const char *ws = s.dirs.workspace_owned ? strdup(s.dirs.workspace) : NULL;
    ipb_session_close(&s);
    ipb_proxy_stop(proxy);
    if (ws && access(ws, F_OK) == 0) {
        const char *name = strrchr(ws, '/') ? strrchr(ws, '/') + 1 : ws;
        log_warn("workspace kept: %s (it holds files: `--workspace %s` uses it again, `ipybox workspaces prune` "
                 "removes it)",
                 ws, name);
    }
    free((char *)ws);
    ipb_options_free(&o);
    return 0;
}
