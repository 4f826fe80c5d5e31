/* The tool channel: a unix socket in the session's read-only /opt/ipybox through which the
 * generated mcptools package asks the supervisor to call a tool. One connection per call,
 * one JSON line each way:
 *   -> {"server": NAME, "tool": NAME, "arguments": {...}}
 *   <- {"text": STR} | {"result": {"content": [...], ...}} (toolmsg.h) |
 *      {"error": {"kind": K, "message": STR}}, K: rejected | timeout | refused | failed
 * A call names only a registered server, one of the tools it listed, and arguments; anything
 * else is refused before anyone is asked. Calls are taken only while a cell runs (code left
 * running between cells, a thread, waits for the next cell); then each is put to the approve
 * hook at once, in arrival order, several questions may be open together, and each approved
 * call starts on a thread of its own (mcp_servers.h): calls never wait for each other, up to
 * IPB_MCP_MAX_CALLS_PER_SERVER per server and IPB_TOOLCHAN_MAX_CONNS connections (running,
 * waiting or being asked) in all; one more is refused with a sentence naming the cap.
 * A caller that hangs up (the cell was interrupted, timed out or was cancelled, the kernel
 * was reset or died, or the generated API's call_timeout expired) has its question withdrawn
 * or its call alone cancelled at its server; the server keeps serving the others.
 * The fd also reports finished calls and stdio servers that exited between calls (reaped at
 * once). */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "error.h"
#include "mcp_servers.h"

enum ipb_approval { IPB_APPROVED, IPB_REJECTED, IPB_APPROVAL_PENDING };

typedef struct ipb_toolchan_hooks {
    void *ud;
    /* Decide on call number `call`: APPROVED, REJECTED (with *why, malloc'd, or NULL) or
     * PENDING, in which case ipb_toolchan_decide(tc, call, ...) follows, or withdraw. Several
     * calls may be pending at once. */
    enum ipb_approval (*approve)(void *ud, unsigned long call, const char *server, const char *tool, json_t *args,
                                 char **why);
    /* The caller of `call` went away (or the cell ended) while its decision was pending: no
     * decision on it is taken any more. */
    void (*withdraw)(void *ud, unsigned long call);
} ipb_toolchan_hooks;

typedef struct ipb_toolchan ipb_toolchan;

#define IPB_TOOLCHAN_SOCKET "tool.sock"
#define IPB_TOOLCHAN_MAX_CONNS 128
#define IPB_TOOLCHAN_MAX_REQUEST (1u << 20)

/* Listens on tool.sock in servers' directory. */
ipb_toolchan *ipb_toolchan_open(ipb_mcp_servers *servers, ipb_error **err);
void ipb_toolchan_set_hooks(ipb_toolchan *tc, const ipb_toolchan_hooks *hooks);
/* One fd (epoll) to watch for POLLIN; then call ipb_toolchan_pump. */
int ipb_toolchan_fd(const ipb_toolchan *tc);
/* Serves what is ready. in_cell: a cell is running, so calls may be approved and started. */
void ipb_toolchan_pump(ipb_toolchan *tc, bool in_cell);
/* The cell ended: pending decisions are withdrawn (their calls wait for the next cell). */
void ipb_toolchan_cell_ended(ipb_toolchan *tc);
/* The cell was interrupted or cancelled: pending decisions are withdrawn and their calls
 * rejected; nothing more is approved until the next cell. */
void ipb_toolchan_interrupted(ipb_toolchan *tc);
/* The decision on a call put to the approve hook (ignored when it is no longer pending). */
void ipb_toolchan_decide(ipb_toolchan *tc, unsigned long call, bool approved, const char *why);
/* Some decision is pending (the cell's timeout does not run meanwhile). */
bool ipb_toolchan_waiting(const ipb_toolchan *tc);
void ipb_toolchan_close(ipb_toolchan *tc);
