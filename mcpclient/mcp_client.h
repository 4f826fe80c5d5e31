/* A client of one MCP server, run on the host by the supervisor: stdio (a process it starts),
 * Streamable HTTP or legacy SSE (libcurl). initialize, tools/list, tools/call; blocking calls
 * with deadlines. Once connected, any number of threads may make calls on one client at once
 * (see "Concurrent calls" below): stdio and legacy SSE carry them over the one connection with
 * their own JSON-RPC ids, and a reader thread of the client (started by ipb_mcpc_connect, signals
 * blocked, never starting processes) hands each answer to its caller and answers the server's
 * own requests; over Streamable HTTP each call is its own HTTP request sharing the session.
 * Clients are independent (no global state but libcurl's, set up once).
 *
 * Errors are sentences naming the server ("MCP server 'x': tools/call echo: ..."); their errnum:
 *   ETIMEDOUT  no answer within the limit          EMSGSIZE  a message over limits.max_message
 *   EPIPE      the stdio server exited or closed its stdout
 *   ECONNRESET, ECONNREFUSED, EHOSTUNREACH  the HTTP connection failed or the SSE stream ended
 *   EREMOTEIO  the server answered with a JSON-RPC error (code and message in the sentence)
 *   EPROTO     the server broke the protocol (a result of the wrong shape, an HTTP error status,
 *              100 malformed messages in a row, ...); EACCES for HTTP 401/403
 *   EPROTONOSUPPORT  a protocol version this client does not know
 *   ECANCELED  the call's cancel fd became readable while waiting for the answer
 *   EPIPE      also: the client was shut down (ipb_mcpc_shutdown) or had died before the call
 *   EINVAL, ENOENT   bad params, an unset ${VAR}, a command not found
 * Malformed messages (not JSON, not JSON-RPC) are skipped, logged at debug level and counted;
 * 100 in a row end the connection (stdio, legacy SSE) or the call whose stream they came on
 * (Streamable HTTP). Answers nobody waits for are skipped, logged and counted (ipb_mcpc_stray). */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

enum ipb_mcp_transport {
    IPB_MCP_STDIO = 1,
    IPB_MCP_HTTP, /* Streamable HTTP */
    IPB_MCP_SSE,  /* legacy HTTP+SSE (2024-11-05) */
};

/* Checks server params as ipybox takes them, without filling ${VAR} placeholders:
 *   stdio: {"command": str, "args": [str], "env": {str: str}, "cwd": str}  (command required)
 *   HTTP:  {"url": str, "headers": {str: str}, "type": "streamable_http" | "sse"}
 * The transport: "type" when given ("stdio" too); else stdio when "command" is there; else
 * SSE when the URL's path contains "/sse", Streamable HTTP otherwise (ipybox: "/mcp").
 * Unknown keys, wrong types, NUL bytes, URLs that are not http(s) are refused with a sentence.
 * Returns the transport or -1. */
int ipb_mcp_params_check(json_t *params, ipb_error **err);

/* Fills ${NAME} placeholders (NAME: [A-Za-z_][A-Za-z0-9_]*) in s from the host environment
 * (getenv, at this call). An unset variable is an error naming it (ENOENT); "$" not followed by
 * "{" stays as it is; "${" without a valid name and "}" is an error (EINVAL). Values are not
 * expanded again. Returns a malloc'd string or NULL with *err set. */
char *ipb_mcp_expand(const char *s, ipb_error **err);

typedef struct ipb_mcp_limits {
    int connect_ms;     /* start/connect plus initialize (default 30000) */
    int call_ms;        /* each later request, each page of tools/list (default 120000) */
    size_t max_message; /* largest message accepted from the server (default 16 MiB) */
} ipb_mcp_limits;

typedef struct ipb_mcpc ipb_mcpc;

