/* Sandboxed stdio MCP servers: the params of a server that runs in a sandbox of its own are
 * rewritten into an `ipybox run` command line (this very binary), so that the MCP client
 * starts, talks to and stops it like any stdio server while it runs with the kernel's
 * namespaces, seccomp filter and an egress proxy of its own, and sees nothing of the user's
 * home but its own private one and the directories it was given. */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "error.h"
#include "mcp_client.h"

/* The prefix of the variables that carry the server's env values to `ipybox run` (which
 * passes each into the sandbox under its own name with --container-env-from). */
#define IPB_MCP_SANDBOX_ENV_PREFIX "IPYBOX_MCP_ENV_"
/* Set for `ipybox run` as an MCP server: when its sandbox cannot be made, it answers the
 * client's initialize with an error saying why (client/run_mcp.c). */
#define IPB_MCP_SANDBOX_RUN_ENV "IPYBOX_RUN_MCP_SERVER"

/* params (checked by ipb_mcp_params_check) as the MCP client is to start the server:
 *  - a server that is not sandboxed (an HTTP one; "sandbox": false; no "sandbox" and not
 *    by_default): a new reference to params, unchanged;
 *  - by_default and "sandbox": false: refused (the session sandboxes every stdio server);
 *  - otherwise {"command": <this binary>, "args": ["run", "--home", HOME, "--allowed-domain",
 *    D..., "--host-dir", DIR..., "--cwd", CWD, "--container-env-from", "NAME=IPYBOX_MCP_ENV_i"...,
 *    "--", command, args...], "env": {"IPYBOX_MCP_ENV_i": value..., IPB_MCP_SANDBOX_RUN_ENV: "1"}},
 *    where HOME is the server's
 *    private home ~/.local/state/ipybox/mcp-homes/<name> (made here, 0700, kept across
 *    sessions) and the env values are the params' "env" then "sandbox"."env" (which wins), with
 *    their ${VAR} placeholders still unfilled (the client fills them when it connects, as for
 *    any server). No value is on the command line.
 * NULL with *err a sentence on failure. */
json_t *ipb_mcp_sandbox_wrap(const char *name, json_t *params, bool by_default, ipb_error **err);

/* The MCP client's start hook (ipb_mcpc_set_stdio_hook) for this process's MCP servers: a
 * server that is `ipybox run` (this very binary, "run": a sandboxed one) started by a process
 * that has a channel to a monitor (a worker of the system service or of root's daemon, root's
 * own ipybox) gets a sub-channel of it as IPYBOX_MONITOR_FD, so that its sandbox is made by
 * that monitor like the kernel's (its uid pool, cgroups and limits) and is killed with this
 * process's channel. When the monitor cannot make one, the server is not started: err says
 * why. Without a channel (user mode) nothing is added: `ipybox run` sandboxes it with user
 * namespaces as the user. */
int ipb_mcp_sandbox_start_hook(const char *name, const char *path, char *const *argv, ipb_mcpc_stdio_extra *extra,
                               ipb_error **err);
