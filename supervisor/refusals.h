/* The egress refusals of a cell, told in its result: the proxy's notes (egress_notes.h) taken
 * when the cell ends, as lines for the text and as `egressRefused` for `_meta`. A refusal
 * made while no cell runs is not told: the next cell clears what came before it. */
#pragma once
#include <jansson.h>

#include "egress_notes.h"
#include "sandbox.h"
#include "strbuf.h"

/* A cell begins: what the sandbox had refused before is not this cell's. */
void ipb_refusals_begin(ipb_sandbox *sb);
/* A cell ended: its refusals into out (empty when none, or when the sandbox is gone). */
void ipb_refusals_take(ipb_sandbox *sb, ipb_egress_notes *out);
/* One line each ("[ipybox] egress refused: ..."), each after a newline when text has some. */
void ipb_refusals_append_text(const ipb_egress_notes *n, ipb_buf *text);
/* [{host|address, port, dns, reason, allow, count}, ...] (host and port null for a refusal
 * of no destination: the connection cap); the count past the list goes to meta's
 * egressRefusedMore. Adds nothing when there were none. */
void ipb_refusals_add_meta(const ipb_egress_notes *n, json_t *meta);
