/* `ipybox run [options] -- CMD [ARGS]`: a command in a fresh sandbox; exits with its status. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bindpoints.h"
#include "cli.h"
#include "clock.h"
#include "fdio.h"
#include "log.h"
#include "proxy.h"
#include "sandbox.h"
#include "shimcfg.h"
#include "statedir.h"

#define REFUSALS_MS 1000

static void run_usage(FILE *f) {
    fprintf(f,
            "Usage: ipybox run [OPTIONS] -- COMMAND [ARGS...]\n\n"
            "Runs COMMAND in a fresh sandbox (the same one `ipybox mcp` gives the kernel: its own user,\n"
            "mount, pid, network, IPC, UTS and cgroup namespaces, egress only through ipybox's proxy,\n"
            "no capabilities, no_new_privs, seccomp) with the workspace at /app as the working\n"
            "directory, and exits with COMMAND's status (128+N when killed by signal N; 125 when the\n"
            "sandbox could not be built, 127 when COMMAND could not be run).\n\n%s\n"
            "Options of `ipybox run` only (what sandboxed MCP servers are run with):\n"
            "  --home DIR                Host directory behind /home/appuser (made if missing, kept;\n"
            "                            default: a fresh one, removed at the end).\n"
            "  --host-dir DIR            Bind host directory DIR read-write at the same path inside\n"
            "                            (repeatable; not in or over /usr, /etc, /app, /tmp, ...).\n"
            "  --cwd DIR                 COMMAND's working directory inside (default /app).\n"
            "  --container-env-from NAME=VAR  Variable NAME for the sandbox with the value of VAR in\n"
            "                            this process's environment (repeatable; VAR must be set).\n",
            ipb_options_help());
}

/* What the egress proxy refused that was not told yet, one line each on stderr, among the
 * command's own (the same lines a cell's result carries; escaped by the proxy). */
static void tell_refusals(const ipb_sandbox *sb) {
    ipb_egress_notes n;
    if (ipb_proxy_take_notes(sb->proxy, sb->proxy_id, &n) < 0)
        return;
    char line[IPB_EGRESS_NOTE_LINE];
    for (size_t i = 0; i < n.n; i++) {
        ipb_egress_note_line(&n.list[i], line, sizeof(line));
        dprintf(2, "%s\n", line);
    }
    ipb_egress_notes_more_line(&n, line, sizeof(line));
    if (line[0])
        dprintf(2, "%s\n", line);
}

/* The command's stdio is relayed through pipes: the sandbox never holds a descriptor of
 * the caller's own files, ttys or devices (a chmod, chown or write through one from inside
 * would change the host's object; a pipe is nobody's file). One relay per direction; the
 * pipe ends here are non-blocking, the caller's descriptors are used as they are (their
 * flags are shared with other processes). */
typedef struct relay {
    int src, dst; /* -1 once closed (ours) or given up (the caller's) */
    bool into;    /* the caller's stdin into the sandbox (else the sandbox's output out) */
    size_t off, len;
    char buf[65536];
} relay;

static void relay_close(relay *r) {
    /* Only our pipe end is ours to close: the caller's fds stay open for them. */
    int ours = r->into ? r->dst : r->src;
    if (ours >= 0)
        close(ours);
    r->src = r->dst = -1;
    r->off = r->len = 0;
}

/* The caller's stdin into the sandbox: read when the buffer is empty, written as the pipe
 * takes it. EOF (or an unreadable stdin) closes the pipe once the buffer is out: the command
 * sees EOF; a command that closed its stdin ends the relay. */
static void relay_in(relay *r, short src_ev, short dst_ev) {
    if (r->dst < 0)
        return;
    if (r->len == 0 && r->src >= 0 && (src_ev & (POLLIN | POLLHUP | POLLERR | POLLNVAL))) {
        ssize_t n = read(r->src, r->buf, sizeof(r->buf));
        if (n > 0) {
            r->off = 0;
            r->len = (size_t)n;
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN))
            r->src = -1; /* the caller's: not closed, only no longer read */
    }
    if (r->len && (dst_ev & (POLLOUT | POLLERR | POLLHUP))) {
        ssize_t n = write(r->dst, r->buf + r->off, r->len);
        if (n > 0) {
            r->off += (size_t)n;
            r->len -= (size_t)n;
        } else if (n < 0 && errno != EINTR && errno != EAGAIN) {
            relay_close(r);
            return;
        }
    }
    if (r->src < 0 && r->len == 0)
        relay_close(r);
}

