/* Shell-command approval (--approve-shell): the built-in MCP server "ipybox" with the tools
 * "shell" (!cmd, !!cmd, %sx, %system, getoutput) and "shell_magic" (%%bash, %%sh, %%script
 * and the other script magics), argument {"cmd": COMMAND}. The kernel's launcher calls it
 * through the tool channel before a command runs (kernel_launch.py); the call is approved
 * like any tool call (mcp_server.c) and then answered here, in-process ("approved"): what
 * matters is that the call was approved, the command itself runs in the kernel. */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "error.h"
#include "mcp_servers.h"
#include "options.h"

#define IPB_SHELLGATE_SERVER "ipybox"

/* Adds the built-in server to the registry (before any other is registered). */
int ipb_shellgate_add(ipb_mcp_servers *s, ipb_error **err);
/* Whether e is the built-in server. */
bool ipb_shellgate_is(const ipb_mcp_server_entry *e);
/* A registration of a real server under the built-in's name is refused: the reason, or 0. */
int ipb_shellgate_check_name(ipb_mcp_servers *s, const char *name, ipb_error **err);
/* Whether --approve-tools approves tool of the built-in server without asking. Only patterns
 * whose server part is "ipybox" itself count (ipybox, ipybox/shell, ipybox/shell_*): a glob
 * such as '*' approves the tools of MCP servers, never shell commands. */
bool ipb_shellgate_preapproved(const ipb_options *o, const char *tool);
/* The question put to the application for a call of the built-in server (malloc'd; ASCII:
 * the command is shown as a JSON string, cut past max characters), or NULL when the call is
 * not one of it. */
char *ipb_shellgate_question(ipb_mcp_servers *s, const char *server, const char *tool, json_t *args, size_t max);
