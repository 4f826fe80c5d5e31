/* The MCP servers a session may call tools of: registered on the host side only (from
 * --mcp-config and the register_mcp_server tool), each with its launch or connection
 * parameters, the tools it listed, its generated package mcptools/<name>/ in the session's
 * read-only /opt/ipybox, and its client connection (made on first use and again after it
 * fails; stdio servers stopped on reset). Connections and calls run on the session's tool
 * thread (toolrun.h). */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "error.h"
#include "mcp_client.h"
#include "toolrun.h"

struct ipb_tool_job;

typedef struct ipb_mcp_server_entry {
    char *name;
    json_t *params;   /* as the client starts it (a sandboxed server's: `ipybox run ...`,
                       * mcp_sandbox.h), ${VAR} placeholders unfilled */
    json_t *tools;    /* name -> tool definition, as listed */
    json_t *modules;  /* [{"tool", "module"}] */
    ipb_mcpc *client; /* touched only by the tool thread, or while it is idle */
    bool abandoned;   /* its last call was cancelled unanswered: stopped before the next one */
    /* A server built into the supervisor (no client, no package, never connected, listed or
     * disconnected): a call is answered at once by local_call (the "ipybox" server of shell
     * approval). NULL for every registered server. */
    json_t *(*local_call)(struct ipb_mcp_server_entry *e, const char *tool, json_t *args, ipb_error **err);
    void *local_ud;
} ipb_mcp_server_entry;

typedef struct ipb_mcp_servers {
    ipb_mcp_server_entry **v;
    size_t n;
    int dir_fd;       /* the session's mcp directory (/opt/ipybox inside) */
    int exit_ep;      /* epoll of the stdio servers' pidfds (one-shot), see ipb_mcp_servers_fd */
    ipb_toolrun *run;
    ipb_mcp_limits limits;
    bool sandbox_default; /* --sandbox-mcp-servers: stdio servers without "sandbox" get the default */
    /* Given a call job that finished while the registry waited for the thread (NULL: the
     * job is freed). */
    void (*job_done)(void *ud, struct ipb_tool_job *job);
    void *job_done_ud;
} ipb_mcp_servers;

#define IPB_MCP_MAX_SERVERS 64

/* Opens the session's mcp directory, writes the mcptools runtime there and starts the tool
 * thread. */
int ipb_mcp_servers_init(ipb_mcp_servers *s, const char *dir, ipb_error **err);
/* Reads {"mcpServers": {name: params}} from path and registers each server. A file that
 * cannot be read or parsed is an error; a server that cannot be reached is logged and left
 * out (register_mcp_server can add it later). */
int ipb_mcp_servers_load_config(ipb_mcp_servers *s, const char *path, ipb_error **err);
/* Registers (or re-registers) a server: checks the params, connects, lists its tools and
 * writes its package. Waits for the tool thread. Returns {"server", "modules": [names],
 * "skipped": [...]} or NULL with *err. */
json_t *ipb_mcp_servers_register(ipb_mcp_servers *s, const char *name, json_t *params, ipb_error **err);
ipb_mcp_server_entry *ipb_mcp_servers_get(ipb_mcp_servers *s, const char *name);
/* A comma-separated list of the registered names (malloc'd), for messages. */
char *ipb_mcp_servers_names(const ipb_mcp_servers *s);
/* Stops every server's connection (stdio servers end); a call still running is cancelled
 * first, and a server whose cancelled call was not answered is stopped at once (SIGKILL)
 * rather than given its grace. They reconnect on next use. */
void ipb_mcp_servers_disconnect(ipb_mcp_servers *s);
/* Readable (POLLIN) once a stdio server exited between calls; then ipb_mcp_servers_reap. */
int ipb_mcp_servers_fd(const ipb_mcp_servers *s);
/* Without blocking: reaps stdio servers that exited (their connections are closed; they start
 * again on next use) and watches the new ones. Does nothing to clients while the tool thread
 * is busy: call again once its job is taken. */
void ipb_mcp_servers_reap(ipb_mcp_servers *s);
void ipb_mcp_servers_free(ipb_mcp_servers *s);

/* A call as the tool thread runs it. */
typedef struct ipb_tool_job {
    ipb_mcp_server_entry *entry;
    char *tool;
    json_t *args;
    json_t *result;   /* CallToolResult, or NULL with err */
    ipb_error *err;
    const ipb_mcp_limits *limits;
    int cancel_fd;    /* readable once the call is to be given up (ipb_toolrun_cancel_fd) */
    void *ud;         /* the caller's */
} ipb_tool_job;
/* Runs on the tool thread: connects when there is no live client (or the last call was
 * cancelled without an answer: the server is stopped first), then calls; gives up at once
 * when cancel_fd is readable (ECANCELED, the server told by notifications/cancelled). */
void ipb_tool_job_run(void *job);
void ipb_tool_job_free(ipb_tool_job *j);
