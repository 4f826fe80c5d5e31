/* Fast paths for the one large thing in the protocol: output text. Kernel `stream` content
 * ({"name": ..., "text": ...}) is decoded without building a jansson tree, and output text
 * is escaped straight into a JSON line. The decoder is strict: anything but that exact shape
 * of plain JSON strings returns 0 and the caller uses jansson, which is the reference
 * (tests/fuzz/fuzz_jsonfast.c checks the two agree). */
#pragma once
#include <stddef.h>

#include "strbuf.h"

/* Decodes `{"name": STRING, "text": STRING}` (either order, whitespace allowed). Returns 1 and
 * malloc'd, NUL-terminated name and text (text may contain NULs; *ret_text_len is its length),
 * or 0 when the input is not exactly that (or not valid JSON / UTF-8), with nothing allocated. */
int ipb_stream_content_decode(const char *json, size_t len, char **ret_name, char **ret_text,
                              size_t *ret_text_len);
/* Appends s (valid UTF-8) as a JSON string literal, quotes included. */
int ipb_json_escape_append(ipb_buf *out, const char *s, size_t len);
