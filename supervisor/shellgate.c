#include "shellgate.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

static const char *const tool_names[] = {"shell", "shell_magic"};

static json_t *tool_def(const char *name) {
    const char *what = !strcmp(name, "shell")
                           ? "A shell command of the kernel (!cmd, !!cmd, %sx, %system, getoutput), after {var} "
                             "expansion, asks to run."
                           : "A script cell magic of the kernel (%%bash, %%sh, %%script, ...) asks to run its cell.";
    return json_pack("{s:s, s:s, s:{s:s, s:{s:{s:s}}, s:[s], s:b}}", "name", name, "description", what, "inputSchema",
                     "type", "object", "properties", "cmd", "type", "string", "required", "cmd", "additionalProperties",
                     0);
}

/* Reached only once the call was approved: the kernel runs the command when it gets this. */
static json_t *shellgate_call(ipb_mcp_server_entry *e, const char *tool, json_t *args, ipb_error **err) {
    json_t *cmd = json_object_get(args, "cmd");
    if (!json_is_string(cmd) || json_object_size(args) != 1)
        return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                         "expected the argument {\"cmd\": COMMAND}", "isError", 1);
    return json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", "approved");
}

bool ipb_shellgate_is(const ipb_mcp_server_entry *e) { return e && e->local_call == shellgate_call; }

int ipb_shellgate_add(ipb_mcp_servers *s, ipb_error **err) {
    if (ipb_mcp_servers_get(s, IPB_SHELLGATE_SERVER))
        return ipb_error_set(err, EEXIST, "--approve-shell: a server named '%s' is registered already",
                             IPB_SHELLGATE_SERVER);
    ipb_mcp_server_entry *e = calloc(1, sizeof(*e));
    ipb_mcp_server_entry **nv = e ? realloc(s->v, (s->n + 1) * sizeof(*nv)) : NULL;
    if (!nv) {
        free(e);
        return ipb_error_set(err, ENOMEM, "--approve-shell");
    }
    s->v = nv;
    e->name = strdup(IPB_SHELLGATE_SERVER);
    e->tools = json_object();
    e->modules = json_array();
    e->local_call = shellgate_call;
    for (size_t i = 0; i < sizeof(tool_names) / sizeof(*tool_names); i++)
        json_object_set_new(e->tools, tool_names[i], tool_def(tool_names[i]));
    s->v[s->n++] = e; /* freed with the registry, like any entry */
    if (!e->name || !e->tools || !e->modules || json_object_size(e->tools) != 2)
        return ipb_error_set(err, ENOMEM, "--approve-shell");
    return 0;
}

int ipb_shellgate_check_name(ipb_mcp_servers *s, const char *name, ipb_error **err) {
    if (!ipb_shellgate_is(ipb_mcp_servers_get(s, name)))
        return 0;
    return ipb_error_set(err, EEXIST,
                         "the name '%s' belongs to the server built into ipybox for shell-command "
                         "approval (--approve-shell); register this server under another name",
                         name);
}

bool ipb_shellgate_preapproved(const ipb_options *o, const char *tool) {
    static const size_t len = sizeof(IPB_SHELLGATE_SERVER) - 1;
    for (size_t i = 0; i < o->approve_tools.n; i++) {
        const char *pat = o->approve_tools.v[i];
        if (strncmp(pat, IPB_SHELLGATE_SERVER, len) || (pat[len] && pat[len] != '/'))
            continue;
        if (!pat[len] || fnmatch(pat + len + 1, tool, 0) == 0)
            return true;
    }
    return false;
}

char *ipb_shellgate_question(ipb_mcp_servers *s, const char *server, const char *tool, json_t *args, size_t max) {
    if (!ipb_shellgate_is(ipb_mcp_servers_get(s, server)))
        return NULL;
    json_t *cmd = json_object_get(args, "cmd");
    /* ASCII only, as a JSON string: no direction or format characters can rearrange what the
     * person reads, and line breaks show as \n. */
    char *shown = json_is_string(cmd) ? json_dumps(cmd, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
    if (!shown)
        shown = strdup("(no command given)");
    size_t len = shown ? strlen(shown) : 0;
    char cut[96] = "";
    if (len > max)
        snprintf(cut, sizeof(cut), "... (CUT: only the first %zu of %zu characters are shown)", max, len);
    bool magic = !strcmp(tool, "shell_magic");
    char *q = ipb_strdupf("Code in the ipybox sandbox asks to run the shell command%s: %.*s%s. Accept to run it, "
                          "decline to refuse it.",
                          magic ? " of a cell magic" : "", (int)(len > max ? max : len), shown ? shown : "", cut);
    free(shown);
    return q;
}
