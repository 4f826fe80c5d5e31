#include "mcp_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fdio.h"
#include "jsonfast.h"
#include "clock.h"
#include "log.h"
#include "options.h"
#include "shellgate.h"
#include "toolchan.h"
#include "tools.h"
#include "version.h"

#define PROGRESS_INTERVAL_MS 50
/* A call with a progress token hears from us at least this often, output or not, so that a
 * client that resets its request timeout on progress keeps waiting for a silent cell. */
#define HEARTBEAT_MS 10000
/* The longest the loop sleeps while a call runs when nothing is due sooner (a client gone
 * with its input already closed is noticed at the next wake). */
#define IDLE_TICK_MS 250
#define OUT_PIPE_SIZE (1 << 20) /* the most an unprivileged process may ask for by default */
/* Pending output goes out once this much is waiting (large output then streams in pieces the
 * client can parse while the next are prepared), or after the interval. */
#define PROGRESS_CHUNK (256u << 10)

/* Newest first; the first is answered when a client asks for one we do not know. */
const char *const ipb_mcp_protocol_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL};

static const char instructions[] =
    "ipybox runs Python in a stateful, sandboxed IPython kernel. State persists across "
    "execute_ipython_cell calls until reset. /app is the workspace (upload_file / download_file). "
    "Use `!pip install` for packages and top-level `await` for async code (never asyncio.run()). "
    "Network connections go through ipybox's egress proxy, which allows only the destinations the "
    "user permitted (all public ones unless they named a list); a refused destination is named at the "
    "end of the cell's result (\"[ipybox] egress refused: ...\"), with the option "
    "the user could start ipybox with to allow it.";

/* Past this much queued, the client's input is not read either (it would only add answers
 * nobody reads); the kernel's output stops at IPB_OUTQ_HIGH already. */
#define OUTQ_MAX (64u << 20)
/* After the client closed its input, a queued call starts only if the client took all our
 * output within this long (it is still reading). */
#define STILL_READING_MS 5000

static void queue_line(ipb_mcp_server *srv, json_t *msg, bool urgent) {
    if (!msg)
        return;
    size_t len;
    char *line = jrpc_dump(msg, &len);
    json_decref(msg);
    if (!line || srv->q.broken) {
        free(line);
        return;
    }
    struct iovec iov = {line, len};
    if (ipb_outq_push(&srv->q, &iov, 1, urgent) < 0)
        log_error("cannot write to the MCP client; stopping");
    free(line);
}

/* Answers, errors, questions: ahead of queued progress. */
static void send_msg(ipb_mcp_server *srv, json_t *msg) { queue_line(srv, msg, true); }
/* A tools/call result: after the progress of that call. */
static void send_result(ipb_mcp_server *srv, json_t *msg) { queue_line(srv, msg, false); }

/* One progress notification whose message is the pending body followed by `more` (a JSON
 * string body too, or empty): written straight from both, without joining them first. */
static void send_progress(ipb_mcp_server *srv, const char *more, size_t more_len) {
    if (!srv->progress_token || srv->pending.len + more_len == 0 || srv->q.broken)
        return;
    size_t queued = ipb_outq_len(&srv->q);
    if ((srv->interrupting && queued >= IPB_OUTQ_HIGH) || queued >= IPB_OUTQ_HIGH + IPB_OUTQ_OVERSHOOT) {
        /* Only while a call is being interrupted or cancelled is the kernel's output read
         * past the bound (execute.c): its text is in the result, not streamed. Otherwise the
         * bound is kept by not reading the kernel, a message at a time (one message may take
         * the queue past it, by IPB_OUTQ_OVERSHOOT at most). */
        srv->progress_dropped += srv->pending.len + more_len;
        ipb_buf_reset(&srv->pending);
        return;
    }
    srv->progress += 1;
    char *token = json_dumps(srv->progress_token, JSON_COMPACT | JSON_ENCODE_ANY);
    char *head = token ? ipb_strdupf("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":"
                                     "{\"progressToken\":%s,\"progress\":%.0f,\"message\":\"",
                                     token, srv->progress)
                       : NULL;
    static const char tail[] = "\"}}\n";
    struct iovec iov[4] = {{head, head ? strlen(head) : 0},
                           {srv->pending.data, srv->pending.len},
                           {(void *)more, more_len},
                           {(void *)tail, sizeof(tail) - 1}};
    if (head && ipb_outq_push(&srv->q, iov, 4, false) < 0)
        log_error("cannot write to the MCP client; stopping");
    srv->last_sent_ms = ipb_now_ms();
    free(token);
    free(head);
    /* Keep a small buffer between chunks, not the largest one ever seen. */
    if (srv->pending.cap > 2 * PROGRESS_CHUNK)
        ipb_buf_free(&srv->pending);
    else
        ipb_buf_reset(&srv->pending);
    srv->last_flush_ms = ipb_now_ms();
}

