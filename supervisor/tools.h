/* The MCP tools: execute_ipython_cell, upload_file, download_file, reset. Names, parameters
 * and behaviour follow ipybox (see shared/design/ipybox-semantics.md). */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "execute.h"
#include "session.h"

/* execute_ipython_cell results carry the outcome as data under this key of _meta: status
 * (ok, error, timeout, timeout_restarted, cancelled, kernel_died), ename, evalue, traceback,
 * images [{mimeType, path}], outputBytes, note. */
#define IPB_META_EXECUTION "ipybox/execution"

/* The `tools` array for tools/list. */
json_t *ipb_tools_list(void);
/* Whether name is one of our tools. */
bool ipb_tool_exists(const char *name);
/* Runs a tool; returns a CallToolResult. Argument problems come back as results with
 * isError set and a sentence (so the model can correct itself). *ret_cancelled is set when
 * the client cancelled the call (no response is then due). */
json_t *ipb_tools_call(ipb_session *s, const char *name, json_t *args, const ipb_exec_hooks *hooks,
                       bool *ret_cancelled);
