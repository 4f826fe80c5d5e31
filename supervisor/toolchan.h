/* The tool channel: a unix socket in the session's read-only /opt/ipybox through which the
 * generated mcptools package asks the supervisor to call a tool. One connection per call,
 * one JSON line each way:
 *   -> {"server": NAME, "tool": NAME, "arguments": {...}}
 *   <- {"text": STR} | {"result": {"content": [...], ...}} (toolmsg.h) |
 *      {"error": {"kind": K, "message": STR}}, K: rejected | timeout | refused | failed
 * A call names only a registered server, one of the tools it listed, and arguments; anything
 * else is refused before anyone is asked. Each call is then approved (or not) through the
 * approve hook and run on the session's tool thread. Calls are taken one at a time, in
 * arrival order, and only while a cell runs: code left running between cells (a thread)
 * waits for the next cell. A running call whose caller hangs up (the cell was interrupted,
 * the kernel died or was restarted) is cancelled at its server, and that server is started
 * again before its next call unless it answered meanwhile (mcp_servers.h).
 * The fd also reports stdio servers that exited between calls: they are reaped at once. */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "error.h"
#include "mcp_servers.h"

enum ipb_approval { IPB_APPROVED, IPB_REJECTED, IPB_APPROVAL_PENDING };

typedef struct ipb_toolchan_hooks {
    void *ud;
    /* Decide on a call: APPROVED, REJECTED (with *why, malloc'd, or NULL) or PENDING, in
     * which case ipb_toolchan_decide() follows. */
    enum ipb_approval (*approve)(void *ud, const char *server, const char *tool, json_t *args, char **why);
    /* The caller went away (or the cell ended) while a decision was pending. */
    void (*withdraw)(void *ud);
} ipb_toolchan_hooks;

typedef struct ipb_toolchan ipb_toolchan;

#define IPB_TOOLCHAN_SOCKET "tool.sock"
#define IPB_TOOLCHAN_MAX_CONNS 16
#define IPB_TOOLCHAN_MAX_REQUEST (1u << 20)

/* Listens on tool.sock in servers' directory. */
ipb_toolchan *ipb_toolchan_open(ipb_mcp_servers *servers, ipb_error **err);
void ipb_toolchan_set_hooks(ipb_toolchan *tc, const ipb_toolchan_hooks *hooks);
/* One fd (epoll) to watch for POLLIN; then call ipb_toolchan_pump. */
int ipb_toolchan_fd(const ipb_toolchan *tc);
/* Serves what is ready. in_cell: a cell is running, so calls may be approved and started. */
void ipb_toolchan_pump(ipb_toolchan *tc, bool in_cell);
/* The cell ended: a pending decision is withdrawn (the call waits for the next cell). */
void ipb_toolchan_cell_ended(ipb_toolchan *tc);
/* The cell was interrupted or cancelled: a pending decision is withdrawn and its call
 * rejected; nothing more is approved until the next cell. */
void ipb_toolchan_interrupted(ipb_toolchan *tc);
/* The decision on the call put to the approve hook. */
void ipb_toolchan_decide(ipb_toolchan *tc, bool approved, const char *why);
/* A decision is pending (the cell's timeout does not run meanwhile). */
bool ipb_toolchan_waiting(const ipb_toolchan *tc);
void ipb_toolchan_close(ipb_toolchan *tc);