static void flush_progress(ipb_mcp_server *srv) { send_progress(srv, NULL, 0); }

/* Pending output is kept as a JSON string body: text that arrived in that form (the usual
 * case) is appended as it is, anything else is escaped. A large piece goes out at once,
 * behind what is pending, without being copied. */
static void on_output(void *ud, const char *text, size_t len, const char *json_body, size_t json_len) {
    ipb_mcp_server *srv = ud;
    if (!srv->progress_token)
        return;
    if (json_body && srv->pending.len + json_len >= PROGRESS_CHUNK) {
        send_progress(srv, json_body, json_len);
        return;
    }
    if (json_body)
        ipb_buf_append(&srv->pending, json_body, json_len);
    else
        ipb_json_escape_body_append(&srv->pending, text, len);
    if (srv->pending.len >= PROGRESS_CHUNK || ipb_now_ms() - srv->last_flush_ms >= PROGRESS_INTERVAL_MS)
        flush_progress(srv);
}

/* --- approval of tool calls from the kernel ------------------------------------------ */

#define ARGS_SHOWN 4000

/* The questions open: srv->approvals maps our elicitation request's id (a string) to
 * [call, deadline_ms]; each belongs to one call of the tool channel. */
static void forget(ipb_mcp_server *srv, const char *qid) { json_object_del(srv->approvals, qid); }

static const char *question_of(ipb_mcp_server *srv, unsigned long call) {
    const char *qid;
    json_t *v;
    json_object_foreach(srv->approvals, qid, v) {
        if ((unsigned long)json_integer_value(json_array_get(v, 0)) == call)
            return qid;
    }
    return NULL;
}

static void withdraw(void *ud, unsigned long call) {
    ipb_mcp_server *srv = ud;
    const char *qid = question_of(srv, call);
    if (!qid)
        return;
    send_msg(srv, jrpc_notification("notifications/cancelled",
                                    json_pack("{s:s, s:s}", "requestId", qid, "reason",
                                              "the tool call was abandoned (the cell ended or was interrupted)")));
    forget(srv, qid);
}

