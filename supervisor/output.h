/* A cell's text output: ANSI escapes stripped, capped to a limit keeping the head and the
 * tail, cut only at UTF-8 character boundaries. Pure; unit-tested. */
#pragma once
#include <stddef.h>

#include "strbuf.h"

typedef struct ipb_output {
    ipb_buf head, tail;
    size_t limit;       /* bytes kept in the final text (head + tail) */
    size_t total;       /* bytes seen */
    size_t total_chars; /* UTF-8 characters seen, for the cut message */
} ipb_output;

void ipb_output_init(ipb_output *o, size_t limit);
int ipb_output_append(ipb_output *o, const char *text, size_t len);
/* The final text (malloc'd), with a line saying how much was cut, if anything was. */
char *ipb_output_finish(ipb_output *o);
void ipb_output_free(ipb_output *o);

/* Removes ANSI escape sequences (CSI, OSC, two-byte ESC) in place; returns the new length. */
size_t ipb_strip_ansi(char *s, size_t len);
