#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "strbuf.h"

extern char **environ;

/* The READY record's listeners, in enum order, bit i of mask saying listener i came. A
 * mismatch between the mask and the descriptors leaves egress without listeners. */
static void take_egress_fds(ipb_sandbox *sb, uint32_t mask, int *fds, size_t nfds) {
    ipb_egress_fds_close(&sb->egress);
    size_t k = 0;
    for (int i = 0; i < IPB_EGRESS_NFDS; i++)
        if (mask & (1u << i))
            k++;
    if (k != nfds || (mask >> IPB_EGRESS_NFDS)) {
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
        return;
    }
    k = 0;
    for (int i = 0; i < IPB_EGRESS_NFDS; i++)
        if (mask & (1u << i))
            sb->egress.fd[i] = fds[k++];
}

void ipb_spawnattr_clean(posix_spawnattr_t *attr, short extra_flags) {
    posix_spawnattr_init(attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(attr, &none);
    posix_spawnattr_setsigdefault(attr, &all);
    posix_spawnattr_setflags(attr, (short)(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | extra_flags));
}

int ipb_sandbox_serve_egress(ipb_sandbox *sb, ipb_proxy *proxy, const char *label, ipb_error **err) {
    if (!proxy)
        return 0;
    if (ipb_proxy_attach(proxy, label, &sb->egress, &sb->proxy_id, err) < 0)
        return -1;
    sb->proxy = proxy;
    return 0;
}

unsigned ipb_sandbox_end_egress(ipb_sandbox *sb) { return sb->proxy ? ipb_proxy_end_all(sb->proxy, sb->proxy_id) : 0; }

static void stop_egress(ipb_sandbox *sb) {
    if (sb->proxy)
        ipb_proxy_detach(sb->proxy, sb->proxy_id);
    sb->proxy = NULL;
    sb->proxy_id = 0;
    ipb_egress_fds_close(&sb->egress);
}

int ipb_sandbox_next(ipb_sandbox *sb, int timeout_ms, struct shim_msg *m, ipb_error **err) {
    struct pollfd p = {sb->fd, POLLIN, 0};
    int r;
    do
        r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return ipb_error_set(err, errno, "waiting for the sandbox");
    if (r == 0)
        return 0;
    int fds[SHIM_MAX_FDS];
    size_t nfds = 0;
    r = shim_recv_fds(sb->fd, m, fds, SHIM_MAX_FDS, &nfds);
    if (r > 0 && m->type == SHIM_EV_READY)
        take_egress_fds(sb, (uint32_t)m->arg, fds, nfds);
    else
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
    if (r == 0)
        return ipb_error_set(err, 0, "the sandbox's PID 1 exited unexpectedly");
    if (r < 0)
        return ipb_error_set(err, -r, "reading from the sandbox");
    return 1;
}

int ipb_sandbox_send(ipb_sandbox *sb, uint32_t type, int32_t arg, uint32_t gen, ipb_error **err) {
    int r = shim_send(sb->fd, type, arg, 0, gen, NULL, NULL);
    return r < 0 ? ipb_error_set(err, -r, "talking to the sandbox") : 0;
}

static int spawn_own(const shim_config *cfg, int in_fd, int out_fd, int err_fd, int sync_fd, ipb_sandbox *sb,
                     ipb_buf *msg, ipb_error **err);

/* Ends a sandbox that did not come up. Returns -2 when its scope could not be made (the shim
 * never ran: no word from it, and systemd-run's status), else -1. */
static int start_failed(ipb_sandbox *sb, bool heard) {
    int kind = sb->ul.kind;
    int status = ipb_sandbox_destroy(sb);
    if (!heard && status != -1 && ipb_ulimits_scope_failed(kind, status))
        return -2;
    return -1;
}

/* Returns 0, -1 with err, or -2 when the user's systemd manager could not make the scope (and
 * a retry will not use one). */
static int sandbox_start(const shim_config *cfg, int in_fd, int out_fd, int err_fd, int timeout_ms, ipb_sandbox *ret,
                         ipb_error **err) {
    ipb_buf msg = {0};
    int r;
    bool own = ipb_monitor_fd() < 0;
    /* A sandbox of our own maps its user to ours: never when that is root. */
    if (own && geteuid() == 0)
        return ipb_error_set(err, EPERM,
                             "cannot start a sandbox: ipybox runs as root and has no monitor to start "
                             "it in the uid pool (the private monitor could not be started); it never "
                             "runs a sandbox as root");
    if (!own && (r = shim_config_encode(cfg, &msg)) < 0) {
        ipb_buf_free(&msg);
        return ipb_error_set(err, -r, "encoding the sandbox configuration");
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        ipb_buf_free(&msg);
        return ipb_error_set(err, errno, "creating the sandbox channel");
    }
    /* A SEQPACKET record must fit the send buffer whole; raise it for a large configuration,
     * never lower it. */
    int sndbuf = 0;
    socklen_t sl = sizeof(sndbuf);
    if (getsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, &sl) == 0 && (size_t)sndbuf < msg.len + 4096) {
        sndbuf = (int)msg.len + 4096;
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    }

    ipb_sandbox sb = IPB_SANDBOX_INIT;
    pid_t pid;
    if (ipb_monitor_fd() >= 0) {
        /* System service: the monitor starts the shim in a uid range of its pool. */
        r = ipb_monitor_spawn(cfg, in_fd, out_fd, err_fd, sv[1], &sb.mon, err);
        close(sv[1]);
        if (r < 0) {
            close(sv[0]);
            ipb_buf_free(&msg);
            return -1;
        }
        pid = sb.mon.pid;
        goto started;
    }
    /* User mode: the shim is ours to start (the monitor finds its own). */
    r = spawn_own(cfg, in_fd, out_fd, err_fd, sv[1], &sb, &msg, err);
    close(sv[1]);
    if (r < 0) {
        close(sv[0]);
        ipb_buf_free(&msg);
        if (sb.pid > 0) {
            sb.fd = -1;
            ipb_sandbox_destroy(&sb);
        }
        return -1;
    }
    pid = sb.pid;
    if (getsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, &sl) == 0 && (size_t)sndbuf < msg.len + 4096) {
        sndbuf = (int)msg.len + 4096;
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    }
started:
    sb.pid = pid;
    sb.fd = sv[0];
    size_t msg_len = msg.len;
    ssize_t n = send(sb.fd, msg.data, msg_len, MSG_NOSIGNAL);
    int send_errno = errno;
    ipb_buf_free(&msg);
    if (n != (ssize_t)msg_len) {
        ipb_error_set(err, n < 0 ? send_errno : EIO, "sending the sandbox configuration");
        return start_failed(&sb, false);
    }
    long deadline = ipb_now_ms() + timeout_ms;
    bool got_any = false;
    for (;;) {
        struct shim_msg m;
        long left = deadline - ipb_now_ms();
        r = ipb_sandbox_next(&sb, left > 0 ? (int)left : 0, &m, err);
        if (r == 0)
            ipb_error_set(err, ETIMEDOUT, "building the sandbox took longer than %d ms", timeout_ms);
        if (r <= 0)
            return start_failed(&sb, got_any || r == 0);
        got_any = true;
        if (m.type == SHIM_EV_READY)
            break;
        if (m.type == SHIM_EV_ERROR) {
            ipb_sandbox_destroy(&sb);
            return ipb_error_set(err, 0, "cannot build the sandbox: %s: %s", m.step, m.text);
        }
    }
    if (own)
        ipb_ulimits_attach(&sb.ul, sb.pid, &sb.mon);
    *ret = sb;
    return 0;
}

