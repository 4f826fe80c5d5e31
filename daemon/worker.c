/* A session's worker: `ipybox mcp --embedded`, re-executed from our own binary, with a pipe as
 * stdin and a socketpair as stdout, its stderr a pipe of its own; for the system service (and
 * root's daemon) with a channel of its own to the monitor. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon_int.h"
#include "fdio.h"
#include "mon_proto.h"
#include "monclient.h"
#include "record.h"

/* Where the worker's own arguments end and the client's begin is not a boundary the worker
 * sees: both are sandbox options, the client's after (so they add to or override ours). */
static char **worker_argv(struct ipbd *d, json_t *args, ipb_error **err) {
    size_t n = 0, extra = json_array_size(args);
    for (char **a = d->cfg->session_args; a && *a; a++)
        n++;
    char **argv = calloc(n + extra + 4, sizeof(char *));
    if (!argv) {
        ipb_error_set(err, ENOMEM, "session arguments");
        return NULL;
    }
    size_t k = 0;
    argv[k++] = (char *)"ipybox";
    argv[k++] = (char *)"mcp";
    argv[k++] = (char *)"--embedded";
    for (size_t i = 0; i < n; i++)
        argv[k++] = d->cfg->session_args[i];
    for (size_t i = 0; i < extra; i++) {
        json_t *v = json_array_get(args, i);
        const char *a = json_string_value(v);
        if (!a || strlen(a) != json_string_length(v)) {
            ipb_error_set(err, 0, "'args' must be an array of strings (sandbox options, as on the command line)");
            free(argv);
            return NULL;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "--embedded") || !strncmp(a, "--connect", 9)) {
            ipb_error_set(err, 0, "'%s' is not a sandbox option", a);
            free(argv);
            return NULL;
        }
        argv[k++] = (char *)a;
    }
    return argv;
}

/* Whose monitor it is, for messages. */
static const char *monitor_name(const struct ipbd *d) {
    return d->cfg->frontend ? "the ipyboxd service's monitor" : "the private monitor of root's ipyboxd";
}

/* System service (or root's daemon): a channel of its own to the monitor for the worker
 * (ADOPT: the monitor makes it and sends us its other end). Returns that end, or -1. */
