/* `ipybox run [options] -- CMD [ARGS]`: a command in a fresh sandbox; exits with its status. */
#include <errno.h>
#include <stdbool.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "proxy.h"
#include "sandbox.h"
#include "shimcfg.h"
#include "statedir.h"

static void run_usage(FILE *f) {
    fprintf(f, "Usage: ipybox run [OPTIONS] -- COMMAND [ARGS...]\n\n"
               "Runs COMMAND in a fresh sandbox (the same one `ipybox mcp` gives the kernel: its own user,\n"
               "mount, pid, network, IPC, UTS and cgroup namespaces, egress only through ipybox's proxy,\n"
               "no capabilities, no_new_privs, seccomp) with the workspace at /app as the working\n"
               "directory, and exits with COMMAND's status (128+N when killed by signal N; 125 when the\n"
               "sandbox could not be built, 127 when COMMAND could not be run).\n\n%s",
            ipb_options_help());
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
        return 125;
    }
    if (ipb_shim_config_build(&o, &dirs, SHIM_MODE_RUN, argv + next, &cfg, &err) < 0) {
        log_error("%s", ipb_error_msg(err));
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

    ipb_sandbox sb = IPB_SANDBOX_INIT;
    ipb_proxy *proxy = NULL;
    int rc = 125;
    bool start_failed = false; /* then rc is ours (125-127), not the command's */
    if (ipb_proxy_start(&o.egress, o.max_connections, &proxy, &err) < 0 ||
        ipb_sandbox_start(&cfg, 0, 1, 2, 30000, &sb, &err) < 0 ||
        ipb_sandbox_serve_egress(&sb, proxy, dirs.id, &err) < 0) {
        log_error("%s", ipb_error_msg(err));
        goto out;
    }
    for (;;) {
        struct pollfd p[2] = {{sb.fd, POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
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
            ipb_sandbox_wait_exit(&sb);
            break;
        }
    }
out:
    ipb_sandbox_destroy(&sb);
    ipb_proxy_stop(proxy);
    shim_config_free(&cfg);
    ipb_session_dirs_remove(&dirs);
    ipb_options_free(&o);
    ipb_error_free(err);
    return rc;
}