static enum ipb_approval approve(void *ud, unsigned long call, const char *server, const char *tool, json_t *args,
                                 char **why) {
    ipb_mcp_server *srv = ud;
    /* Shell commands (--approve-shell): only patterns naming "ipybox" itself pre-approve. */
    char *shell_q = ipb_shellgate_question(&srv->session->mcp, server, tool, args, ARGS_SHOWN);
    if (shell_q ? ipb_shellgate_preapproved(srv->session->opts, tool)
                : ipb_options_auto_approved(srv->session->opts, server, tool)) {
        free(shell_q);
        return IPB_APPROVED;
    }
    if (srv->elicit == IPB_ELICIT_NO || srv->q.broken) {
        free(shell_q);
        *why = ipb_strdupf("the MCP client cannot be asked (it did not declare the elicitation capability) and "
                           "--approve-tools does not name %s/%s",
                           server, tool);
        return IPB_REJECTED;
    }
    /* ASCII only: no direction or format characters can rearrange what the person reads. */
    char *shown = json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
    size_t len = shown ? strlen(shown) : 0;
    char cut[96] = "";
    if (len > ARGS_SHOWN)
        snprintf(cut, sizeof(cut), "... (CUT: only the first %d of %zu characters are shown)", ARGS_SHOWN, len);
    char *message =
        shell_q ? shell_q
                : ipb_strdupf("Code in the ipybox sandbox asks to call tool '%s' of MCP server '%s' "
                              "with arguments %.*s%s. Accept to run this call, decline to refuse it.",
                              tool, server, (int)(len > ARGS_SHOWN ? ARGS_SHOWN : len), shown ? shown : "{}", cut);
    free(shown);
    char qid[48];
    snprintf(qid, sizeof(qid), "ipybox-approval-%lu", ++srv->approval_seq);
    json_t *params = json_pack("{s:s, s:{s:s, s:{}}, s:{s:O*, s:{s:s, s:s, s:O}}}", "message", message ? message : "",
                               "requestedSchema", "type", "object", "properties", "_meta", IPB_META_CALL_ID,
                               srv->elicit == IPB_ELICIT_UNKNOWN ? srv->current_id : NULL, "ipybox/toolCall", "server",
                               server, "tool", tool, "arguments", args);
    free(message);
    send_msg(srv, json_pack("{s:s, s:s, s:s, s:o}", "jsonrpc", "2.0", "id", qid, "method", "elicitation/create",
                            "params", params));
    if (srv->q.broken) { /* nobody is there to answer */
        *why = ipb_strdupf("the MCP client is gone");
        return IPB_REJECTED;
    }
    json_object_set_new(srv->approvals, qid,
                        json_pack("[I, I]", (json_int_t)call, (json_int_t)(ipb_now_ms() + IPB_APPROVAL_TIMEOUT_MS)));
    return IPB_APPROVAL_PENDING;
}

/* The client's answer to our elicitation request qid. */
static void on_approval_answer(ipb_mcp_server *srv, const char *qid, json_t *root) {
    unsigned long call = (unsigned long)json_integer_value(json_array_get(json_object_get(srv->approvals, qid), 0));
    forget(srv, qid);
    ipb_toolchan *chan = srv->session->chan;
    json_t *error = json_object_get(root, "error");
    if (error) {
        const char *msg = json_string_value(json_object_get(error, "message"));
        if (json_integer_value(json_object_get(error, "code")) == JRPC_METHOD_NOT_FOUND)
            ipb_toolchan_decide(chan, call, false,
                                "the MCP client cannot be asked (it does not take elicitation requests) and "
                                "--approve-tools does not name this tool");
        else {
            char *why = ipb_strdupf("asking the MCP client failed: %.300s", msg ? msg : "an error without a message");
            ipb_toolchan_decide(chan, call, false, why);
            free(why);
        }
        return;
    }
    const char *action = json_string_value(json_object_get(json_object_get(root, "result"), "action"));
    if (action && !strcmp(action, "accept"))
        ipb_toolchan_decide(chan, call, true, NULL);
    else if (action && !strcmp(action, "decline"))
        ipb_toolchan_decide(chan, call, false, "the application declined it");
    else if (action && !strcmp(action, "cancel"))
        ipb_toolchan_decide(chan, call, false, "the application dismissed the request");
    else
        ipb_toolchan_decide(chan, call, false, "the MCP client's answer to the approval request was not understood");
}

/* A call that has sent nothing for HEARTBEAT_MS says it is still running, with the time it
 * has run. Marked in _meta, so that clients that show progress messages as the cell's output
 * can leave it out. */
