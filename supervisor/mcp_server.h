/* MCP over a newline-delimited JSON-RPC stream (stdio for `ipybox mcp`): initialize,
 * ping, tools/list, tools/call, notifications/cancelled, progress notifications. */
#pragma once
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>

#include "jsonrpc.h"
#include "outq.h"
#include "session.h"
#include "strbuf.h"

typedef struct ipb_mcp_server {
    int in_fd, out_fd;
    ipb_session *session;
    volatile sig_atomic_t *stop; /* set by a signal handler: finish and return */
    /* internal */
    jrpc_reader rd;
    json_t *queue;      /* tools/call requests waiting for the running one */
    json_t *current_id; /* id of the running tools/call */
    bool cancel_current;
    json_t *progress_token;
    double progress;
    ipb_buf pending; /* output not yet sent as progress */
    long last_flush_ms;
    long call_start_ms;      /* when the running call began */
    long last_sent_ms;       /* when its last progress notification was queued */
    ipb_outq q;              /* what the client has not taken yet */
    bool interrupting;       /* the running call is being interrupted or cancelled */
    size_t progress_dropped; /* progress text not sent: the call was ending and the
                                    * client was not reading */
    /* Approval of tool calls from the kernel: whether the client said it takes elicitation
     * requests (unknown: no initialize came, as behind ipyboxd, which answers for its clients),
     * and the questions open: {our request id: [call, deadline_ms]} (several calls may wait
     * at once, each for its own answer). */
    enum { IPB_ELICIT_UNKNOWN, IPB_ELICIT_YES, IPB_ELICIT_NO } elicit;
    json_t *approvals;
    unsigned long approval_seq;
} ipb_mcp_server;

/* How long a tool call waits for the application's decision. */
#define IPB_APPROVAL_TIMEOUT_MS (600 * 1000L)
/* Our elicitation requests carry the id of the tools/call they belong to here (params._meta),
 * so that ipyboxd can put them to the client that made that call. */
#define IPB_META_CALL_ID "ipybox/callId"

/* Serves until the input ends, the output breaks or *stop is set. Returns 0. */
int ipb_mcp_serve(ipb_mcp_server *srv);

extern const char *const ipb_mcp_protocol_versions[];
/* The result of `initialize`: the version agreed from the client's, our capabilities, info
 * and instructions. */
json_t *ipb_mcp_initialize_result(json_t *params);
