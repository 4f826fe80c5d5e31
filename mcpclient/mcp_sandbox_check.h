/* The "sandbox" member of a stdio MCP server's params: the server then runs in a sandbox of
 * its own (`ipybox run`, made by the supervisor; supervisor/mcp_sandbox.h):
 *   "sandbox": true | false | {"allowed_domains": [str], "allowed_dirs": [str], "env": {str: str}}
 * true: the default sandbox (no allowed dirs, every public destination); false: not sandboxed
 * (refused when the session sandboxes every server). allowed_domains: entries as for
 * --allowed-domain (a name, *.name, an address or a CIDR block; at least one when the key is
 * there). allowed_dirs: absolute host directories bound read-write at the same path, none of
 * them in or over the sandbox's own places (/usr, /etc, /app, /home/appuser, /tmp, ...).
 * env: variables for the server (names as for --container-env-var); ${VAR} is filled in
 * these values, as in the top-level "env", and nowhere else of "sandbox". */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "error.h"

/* Checks sandbox (the member's value) and, when it sandboxes the server (true or an object),
 * what a sandboxed server's params must be besides: the top-level env names are variable
 * names, cwd (when there) is absolute, without placeholders, and inside one of allowed_dirs.
 * Returns 0 or -1 with a sentence (EINVAL). */
int ipb_mcp_sandbox_check(json_t *params, json_t *sandbox, ipb_error **err);
/* Whether sandbox (the member's value, NULL when absent) sandboxes the server. */
bool ipb_mcp_sandbox_on(json_t *sandbox, bool by_default);