static void heartbeat(ipb_mcp_server *srv, long now) {
    srv->last_sent_ms = now; /* also when it cannot go: tried again an interval later */
    if (srv->q.broken || ipb_outq_len(&srv->q) >= IPB_OUTQ_HIGH)
        return; /* the client is not reading what it was sent already */
    long secs = (now - srv->call_start_ms + 500) / 1000;
    char message[64];
    snprintf(message, sizeof(message), "still running, %ld s", secs);
    srv->progress += 1;
    queue_line(srv,
               jrpc_notification("notifications/progress",
                                 json_pack("{s:O, s:I, s:s, s:{s:{s:I}}}", "progressToken", srv->progress_token,
                                           "progress", (json_int_t)srv->progress, "message", message, "_meta",
                                           "ipybox/heartbeat", "elapsedSeconds", (json_int_t)secs)),
               false);
}

/* How long until on_tick has something to do: pending output, a heartbeat, an approval's
 * deadline. */
static long tick_due(void *ud) {
    ipb_mcp_server *srv = ud;
    long now = ipb_now_ms(), due = -1;
    if (srv->pending.len && !srv->q.broken) /* (pending that cannot go is not due: no spinning) */
        due = srv->last_flush_ms + PROGRESS_INTERVAL_MS;
    if (srv->progress_token && (due < 0 || srv->last_sent_ms + HEARTBEAT_MS < due))
        due = srv->last_sent_ms + HEARTBEAT_MS;
    const char *qid;
    json_t *v;
    json_object_foreach(srv->approvals, qid, v) {
        long d = (long)json_integer_value(json_array_get(v, 1));
        if (due < 0 || d < due)
            due = d;
    }
    return due < 0 ? -1 : due > now ? due - now : 0;
}

/* Output waiting longer than the interval goes out even when no more output follows. */
static void on_tick(void *ud) {
    ipb_mcp_server *srv = ud;
    if (srv->pending.len && ipb_now_ms() - srv->last_flush_ms >= PROGRESS_INTERVAL_MS)
        flush_progress(srv);
    if (srv->progress_token && ipb_now_ms() - srv->last_sent_ms >= HEARTBEAT_MS)
        heartbeat(srv, ipb_now_ms());
    /* Collected first: a decision can put the next call's question (the object changes). */
    long now = ipb_now_ms();
    unsigned long late[IPB_TOOLCHAN_MAX_CONNS];
    size_t n = 0;
    const char *qid;
    json_t *v;
    json_object_foreach(srv->approvals, qid, v) {
        if (json_integer_value(json_array_get(v, 1)) <= now && n < IPB_TOOLCHAN_MAX_CONNS)
            late[n++] = (unsigned long)json_integer_value(json_array_get(v, 0));
    }
    for (size_t i = 0; i < n; i++) {
        withdraw(srv, late[i]);
        ipb_toolchan_decide(srv->session->chan, late[i], false, "no decision came within 600 s");
    }
}

static void on_tool(void *ud) {
    ipb_mcp_server *srv = ud;
    ipb_toolchan_pump(srv->session->chan, true);
}

static void on_interrupt(void *ud) {
    ipb_mcp_server *srv = ud;
    srv->interrupting = true;
    ipb_toolchan_interrupted(srv->session->chan);
}

static bool tool_paused(void *ud) {
    ipb_mcp_server *srv = ud;
    return ipb_toolchan_waiting(srv->session->chan);
}

static bool ids_equal(json_t *a, json_t *b) { return a && b && json_equal(a, b); }

json_t *ipb_mcp_initialize_result(json_t *params) {
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    const char *version = ipb_mcp_protocol_versions[0];
    for (size_t i = 0; asked && ipb_mcp_protocol_versions[i]; i++)
        if (!strcmp(asked, ipb_mcp_protocol_versions[i]))
            version = ipb_mcp_protocol_versions[i];
    return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version, "capabilities", "tools",
                     "listChanged", 0, "serverInfo", "name", "ipybox", "title", "ipybox (native sandbox)", "version",
                     IPYBOX_VERSION, "instructions", instructions);
}

static void run_call(ipb_mcp_server *srv, json_t *root);

/* The client is gone when nobody reads our output any more (EOF on stdin alone only means
 * no more requests: running and queued calls still finish). */
