/* The tool channel's messages (toolchan.h describes the protocol): pure, for the channel and
 * for tests. */
#pragma once
#include <jansson.h>

#include "error.h"
#include "mcp_servers.h"

/* {"error": {"kind": kind, "message": message}} (message NULL: the kind). */
json_t *ipb_toolmsg_error(const char *kind, const char *message);
/* The reply line for a finished call: CallToolResult or error to reply. */
json_t *ipb_toolmsg_reply(json_t *call_result, const ipb_error *err);
/* Checks a request line: fills server, tool, args (borrowed from *ret_root) or returns a
 * refusal sentence (malloc'd). */
char *ipb_toolmsg_parse(const char *line, size_t len, ipb_mcp_servers *servers, json_t **ret_root,
                        const char **server, const char **tool, json_t **args);