/* Connects and initializes (initialize request asking for MCP 2025-06-18, then
 * notifications/initialized; the server's answer may be 2025-11-25, 2025-06-18, 2025-03-26 or
 * 2024-11-05). params as checked by ipb_mcp_params_check; placeholders are filled here (in
 * command, args, env values, cwd, url and header values, not in names), and the result is
 * checked again. stdio: the command is found on the host's PATH (a command with a '/' is taken
 * as it is, relative to cwd) and started in its own process group with a clean environment
 * (PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG from the host when set, then "env" from params),
 * no blocked or ignored signals, stdin and stdout pipes, stderr inherited, PR_SET_PDEATHSIG
 * SIGKILL (note: the kernel sends it when the *thread* that connected ends), cwd from params
 * (else the caller's). The process that uses stdio clients must not reap children it did not
 * start (waitpid(-1)). HTTP: no redirects, http and https only, Mcp-Session-Id and
 * MCP-Protocol-Version as the spec says; legacy SSE: the endpoint must be on the stream's
 * scheme, host and port. name labels log lines and sentences. NULL with *err a sentence on
 * failure (nothing left running). limits NULL, or a field 0: defaults. */
ipb_mcpc *ipb_mcpc_connect(const char *name, json_t *params, const ipb_mcp_limits *limits, ipb_error **err);

/* stdio: what a server's process gets besides its params, from the start hook. */
typedef struct ipb_mcpc_stdio_extra {
    int fd;       /* above 2: the process's fd 3 (the client closes it once started), or -1 */
    char env[64]; /* "NAME=value" added to its environment (replacing one of the name), or "" */
} ipb_mcpc_stdio_extra;
/* Called before every stdio server process is started (at connect, and so at each reconnect),
 * with the program's path as found and its argv (NULL-terminated). Returns 0 (extra filled,
 * or left as it is: no fd, no variable) or -1 with *err: the process is not started and the
 * connect fails with that error. */
typedef int (*ipb_mcpc_stdio_hook)(const char *name, const char *path, char *const *argv, ipb_mcpc_stdio_extra *extra,
                                   ipb_error **err);
/* Sets the start hook of every client of this process (NULL: none). Set before any connect. */
void ipb_mcpc_set_stdio_hook(ipb_mcpc_stdio_hook hook);

/* tools/list, following nextCursor through every page (at most 100 pages, 10000 tools); may run
 * while calls do. Returns a new reference to the array of tools (as the server sent them: the
 * elements are not checked), or NULL. */
json_t *ipb_mcpc_list_tools(ipb_mcpc *c, ipb_error **err);

/* ipb_mcpc_call(c, tool, arguments, the fd of ipb_mcpc_set_cancel_fd, limits.call_ms), for
 * callers that make one call at a time, with their semantics: after a timeout the client is no
 * longer alive (a server that serves one call at a time may still be busy with it: connect
 * again); ipb_mcpc_call keeps it alive. */
json_t *ipb_mcpc_call_tool(ipb_mcpc *c, const char *tool, json_t *arguments, ipb_error **err);

/* Malformed messages from the server skipped so far (not JSON, not JSON-RPC). */
size_t ipb_mcpc_malformed(const ipb_mcpc *c);

/* False once the process has exited (looked at now, without waiting), the connection failed or
 * the client was shut down: close it and connect again. Any thread. */
bool ipb_mcpc_alive(ipb_mcpc *c);

/* The server's serverInfo.name and the negotiated protocol version (owned by c). */
const char *ipb_mcpc_server_name(const ipb_mcpc *c);
const char *ipb_mcpc_protocol_version(const ipb_mcpc *c);

/* Ends the connection (the reader thread first). stdio: stdin closed, SIGTERM to its process
 * group after 2 s, SIGKILL after 2 s more, reaped. HTTP: DELETE of the session when there is one
 * (best effort, 2 s). Only once no call runs (ipb_mcpc_shutdown ends them). NULL is fine. */
void ipb_mcpc_close(ipb_mcpc *c);

/* Ends the connection at once: stdio: SIGKILL to its process group, reaped; HTTP: no DELETE.
 * For a server busy with a call nobody waits for any more. NULL is fine. */
