#include "kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "fdio.h"
#include "log.h"
#include "mountplan.h"
#include "stderrnote.h"
#include "tree.h"

/* ipc endpoints: <ip>-<port>; fixed ports so the names are known in advance. */
static const int channel_port[IPB_NCHANNELS] = {1, 2, 4};
static const char *const channel_name[IPB_NCHANNELS] = {"shell", "iopub", "control"};

static void disconnect(ipb_kernel *k) {
    for (int i = 0; i < IPB_NCHANNELS; i++) {
        if (k->sock[i]) {
            zmq_close(k->sock[i]);
            k->sock[i] = NULL;
        }
        if (k->pin_fd[i] >= 0) {
            close(k->pin_fd[i]);
            k->pin_fd[i] = -1;
        }
    }
}

static int write_connection_file(ipb_kernel *k, bool rescue, ipb_error **err) {
    unsigned char rnd[32];
    if (ipb_random(rnd, sizeof(rnd)) < 0)
        return ipb_error_set(err, errno, "generating the kernel's key");
    ipb_hex(rnd, sizeof(rnd), k->key);
    if (ipb_random(rnd, 16) < 0)
        return ipb_error_set(err, errno, "generating a session id");
    ipb_hex(rnd, 16, k->session);
    json_t *c =
        json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:s}", "transport", "ipc", "ip",
                  IPB_SANDBOX_RUNDIR "/kernel", "shell_port", 1, "iopub_port", 2, "stdin_port", 3, "control_port", 4,
                  "hb_port", 5, "key", k->key, "signature_scheme", "hmac-sha256", "kernel_name", "python3");
    /* Read by the launcher (kernel_launch.py _rescue_asked); jupyter_client ignores it. */
    if (c && rescue)
        json_object_set_new(c, "ipybox_rescue", json_true());
    char *text = c ? json_dumps(c, JSON_INDENT(1)) : NULL;
    json_decref(c);
    if (!text)
        return ipb_error_set(err, ENOMEM, "writing the connection file");
    /* The run directory was emptied by PID 1 with no sandbox process alive; O_EXCL|O_NOFOLLOW
     * still refuses anything unexpected. */
    unlinkat(k->rundir_fd, "connection.json", 0);
    cleanup_close int fd =
        openat(k->rundir_fd, "connection.json", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int r = fd < 0 ? -errno : ipb_write_all(fd, text, strlen(text));
    free(text);
    if (r < 0)
        return ipb_error_set(err, -r, "writing the connection file");
    return 0;
}

/* Connects channel ch once the kernel has bound its socket file. Returns 1 when connected,
 * 0 when the file is not there yet. */
static int connect_channel(ipb_kernel *k, int ch, ipb_error **err) {
    char name[32];
    snprintf(name, sizeof(name), "kernel-%d", channel_port[ch]);
    int fd = openat(k->rundir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : ipb_error_set(err, errno, "opening the kernel's %s socket", channel_name[ch]);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
        close(fd);
        return ipb_error_set(err, EINVAL, "the kernel's %s endpoint is not a socket", channel_name[ch]);
    }
    void *s = zmq_socket(k->zctx, ch == IPB_IOPUB ? ZMQ_SUB : ZMQ_DEALER);
    if (!s) {
        close(fd);
        return ipb_error_set(err, zmq_errno(), "creating a ZMQ socket");
    }
    int zero = 0, ivl = 20;
    /* iopub: an image of the largest size kept (IPB_MAX_IMAGE_B64) and its message fit; the
     * launcher's stream messages are about 1 MiB. What a kernel that bypasses the launcher can
     * make us hold while the client does not read is (RCVHWM + 1) of these. */
    int64_t maxmsg = ch == IPB_IOPUB ? (int64_t)IPB_IOPUB_MAX_MSG : (int64_t)JMSG_MAX_FRAME;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &ivl, sizeof(ivl));
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg));
    if (ch == IPB_IOPUB) {
        /* One message waits here: when we stop reading (the client does not read), the
         * kernel's iopub socket (XPUB_NODROP, kernel_launch.py) fills and its writers wait,
         * instead of the output piling up in this process. A stream message is at most about
         * 1 MiB of text (kernel_launch.py). */
        int hwm = 1;
        zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof(hwm));
        zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
    }
    char ep[64];
    snprintf(ep, sizeof(ep), "ipc:///proc/self/fd/%d", fd);
    if (zmq_connect(s, ep) < 0) {
        int e = zmq_errno();
        zmq_close(s);
        close(fd);
        return ipb_error_set(err, e, "connecting to the kernel's %s socket", channel_name[ch]);
    }
    k->sock[ch] = s;
    k->pin_fd[ch] = fd;
    return 1;
}

