/* The tool channel's messages (toolchan.h describes the protocol): for the channel and for
 * tests; no I/O but a log line when content blocks are dropped. */
#pragma once
#include <jansson.h>

#include "error.h"
#include "mcp_servers.h"

/* {"error": {"kind": kind, "message": message}} (message NULL: the kind). */
json_t *ipb_toolmsg_error(const char *kind, const char *message);
#define IPB_TOOLMSG_MAX_DROPPED 16

/* The reply line for a finished call, from its CallToolResult (or err when it has none):
 *   {"text": STR}   the result is one text block and nothing else (no structured content,
 *                   not an error, nothing dropped): the common case, kept short
 *   {"result": {"content": [BLOCK, ...], "structuredContent"?: VALUE, "isError"?: true,
 *               "dropped"?: [STR, ...]}}   anything else
 *   {"error": {"kind": "timeout" | "failed", "message": STR}}   no result
 * The blocks are those of the result in order, each checked and rewritten by
 * ipb_toolcontent_check(); a block that fails is left out, logged, and told in "dropped"
 * (at most IPB_TOOLMSG_MAX_DROPPED reasons, then "and N more"). Base64 is passed on as it
 * came (not decoded), so the line is at most about 3 times the server's message (a 4-byte
 * UTF-8 character becomes a 12-byte \u escape pair): under 48 MiB for a 16 MiB message, within
 * the runtime's 64 MiB. */
json_t *ipb_toolmsg_reply(json_t *call_result, const ipb_error *err);
/* Checks a request line: fills server, tool, args (borrowed from *ret_root) or returns a
 * refusal sentence (malloc'd). */
char *ipb_toolmsg_parse(const char *line, size_t len, ipb_mcp_servers *servers, json_t **ret_root, const char **server,
                        const char **tool, json_t **args);
