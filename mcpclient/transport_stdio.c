/* The stdio transport: the server is a process we start, newline-delimited JSON-RPC on its
 * stdin and stdout. The process has other threads (libzmq, the proxy), so the child does only
 * async-signal-safe calls between fork() and execve(); everything it needs (the program's
 * path, argv, envp) is prepared before the fork. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "fdio.h"
#include "log.h"
#include "mcpc_internal.h"
#include "strbuf.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define READ_CHUNK 65536
#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
#define MAX_PATH_LEN 4096

typedef struct stdio_transport {
    mcpc_transport base;
    pid_t pid;      /* the server, leader of its own process group; 0 once reaped */
    pid_t pgid;     /* its process group (the server's pid), kept after it is reaped */
    int status;     /* its wait status once reaped */
    int pidfd;      /* -1 when pidfd_open() is not available */
    int to_fd;      /* its stdin */
    int from_fd;    /* its stdout */
    ipb_buf in;     /* bytes read from its stdout, from offset `start` */
    size_t start;   /* where the unread part of `in` begins */
    size_t scanned; /* bytes after start known to hold no '\n' */
    bool eof;
    char *command; /* as configured, for sentences */
    /* pid and status: reaped by the reader thread, ipb_mcpc_alive() in any thread, or close */
    pthread_mutex_t reap_lock;
} stdio_transport;

/* Which step of the child failed, reported with its errno through the CLOEXEC pipe. */
enum child_step { STEP_SETPGID = 1, STEP_PDEATHSIG, STEP_PARENT_GONE, STEP_DUP, STEP_CHDIR, STEP_EXEC };
struct child_report {
    int step;
    int errnum;
};

/* ---- starting the process ---- */

/* 0 when path is a regular file we may execute, else an errno for the sentence. */
static int executable_file(const char *path) {
    struct stat st;
    if (stat(path, &st) < 0)
        return errno;
    if (!S_ISREG(st.st_mode))
        return EACCES;
    return access(path, X_OK) == 0 ? 0 : errno;
}

/* The program to execve(): a command with a '/' as it is (relative to cwd in the child, as the
 * shell would do after cd); else the first match on the host's PATH. */