void ipb_kernel_death_report(ipb_kernel *k, char *buf, size_t len) {
    char how[160];
    ipb_describe_status(k->exit_status, how, sizeof(how));
    /* Only the last few lines of stderr that may say why, as text: a kernel's start writes
     * warnings that never do (stderrnote.c). */
    char rel[sizeof(k->stderr_tail) + 1];
    size_t tl = ipb_stderr_relevant(k->stderr_tail, k->stderr_len, 8, rel, sizeof(rel));
    snprintf(buf, len, "The kernel died (it %s).%s%.*s", how, tl ? " Its last output on stderr:\n" : "", (int)tl, rel);
}

bool ipb_kernel_lacks_ipykernel(const ipb_kernel *k, char *why, size_t len) {
    static const char mark[] = "ipybox: no ipykernel: ";
    const char *end = k->stderr_tail + k->stderr_len;
    const char *at = memmem(k->stderr_tail, k->stderr_len, mark, sizeof(mark) - 1);
    if (!at)
        return false;
    at += sizeof(mark) - 1;
    const char *nl = memchr(at, '\n', (size_t)(end - at));
    size_t n = (size_t)((nl ? nl : end) - at);
    snprintf(why, len, "%.*s", (int)(n > 300 ? 300 : n), at);
    /* It is the kernel's text: printable characters only. */
    for (char *c = why; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    return true;
}

/* At most max_reads reads of 4 KiB: sandbox processes that write to it without end must not
 * keep the supervisor here (the rest is read at the next call, from the loops that poll it). */
static void drain_stderr_at_most(ipb_kernel *k, int max_reads) {
    char buf[4096];
    ssize_t n;
    for (int reads = 0; reads < max_reads && (n = read(k->stderr_fd, buf, sizeof(buf))) > 0; reads++) {
        size_t cap = sizeof(k->stderr_tail);
        if ((size_t)n >= cap) {
            memcpy(k->stderr_tail, buf + n - cap, cap);
            k->stderr_len = cap;
        } else {
            if (k->stderr_len + (size_t)n > cap) {
                size_t drop = k->stderr_len + (size_t)n - cap;
                memmove(k->stderr_tail, k->stderr_tail + drop, k->stderr_len - drop);
                k->stderr_len -= drop;
            }
            memcpy(k->stderr_tail + k->stderr_len, buf, (size_t)n);
            k->stderr_len += (size_t)n;
        }
        log_debug("kernel stderr: %.*s", (int)n, buf);
    }
}

static void drain_stderr(ipb_kernel *k) { drain_stderr_at_most(k, 16); }

/* The kernel ended (it died, or the sandbox did, or it is being restarted): so do its
 * connections and DNS queries, at once and whatever their remote does, so that none outlives
 * it or holds its successor's share of the connection cap. Every way a kernel ends comes
 * through here, before the next one starts; closing the sandbox ends them with it
 * (ipb_sandbox_destroy). */
static void kernel_ended(ipb_kernel *k) { ipb_sandbox_end_egress(&k->sb); }

static int handle_shim_msg(ipb_kernel *k, const struct shim_msg *m, ipb_error **err) {
    switch (m->type) {
    case SHIM_EV_EXITED:
        if (m->gen == k->gen) {
            k->running = false;
            k->died = true;
            k->exit_status = m->arg;
            kernel_ended(k);
        }
        return 0;
    case SHIM_EV_ZYGOTE: {
        /* Told once by the shim, before the STARTED of a kernel that took the slow way. */
        char how[160];
        if (m->err & SHIM_ZYGOTE_LATE)
            snprintf(how, sizeof(how), "did not answer in time and was killed");
        else if (m->err & SHIM_ZYGOTE_BAD)
            snprintf(how, sizeof(how), "sent what it should not and was killed");
        else
            ipb_describe_status(m->arg, how, sizeof(how));
        if (m->err & SHIM_ZYGOTE_GIVEN_UP)
            snprintf(k->zygote_note, sizeof(k->zygote_note),
                     "The zygote ended twice before it was ready (the last one %s): kernels of this "
                     "session start the slow way from now on.",
                     how);
        else
            snprintf(k->zygote_note, sizeof(k->zygote_note),
                     "The zygote ended (it %s): this kernel started the slow way; a new zygote is being made.", how);
        return 0;
    }
    case SHIM_EV_ERROR:
        k->running = false;
        k->died = true;
        k->start_outside = true;
        k->exit_status = 127 << 8;
        return ipb_error_set(err, 0, "cannot start the kernel: %s: %s", m->step, m->text);
    default:
        return 0;
    }
}

int ipb_kernel_pump(ipb_kernel *k, ipb_error **err) {
    drain_stderr(k);
    for (;;) {
        struct shim_msg m;
        int r = ipb_sandbox_next(&k->sb, 0, &m, err);
        if (r < 0) {
            k->running = false;
            k->died = true;
            k->start_outside = true;
            kernel_ended(k);
            return -1;
        }
        if (r == 0)
            return 0;
        if (handle_shim_msg(k, &m, err) < 0)
            return 0; /* reported through died; the error text stays in err for callers */
    }
}

int ipb_kernel_pollitems(ipb_kernel *k, zmq_pollitem_t items[4]) {
    items[0] = (zmq_pollitem_t){k->sock[IPB_IOPUB], 0, ZMQ_POLLIN, 0};
    items[1] = (zmq_pollitem_t){k->sock[IPB_SHELL], 0, ZMQ_POLLIN, 0};
    items[2] = (zmq_pollitem_t){NULL, k->sb.fd, ZMQ_POLLIN, 0};
    items[3] = (zmq_pollitem_t){NULL, k->stderr_fd, ZMQ_POLLIN, 0};
    return 4;
}

int ipb_kernel_send(ipb_kernel *k, enum ipb_channel ch, const char *msg_type, json_t *content, char msg_id[33],
                    ipb_error **err) {
    jmsg_frame f[6];
    char *storage = NULL;
    if (jmsg_build(k->key, k->session, msg_type, content, msg_id, f, &storage, err) < 0)
        return -1;
    int r = 0;
    for (int i = 0; i < 6 && r >= 0; i++)
        r = zmq_send(k->sock[ch], f[i].data, f[i].len, (i < 5 ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
    free(storage);
    if (r < 0)
        return ipb_error_set(err, zmq_errno(), "sending %s to the kernel", msg_type);
    return 0;
}

static void free_zmq_frame(void *p) {
    zmq_msg_close(p);
    free(p);
}

/* The text of a stream message points into its content frame: move that frame into the
 * message, so the text is used where it arrived, without a copy. */
static int keep_text_frame(jmsg *m, const jmsg_frame *f, zmq_msg_t *parts, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uintptr_t d = (uintptr_t)f[i].data, t = (uintptr_t)m->text_body;
        if (t < d || t > d + f[i].len)
            continue;
        size_t off = t - d;
        zmq_msg_t *keep = malloc(sizeof(*keep));
        if (!keep)
            return -1;
        zmq_msg_init(keep);
        zmq_msg_move(keep, &parts[i]);
        /* Small frames live inside zmq_msg_t itself: their data moved with it. */
        m->text_body = (const char *)zmq_msg_data(keep) + off;
        m->keep = keep;
        m->keep_free = free_zmq_frame;
        return 0;
    }
    return -1;
}

int ipb_kernel_recv(ipb_kernel *k, enum ipb_channel ch, jmsg *ret, ipb_error **err) {
    enum { MAX_FRAMES = 64 };
    zmq_msg_t parts[MAX_FRAMES];
    size_t n = 0;
    int more = 1;
    bool overflow = false;
    while (more) {
        zmq_msg_t tmp;
        zmq_msg_init(&tmp);
        if (zmq_msg_recv(&tmp, k->sock[ch], n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            int e = zmq_errno();
            zmq_msg_close(&tmp);
            for (size_t i = 0; i < n; i++)
                zmq_msg_close(&parts[i]);
            if (e == EAGAIN && n == 0)
                return 0;
            return ipb_error_set(err, e, "receiving from the kernel's %s channel", channel_name[ch]);
        }
        more = zmq_msg_more(&tmp);
        if (n < MAX_FRAMES)
            parts[n++] = tmp;
        else {
            overflow = true;
            zmq_msg_close(&tmp);
        }
    }
    jmsg_frame f[MAX_FRAMES];
    for (size_t i = 0; i < n; i++)
        f[i] = (jmsg_frame){zmq_msg_data(&parts[i]), zmq_msg_size(&parts[i])};
    ipb_error *perr = NULL;
    int r = overflow ? ipb_error_set(&perr, EMSGSIZE, "kernel message with too many parts")
                     : jmsg_parse(k->key, f, n, ret, &perr);
    if (r == 0 && ret->text_body && keep_text_frame(ret, f, parts, n) < 0) {
        jmsg_free(ret);
        r = ipb_error_set(&perr, ENOMEM, "keeping a kernel message");
    }
    for (size_t i = 0; i < n; i++)
        zmq_msg_close(&parts[i]);
    if (r < 0) {
        log_warn("dropped a message from the kernel: %s", ipb_error_msg(perr));
        ipb_error_free(perr);
        return 0;
    }
    return 1;
}

int ipb_kernel_interrupt(ipb_kernel *k, ipb_error **err) {
    return ipb_sandbox_send(&k->sb, SHIM_CMD_SIGNAL, SIGINT, k->gen, err);
}

/* Ready when the kernel has answered a kernel_info_request on shell and iopub has carried
 * traffic, so that the subscription is live and no output of the first cell can be missed.
 * The request is sent as soon as shell is connected (zmq hands it over when the kernel
 * listens) and sent again only when the reply came without iopub traffic (the subscription
 * was late) or nothing came at all for a while. */
static int handshake(ipb_kernel *k, long deadline, ipb_error **err) {
    char info_id[33] = "";
    bool iopub_seen = false, replied = false;
    long next_send = 0;
    while (!(iopub_seen && replied)) {
        long now = ipb_now_ms();
        if (now > deadline)
            return ipb_error_set(err, ETIMEDOUT, "the kernel did not answer within %d s", k->start_timeout_ms / 1000);
        if (now >= next_send) {
            json_t *c = json_object();
            int r = ipb_kernel_send(k, IPB_SHELL, "kernel_info_request", c, info_id, err);
            json_decref(c);
            if (r < 0 && (*err)->errnum != EAGAIN)
                return -1;
            /* Not connected yet: try again at once; sent: wait for the kernel. */
            if (r < 0)
                ipb_error_freep(err);
            next_send = now + (r < 0 ? 1 : 200);
        }
        zmq_pollitem_t items[4];
        ipb_kernel_pollitems(k, items);
        long wait = next_send - now;
        if (zmq_poll(items, 4, wait > 0 ? wait : 0) < 0 && zmq_errno() != EINTR)
            return ipb_error_set(err, zmq_errno(), "waiting for the kernel");
        if (items[2].revents || items[3].revents) {
            if (ipb_kernel_pump(k, err) < 0)
                return -1;
            if (k->died) {
                char report[2600];
                ipb_kernel_death_report(k, report, sizeof(report));
                ipb_error_freep(err);
                return ipb_error_set(err, 0, "the kernel exited while starting. %s", report);
            }
        }
        jmsg m;
        while (ipb_kernel_recv(k, IPB_IOPUB, &m, NULL) > 0) {
            iopub_seen = true;
            jmsg_free(&m);
        }
        while (ipb_kernel_recv(k, IPB_SHELL, &m, NULL) > 0) {
            if (!strcmp(m.msg_type, "kernel_info_reply")) {
                replied = true;
                if (!iopub_seen)
                    next_send = ipb_now_ms() + 5;
            }
            jmsg_free(&m);
        }
    }
    return 0;
}

static int start_kernel(ipb_kernel *k, bool rescue, ipb_error **err) {
    long deadline = ipb_now_ms() + k->start_timeout_ms;
    k->gen++;
    k->died = false;
    k->start_kind = SHIM_START_EXEC;
    k->start_note[0] = '\0';
    k->rescue_note[0] = '\0';
    k->start_outside = false;
    /* The tail is this start's alone: what the old kernel left in the pipe goes first, all of
     * it (no process of the sandbox writes now, and a pipe holds at most 1 MiB unless root
     * raised fs.pipe-max-size), so that none of it is taken for this start's notes. */
    drain_stderr_at_most(k, 256);
    k->stderr_len = 0;
    if (write_connection_file(k, rescue, err) < 0 ||
        ipb_sandbox_send(&k->sb, SHIM_CMD_START, rescue ? SHIM_START_RESCUE : 0, k->gen, err) < 0) {
        k->start_outside = true;
        return -1;
    }
    /* Wait for the started record and for the three socket files. */
    bool started = false;
    int connected = 0;
    while (connected < IPB_NCHANNELS) {
        long left = deadline - ipb_now_ms();
        if (left <= 0)
            return ipb_error_set(err, ETIMEDOUT, "the kernel did not open its sockets within %d s",
                                 k->start_timeout_ms / 1000);
        struct shim_msg m;
        int r = ipb_sandbox_next(&k->sb, started ? 0 : (int)left, &m, err);
        if (r < 0) {
            k->start_outside = true;
            return -1;
        }
        if (r == 1) {
            if (m.type == SHIM_EV_STARTED && m.gen == k->gen) {
                started = true;
                k->start_kind = m.err == SHIM_START_ZYGOTE || m.err == SHIM_START_STANDBY || m.err == SHIM_START_RESCUE
                                    ? m.err
                                    : SHIM_START_EXEC;
            } else if (handle_shim_msg(k, &m, err) < 0)
                return -1;
            if (k->died) {
                drain_stderr(k);
                char report[2600];
                ipb_kernel_death_report(k, report, sizeof(report));
                return ipb_error_set(err, 0, "the kernel exited while starting. %s", report);
            }
            continue;
        }
        drain_stderr(k);
        connected = 0;
        for (int ch = 0; ch < IPB_NCHANNELS; ch++) {
            if (!k->sock[ch] && connect_channel(k, ch, err) < 0)
                return -1;
            connected += k->sock[ch] != NULL;
        }
        if (connected < IPB_NCHANNELS) {
            struct pollfd p = {k->sb.fd, POLLIN, 0};
            poll(&p, 1, 1);
        }
    }
    long t_sockets = ipb_now_ms();
    if (handshake(k, deadline, err) < 0)
        return -1;
    /* Its notes were written before its sockets (kernel_launch.py _enter_app). */
    drain_stderr(k);
    ipb_stderr_start_notes(k->stderr_tail, k->stderr_len, 3, k->start_note, sizeof(k->start_note));
    log_debug("kernel %u: sockets after %ld ms, ready after %ld ms", k->gen,
              t_sockets - (deadline - k->start_timeout_ms), ipb_now_ms() - (deadline - k->start_timeout_ms));
    k->running = true;
    /* Told after every start: S1 boots a zygote it held (one made after a lost zygote, while
     * this kernel started the slow way) only now, so that the two Pythons do not compete for
     * the CPU. A lost channel shows at the next call. */
    ipb_error *aerr = NULL;
    if (ipb_sandbox_send(&k->sb, SHIM_CMD_ANSWERED, 0, k->gen, &aerr) < 0) {
        log_debug("telling the sandbox that its kernel answered: %s", ipb_error_msg(aerr));
        ipb_error_free(aerr);
    }
    return 0;
}

/* SIGKILL to every process of the sandbox but its PID 1; returns once they are gone. */
static int kill_all(ipb_kernel *k, ipb_error **err) {
    if (ipb_sandbox_send(&k->sb, SHIM_CMD_KILL_ALL, 0, k->gen, err) < 0)
        return -1;
    long deadline = ipb_now_ms() + 10000;
    for (;;) {
        struct shim_msg m;
        long left = deadline - ipb_now_ms();
        int r = ipb_sandbox_next(&k->sb, left > 0 ? (int)left : 0, &m, err);
        if (r == 0)
            return ipb_error_set(err, ETIMEDOUT, "the sandbox did not stop its processes");
        if (r < 0)
            return -1;
        if (m.type == SHIM_EV_KILLED)
            return 0;
    }
}

/* A start that failed because of what it ran, not because the supervisor's side, the sandbox's
 * channel or the shim failed: code the sandbox wrote that every start runs by design (a .pth
 * or usercustomize in the user site, a config, startup file or extension of IPython's
 * directory, a module in /app that a start imports) can end it, put something where its
 * sockets go, or hold it past the bound, at every start, and the session had no kernel left
 * in which to mend it. Nothing the failed start said is trusted to tell which (its exit
 * status, its stderr): a start without ipykernel is told as such from the rescue's stderr. */
static bool rescuable(const ipb_kernel *k) { return k->sb.fd >= 0 && !k->start_outside; }

/* For the host's log: the failed start's text, which is the sandbox's, without control
 * characters (no escape sequence or forged line reaches the terminal). */
static void log_safe(char *text) {
    for (unsigned char *c = (unsigned char *)text; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            *c = ' ';
}

/* text, or when it does not fit its head, " ... " and its tail (where a traceback says why),
 * cut between UTF-8 characters (a death report is valid UTF-8: stderrnote.c). */
static void shorten(const char *text, char *buf, size_t len) {
    size_t n = strlen(text), head = len / 5;
    if (n < len) {
        memcpy(buf, text, n + 1);
        return;
    }
    while (head > 0 && ((unsigned char)text[head] & 0xC0) == 0x80)
        head--;
    size_t tail = n - (len - head - 6);
    while (text[tail] && ((unsigned char)text[tail] & 0xC0) == 0x80)
        tail++;
    snprintf(buf, len, "%.*s ... %s", (int)head, text, text + tail);
}

/* start_kernel(), and when that fails in a way rescuable() takes, once more after KILL_ALL as
 * a rescue start: the slow way with `python -s` and what the launcher leaves out then
 * (kernel_launch.py _rescue_asked). The first failure is told with the kernel that came. */
static int start_or_rescue(ipb_kernel *k, ipb_error **err) {
    if (start_kernel(k, false, err) == 0)
        return 0;
    disconnect(k);
    if (!rescuable(k))
        return -1;
    char why[1000], logged[1000];
    shorten(ipb_error_msg(*err), why, sizeof(why));
    memcpy(logged, why, sizeof(logged));
    log_safe(logged);
    /* Told to the user with the kernel that comes, or in the error when none does. */
    log_debug("kernel %u failed to start (%s); starting it once more without the user site and IPython's directory",
              k->gen, logged);
    ipb_error_freep(err);
    int r = kill_all(k, err);
    kernel_ended(k);
    if (r < 0)
        return -1;
    if (start_kernel(k, true, err) < 0) {
        disconnect(k);
        return ipb_error_wrap(err, "%s A second start without the user site and IPython's directory failed too", why);
    }
    snprintf(k->rescue_note, sizeof(k->rescue_note),
             "The kernel could not start as usual: %s%s This kernel was started without what a start takes from "
             "$HOME and /app: the user site (~/.local: packages installed with pip --user, .pth files, "
             "usercustomize), IPython's directory (~/.ipython: config, startup files, extensions, history), "
             "$PYTHONSTARTUP, and /app on sys.path while it started. Cells run in /app and import from it as "
             "usual. Mend what stopped the start, then reset.",
             why, why[0] && strchr(".\n", why[strlen(why) - 1]) ? "" : ".");
    return 0;
}

int ipb_kernel_restart(ipb_kernel *k, ipb_error **err) {
    disconnect(k);
    k->running = false;
    int r = kill_all(k, err);
    /* No process of the old kernel is left (or the sandbox is broken): nothing it made may
     * stay, and nothing made from here on is its. */
    kernel_ended(k);
    if (r < 0)
        return -1;
    return start_or_rescue(k, err);
}

int ipb_kernel_open(ipb_kernel *k, const shim_config *cfg, const char *rundir, ipb_proxy *proxy, const char *label,
                    ipb_error **err) {
    memset(k, 0, sizeof(*k));
    k->proxy = proxy;
    snprintf(k->label, sizeof(k->label), "%s", label);
    k->sb = (ipb_sandbox)IPB_SANDBOX_INIT;
    k->stderr_fd = -1;
    k->rundir_fd = -1;
    for (int i = 0; i < IPB_NCHANNELS; i++)
        k->pin_fd[i] = -1;
    if (!k->start_timeout_ms)
        k->start_timeout_ms = 60000;
    k->rundir_fd = open(rundir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (k->rundir_fd < 0)
        return ipb_error_set(err, errno, "opening the session's run directory %s", rundir);
    /* A sandbox killed from outside leaves its socket files behind; no sandbox process
     * exists yet, so nothing races with this. */
    ipb_empty_dir_at(k->rundir_fd);
    if (!(k->zctx = zmq_ctx_new()))
        return ipb_error_set(err, zmq_errno(), "creating the ZMQ context");
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return ipb_error_set(err, errno, "creating the kernel's stderr pipe");
    ipb_set_nonblock(pipefd[0], 1);
    k->stderr_fd = pipefd[0];
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    int r = ipb_sandbox_start(cfg, devnull, devnull, pipefd[1], 30000, &k->sb, err);
    if (devnull >= 0)
        close(devnull);
    close(pipefd[1]);
    if (r < 0 || ipb_sandbox_serve_egress(&k->sb, proxy, k->label, err) < 0)
        return -1;
    return start_or_rescue(k, err);
}

void ipb_kernel_close(ipb_kernel *k) {
    disconnect(k);
    ipb_sandbox_destroy(&k->sb);
    if (k->zctx) {
        zmq_ctx_term(k->zctx);
        k->zctx = NULL;
    }
    if (k->stderr_fd >= 0)
        close(k->stderr_fd);
    if (k->rundir_fd >= 0)
        close(k->rundir_fd);
    k->stderr_fd = k->rundir_fd = -1;
    k->running = false;
}
