#include "execute.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "crlines.h"
#include "jsonfast.h"
#include "log.h"
#include "output.h"
#include "strbuf.h"
#include "ulimits.h"

#define INTERRUPT_GRACE_MS 3000
/* The kernel takes an interrupt only inside a cell's code, once per cell (kernel_launch.py);
 * one that came before the code began is dropped there, so it is sent again this often until
 * the cell ends. */
#define INTERRUPT_RESEND_MS 200
/* Stream text is decoded this much at a time, into a buffer that stays in the cache; this is
 * also the size of the progress pieces large output is forwarded in. */
#define TEXT_CHUNK (256u << 10)

typedef struct exec_state {
    ipb_output out;
    ipb_crlines cr; /* the line in progress, for '\r' collapsing */
    ipb_buf crout;  /* what the collapser let out, passed on at once */
    ipb_exec_result *res;
    const ipb_exec_hooks *h;
    bool got_reply, got_idle, raised;
    bool reply_ok; /* the execute_reply said "ok": the code ran to its end */
    bool draining; /* interrupted or cancelled: output is read whatever the client does */
    char *scratch; /* TEXT_CHUNK bytes, for decoding stream text */
} exec_state;

static void state_free(exec_state *s) {
    ipb_output_free(&s->out);
    ipb_crlines_free(&s->cr);
    ipb_buf_free(&s->crout);
    free(s->scratch);
    s->scratch = NULL;
}

/* Final text to the result and to progress; json_body, when given, is the same text as a
 * JSON string body that needs no cleaning (see jsonfast.h), which progress can forward as it
 * is. */
static void deliver(exec_state *s, const char *text, size_t len, const char *json_body, size_t json_len) {
    ipb_output_append(&s->out, text, len);
    if (s->h && s->h->on_output && len)
        s->h->on_output(s->h->ud, text, len, json_body, json_len);
}

/* Text through the collapser, what it lets out passed on. */
static void collapse(exec_state *s, const char *text, size_t len) {
    ipb_buf_reset(&s->crout);
    ipb_crlines_feed(&s->cr, text, len, &s->crout);
    if (s->crout.len)
        deliver(s, s->crout.data, s->crout.len, NULL, 0);
}

/* The JSON body of text[0..n) when body is that of text, or NULL. */
static const char *body_of_prefix(const char *body, size_t body_len, size_t n, size_t *ret_len) {
    *ret_len = body ? ipb_json_body_prefix(body, body_len, n) : 0;
    return *ret_len ? body : NULL;
}

/* Output text, with carriage returns collapsed as a terminal shows them (crlines.h). Only the
 * line in progress goes through the collapser: the rest of a held line up to its newline, and
 * a last line without one. Whole lines without '\r' between go on as they are, with their
 * piece of the JSON body, so that large output is still forwarded without escaping it again. */
static void emit_text(exec_state *s, const char *text, size_t len, const char *json_body, size_t json_len) {
    if (ipb_crlines_holding(&s->cr)) {
        const char *nl = memchr(text, '\n', len);
        size_t head = nl ? (size_t)(nl - text) + 1 : len;
        collapse(s, text, head);
        if (head == len)
            return;
        size_t skip;
        json_body = body_of_prefix(json_body, json_len, head, &skip);
        json_body = json_body ? json_body + skip : NULL;
        json_len = json_body ? json_len - skip : 0;
        text += head;
        len -= head;
    }
    size_t plain = ipb_crlines_plain_prefix(&s->cr, text, len);
    if (plain == len) {
        deliver(s, text, len, json_body, json_len);
        return;
    }
    if (plain) {
        size_t bl;
        const char *b = body_of_prefix(json_body, json_len, plain, &bl);
        deliver(s, text, plain, b, bl);
    }
    collapse(s, text + plain, len - plain);
}

/* The output ended: the line in progress as it stands. */
static void emit_held(exec_state *s) {
    ipb_buf_reset(&s->crout);
    ipb_crlines_finish(&s->cr, &s->crout);
    if (s->crout.len)
        deliver(s, s->crout.data, s->crout.len, NULL, 0);
}