static bool client_gone(ipb_mcp_server *srv) {
    struct pollfd p = {srv->q.poll_fd, 0, 0};
    return srv->q.broken || (poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)));
}

static bool out_waiting(void *ud) {
    ipb_mcp_server *srv = ud;
    return ipb_outq_len(&srv->q) > 0 && !srv->q.broken;
}

static bool out_full(void *ud) {
    ipb_mcp_server *srv = ud;
    return ipb_outq_len(&srv->q) >= IPB_OUTQ_HIGH && !srv->q.broken;
}

static void on_out(void *ud) {
    ipb_mcp_server *srv = ud;
    if (ipb_outq_flush(&srv->q) < 0)
        log_error("cannot write to the MCP client; stopping");
}

static bool cancelled(void *ud) {
    ipb_mcp_server *srv = ud;
    return srv->cancel_current || (srv->stop && *srv->stop) || client_gone(srv);
}

/* Handles one incoming line. While a call runs (busy), tools/call requests are queued. */
static void handle_line(ipb_mcp_server *srv, const char *line, size_t len, bool busy) {
    jrpc_msg m;
    jrpc_parse(line, len, &m);
    switch (m.kind) {
    case JRPC_INVALID:
        send_msg(srv, jrpc_error(m.id, m.error_code, m.error_msg));
        break;
    case JRPC_RESPONSE:
        /* Our only requests are approval questions. */
        if (json_is_string(m.id) && json_object_get(srv->approvals, json_string_value(m.id)))
            on_approval_answer(srv, json_string_value(m.id), m.root);
        break;
    case JRPC_NOTIFICATION:
        if (!strcmp(m.method, "notifications/cancelled")) {
            json_t *rid = json_object_get(m.params, "requestId");
            if (ids_equal(rid, srv->current_id)) {
                srv->cancel_current = true;
            } else {
                size_t i;
                json_t *q;
                json_array_foreach(srv->queue, i, q) {
                    if (ids_equal(rid, json_object_get(q, "id"))) {
                        json_array_remove(srv->queue, i);
                        break;
                    }
                }
            }
        }
        break;
    case JRPC_REQUEST:
        if (!strcmp(m.method, "initialize")) {
            srv->elicit = json_is_object(json_object_get(json_object_get(m.params, "capabilities"), "elicitation"))
                              ? IPB_ELICIT_YES
                              : IPB_ELICIT_NO;
            send_msg(srv, jrpc_result(m.id, ipb_mcp_initialize_result(m.params)));
        } else if (!strcmp(m.method, "ping")) {
            send_msg(srv, jrpc_result(m.id, json_object()));
        } else if (!strcmp(m.method, "tools/list")) {
            send_msg(srv, jrpc_result(m.id, json_pack("{s:o}", "tools", ipb_tools_list())));
        } else if (!strcmp(m.method, "tools/call")) {
            const char *name = json_string_value(json_object_get(m.params, "name"));
            if (name && strlen(name) != json_string_length(json_object_get(m.params, "name")))
                name = "(name with a NUL byte)";
            if (!json_is_object(m.params) || !name) {
                send_msg(srv, jrpc_error(m.id, JRPC_INVALID_PARAMS, "Invalid params: tools/call needs a tool 'name'"));
            } else if (!ipb_tool_exists(name)) {
                char msg[512];
                snprintf(msg, sizeof(msg),
                         "Unknown tool: '%.200s' (tools: execute_ipython_cell, upload_file, register_mcp_server, "
                         "download_file, reset)",
                         name);
                send_msg(srv, jrpc_error(m.id, JRPC_INVALID_PARAMS, msg));
            } else if (busy || json_array_size(srv->queue) > 0) {
                if (json_array_size(srv->queue) >= 64)
                    send_msg(srv, jrpc_error(m.id, JRPC_INTERNAL_ERROR, "Too many queued tool calls (64)"));
                else
                    json_array_append(srv->queue, m.root);
            } else {
                run_call(srv, m.root);
            }
        } else {
            char msg[512];
            snprintf(msg, sizeof(msg), "Method not found: '%.200s'", m.method);
            send_msg(srv, jrpc_error(m.id, JRPC_METHOD_NOT_FOUND, msg));
        }
        break;
    }
    jrpc_msg_free(&m);
}