void ipb_mcpc_abort(ipb_mcpc *c);

/* An fd that becomes readable (POLLIN) once the server's process has exited, for a poll loop
 * that wants to reap it without waiting for the next call (stdio, with pidfd_open()); -1 for
 * HTTP servers and when there is none. Owned by c: closed with it. Once it is readable,
 * ipb_mcpc_alive() reaps the process and says false. */
int ipb_mcpc_exit_fd(const ipb_mcpc *c);

/* The cancel fd ipb_mcpc_call_tool passes to ipb_mcpc_call (-1: none). The caller makes fd
 * unreadable again before the next call. */
void ipb_mcpc_set_cancel_fd(ipb_mcpc *c, int fd);
/* Requests cancelled at the server so far (cancel fd or timeout). */
size_t ipb_mcpc_cancelled(const ipb_mcpc *c);
/* Answers skipped because no call waits for them: an id never sent, a second answer to one id,
 * the late answer of a call given up on (each logged with its id: the first 20 of a client at
 * info level, later ones at debug level). */
size_t ipb_mcpc_stray(const ipb_mcpc *c);

/* --- Concurrent calls ---------------------------------------------------------------------
 * tools/call that any number of threads may make on one client at once; arguments NULL means
 * {}. Each request has its own JSON-RPC id over the one connection (stdio, legacy SSE; whole
 * messages written under a lock, answers routed by id by the reader thread) or its own HTTP
 * request (Streamable HTTP: its own libcurl handles; the session id shared). Each call ends on
 * its own:
 *   - its answer: a new reference to the CallToolResult (isError results are results); a
 *     JSON-RPC error answer is EREMOTEIO, a result that is not an object EPROTO;
 *   - its cancel fd (-1: none) becoming readable: ECANCELED at once; the server is sent
 *     notifications/cancelled for this id only (Streamable HTTP: the answer's stream is closed
 *     first);
 *   - its limit (timeout_ms; 0: limits.call_ms): ETIMEDOUT "no answer within N ms", cancelled at
 *     the server the same way; the client stays alive;
 *   - the connection failing (the process exited: EPIPE; the SSE stream ended: ECONNRESET; a
 *     message over limits.max_message: EMSGSIZE, stdio: the server killed at once; 100
 *     malformed messages in a row: EPROTO): every call over that connection at once, and the
 *     client is no longer alive. Over Streamable HTTP an oversized or malformed answer ends only
 *     its call; a failed connection ends its call and makes the client not alive;
 *   - ipb_mcpc_shutdown: EPIPE.
 * A call waiting for its turn to write (another caller's message is being written) ends on its
 * cancel fd, its deadline or a shutdown with nothing sent. Over stdio a request begun is written
 * whole (a cut one would corrupt the stream for every call): for up to limits.call_ms, even past
 * the call's own limit and its cancel fd; a server that has not read it by then loses the
 * connection. After that, the cancel fd and the limit end the call as above.
 * A late answer of a call given up on, an answer with an id never sent, or a second answer to
 * one id is skipped, logged with its id, and counted (ipb_mcpc_stray). A
 * Streamable HTTP server that forgot the session (404) gets one new session, started once
 * however many calls saw the 404, and each such request again, once. ipb_mcpc_alive,
 * ipb_mcpc_cancelled, ipb_mcpc_stray, ipb_mcpc_in_flight, list_tools and ipb_mcpc_shutdown may be
 * called from any thread meanwhile; close and abort only when no call runs. */
json_t *ipb_mcpc_call(ipb_mcpc *c, const char *tool, json_t *arguments, int cancel_fd, int timeout_ms, ipb_error **err);
/* Calls in flight now (any thread). */
size_t ipb_mcpc_in_flight(ipb_mcpc *c);
/* From any thread: every call in flight ends at once (EPIPE, "the client was shut down"), later
 * ones fail at once, and the client is no longer alive (stdio: the server's process group is
 * killed). Then close or abort it once the calls returned. */
void ipb_mcpc_shutdown(ipb_mcpc *c);