static void emit(exec_state *s, const char *text, size_t len) {
    char *copy = NULL;
    /* Copy only when there is something to remove: output is often megabytes. */
    if (memchr(text, 0x1b, len) || memchr(text, '\0', len)) {
        copy = malloc(len + 1);
        if (!copy)
            return;
        memcpy(copy, text, len);
        size_t n = ipb_strip_ansi(copy, len);
        /* NUL characters would end the text at the next C string boundary: drop them. */
        size_t w = 0;
        for (size_t i = 0; i < n; i++)
            if (copy[i])
                copy[w++] = copy[i];
        copy[w] = '\0';
        text = copy;
        len = w;
    }
    emit_text(s, text, len, NULL, 0);
    free(copy);
}

/* Stream text, decoded a chunk at a time where it arrived. Chunks end on character
 * boundaries; an escape sequence that straddles two chunks of unclean text is not
 * recognised (chunks are 256 KiB, so this is rare and only leaves a few characters). */
static void emit_stream(exec_state *s, const jmsg *m) {
    if (!s->scratch && !(s->scratch = malloc(TEXT_CHUNK)))
        return;
    const char *body = m->text_body;
    size_t left = m->text_body_len;
    while (left > 0) {
        size_t n = 0;
        size_t used = ipb_json_unescape_chunk(body, left, s->scratch, TEXT_CHUNK, &n);
        if (used == 0)
            break;
        if (m->text_clean)
            emit_text(s, s->scratch, n, body, used);
        else
            emit(s, s->scratch, n);
        body += used;
        left -= used;
    }
}

static void add_image(exec_state *s, const char *mime, json_t *v) {
    const char *data = json_string_value(v);
    if (!data)
        return;
    size_t len = json_string_length(v);
    if (s->res->n_images >= IPB_MAX_IMAGES || len > IPB_MAX_IMAGE_B64) {
        s->res->images_dropped++;
        return;
    }
    ipb_image *img = &s->res->images[s->res->n_images];
    img->mime = strdup(mime);
    img->data = strndup(data, len);
    if (img->mime && img->data)
        s->res->n_images++;
    else {
        free(img->mime);
        free(img->data);
    }
}

/* execute_result and display_data: images where present, else the text/plain form. */
static void handle_display(exec_state *s, json_t *content) {
    json_t *data = json_object_get(content, "data");
    if (!json_is_object(data))
        return;
    static const char *const mimes[] = {"image/png", "image/jpeg", "image/svg+xml"};
    bool had_image = false;
    for (size_t i = 0; i < 3; i++) {
        json_t *v = json_object_get(data, mimes[i]);
        if (v) {
            add_image(s, mimes[i], v);
            had_image = true;
            break;
        }
    }
    if (had_image)
        return;
    json_t *text = json_object_get(data, "text/plain");
    if (json_is_string(text)) {
        emit(s, json_string_value(text), json_string_length(text));
        emit(s, "\n", 1);
    }
}

/* The first error of the cell, kept apart from the output for clients that want it typed
 * (tools.c puts it in the result's _meta). */
static void record_error(ipb_exec_result *res, json_t *content) {
    if (res->ename)
        return;
    const char *en = json_string_value(json_object_get(content, "ename"));
    const char *ev = json_string_value(json_object_get(content, "evalue"));
    res->ename = strdup(en ? en : "Error");
    res->evalue = strdup(ev ? ev : "");
    ipb_buf tb = {0};
    json_t *line;
    size_t i;
    json_array_foreach(json_object_get(content, "traceback"), i, line) {
        if (json_is_string(line)) {
            ipb_buf_append(&tb, json_string_value(line), json_string_length(line));
            ipb_buf_append(&tb, "\n", 1);
        }
    }
    if (!tb.len)
        ipb_buf_appendf(&tb, "%s: %s\n", res->ename ? res->ename : "Error", res->evalue ? res->evalue : "");
    size_t n = tb.data ? ipb_strip_ansi(tb.data, tb.len) : 0;
    size_t from = 0;
    if (n > IPB_MAX_TRACEBACK) {
        from = n - IPB_MAX_TRACEBACK;
        while (from < n && ((unsigned char)tb.data[from] & 0xC0) == 0x80) /* a whole character */
            from++;
    }
    res->traceback = tb.data ? strndup(tb.data + from, n - from) : NULL;
    ipb_buf_free(&tb);
}

