/* The MCP servers a session may call tools of: registered on the host side only (from
 * --mcp-config and the register_mcp_server tool), each with its launch or connection
 * parameters, the tools it listed, its generated package mcptools/<name>/ in the session's
 * read-only /opt/ipybox, and its client connection (made on first use and again after it
 * fails; stdio servers stopped on reset).
 *
 * Threads: each registered server has a long-lived thread of its own (its keeper) that
 * connects, lists and closes it: a stdio server's parent-death signal follows the thread that
 * started it. Calls run each on a thread of its own (callpool.h) and share the server's one
 * client (ipb_mcpc_call), up to IPB_MCP_MAX_CALLS_PER_SERVER at once; a call that finds no
 * live client asks the keeper to connect and waits for it (one connect at a time per server).
 * A server that hangs, floods or dies holds only the calls to it. A cancelled call (its caller
 * went away) is cancelled at its server alone; the server keeps serving the others. A call that
 * passed --mcp-timeout is cancelled at the server too, and the server is started again before
 * its next call if it answered nothing since and no other call runs (a server that serves one
 * call at a time would still be busy with it). */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "error.h"
#include <pthread.h>

#include "callpool.h"
#include "mcp_client.h"
#include "toolrun.h"

struct ipb_tool_job;

typedef struct ipb_mcp_server_entry {
    char *name;
    json_t *params;  /* as the client starts it (a sandboxed server's: `ipybox run ...`,
                       * mcp_sandbox.h), ${VAR} placeholders unfilled */
    json_t *tools;   /* name -> tool definition, as listed */
    json_t *modules; /* [{"tool", "module"}] */
    /* Set up for registered servers (not for built-in ones): */
    ipb_toolrun *keeper;      /* its thread: connects, lists, closes */
    pthread_mutex_t mu;       /* guards what follows */
    pthread_cond_t cv;        /* calls, active or connecting changed */
    ipb_mcpc *client;         /* NULL: connected on next use */
    unsigned calls;           /* in ipb_mcpc_call on client now */
    unsigned active;          /* call jobs for it not finished yet (any stage) */
    bool connecting;          /* the keeper is busy for it */
    bool abandoned;           /* a call was cancelled unanswered: stopped at once (SIGKILL) on
                           * disconnect rather than given its grace */
    unsigned long answered;   /* calls the server answered (a result or an error answer) */
    bool stale;               /* a call got no answer within --mcp-timeout ... */
    unsigned long stale_mark; /* ... when answered was this: if it still is when the next call
                           * comes and none runs, the server is started again first */
    bool synced;              /* mu, cv and keeper are set up */
    /* A server built into the supervisor (no client, no package, never connected, listed or
     * disconnected): a call is answered at once by local_call (the "ipybox" server of shell
     * approval). NULL for every registered server. */
    json_t *(*local_call)(struct ipb_mcp_server_entry *e, const char *tool, json_t *args, ipb_error **err);
    void *local_ud;
} ipb_mcp_server_entry;

typedef struct ipb_mcp_servers {
    ipb_mcp_server_entry **v;
    size_t n;
    int dir_fd;         /* the session's mcp directory (/opt/ipybox inside) */
    int exit_ep;        /* epoll of the stdio servers' pidfds (one-shot), see ipb_mcp_servers_fd */
    ipb_callpool *pool; /* the calls in flight */
    ipb_mcp_limits limits;
    bool sandbox_default; /* --sandbox-mcp-servers: stdio servers without "sandbox" get the default */
    /* Given a call job that finished while the registry waited for calls to end (NULL: the
     * job is freed). */
    void (*job_done)(void *ud, struct ipb_tool_job *job);
    void *job_done_ud;
} ipb_mcp_servers;

#define IPB_MCP_MAX_SERVERS 64
/* Calls one server runs at once; one more is refused (the tool channel says so). */
#define IPB_MCP_MAX_CALLS_PER_SERVER 32

/* Opens the session's mcp directory, writes the mcptools runtime there and prepares the
 * call pool. */
int ipb_mcp_servers_init(ipb_mcp_servers *s, const char *dir, ipb_error **err);
/* Reads {"mcpServers": {name: params}} from path and registers each server. A file that
 * cannot be read or parsed is an error; a server that cannot be reached is logged and left
 * out (register_mcp_server can add it later). */
int ipb_mcp_servers_load_config(ipb_mcp_servers *s, const char *path, ipb_error **err);
/* Registers (or re-registers) a server: checks the params, connects, lists its tools and
 * writes its package. Blocks the caller meanwhile; calls to other servers go on. Calls to a
 * server registered again are cancelled first. Returns {"server", "modules": [names],
 * "skipped": [...]} or NULL with *err. */
json_t *ipb_mcp_servers_register(ipb_mcp_servers *s, const char *name, json_t *params, ipb_error **err);
ipb_mcp_server_entry *ipb_mcp_servers_get(ipb_mcp_servers *s, const char *name);
/* A comma-separated list of the registered names (malloc'd), for messages. */
char *ipb_mcp_servers_names(const ipb_mcp_servers *s);
/* Stops every server's connection (stdio servers end); calls still running are cancelled and
 * waited for first (their jobs go to job_done), and a server with a cancelled call that was
 * not answered is stopped at once (SIGKILL) rather than given its grace. They reconnect on
 * next use. */
void ipb_mcp_servers_disconnect(ipb_mcp_servers *s);
/* Readable (POLLIN) once a stdio server exited between calls; then ipb_mcp_servers_reap. */
int ipb_mcp_servers_fd(const ipb_mcp_servers *s);
/* Without blocking: reaps stdio servers that exited (their connections are closed; they start
 * again on next use) and watches the new ones. A server with calls in flight is left to them
 * (they fail and the next call reconnects): call again once calls were taken. */
void ipb_mcp_servers_reap(ipb_mcp_servers *s);
void ipb_mcp_servers_free(ipb_mcp_servers *s);

/* A call as a call thread runs it. */
typedef struct ipb_tool_job {
    ipb_mcp_server_entry *entry;
    char *tool;
    json_t *args;
    json_t *result; /* CallToolResult, or NULL with err */
    ipb_error *err;
    const ipb_mcp_limits *limits;
    int timeout_ms; /* 0: limits->call_ms */
    ipb_call *call; /* in the pool: ipb_callpool_cancel(call) gives it up */
    void *ud;       /* the caller's */
} ipb_tool_job;
/* Starts a call to a registered server (not a built-in one) on a thread of its own; its end is
 * taken from the pool's fd (ipb_mcp_servers_take). The job is the caller's until then. -1
 * with *err when it could not start: EBUSY when the server runs IPB_MCP_MAX_CALLS_PER_SERVER
 * calls already. */
int ipb_tool_job_start(ipb_mcp_servers *s, ipb_tool_job *j, ipb_error **err);
/* Cancels the call (the server is sent notifications/cancelled for it alone). Any thread. */
void ipb_tool_job_cancel(ipb_tool_job *j);
/* A finished call (NULL: none). */
ipb_tool_job *ipb_mcp_servers_take(ipb_mcp_servers *s);
/* Readable (POLLIN) while a finished call waits to be taken. */
int ipb_mcp_servers_done_fd(const ipb_mcp_servers *s);
void ipb_tool_job_free(ipb_tool_job *j);
