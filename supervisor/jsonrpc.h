/* JSON-RPC 2.0 over newline-delimited streams (MCP's stdio transport): framing with a size
 * cap, classification of messages, and response builders. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "strbuf.h"

#define JRPC_MAX_LINE (16u << 20)
/* The error an oversized line is answered with (by its id when it can be read). */
#define JRPC_TOO_LARGE_MSG                                                                                             \
    "Message too large (over 16 MiB, the most one JSON-RPC line may hold); dropped. "                                  \
    "Files go in and out with upload_file and download_file, not inside a request"

enum {
    JRPC_PARSE_ERROR = -32700,
    JRPC_INVALID_REQUEST = -32600,
    JRPC_METHOD_NOT_FOUND = -32601,
    JRPC_INVALID_PARAMS = -32602,
    JRPC_INTERNAL_ERROR = -32603
};

typedef struct jrpc_reader {
    ipb_buf buf;
    bool discarding; /* inside an oversized line, dropping until its newline */
    bool eof;
    char *line;         /* the line last returned by jrpc_reader_next(), owned */
    size_t max;         /* longest line accepted; 0: JRPC_MAX_LINE */
    json_t *dropped_id; /* the id of the oversized line last dropped, when it could be read */
} jrpc_reader;

enum jrpc_kind { JRPC_REQUEST, JRPC_NOTIFICATION, JRPC_RESPONSE, JRPC_INVALID };

typedef struct jrpc_msg {
    enum jrpc_kind kind;
    json_t *root;       /* owned */
    json_t *id;         /* borrowed; NULL for notifications */
    const char *method; /* borrowed */
    json_t *params;     /* borrowed; may be NULL */
    int error_code;     /* for JRPC_INVALID: the error to answer with */
    const char *error_msg;
} jrpc_msg;

/* Reads what is available on fd (non-blocking). Returns 0, or -errno; sets eof. */
int jrpc_reader_fill(jrpc_reader *r, int fd);
/* The same, reading at most about limit bytes (whole 64 KiB reads) before it returns: a reader
 * that must not take more than it can pass on at once. */
int jrpc_reader_fill_max(jrpc_reader *r, int fd, size_t limit);
/* Takes the next complete line. Returns 1 with the line and its length (valid until the next call),
 * 0 when none is complete, -E2BIG once per oversized line (the line is dropped; its id, when
 * jrpc_peek_id() could read one, is kept for jrpc_reader_take_dropped_id()). */
int jrpc_reader_next(jrpc_reader *r, char **line, size_t *len);
/* The id of the line the last -E2BIG dropped (a new reference), or NULL. */
json_t *jrpc_reader_take_dropped_id(jrpc_reader *r);
/* The id of a message of which only the start is at hand (one too large to parse whole): the
 * value of the top-level "id" member in s[0..len), when that text is well-formed JSON up to
 * where it ends, the id is a string (at most JRPC_PEEK_ID_MAX bytes as written) or an integer,
 * and no second "id" member comes in that text. NULL otherwise: an answer with id null is
 * better than one with a wrong id. Linear in len, no recursion. */
#define JRPC_PEEK_ID_MAX 4096
json_t *jrpc_peek_id(const char *s, size_t len);
void jrpc_reader_free(jrpc_reader *r);

/* Parses and classifies one line. Always fills *ret (kind JRPC_INVALID with an error code
 * on bad input; root may then be NULL). */
void jrpc_parse(const char *line, size_t len, jrpc_msg *ret);
void jrpc_msg_free(jrpc_msg *m);

json_t *jrpc_result(json_t *id, json_t *result); /* steals result */
json_t *jrpc_error(json_t *id, int code, const char *msg);
json_t *jrpc_notification(const char *method, json_t *params); /* steals params */
/* Serialises as one line with '\n'. Returns a malloc'd string. */
char *jrpc_dump(json_t *msg, size_t *ret_len);
