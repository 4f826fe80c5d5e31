/* The content blocks of a tool's result (MCP CallToolResult.content), checked one by one before
 * they go to the kernel: only the block types and fields below pass, each of the right type,
 * so that the runtime in the kernel (toolgen/mcptools_runtime.py) can trust their shape. Pure
 * (no I/O). A block that does not fit is dropped by the caller, with the reason given here.
 *
 * The checked block is flat (an embedded resource's fields are lifted out of "resource"); it
 * keeps MCP's field names; annotations and _meta are left out:
 *   {"type": "text", "text": STR}
 *   {"type": "image" | "audio", "data": BASE64, "mimeType": MIME}
 *   {"type": "resource", "uri": STR, "mimeType"?: MIME, "text": STR | "blob": BASE64}
 *   {"type": "resource_link", "uri": STR, "name": STR, "mimeType"?: MIME, "title"?: STR,
 *    "description"?: STR, "size"?: INT >= 0}
 * BASE64 is standard base64 (RFC 4648 section 4: A-Z a-z 0-9 + /, padded with '=' to a
 * multiple of 4, no whitespace), passed on as it came: the runtime decodes it. MIME is 1 to
 * 255 printable ASCII characters. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define IPB_TOOLCONTENT_MAX_MIME 255

/* Whether s (len bytes) is standard padded base64. */
bool ipb_toolcontent_base64_ok(const char *s, size_t len);
/* The checked copy of one content block (new reference), or NULL with *ret_why set to a
 * sentence saying why it was dropped (static, or NULL when out of memory). */
json_t *ipb_toolcontent_check(json_t *block, const char **ret_why);