/* User mode: starts the shim (through systemd-run when its limits come from a scope) and
 * moves it into its cgroups before it has its configuration. */
static int spawn_own(const shim_config *cfg, int in_fd, int out_fd, int err_fd, int sync_fd, ipb_sandbox *sb,
                     ipb_buf *msg, ipb_error **err) {
    cleanup_free char *shim = NULL;
    if (ipb_find_shim(&shim, err) < 0)
        return -1;
    shim_config c = *cfg;
    const char *path = shim;
    char *argv[24] = {(char *)"ipybox-shim", NULL};
    char *envp[4] = {NULL};
    if (ipb_ulimits_prepare(&sb->ul, &c, shim, &path, argv, envp, err) < 0)
        return -1;
    int r = shim_config_encode(&c, msg);
    if (r < 0) {
        ipb_ulimits_release(&sb->ul, &sb->mon);
        return ipb_error_set(err, -r, "encoding the sandbox configuration");
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    ipb_spawnattr_clean(&attr, 0);
    posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    posix_spawn_file_actions_adddup2(&fa, sync_fd, SHIM_SYNC_FD);
    pid_t pid;
    r = posix_spawn(&pid, path, &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (r != 0) {
        ipb_ulimits_release(&sb->ul, &sb->mon);
        return ipb_error_set(err, r, "starting %s", path);
    }
    sb->pid = pid;
    if (ipb_ulimits_enter(&sb->ul, pid, err) < 0)
        return -1; /* the caller destroys it */
    return 0;
}

int ipb_sandbox_start(const shim_config *cfg, int in_fd, int out_fd, int err_fd, int timeout_ms, ipb_sandbox *ret,
                      ipb_error **err) {
    for (int attempt = 0;; attempt++) {
        int r = sandbox_start(cfg, in_fd, out_fd, err_fd, timeout_ms, ret, err);
        if (r != -2 || attempt > 0)
            return r < 0 ? -1 : r;
        /* The scope could not be made: once more, limited the next best way. */
        ipb_error_free(*err);
        *err = NULL;
    }
}

/* Reaps the outer shim (killing it first when asked) and releases the channel and the
 * egress listeners. Returns the wait status, or `none` when there was no shim. */
static int release(ipb_sandbox *sb, bool kill_first, int none) {
    int status = none;
    if (sb->mon.id) {
        /* Not our child: the monitor kills it and tells us when it ended. */
        status = ipb_monitor_end(&sb->mon, kill_first, 10000);
        if (status < 0)
            status = none;
        sb->pid = -1;
    } else if (sb->pid > 0) {
        if (kill_first)
            kill(sb->pid, SIGKILL);
        while (waitpid(sb->pid, &status, 0) < 0 && errno == EINTR)
            ;
        sb->pid = -1;
    }
    if (!sb->mon.id)
        ipb_ulimits_release(&sb->ul, &sb->mon);
    if (sb->fd >= 0) {
        close(sb->fd);
        sb->fd = -1;
    }
    stop_egress(sb);
    return status;
}

int ipb_sandbox_destroy(ipb_sandbox *sb) { return release(sb, true, -1); }

int ipb_sandbox_wait_exit(ipb_sandbox *sb) {
    int status = release(sb, false, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void ipb_describe_status(int status, char *buf, size_t len) {
    if (WIFEXITED(status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "was killed by signal %d (%s)%s", WTERMSIG(status), strsignal(WTERMSIG(status)),
                 WTERMSIG(status) == SIGKILL ? ", possibly for running out of memory" : "");
    else
        snprintf(buf, len, "ended with wait status 0x%x", status);
}