static void handle_iopub(exec_state *s, jmsg *m) {
    if (!strcmp(m->msg_type, "stream")) {
        json_t *t = json_object_get(m->content, "text");
        if (m->text_body)
            emit_stream(s, m);
        else if (json_is_string(t))
            emit(s, json_string_value(t), json_string_length(t));
    } else if (!strcmp(m->msg_type, "execute_result") || !strcmp(m->msg_type, "display_data")) {
        handle_display(s, m->content);
    } else if (!strcmp(m->msg_type, "error")) {
        s->raised = true;
        record_error(s->res, m->content);
        json_t *tb = json_object_get(m->content, "traceback");
        size_t i;
        json_t *line;
        if (json_is_array(tb) && json_array_size(tb) > 0) {
            json_array_foreach(tb, i, line) {
                if (json_is_string(line)) {
                    emit(s, json_string_value(line), json_string_length(line));
                    emit(s, "\n", 1);
                }
            }
        } else {
            const char *en = json_string_value(json_object_get(m->content, "ename"));
            const char *ev = json_string_value(json_object_get(m->content, "evalue"));
            char buf[1024];
            int n = snprintf(buf, sizeof(buf), "%s: %s\n", en ? en : "Error", ev ? ev : "");
            emit(s, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
        }
    } else if (!strcmp(m->msg_type, "status")) {
        const char *st = json_string_value(json_object_get(m->content, "execution_state"));
        if (st && !strcmp(st, "idle"))
            s->got_idle = true;
    }
}

/* Output is read while the client's queue has room (out_full), a message at a time. */
static bool output_waits(const exec_state *s) {
    return !s->draining && s->h && s->h->out_full && s->h->out_full(s->h->ud);
}

static void drain(ipb_kernel *k, exec_state *s, const char *msg_id) {
    jmsg m;
    while (k->running && !output_waits(s) && ipb_kernel_recv(k, IPB_IOPUB, &m, NULL) > 0) {
        if (!strcmp(m.parent_id, msg_id))
            handle_iopub(s, &m);
        jmsg_free(&m);
    }
    while (k->running && ipb_kernel_recv(k, IPB_SHELL, &m, NULL) > 0) {
        if (!strcmp(m.parent_id, msg_id) && !strcmp(m.msg_type, "execute_reply")) {
            s->got_reply = true;
            const char *st = json_string_value(json_object_get(m.content, "status"));
            if (st && strcmp(st, "ok"))
                s->raised = true;
            s->reply_ok = st && !strcmp(st, "ok");
        }
        jmsg_free(&m);
    }
}

long ipb_exec_tick_wait(const ipb_exec_hooks *h) {
    if (!h || !h->on_tick || h->tick_ms <= 0)
        return -1;
    long wait = h->tick_ms;
    long due = h->tick_due ? h->tick_due(h->ud) : -1;
    return due >= 0 && due < wait ? due : wait;
}

int ipb_execute(ipb_kernel *k, const char *code, double timeout_s, size_t max_chars, const ipb_exec_hooks *h,
                ipb_exec_result *ret, ipb_error **err) {
    memset(ret, 0, sizeof(*ret));
    if (!k->running && ipb_kernel_restart(k, err) < 0)
        return ipb_error_wrap(err, "starting a fresh kernel");
    exec_state s = {.res = ret, .h = h};
    /* System service: the cgroup's counters before, to tell what a limit did to this cell. */
    uint64_t oom0 = 0, pids0 = 0;
    ipb_monitor_events(&k->sb.mon, &oom0, &pids0);
    ipb_output_init(&s.out, max_chars);
    char msg_id[33];
    json_t *c = json_pack("{s:s, s:b, s:b, s:{}, s:b, s:b}", "code", code, "silent", 0, "store_history", 1,
                          "user_expressions", "allow_stdin", 0, "stop_on_error", 0);
    if (!c) {
        state_free(&s);
        return ipb_error_set(err, EINVAL, "the code is not valid UTF-8 text");
    }
    int r = ipb_kernel_send(k, IPB_SHELL, "execute_request", c, msg_id, err);
    json_decref(c);
    if (r < 0) {
        state_free(&s);
        return -1;
    }
    long deadline = ipb_now_ms() + (long)(timeout_s * 1000.0);
    bool interrupted = false, cancelled = false;
    long resend_at = 0; /* when the interrupt goes again (0: not interrupting) */
    /* Tool calls that waited for a cell are taken now. */
    if (h && h->tool_fd >= 0 && h->on_tool)
        h->on_tool(h->ud);
    bool watch_extra = h && h->extra_fd >= 0;
    enum ipb_exec_outcome outcome = IPB_EXEC_OK;
    for (;;) {
        zmq_pollitem_t items[7];
        int n = ipb_kernel_pollitems(k, items);
        int extra_at = -1, tool_at = -1, out_at = -1;
        s.draining = interrupted || cancelled;
        if (output_waits(&s))
            items[0].events = 0; /* iopub: the kernel waits until the client reads */
        if (h && h->out_fd >= 0 && h->out_waiting && h->out_waiting(h->ud)) {
            out_at = n;
            items[n++] = (zmq_pollitem_t){NULL, h->out_fd, ZMQ_POLLOUT, 0};
        }
        if (watch_extra) {
            extra_at = n;
            items[n++] = (zmq_pollitem_t){NULL, h->extra_fd, ZMQ_POLLIN, 0};
        }
        if (h && h->tool_fd >= 0 && h->on_tool) {
            tool_at = n;
            items[n++] = (zmq_pollitem_t){NULL, h->tool_fd, ZMQ_POLLIN, 0};
        }
        long before = ipb_now_ms();
        long left = deadline - ipb_now_ms();
        if (resend_at && resend_at - before < left)
            left = resend_at - before;
        long tick = ipb_exec_tick_wait(h);
        if (tick >= 0 && left > tick)
            left = tick;
        if (zmq_poll(items, n, left > 0 ? left : 0) < 0 && zmq_errno() != EINTR) {
            state_free(&s);
            return ipb_error_set(err, zmq_errno(), "waiting for the kernel");
        }
        if (items[2].revents || items[3].revents) {
            ipb_error *perr = NULL;
            if (ipb_kernel_pump(k, &perr) < 0) {
                /* Taken down now, so that the next call builds a new one. */
                ipb_sandbox_destroy(&k->sb);
                state_free(&s);
                *err = perr;
                return ipb_error_wrap(err, "the sandbox is gone");
            }
            ipb_error_free(perr);
        }
        drain(k, &s, msg_id);
        if (s.got_reply && s.got_idle)
            break;
        if (k->died) {
            /* Keep whatever output arrived before it died. */
            outcome = IPB_EXEC_DIED;
            break;
        }
        if (extra_at >= 0 && items[extra_at].revents && h->on_extra && !h->on_extra(h->ud))
            watch_extra = false;
        if (tool_at >= 0 && items[tool_at].revents)
            h->on_tool(h->ud);
        if (out_at >= 0 && items[out_at].revents && h->on_out)
            h->on_out(h->ud);
        /* Waiting for the application to approve a tool call does not count against the
         * timeout (an interrupt's grace runs regardless). */
        if (!interrupted && !cancelled && h && h->paused && h->paused(h->ud))
            deadline += ipb_now_ms() - before;
        if (h && h->on_tick)
            h->on_tick(h->ud);
        if (!cancelled && h && h->cancelled && h->cancelled(h->ud)) {
            cancelled = true;
            if (h->on_interrupt)
                h->on_interrupt(h->ud);
            ipb_kernel_interrupt(k, NULL);
            deadline = ipb_now_ms() + INTERRUPT_GRACE_MS;
            resend_at = ipb_now_ms() + INTERRUPT_RESEND_MS;
            continue;
        }
        if (resend_at && ipb_now_ms() >= resend_at && ipb_now_ms() < deadline) {
            ipb_kernel_interrupt(k, NULL);
            resend_at = ipb_now_ms() + INTERRUPT_RESEND_MS;
        }
        if (ipb_now_ms() >= deadline) {
            if (!interrupted && !cancelled) {
                interrupted = true;
                log_info("cell timed out after %.0f s; interrupting the kernel", timeout_s);
                if (h && h->on_interrupt)
                    h->on_interrupt(h->ud);
                ipb_kernel_interrupt(k, NULL);
                deadline = ipb_now_ms() + INTERRUPT_GRACE_MS;
                resend_at = ipb_now_ms() + INTERRUPT_RESEND_MS;
                continue;
            }
            /* The interrupt did not bring the kernel back: start over. */
            outcome = cancelled ? IPB_EXEC_CANCELLED : IPB_EXEC_TIMEOUT_RESTARTED;
            ipb_error *rerr = NULL;
            if (ipb_kernel_restart(k, &rerr) < 0) {
                ret->note = ipb_strdupf("Restarting the kernel failed: %s", ipb_error_msg(rerr));
                ipb_error_free(rerr);
            }
            break;
        }
    }
    if (outcome == IPB_EXEC_OK) {
        if (cancelled)
            outcome = IPB_EXEC_CANCELLED;
        else if (interrupted && !s.reply_ok)
            outcome = IPB_EXEC_TIMEOUT;
        /* Interrupted, yet the code ran to its end (the interrupt came before it began, or it
         * caught KeyboardInterrupt and went on): that is what it did. */
        else if (s.raised)
            outcome = IPB_EXEC_ERROR;
    }
    ret->outcome = outcome;
    emit_held(&s);
    ret->text = ipb_output_finish(&s.out);
    ret->output_len = ret->text ? strlen(ret->text) : 0;
    state_free(&s);
    char *note = NULL;
    switch (outcome) {
    case IPB_EXEC_TIMEOUT:
        note = ipb_strdupf("The cell timed out after %g s and was interrupted; the kernel's state is kept.", timeout_s);
        break;
    case IPB_EXEC_TIMEOUT_RESTARTED:
        note = ipb_strdupf(
            "The cell timed out after %g s and did not stop when interrupted, so the kernel was restarted: "
            "variables, imports and definitions are lost; files in /app and installed packages are kept.%s%s",
            timeout_s, ret->note ? " " : "", ret->note ? ret->note : "");
        break;
    case IPB_EXEC_DIED: {
        char report[2600];
        ipb_kernel_death_report(k, report, sizeof(report));
        /* A fresh kernel now, so that the next call finds one. */
        ipb_error *rerr = NULL;
        bool restarted = ipb_kernel_restart(k, &rerr) == 0;
        note = ipb_strdupf("%s %s: variables are lost; files in /app and installed packages are kept.%s%s", report,
                           restarted ? "A fresh kernel was started" : "The next call starts a fresh kernel",
                           restarted ? "" : " Restarting it failed: ", restarted ? "" : ipb_error_msg(rerr));
        ipb_error_free(rerr);
        break;
    }
    case IPB_EXEC_CANCELLED:
        note = ipb_strdupf("The cell was cancelled.");
        break;
    default:
        break;
    }
    uint64_t oom1 = 0, pids1 = 0;
    ipb_monitor_events(&k->sb.mon, &oom1, &pids1);
    char limits[400] = "";
    if (oom1 > oom0)
        snprintf(limits, sizeof(limits),
                 "The sandbox ran out of memory (its limit is %llu MiB, no swap) and the "
                 "kernel's out-of-memory killer ended a process. ",
                 (unsigned long long)(k->sb.mon.memory_max >> 20));
    if (pids1 > pids0)
        snprintf(limits + strlen(limits), sizeof(limits) - strlen(limits),
                 "The sandbox reached its limit of %u "
                 "processes and threads: creating another failed in this cell. ",
                 k->sb.mon.pids_max);
    uint64_t as_max;
    unsigned nproc_max;
    ipb_ulimits_rlimit_values(&as_max, &nproc_max);
    if (!limits[0] && ret->ename && (as_max || nproc_max)) {
        /* User mode under rlimits: no counters, but these errors are what the limits do. */
        if (as_max && !strcmp(ret->ename, "MemoryError"))
            snprintf(limits, sizeof(limits),
                     "Each process of the sandbox may use at most %llu MiB of address "
                     "space (--memory as RLIMIT_AS: this host offers no cgroup to bound the sandbox as a whole). ",
                     (unsigned long long)(as_max >> 20));
        else if (nproc_max && (!strcmp(ret->ename, "BlockingIOError") ||
                               (ret->evalue && strstr(ret->evalue, "Resource temporarily unavailable"))))
            snprintf(limits, sizeof(limits),
                     "The sandbox may have reached its limit of %u processes and threads "
                     "(--max-processes as RLIMIT_NPROC): creating another failed in this cell. ",
                     nproc_max);
    }
    if (limits[0]) {
        char *both = ipb_strdupf("%s%s", limits, note ? note : ret->note ? ret->note : "");
        free(note);
        note = both;
        if (outcome == IPB_EXEC_OK)
            ret->outcome = IPB_EXEC_ERROR;
    }
    if (note) {
        free(ret->note);
        ret->note = note;
    }
    /* A cell with megabytes of output leaves the heap grown; give it back (not after every
     * cell: trimming walks the heap). */
    if (s.out.total > (4u << 20))
        malloc_trim(0);
    return 0;
}

void ipb_exec_result_free(ipb_exec_result *r) {
    free(r->text);
    free(r->note);
    free(r->ename);
    free(r->evalue);
    free(r->traceback);
    for (size_t i = 0; i < r->n_images; i++) {
        free(r->images[i].mime);
        free(r->images[i].data);
    }
    memset(r, 0, sizeof(*r));
}