static int monitor_channel(struct ipbd *d, ipb_error **err) {
    static uint32_t seq;
    struct ipbm_msg m = {.magic = IPBM_MAGIC, .type = IPBM_ADOPT, .id = ++seq};
    int r = ipbm_send(d->monitor_fd, &m, NULL, 0, MSG_DONTWAIT);
    if ((r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN) && !d->cfg->frontend) {
        /* Root's private monitor is gone (killed, say; the sandboxes it ran went with it):
         * another is started as the first was. The system service's monitor is the
         * service's own: a frontend whose monitor is gone ends with it (its parent-death
         * signal), and the service's manager starts the service again. */
        int fd = ipb_monitor_private_replace(d->monitor_fd, err);
        if (fd < 0) /* the old channel stays (dead): the next session tries again */
            return ipb_error_wrap(err, "the private monitor of root's ipyboxd is gone");
        d->monitor_fd = fd;
        r = ipbm_send(d->monitor_fd, &m, NULL, 0, MSG_DONTWAIT);
    }
    if (r < 0)
        return ipb_error_set(err, -r, "%s is gone", monitor_name(d));
    long deadline = ipbd_now_ms() + 10000;
    for (;;) {
        long left = deadline - ipbd_now_ms();
        struct pollfd p = {d->monitor_fd, POLLIN, 0};
        int n = poll(&p, 1, left > 0 ? (int)left : 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            return ipb_error_set(err, ETIMEDOUT, "%s did not answer for a channel", monitor_name(d));
        struct ipbm_msg rep;
        int fd[2];
        unsigned nfds = 0;
        r = n < 0 ? -errno : ipbm_recv(d->monitor_fd, &rep, fd, 2, &nfds, MSG_DONTWAIT);
        if (r == -EAGAIN)
            continue;
        bool mine = r == 1 && rep.id == m.id;
        if (mine && rep.type == IPBM_ADOPTED && nfds == 1 && ipbm_is_seqpacket(fd[0])) {
            if (!d->cfg->frontend)
                ipb_monitor_private_served();
            return fd[0];
        }
        ipb_record_close_fds(fd, nfds);
        if (r <= 0)
            return ipb_error_set(err, r < 0 ? -r : EPIPE, "%s is gone", monitor_name(d));
        if (mine && rep.type == IPBM_ERROR)
            return ipb_error_set(err, rep.err, "%s", rep.text);
        if (mine)
            return ipb_error_set(err, EPROTO, "%s answered something unexpected", monitor_name(d));
        /* An answer to an earlier request that timed out: skipped. */
    }
}

static pid_t spawn_worker(struct ipbd *d, char **argv, const char *cwd, int in_fd, int out_fd, int err_fd,
                          ipb_error **err) {
    pid_t parent = getpid();
    int mon = -1;
    if (d->monitor_fd >= 0 && (mon = monitor_channel(d, err)) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        if (mon >= 0)
            close(mon);
        return ipb_error_set(err, errno, "fork");
    }
    if (pid > 0) {
        if (mon >= 0)
            close(mon);
        return pid;
    }
    /* The child: its own process group (a terminal's ^C goes to the daemon, which decides),
     * killed when the daemon dies, with the daemon's blocked signals unblocked. */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        _exit(126);
    if (mon >= 0 && (dup2(mon, 3) < 0 || setenv(IPB_MONITOR_FD_ENV, "3", 1) < 0))
        _exit(126);
    if (cwd && chdir(cwd) < 0) {
        dprintf(2, "ipybox mcp: cannot start: the directory '%s' is not usable: %s\n", cwd, strerror(errno));
        _exit(126);
    }
    execv(d->cfg->self_exe, argv);
    dprintf(2, "ipybox mcp: cannot start: executing %s: %s\n", d->cfg->self_exe, strerror(errno));
    _exit(127);
}

/* A session object with its worker started (named by the caller). */
struct ipbd_session *ipbd_worker_start(struct ipbd *d, json_t *args, const char *cwd, ipb_error **err) {
    char **argv = worker_argv(d, args, err);
    if (!argv)
        return NULL;
    struct ipbd_session *s = calloc(1, sizeof(*s));
    int sp[2] = {-1, -1}, ep[2] = {-1, -1}, ip[2] = {-1, -1};
    if (!s || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 || pipe2(ep, O_CLOEXEC) < 0 ||
        pipe2(ip, O_CLOEXEC) < 0) {
        ipb_error_set(err, errno ? errno : ENOMEM, "creating a session's channels");
        goto fail;
    }
    pid_t pid = spawn_worker(d, argv, cwd, ip[0], sp[1], ep[1], err);
    close(sp[1]);
    close(ep[1]);
    close(ip[0]);
    sp[1] = ep[1] = ip[0] = -1;
    if (pid < 0)
        goto fail;
    free(argv);
    s->pid = pid;
    s->rd.max = IPBD_WORKER_LINE_MAX;
    s->created_ms = s->idle_since_ms = ipbd_now_ms();
    s->link = (struct ipbd_watch){W_LINK, sp[0], s, 0};
    s->linkw = (struct ipbd_watch){W_LINK, ip[1], s, 0};
    s->errw = (struct ipbd_watch){W_STDERR, ep[0], s, 0};
    ipb_set_nonblock(sp[0], 1);
    ipb_set_nonblock(ip[1], 1);
    ipb_set_nonblock(ep[0], 1);
    ipbd_watch_add(d, &s->link, EPOLLIN);
    ipbd_watch_add(d, &s->linkw, 0);
    ipbd_watch_add(d, &s->errw, EPOLLIN);
    s->next = d->sessions;
    d->sessions = s;
    d->nsessions++;
    return s;
fail:
    for (int i = 0; i < 2; i++) {
        if (sp[i] >= 0)
            close(sp[i]);
        if (ep[i] >= 0)
            close(ep[i]);
        if (ip[i] >= 0)
            close(ip[i]);
    }
    free(argv);
    free(s);
    return NULL;
}