static char *resolve_command(const char *command, const char *cwd, ipb_error **err) {
    if (strchr(command, '/')) {
        cleanup_free char *check = NULL;
        if (command[0] != '/' && cwd)
            check = ipb_strdupf("%s/%s", cwd, command);
        int e = executable_file(check ? check : command);
        if (e) {
            mcpc_fail(err, e, "command '%s' %s", command,
                      e == ENOENT || e == ENOTDIR ? "does not exist" : "is not an executable file");
            return NULL;
        }
        return strdup(command);
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = DEFAULT_PATH;
    const char *p = path;
    while (*p) {
        size_t n = strcspn(p, ":");
        /* An empty or relative entry would depend on the current directory: skipped. */
        if (n > 0 && n < MAX_PATH_LEN && p[0] == '/') {
            char *cand = ipb_strdupf("%.*s/%s", (int)n, p, command);
            if (!cand) {
                mcpc_fail(err, ENOMEM, "out of memory");
                return NULL;
            }
            if (executable_file(cand) == 0)
                return cand;
            free(cand);
        }
        p += n;
        if (*p == ':')
            p++;
    }
    mcpc_fail(err, ENOENT, "command '%s' was not found on PATH (%s)", command, path);
    return NULL;
}

static void free_strv(char **v) {
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

static char **build_argv(const char *command, json_t *args) {
    size_t n = json_array_size(args);
    char **argv = calloc(n + 2, sizeof(char *));
    if (!argv)
        return NULL;
    argv[0] = strdup(command);
    if (!argv[0])
        goto fail;
    for (size_t i = 0; i < n; i++)
        if (!(argv[i + 1] = strdup(json_string_value(json_array_get(args, i)))))
            goto fail;
    return argv;
fail:
    free_strv(argv);
    return NULL;
}

/* A clean environment: a few variables from the host when set, then "env" from params (which
 * replaces a host value of the same name), then extra ("NAME=value" from the start hook, or
 * ""; it replaces a value of the same name). */
static char **build_envp(json_t *env, const char *extra) {
    static const char *const keep[] = {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG"};
    size_t nkeep = sizeof(keep) / sizeof(keep[0]);
    const char *eq = strchr(extra, '=');
    size_t elen = eq ? (size_t)(eq - extra) : 0;
    char **envp = calloc(nkeep + json_object_size(env) + 2, sizeof(char *));
    if (!envp)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < nkeep; i++) {
        const char *v = getenv(keep[i]);
        if (!v || json_object_get(env, keep[i]) || (elen == strlen(keep[i]) && !strncmp(extra, keep[i], elen)))
            continue;
        if (!(envp[n++] = ipb_strdupf("%s=%s", keep[i], v)))
            goto fail;
    }
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v) {
        if (elen == strlen(k) && !strncmp(extra, k, elen))
            continue;
        if (!(envp[n++] = ipb_strdupf("%s=%s", k, json_string_value(v))))
            goto fail;
    }
    if (elen && !(envp[n++] = strdup(extra)))
        goto fail;
    return envp;
fail:
    free_strv(envp);
    return NULL;
}

/* A descriptor at 3 or above, so that the child's dup2() onto 0 and 1 cannot clobber another of
 * its pipe ends (when this process runs with 0 or 1 closed). */
static int fd_above_stdio(int fd) {
    if (fd < 0 || fd > 2)
        return fd;
    int n = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int e = errno;
    close(fd);
    errno = e;
    return n;
}

static int make_pipe(int p[2]) {
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    p[0] = fd_above_stdio(p[0]);
    p[1] = fd_above_stdio(p[1]);
    if (p[0] < 0 || p[1] < 0) {
        int e = errno;
        if (p[0] >= 0)
            close(p[0]);
        if (p[1] >= 0)
            close(p[1]);
        errno = e;
        return -1;
    }
    return 0;
}

__attribute__((noreturn)) static void report_and_exit(int fd, int step) {
    struct child_report rep = {step, errno};
    ssize_t w = write(fd, &rep, sizeof(rep));
    (void)w;
    _exit(127);
}

/* Runs in the child: only async-signal-safe calls. */
__attribute__((noreturn)) static void child_exec(pid_t parent, int stdin_fd, int stdout_fd, int report_fd, int pass_fd,
                                                 const char *path, char **argv, char **envp, const char *cwd) {
    /* The signal mask and ignored signals survive execve(): the thread that forks may block
     * signals for its own reasons (signalfd) and the process ignores SIGPIPE; the server starts
     * with the defaults. */
    for (int s = 1; s < NSIG; s++) {
        if (s == SIGKILL || s == SIGSTOP)
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        sigaction(s, &sa, NULL); /* fails for the signals libc reserves; harmless */
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (setpgid(0, 0) < 0)
        report_and_exit(report_fd, STEP_SETPGID);
    /* Dies with the thread that started it. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        report_and_exit(report_fd, STEP_PDEATHSIG);
    if (getppid() != parent) {
        errno = ESRCH;
        report_and_exit(report_fd, STEP_PARENT_GONE);
    }
    if (dup2(stdin_fd, 0) < 0 || dup2(stdout_fd, 1) < 0)
        report_and_exit(report_fd, STEP_DUP);
    /* Descriptors another thread opened without O_CLOEXEC do not reach the server. */
    syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
    /* The start hook's descriptor, as fd 3 (the report pipe moved out of its way). */
    if (pass_fd >= 0) {
        if (report_fd == 3) {
            int r = fcntl(3, F_DUPFD_CLOEXEC, 4);
            if (r < 0)
                report_and_exit(3, STEP_DUP);
            report_fd = r;
        }
        if (pass_fd == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(pass_fd, 3) < 0)
            report_and_exit(report_fd, STEP_DUP);
    }
    if (cwd && chdir(cwd) < 0)
        report_and_exit(report_fd, STEP_CHDIR);
    execve(path, argv, envp);
    report_and_exit(report_fd, STEP_EXEC);
}

static int pidfd_open_compat(pid_t pid) {
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) {
        int c = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        return c;
    }
#endif
    return -1;
}

/* ---- the process's end ---- */

/* Reaps the server if it has exited, waiting up to wait_ms. Returns true once reaped. */
static bool reap_now(stdio_transport *t) {
    pthread_mutex_lock(&t->reap_lock);
    bool done = !t->pid;
    if (!done) {
        int st;
        pid_t r = waitpid(t->pid, &st, WNOHANG);
        if (r == t->pid || (r < 0 && errno == ECHILD)) {
            t->status = r == t->pid ? st : 0;
            t->pid = 0;
            done = true;
        }
    }
    pthread_mutex_unlock(&t->reap_lock);
    return done;
}

static bool reap(stdio_transport *t, long wait_ms) {
    long deadline = ipb_now_ms() + wait_ms;
    for (;;) {
        if (reap_now(t))
            return true;
        long left = deadline - ipb_now_ms();
        if (left <= 0)
            return false;
        if (t->pidfd >= 0) {
            struct pollfd pf = {t->pidfd, POLLIN, 0};
            poll(&pf, 1, (int)left);
        } else {
            struct timespec ts = {0, 5 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
}

/* "exited with status 3", "was killed by signal 9 (Killed)". */
static void describe_status(int st, char *out, size_t size) {
    if (WIFEXITED(st))
        snprintf(out, size, "exited with status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(out, size, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(out, size, "ended (wait status %#x)", (unsigned)st);
}

/* The group outlives its leader while any member runs, and its id is not reused meanwhile. */
static void kill_group(stdio_transport *t, int sig) {
    if (t->pgid > 0)
        kill(-t->pgid, sig);
}

/* The server's end, as a sentence ending. Waits a little for the exit status after EOF. */
static int fail_gone(stdio_transport *t, const char *what, ipb_error **err) {
    mcpc_set_broken(&t->base);
    if (reap(t, 500)) {
        char how[96];
        describe_status(t->status, how, sizeof(how));
        return mcpc_fail(err, EPIPE, "the server process (%s) %s%s", t->command, how, what);
    }
    return mcpc_fail(err, EPIPE, "the server process (%s) closed its stdout%s", t->command, what);
}

static void stdio_close(mcpc_transport *base, bool graceful) {
    stdio_transport *t = (stdio_transport *)base;
    /* EOF on its stdin asks it to end; its stdout is closed too, so that a server writing on
     * its way out is not blocked by a full pipe nobody reads. */
    if (t->to_fd >= 0)
        close(t->to_fd);
    if (t->from_fd >= 0)
        close(t->from_fd);
    t->to_fd = t->from_fd = -1;
    if (t->pid) {
        if (!graceful || !reap(t, MCPC_CLOSE_GRACE_MS)) {
            if (graceful) {
                log_debug("MCP server '%s': still running %d ms after its stdin was closed; SIGTERM", base->name,
                          MCPC_CLOSE_GRACE_MS);
                kill_group(t, SIGTERM);
            }
            if (!graceful || !reap(t, MCPC_CLOSE_GRACE_MS)) {
                if (graceful)
                    log_warn("MCP server '%s': still running %d ms after SIGTERM; SIGKILL", base->name,
                             MCPC_CLOSE_GRACE_MS);
                kill_group(t, SIGKILL);
                reap(t, 10000);
            }
        }
    }
    /* Members of its group that outlived it (children of the server) go too. */
    if (t->pgid > 0 && kill(-t->pgid, 0) == 0)
        kill_group(t, SIGKILL);
    if (t->pid) {
        /* Unkillable (a task stuck in the kernel, 10 s after SIGKILL): left as it is rather
         * than blocking the caller; it stays a zombie until this process ends. */
        log_warn("MCP server '%s': process %d did not end after SIGKILL", base->name, (int)t->pid);
    }
    if (t->pidfd >= 0)
        close(t->pidfd);
    ipb_buf_free(&t->in);
    free(t->command);
    pthread_mutex_destroy(&t->reap_lock);
    free(t);
}

static void stdio_kill(mcpc_transport *base) { kill_group((stdio_transport *)base, SIGKILL); }

/* ---- messages ---- */

static int poll_one(int fd, short events, long deadline) {
    struct pollfd pf = {fd, events, 0};
    for (;;) {
        long left = mcpc_ms_left(deadline);
        int r = poll(&pf, 1, left > 1000000 ? 1000000 : (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        return r == 0 ? 0 : pf.revents;
    }
}

/* Reads what is there into `in`. Returns bytes read, 0 at EOF, -EAGAIN, or -errno. */
static ssize_t read_some(stdio_transport *t) {
    if (t->start > 0 && t->start == t->in.len) {
        ipb_buf_reset(&t->in);
        t->start = 0;
    } else if (t->start > (1u << 20) && t->start > t->in.len / 2) {
        ipb_buf_consume(&t->in, t->start);
        t->start = 0;
    }
    char chunk[READ_CHUNK];
    ssize_t n;
    do
        n = read(t->from_fd, chunk, sizeof(chunk));
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    if (n > 0 && ipb_buf_append(&t->in, chunk, (size_t)n) < 0)
        return -ENOMEM;
    return n;
}

/* Writing to a closed pipe raises SIGPIPE, which would kill the process unless it ignores it.
 * It is blocked in this thread around the write, and one raised by it is taken back. */
static ssize_t writev_nosigpipe(int fd, const struct iovec *iov, int n) {
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    bool was_pending = sigismember(&pending, SIGPIPE);
    ssize_t w = writev(fd, iov, n);
    int e = errno;
    if (w < 0 && e == EPIPE && !was_pending) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return w;
}

static int stdio_send(mcpc_transport *base, const char *msg, size_t len, enum mcpc_msg_kind kind, long deadline,
                      ipb_error **err) {
    stdio_transport *t = (stdio_transport *)base;
    (void)kind;
    if (t->to_fd < 0 || mcpc_is_broken(base))
        return mcpc_fail(err, EPIPE, "the server process (%s) is no longer running", t->command);
    static char newline[] = "\n";
    struct iovec parts[2] = {{(void *)msg, len}, {newline, 1}};
    struct iovec *iov = parts;
    int n = 2;
    while (n > 0) {
        ssize_t w = writev_nosigpipe(t->to_fd, iov, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EPIPE)
            return fail_gone(t, " (writing to its stdin failed)", err);
        if (w < 0 && errno != EAGAIN)
            return mcpc_fail(err, errno, "writing to the stdin of %s failed: %s", t->command, strerror(errno));
        if (w > 0) {
            while (n > 0 && (size_t)w >= iov->iov_len) {
                w -= (ssize_t)iov->iov_len;
                iov++;
                n--;
            }
            if (n > 0) {
                iov->iov_base = (char *)iov->iov_base + w;
                iov->iov_len -= (size_t)w;
            }
            continue;
        }
        /* The pipe is full. Keep reading its stdout meanwhile (up to a bound), so that a server
         * blocked writing a long message to us does not leave both sides waiting; once a reader
         * thread owns its stdout, that thread does (and only it). */
        bool reading = (!base->has_reader || mcpc_in_reader) && !t->eof &&
                       t->in.len - t->start < base->limits.max_message + READ_CHUNK;
        struct pollfd pf[3] = {{t->to_fd, POLLOUT, 0},
                               {t->from_fd, reading ? POLLIN : 0, 0},
                               {base->stop_fd, base->stop_fd >= 0 ? POLLIN : 0, 0}};
        long left = mcpc_ms_left(deadline);
        if (left == 0)
            return mcpc_fail(err, ETIMEDOUT, "the server did not read its stdin before the deadline");
        int r = poll(pf, 3, left > 1000000 ? 1000000 : (int)left);
        if (r < 0 && errno != EINTR)
            return mcpc_fail(err, errno, "poll failed: %s", strerror(errno));
        if (r > 0 && (pf[2].revents & POLLIN))
            return mcpc_fail(err, ESHUTDOWN, "the client was shut down");
        if (r > 0 && (pf[1].revents & (POLLIN | POLLHUP))) {
            ssize_t got = read_some(t);
            if (got == 0)
                t->eof = true;
            else if (got < 0 && got != -EAGAIN)
                return mcpc_fail(err, (int)-got, "reading the stdout of %s failed: %s", t->command,
                                 strerror((int)-got));
        }
    }
    return 1;
}

static int stdio_recv(mcpc_transport *base, long deadline, char **ret_msg, size_t *ret_len, ipb_error **err) {
    stdio_transport *t = (stdio_transport *)base;
    size_t max = base->limits.max_message;
    for (;;) {
        char *s = t->in.data ? t->in.data + t->start : NULL;
        size_t avail = t->in.len - t->start;
        char *nl = avail > t->scanned ? memchr(s + t->scanned, '\n', avail - t->scanned) : NULL;
        if (nl) {
            size_t l = (size_t)(nl - s);
            size_t used = l + 1;
            if (l && s[l - 1] == '\r')
                l--;
            t->start += used;
            t->scanned = 0;
            if (l > max)
                goto too_big;
            if (l == 0)
                continue;
            char *m = malloc(l + 1);
            if (!m)
                return mcpc_fail(err, ENOMEM, "out of memory");
            memcpy(m, s, l);
            m[l] = '\0';
            *ret_msg = m;
            *ret_len = l;
            return 1;
        }
        t->scanned = avail;
        if (avail > max + 1)
            goto too_big;
        if (t->eof)
            return fail_gone(t, "", err);
        ssize_t n = read_some(t);
        if (n > 0)
            continue;
        if (n == 0) {
            t->eof = true;
            continue;
        }
        if (n != -EAGAIN)
            return mcpc_fail(err, (int)-n, "reading the stdout of %s failed: %s", t->command, strerror((int)-n));
        /* Nothing yet: wait for output, for the process to end while a child of it holds
         * the pipe open, or for the caller to give up. */
        struct pollfd pf[4] = {{t->from_fd, POLLIN, 0},
                               {t->pidfd, t->pidfd >= 0 ? POLLIN : 0, 0},
                               {base->cancel_fd, base->cancel_fd >= 0 ? POLLIN : 0, 0},
                               {base->stop_fd, base->stop_fd >= 0 ? POLLIN : 0, 0}};
        long left = mcpc_ms_left(deadline);
        if (left == 0)
            return mcpc_fail(err, ETIMEDOUT, "no answer before the deadline");
        if (t->pidfd < 0 && left > 200)
            left = 200; /* without a pidfd, look at the process now and then */
        int r = poll(pf, 4, left > 1000000 ? 1000000 : (int)left);
        if (r > 0 && (pf[3].revents & POLLIN))
            return mcpc_fail(err, ESHUTDOWN, "the client was shut down");
        if (r > 0 && (pf[2].revents & POLLIN))
            return mcpc_fail(err, ECANCELED, "the call was cancelled");
        if (r < 0 && errno != EINTR)
            return mcpc_fail(err, errno, "poll failed: %s", strerror(errno));
        if (r < 0 || (pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        if ((t->pidfd < 0 || (pf[1].revents & POLLIN)) && reap(t, 0)) {
            /* It ended (a child of it may hold the pipe): what it wrote before comes first. */
            ssize_t m = read_some(t);
            if (m > 0)
                continue;
            return fail_gone(t, "", err);
        }
    }
too_big:
    mcpc_set_broken(base);
    log_debug("MCP server '%s': a line of its stdout is longer than %zu bytes; killing it", base->name, max);
    kill_group(t, SIGKILL);
    reap(t, 2000);
    return mcpc_fail(err, EMSGSIZE, "the server sent a message longer than the limit of %zu bytes; it was stopped",
                     max);
}

static bool stdio_gone(mcpc_transport *base) { return reap_now((stdio_transport *)base); }

static int stdio_exit_fd(mcpc_transport *base) { return ((stdio_transport *)base)->pidfd; }

static const mcpc_transport_ops stdio_ops = {
    .send = stdio_send,
    .recv = stdio_recv,
    .reset_session = NULL,
    .close = stdio_close,
    .gone = stdio_gone,
    .exit_fd = stdio_exit_fd,
    .clone = NULL,
    .kill = stdio_kill,
};

static const char *step_name(int step) {
    switch (step) {
    case STEP_SETPGID:
        return "setpgid";
    case STEP_PDEATHSIG:
        return "prctl(PR_SET_PDEATHSIG)";
    case STEP_PARENT_GONE:
        return "checking its parent";
    case STEP_DUP:
        return "dup2";
    case STEP_CHDIR:
        return "changing to the directory in 'cwd'";
    default:
        return "execve";
    }
}

static ipb_mcpc_stdio_hook start_hook;

void ipb_mcpc_set_stdio_hook(ipb_mcpc_stdio_hook hook) { start_hook = hook; }

mcpc_transport *mcpc_stdio_open(const char *name, json_t *params, const ipb_mcp_limits *limits, long deadline,
                                ipb_error **err) {
    const char *command = json_string_value(json_object_get(params, "command"));
    const char *cwd = json_string_value(json_object_get(params, "cwd"));
    cleanup_free char *path = resolve_command(command, cwd, err);
    if (!path)
        return NULL;
    char **argv = build_argv(command, json_object_get(params, "args"));
    ipb_mcpc_stdio_extra extra = {.fd = -1};
    if (argv && start_hook && start_hook(name, path, argv, &extra, err) < 0) {
        free_strv(argv);
        return NULL;
    }
    extra.env[sizeof(extra.env) - 1] = '\0';
    char **envp = build_envp(json_object_get(params, "env"), extra.env);
    stdio_transport *t = calloc(1, sizeof(*t));
    int in_p[2] = {-1, -1}, out_p[2] = {-1, -1}, rep_p[2] = {-1, -1};
    if (t) {
        pthread_mutex_init(&t->reap_lock, NULL);
        t->to_fd = t->from_fd = t->pidfd = -1;
        t->base.cancel_fd = t->base.stop_fd = -1;
        t->base.ops = &stdio_ops;
        t->base.name = name;
        t->base.limits = *limits;
    }
    if (!argv || !envp || !t || !(t->command = strdup(command))) {
        mcpc_fail(err, ENOMEM, "out of memory");
        goto fail;
    }
    if (make_pipe(in_p) < 0 || make_pipe(out_p) < 0 || make_pipe(rep_p) < 0) {
        ipb_error_set(err, errno, "cannot make pipes for the server");
        goto fail;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        ipb_error_set(err, errno, "fork failed");
        goto fail;
    }
    if (pid == 0)
        child_exec(parent, in_p[0], out_p[1], rep_p[1], extra.fd, path, argv, envp, cwd);
    /* Also here, so that a kill of the group right after the fork cannot miss it. */
    setpgid(pid, pid);
    if (extra.fd >= 0)
        close(extra.fd); /* the server's now */
    extra.fd = -1;
    t->pid = t->pgid = pid;
    t->pidfd = pidfd_open_compat(pid);
    close(in_p[0]);
    close(out_p[1]);
    close(rep_p[1]);
    in_p[0] = out_p[1] = rep_p[1] = -1;
    t->to_fd = in_p[1];
    t->from_fd = out_p[0];
    in_p[1] = out_p[0] = -1;
    ipb_set_nonblock(t->to_fd, 1);
    ipb_set_nonblock(t->from_fd, 1);

    /* The report pipe closes at execve() (CLOEXEC) or carries why the child failed. */
    struct child_report rep;
    size_t got = 0;
    for (;;) {
        int ev = poll_one(rep_p[0], POLLIN, deadline);
        if (ev < 0) {
            mcpc_fail(err, -ev, "poll failed: %s", strerror(-ev));
            goto fail;
        }
        if (ev == 0) {
            mcpc_fail(err, ETIMEDOUT, "the server process (%s) did not start before the deadline", command);
            goto fail;
        }
        ssize_t n = read(rep_p[0], (char *)&rep + got, sizeof(rep) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        if (got == sizeof(rep))
            break;
    }
    close(rep_p[0]);
    rep_p[0] = -1;
    if (got == sizeof(rep)) {
        reap(t, 2000);
        if (rep.step == STEP_EXEC)
            mcpc_fail(err, rep.errnum, "cannot run %s (%s): %s", command, path, strerror(rep.errnum));
        else if (rep.step == STEP_CHDIR)
            mcpc_fail(err, rep.errnum, "cannot start %s: cannot change to directory '%s': %s", command, cwd,
                      strerror(rep.errnum));
        else
            mcpc_fail(err, rep.errnum, "cannot start %s: %s failed: %s", command, step_name(rep.step),
                      strerror(rep.errnum));
        goto fail;
    }
    free_strv(argv);
    free_strv(envp);
    log_debug("MCP server '%s': started %s as process %d", name, path, (int)pid);
    return &t->base;

fail:
    free_strv(argv);
    free_strv(envp);
    if (extra.fd >= 0)
        close(extra.fd);
    for (int i = 0; i < 2; i++) {
        if (in_p[i] >= 0)
            close(in_p[i]);
        if (out_p[i] >= 0)
            close(out_p[i]);
        if (rep_p[i] >= 0)
            close(rep_p[i]);
    }
    if (t)
        stdio_close(&t->base, false);
    return NULL;
}
