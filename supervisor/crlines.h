/* Output lines as a terminal shows them: a carriage return moves back to the start of the
 * line and what follows overwrites it character by character, so a progress bar redrawn
 * thousands of times (tqdm, pip) leaves only its last state; "\r\n" is a newline. Streaming:
 * the line in progress is held until its newline (or the end of the output), so a '\r' at a
 * piece boundary collapses as one inside a piece does; a line that grows past
 * IPB_CRLINES_HOLD_MAX characters is let out as it stands. Linear time: each character is
 * written once into the held line and copied out once. A line held without a '\r' so far is
 * kept as its bytes (copied, not decoded); the first '\r' turns it into cells. Pure;
 * unit-tested and fuzzed. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "strbuf.h"

#define IPB_CRLINES_HOLD_MAX (64u << 10)

typedef struct ipb_crlines {
    uint32_t *cells;       /* the held line: one character per cell, its bytes packed */
    size_t len, cap, col;  /* cells in use, allocated, the cursor */
    ipb_buf bytes;         /* or the held line as it came, when it had no '\r' (cells empty):
                            * well-formed characters only, the cursor at its end */
    size_t bytes_chars;    /* characters in bytes */
    unsigned char part[4]; /* an incomplete UTF-8 sequence that ended the last piece */
    size_t part_len;
} ipb_crlines;

/* Whether part of a line is held (what comes next may overwrite it). */
static inline int ipb_crlines_holding(const ipb_crlines *c) { return c->len || c->bytes.len || c->part_len; }
/* How many bytes at the start of text may go out as they are: nothing is held, and the
 * prefix ends with '\n' and has no '\r'. */
size_t ipb_crlines_plain_prefix(const ipb_crlines *c, const char *text, size_t len);
/* Appends to out what of text is final (whole lines, collapsed); the line in progress is
 * held. Returns 0 or -ENOMEM. */
int ipb_crlines_feed(ipb_crlines *c, const char *text, size_t len, ipb_buf *out);
/* Appends the held line as it stands (the output ended) and starts over. */
int ipb_crlines_finish(ipb_crlines *c, ipb_buf *out);
void ipb_crlines_free(ipb_crlines *c);
