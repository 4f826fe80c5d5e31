/* Whether a tool's name, as a server lists it, can be shown to a person truthfully: the
 * approval question quotes it ("... tool 'NAME' of MCP server ...") as it is. A name that
 * could make that sentence read as something else is refused both where modules are
 * generated (the tool is skipped) and on the tool channel (a call naming it is refused, and
 * nobody is asked). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define IPB_TOOL_NAME_MAX 256 /* bytes */

/* NULL when name (len bytes, UTF-8) can be shown; else why not (a static phrase: "contains
 * ..."/"is ..."). Refused: empty or longer than IPB_TOOL_NAME_MAX; not UTF-8; control
 * characters (C0, DEL, C1: line breaks, terminal escapes); the line and paragraph separators
 * U+2028/9; characters that reorder or hide text (direction marks, embeddings, overrides and
 * isolates, zero-width and other invisible format characters, the BOM, tag characters); the
 * quotes ', " and ` (the question's own). */
const char *ipb_tool_name_problem(const char *name, size_t len);