/* The sandbox's output to the caller's descriptor, written whole (blocking, as the command's
 * own write would have). A caller's descriptor that fails (a closed pipe) closes our end:
 * the command gets EPIPE or SIGPIPE as it would have. Returns false at EOF. */
static bool relay_out(relay *r) {
    if (r->src < 0)
        return false;
    ssize_t n = read(r->src, r->buf, sizeof(r->buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0 || ipb_write_all(r->dst, r->buf, (size_t)n) < 0) {
        relay_close(r);
        return false;
    }
    return true;
}

static bool same_file(int a, int b) {
    struct stat x, y;
    return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The pipes: *in (0: the sandbox's end, 1: ours), *out and *err (0: ours, 1: the sandbox's).
 * When the caller's stdout and stderr are one file (2>&1, a terminal), one pipe carries
 * both, so that their order is kept. */
static int make_pipes(int in[2], int out[2], int err[2]) {
    in[0] = in[1] = out[0] = out[1] = err[0] = err[1] = -1;
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
        return -errno;
    if (same_file(1, 2)) {
        err[1] = dup(out[1]);
        if (err[1] < 0)
            return -errno;
        fcntl(err[1], F_SETFD, FD_CLOEXEC);
    } else if (pipe2(err, O_CLOEXEC) < 0)
        return -errno;
    ipb_set_nonblock(in[1], 1);
    ipb_set_nonblock(out[0], 1);
    if (err[0] >= 0)
        ipb_set_nonblock(err[0], 1);
    return 0;
}

static void close_fds(int *fds, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

int cmd_run(int argc, char **argv) {
    ipb_options o;
    ipb_error *err = NULL;
    int next = 0;
    int pr = cli_parse_options(&o, argc, argv, "ipybox run", run_usage, &next);
    if (pr) {
        ipb_options_free(&o);
        return pr - 1;
    }
    if (o.approve_shell) {
        /* Nothing here would ask: refused rather than ignored, so nobody relies on it. */
        log_error("--approve-shell is for the kernel of `ipybox mcp` and ipyboxd sessions; `ipybox run` runs "
                  "COMMAND itself, with no kernel to put its shell commands to approval");
        ipb_options_free(&o);
        return 2;
    }
    if (next >= argc) {
        log_error("no command given; usage: ipybox run [OPTIONS] -- COMMAND [ARGS...]");
        ipb_options_free(&o);
        return 2;
    }
    ipb_session_dirs_reap_stale();
    ipb_session_dirs dirs;
    shim_config cfg;
    if (ipb_session_dirs_create(&o, false, &dirs, &err) < 0) {
        log_error("%s", ipb_error_msg(err));
        cli_run_mcp_refuse(ipb_error_msg(err));
        return 125;
    }
    if (ipb_shim_config_build(&o, &dirs, SHIM_MODE_RUN, argv + next, &cfg, &err) < 0) {
        log_error("%s", ipb_error_msg(err));
        cli_run_mcp_refuse(ipb_error_msg(err));
        ipb_session_dirs_remove(&dirs);
        return 125;
    }
    /* Signals for the command go through PID 1 (which ignores them for itself). */
    sigset_t fwd;
    sigemptyset(&fwd);
    sigaddset(&fwd, SIGINT);
    sigaddset(&fwd, SIGTERM);
    sigaddset(&fwd, SIGHUP);
    sigaddset(&fwd, SIGQUIT);
    sigprocmask(SIG_BLOCK, &fwd, NULL);
    int sfd = signalfd(-1, &fwd, SFD_CLOEXEC);

    /* A caller that went away (a closed pipe on our stdout) is an error on that write, not
     * our death: the command sees it through its pipe. */
    signal(SIGPIPE, SIG_IGN);

    ipb_sandbox sb = IPB_SANDBOX_INIT;
    ipb_proxy *proxy = NULL;
    int rc = 125;
    bool start_failed = false; /* then rc is ours (125-127), not the command's */
    int pin[2], pout[2], perr[2];
    static relay rin, rout, rerr;
    int pr2 = make_pipes(pin, pout, perr);
    if (pr2 < 0) {
        ipb_error_set(&err, -pr2, "creating the command's stdio pipes");
        log_error("%s", ipb_error_msg(err));
        close_fds(pin, 2);
        close_fds(pout, 2);
        close_fds(perr, 2);
        goto out;
    }
    rin = (relay){.src = 0, .dst = pin[1], .into = true};
    rout = (relay){.src = pout[0], .dst = 1};
    rerr = (relay){.src = perr[0], .dst = 2};
    int started = -1;
    if (ipb_proxy_start(&o.egress, o.max_connections, &proxy, &err) == 0)
        started = ipb_sandbox_start(&cfg, pin[0], pout[1], perr[1], 30000, &sb, &err);
    /* The sandbox's ends are the shim's now (or nobody's). */
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    if (started < 0 || ipb_sandbox_serve_egress(&sb, proxy, dirs.id, &err) < 0) {
        log_error("%s", ipb_error_msg(err));
        cli_run_mcp_refuse(ipb_error_msg(err));
        relay_close(&rin);
        relay_close(&rout);
        relay_close(&rerr);
        goto out;
    }
    bool tty_in = isatty(0);
    long told_at = ipb_now_ms();
    for (;;) {
        /* A terminal is read only while we are its foreground job: a background `ipybox run`
         * must not be stopped (SIGTTIN) by what is typed for the shell. Looked at again every
         * quarter second meanwhile. */
        bool bg = tty_in && rin.src >= 0 && tcgetpgrp(0) != getpgrp();
        struct pollfd p[6] = {{sb.fd, POLLIN, 0},
                              {sfd, POLLIN, 0},
                              {rin.dst >= 0 && !rin.len && !bg ? rin.src : -1, POLLIN, 0},
                              {rin.len ? rin.dst : -1, POLLOUT, 0},
                              {rout.src, POLLIN, 0},
                              {rerr.src, POLLIN, 0}};
        /* Refusals are told within a second, also while the command says nothing. */
        if (poll(p, 6, bg ? 250 : REFUSALS_MS) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (ipb_now_ms() - told_at >= REFUSALS_MS) {
            tell_refusals(&sb);
            told_at = ipb_now_ms();
        }
        relay_in(&rin, p[2].revents, p[3].revents);
        if (p[4].revents)
            relay_out(&rout);
        if (p[5].revents)
            relay_out(&rerr);
        if (p[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == sizeof(si))
                ipb_sandbox_send(&sb, SHIM_CMD_SIGNAL, (int32_t)si.ssi_signo, 0, NULL);
        }
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        struct shim_msg m;
        int r = shim_recv(sb.fd, &m);
        if (r <= 0) {
            tell_refusals(&sb);
            rc = ipb_sandbox_wait_exit(&sb);
            break;
        }
        if (m.type == SHIM_EV_ERROR) {
            log_error("%s: %s", m.step, m.text);
            start_failed = true;
            rc = strcmp(m.step, "exec") == 0 ? (m.err == ENOENT ? 127 : 126) : 125;
        } else if (m.type == SHIM_EV_EXITED) {
            if (!start_failed)
                rc = WIFEXITED(m.arg) ? WEXITSTATUS(m.arg) : 128 + WTERMSIG(m.arg);
            tell_refusals(&sb);
            ipb_sandbox_wait_exit(&sb);
            break;
        }
    }
    /* The command and every process of the sandbox are gone: what they wrote is in the pipes,
     * up to EOF (a writer still holding an end somehow is not waited for long). */
    relay_close(&rin);
    for (;;) {
        struct pollfd p[2] = {{rout.src, POLLIN, 0}, {rerr.src, POLLIN, 0}};
        if (rout.src < 0 && rerr.src < 0)
            break;
        int r = poll(p, 2, 2000);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (p[0].revents)
            relay_out(&rout);
        if (p[1].revents)
            relay_out(&rerr);
    }
    relay_close(&rout);
    relay_close(&rerr);
out:
    ipb_sandbox_destroy(&sb);
    ipb_proxy_stop(proxy);
    shim_config_free(&cfg);
    ipb_bind_points_remove(&dirs, &o);
    ipb_session_dirs_remove(&dirs);
    ipb_options_free(&o);
    ipb_error_free(err);
    return rc;
}