static void pump_input(ipb_mcp_server *srv, bool busy) {
    /* A client that sends without reading what we answer gets no more answers queued. */
    if (ipb_outq_len(&srv->q) >= OUTQ_MAX)
        return;
    int r = jrpc_reader_fill(&srv->rd, srv->in_fd);
    if (r < 0) {
        log_error("reading from the MCP client: %s", strerror(-r));
        srv->rd.eof = true;
    }
    for (;;) {
        char *line;
        size_t len;
        r = jrpc_reader_next(&srv->rd, &line, &len);
        if (r == 0)
            break;
        if (r == -E2BIG) {
            json_t *id = jrpc_reader_take_dropped_id(&srv->rd);
            send_msg(srv, jrpc_error(id, JRPC_INVALID_REQUEST, JRPC_TOO_LARGE_MSG));
            json_decref(id);
            continue;
        }
        if (r < 0)
            break;
        if (len == 0)
            continue;
        handle_line(srv, line, len, busy);
    }
}

static bool on_extra(void *ud) {
    ipb_mcp_server *srv = ud;
    pump_input(srv, true);
    return !srv->rd.eof;
}

static void run_call(ipb_mcp_server *srv, json_t *root) {
    json_incref(root);
    json_t *id = json_object_get(root, "id");
    json_t *params = json_object_get(root, "params");
    const char *name = json_string_value(json_object_get(params, "name"));
    json_t *args = json_object_get(params, "arguments");
    srv->current_id = id;
    srv->cancel_current = false;
    srv->interrupting = false;
    srv->progress_token = json_object_get(json_object_get(params, "_meta"), "progressToken");
    if (srv->progress_token && !json_is_string(srv->progress_token) && !json_is_integer(srv->progress_token))
        srv->progress_token = NULL;
    srv->progress = 0;
    srv->last_flush_ms = srv->call_start_ms = srv->last_sent_ms = ipb_now_ms();
    ipb_buf_reset(&srv->pending);
    ipb_exec_hooks hooks = {.ud = srv,
                            .extra_fd = srv->rd.eof ? -1 : srv->in_fd,
                            .on_extra = on_extra,
                            .cancelled = cancelled,
                            .on_output = on_output,
                            .on_tick = on_tick,
                            .tick_ms = IDLE_TICK_MS,
                            .tick_due = tick_due,
                            .tool_fd = ipb_toolchan_fd(srv->session->chan),
                            .on_tool = on_tool,
                            .paused = tool_paused,
                            .on_interrupt = on_interrupt,
                            .out_fd = srv->q.poll_fd,
                            .out_waiting = out_waiting,
                            .out_full = out_full,
                            .on_out = on_out};
    bool was_cancelled = false;
    json_t *result = ipb_tools_call(srv->session, name, args, &hooks, &was_cancelled);
    ipb_toolchan_cell_ended(srv->session->chan);
    flush_progress(srv);
    if (srv->progress_dropped) {
        log_info("%zu bytes of output were not streamed as progress: the client was not reading while the "
                 "call ended, or one kernel message was too large to queue (the result has the output)",
                 srv->progress_dropped);
        srv->progress_dropped = 0;
    }
    if (!(was_cancelled && srv->cancel_current))
        send_result(srv, jrpc_result(id, result));
    else
        json_decref(result);
    srv->current_id = NULL;
    srv->progress_token = NULL;
    srv->cancel_current = false;
    json_decref(root);
}

/* After the client closed its input: true while it still reads what we write (all of our
 * output taken within STILL_READING_MS); queued calls start only then. */
