/* An incremental parser for text/event-stream (the WHATWG HTML standard's server-sent events):
 * bytes go in as they arrive, in chunks of any size; each complete event comes out through a
 * callback. Lines end with CRLF, LF or CR (a CRLF may be split across chunks); one leading
 * byte-order mark is skipped; lines starting with ':' are comments; the fields are event, data
 * (several data lines are joined with "\n"), id and retry; other fields are ignored. An event
 * is dispatched at an empty line when it has data; an event cut off by the end of the stream is
 * never dispatched. Bytes are passed through as they are (the caller checks UTF-8). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "strbuf.h"

typedef struct ipb_sse_event {
    const char *type; /* the event field, or "message" when there was none */
    const char *data; /* NUL-terminated; may also contain NUL bytes: use data_len */
    size_t data_len;
    const char *id; /* the last event id seen so far in the stream ("" if none) */
} ipb_sse_event;

/* Returns 0 to go on, or a negative errno to stop ipb_sse_feed() with that value. */
typedef int (*ipb_sse_callback)(void *ctx, const ipb_sse_event *ev);

typedef struct ipb_sse {
    size_t max_event; /* cap on one event: its data plus the line being read; 0 means 16 MiB */
    ipb_buf line;     /* the current line, without its end */
    ipb_buf data;     /* the data of the event being read; each line followed by '\n' */
    ipb_buf type;     /* its event field */
    ipb_buf id;       /* the last event id buffer */
    long retry;       /* the last valid retry field in ms, or -1 */
    bool has_data;    /* a data field was seen since the last dispatch */
    bool started;     /* past the (optional) byte-order mark */
    size_t bom_seen;  /* bytes of a possible byte-order mark held back so far */
    bool after_cr;    /* the last line ended with CR: an LF right after it belongs to it */
    int error;        /* sticky: the negative errno that stopped the parser */
} ipb_sse;

void ipb_sse_init(ipb_sse *p, size_t max_event);
/* Parses len bytes, calling cb for each event completed by them. Returns 0; -EMSGSIZE when an
 * event or a line grows past max_event; -ENOMEM; or what cb returned. After an error the parser
 * stays stopped and returns that error again. */
int ipb_sse_feed(ipb_sse *p, const char *buf, size_t len, ipb_sse_callback cb, void *ctx);
void ipb_sse_free(ipb_sse *p);
