/* The tool channel's messages: a call request checked against the registry, and the reply
 * line made from a finished call. Pure functions (no I/O), shared by the channel and tests. */
#include "toolmsg.h"

#include <errno.h>
#include <string.h>

#include "cleanup.h"
#include "strbuf.h"

json_t *ipb_toolmsg_error(const char *kind, const char *message) {
    return json_pack("{s:{s:s, s:s}}", "error", "kind", kind, "message", message ? message : kind);
}

char *ipb_toolmsg_parse(const char *line, size_t len, ipb_mcp_servers *servers, json_t **ret_root,
                         const char **server, const char **tool, json_t **args) {
    json_error_t jerr;
    *ret_root = NULL;
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(root)) {
        json_decref(root);
        return ipb_strdupf("a tool call is one JSON object {\"server\", \"tool\", \"arguments\"}");
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "server") && strcmp(key, "tool") && strcmp(key, "arguments")) {
            char *m = ipb_strdupf("unexpected field '%.100s': a tool call names only a registered server, one of "
                                  "its tools and the arguments",
                                  key);
            json_decref(root);
            return m;
        }
    }
    json_t *s = json_object_get(root, "server"), *t = json_object_get(root, "tool");
    json_t *a = json_object_get(root, "arguments");
    if (!json_is_string(s) || !json_is_string(t) || strlen(json_string_value(s)) != json_string_length(s) ||
        strlen(json_string_value(t)) != json_string_length(t)) {
        json_decref(root);
        return ipb_strdupf("\"server\" and \"tool\" must be strings");
    }
    if (a && !json_is_object(a)) {
        json_decref(root);
        return ipb_strdupf("\"arguments\" must be an object");
    }
    ipb_mcp_server_entry *e = ipb_mcp_servers_get(servers, json_string_value(s));
    if (!e) {
        cleanup_free char *names = ipb_mcp_servers_names(servers);
        char *m = ipb_strdupf("no MCP server named '%.100s' is registered (registered: %s)", json_string_value(s),
                              names ? names : "?");
        json_decref(root);
        return m;
    }
    if (!json_object_get(e->tools, json_string_value(t))) {
        char *m = ipb_strdupf("MCP server '%s' has no tool '%.100s'", e->name, json_string_value(t));
        json_decref(root);
        return m;
    }
    if (!a) {
        a = json_object();
        json_object_set_new(root, "arguments", a);
    }
    *ret_root = root;
    *server = e->name;
    *tool = json_string_value(t);
    *args = a;
    return NULL;
}

json_t *ipb_toolmsg_reply(json_t *res, const ipb_error *err) {
    if (!res)
        return ipb_toolmsg_error(err && err->errnum == ETIMEDOUT ? "timeout" : "failed",
                         err ? ipb_error_msg(err) : "the call failed");
    ipb_buf text = {0};
    size_t i, n = 0;
    json_t *block;
    json_array_foreach(json_object_get(res, "content"), i, block) {
        const char *t = json_string_value(json_object_get(block, "text"));
        if (!t || strcmp(json_string_value(json_object_get(block, "type")) ?: "", "text"))
            continue;
        if (n++)
            ipb_buf_append(&text, "\n", 1);
        ipb_buf_append(&text, t, json_string_length(json_object_get(block, "text")));
    }
    json_t *ret;
    json_t *sc = json_object_get(res, "structuredContent");
    if (json_is_true(json_object_get(res, "isError")))
        ret = json_pack("{s:{s:s, s:s%}}", "error", "kind", "tool_error", "message", text.len ? text.data : "the tool "
                        "reported an error without a message", text.len ? text.len : strlen("the tool reported an error "
                        "without a message"));
    else if (sc && !json_is_null(sc))
        ret = json_pack("{s:O}", "structured", sc);
    else
        ret = json_pack("{s:s%}", "text", text.data ? text.data : "", text.len);
    ipb_buf_free(&text);
    return ret ? ret : ipb_toolmsg_error("failed", "the tool's result could not be passed on");
}