static bool still_reading(ipb_mcp_server *srv) {
    long deadline = ipb_now_ms() + STILL_READING_MS;
    while (ipb_now_ms() < deadline && !client_gone(srv)) {
        if (ipb_outq_finish(&srv->q, 100, srv->stop) == 0 && ipb_outq_unread(&srv->q) == 0)
            return true;
        if (srv->stop && *srv->stop)
            return false;
        if (ipb_outq_len(&srv->q) == 0)
            poll(NULL, 0, 20);
    }
    return false;
}

int ipb_mcp_serve(ipb_mcp_server *srv) {
    srv->queue = json_array();
    srv->approvals = json_object();
    ipb_toolchan_set_hooks(srv->session->chan,
                           &(ipb_toolchan_hooks){.ud = srv, .approve = approve, .withdraw = withdraw});
    ipb_set_nonblock(srv->in_fd, 1);
    /* A pipe to the client holds 64 KiB by default; a larger one lets output stream with
     * fewer round trips between us and the client. Not a pipe, or not allowed: no matter. */
    (void)fcntl(srv->out_fd, F_SETPIPE_SZ, OUT_PIPE_SIZE);
    ipb_outq_init(&srv->q, srv->out_fd);
    while (!srv->q.broken && !(srv->stop && *srv->stop)) {
        /* Queued calls first, in arrival order, once the client has taken most of what it
         * was sent. */
        if (json_array_size(srv->queue) > 0 && ipb_outq_len(&srv->q) < IPB_OUTQ_HIGH) {
            if (srv->rd.eof && !still_reading(srv)) {
                log_warn("the MCP client closed its input and does not read: %zu queued call%s not run",
                         json_array_size(srv->queue), json_array_size(srv->queue) == 1 ? "" : "s");
                json_array_clear(srv->queue);
                break;
            }
            json_t *next = json_incref(json_array_get(srv->queue, 0));
            json_array_remove(srv->queue, 0);
            run_call(srv, next);
            json_decref(next);
            continue;
        }
        if (srv->rd.eof && json_array_size(srv->queue) == 0)
            break;
        ipb_kernel *k = &srv->session->kernel;
        /* A sandbox that is gone leaves its stderr at EOF: not watched until the next one. */
        struct pollfd p[5] = {{srv->rd.eof ? -1 : srv->in_fd, POLLIN, 0},
                              {k->sb.fd, POLLIN, 0},
                              {k->sb.fd >= 0 ? k->stderr_fd : -1, POLLIN, 0},
                              {ipb_toolchan_fd(srv->session->chan), POLLIN, 0},
                              {ipb_outq_len(&srv->q) ? srv->q.poll_fd : -1, POLLOUT, 0}};
        if (poll(p, 5, -1) < 0) {
            if (errno == EINTR)
                continue;
            log_error("poll: %s", strerror(errno));
            break;
        }
        if (p[1].revents || p[2].revents) {
            ipb_error *err = NULL;
            bool was_dead = k->died;
            if (ipb_kernel_pump(k, &err) < 0) {
                log_warn("the sandbox ended: %s; the next call builds a new one", ipb_error_msg(err));
                ipb_session_sandbox_lost(srv->session, ipb_error_msg(err));
            } else if (k->died && !was_dead) {
                log_warn("the kernel ended between calls; the next call starts a fresh one and says so");
            }
            ipb_error_free(err);
        }
        if (p[3].revents)
            ipb_toolchan_pump(srv->session->chan, false);
        if (p[4].revents)
            on_out(srv);
        if (p[0].revents)
            pump_input(srv, false);
    }
    /* What the client was sent is written before we go (unless it is gone or we are told to
     * stop). */
    ipb_outq_finish(&srv->q, -1, srv->stop);
    json_decref(srv->approvals);
    srv->approvals = NULL;
    json_decref(srv->queue);
    srv->queue = NULL;
    jrpc_reader_free(&srv->rd);
    ipb_buf_free(&srv->pending);
    ipb_outq_free(&srv->q);
    return 0;
}
