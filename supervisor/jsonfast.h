/* Fast paths for the one large thing in the protocol: output text. Kernel `stream` content
 * ({"name": ..., "text": ...}) is decoded without building a jansson tree, and output text
 * is escaped straight into a JSON line. The decoder is strict: anything but that exact shape
 * of plain JSON strings returns 0 and the caller uses jansson, which is the reference
 * (tests/fuzz/fuzz_jsonfast.c checks the two agree). */
#pragma once
#include <stddef.h>

#include "strbuf.h"

#include <stdbool.h>

/* Stream content checked but not decoded: the text stays in the message as its JSON string
 * body, so that megabytes of output can be forwarded without decoding and re-encoding. */
typedef struct ipb_stream_view {
    char *name;       /* malloc'd */
    const char *text; /* the text's JSON string body (escapes included, quotes excluded) */
    size_t text_len;
    bool text_clean; /* no escape stands for NUL or ESC: the body can be forwarded as is */
} ipb_stream_view;

/* Checks `{"name": STRING, "text": STRING}` (either order, whitespace allowed), exactly as
 * ipb_stream_content_decode does, without copying the text. Returns 1 and fills v (v->text
 * points into json), or 0 with nothing allocated. */
int ipb_stream_content_scan(const char *json, size_t len, ipb_stream_view *v);
/* Decodes the start of a string body accepted by the scanner into out (cap >= 16 bytes),
 * stopping at the end or before an escape or UTF-8 character that would not fit. Returns the
 * body bytes consumed (so the next call continues there); *out_len gets the bytes written.
 * A chunk never ends inside a character, so chunks are valid UTF-8 on their own. */
size_t ipb_json_unescape_chunk(const char *body, size_t len, char *out, size_t cap, size_t *out_len);
/* How much of a string body accepted by the scanner decodes to exactly its first text_len
 * bytes (so that a piece of the text can be forwarded with its own piece of the body); 0 when
 * text_len falls inside what one escape stands for, or past the end. */
size_t ipb_json_body_prefix(const char *body, size_t len, size_t text_len);

/* Decodes `{"name": STRING, "text": STRING}` (either order, whitespace allowed). Returns 1 and
 * malloc'd, NUL-terminated name and text (text may contain NULs; *ret_text_len is its length),
 * or 0 when the input is not exactly that (or not valid JSON / UTF-8), with nothing allocated. */
int ipb_stream_content_decode(const char *json, size_t len, char **ret_name, char **ret_text, size_t *ret_text_len);
/* Appends s (valid UTF-8) escaped as a JSON string body (no quotes), which can be joined to
 * other bodies. */
int ipb_json_escape_body_append(ipb_buf *out, const char *s, size_t len);

/* The length of the valid multibyte UTF-8 character at p (strict, as jansson checks: no
 * overlong form, no surrogate, nothing above U+10FFFF), or 0: also for an ASCII byte. */
size_t ipb_utf8_seq(const unsigned char *p, const unsigned char *end);
