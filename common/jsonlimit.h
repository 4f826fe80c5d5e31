/* A bound on what parsing a JSON text costs, checked before the parse. jansson builds a node of
 * about 50-100 bytes for every value, so text made of many tiny values ("[[],[],...]", "{},"...)
 * costs 20-40 times its size once parsed: 16 MiB of it took 1.3 GB. Every parser fed by
 * something we do not trust (a kernel's messages, an MCP server's answers, the tool channel)
 * counts the values first. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* At most this many values (containers, members and elements) per message. The parsed tree
 * of 2^20 values costs from about 40 MB (numbers) to 140 MB (empty arrays) and 230 MB (empty
 * objects: each gets a hashtable), as measured with jansson 2.14. Megabytes of text, images
 * and base64 are a handful of values. */
#define IPB_JSON_MAX_VALUES ((size_t)1 << 20)

/* An upper bound of the number of values in the JSON text s (one per '{', '[' and ',' outside
 * strings, plus one), counting no further than stop: returns a number > stop as soon as it
 * passes it. Works on any bytes (invalid JSON included): only what a parser would build is
 * counted, never more than once. */
size_t ipb_json_values_bound(const char *s, size_t len, size_t stop);
/* Whether s is under max values (ipb_json_values_bound(s, len, max) <= max). */
bool ipb_json_values_ok(const char *s, size_t len, size_t max);
