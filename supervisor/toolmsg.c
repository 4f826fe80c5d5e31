/* The tool channel's messages: a call request checked against the registry, and the reply
 * line made from a finished call. No I/O but a log line for dropped content blocks; shared by
 * the channel and tests. */
#include "toolmsg.h"
#include "jsonlimit.h"

#include <errno.h>
#include <string.h>

#include "cleanup.h"
#include "log.h"
#include "strbuf.h"
#include "toolcontent.h"
#include "toolname.h"

json_t *ipb_toolmsg_error(const char *kind, const char *message) {
    return json_pack("{s:{s:s, s:s}}", "error", "kind", kind, "message", message ? message : kind);
}

char *ipb_toolmsg_parse(const char *line, size_t len, ipb_mcp_servers *servers, json_t **ret_root, const char **server,
                        const char **tool, json_t **args) {
    json_error_t jerr;
    *ret_root = NULL;
    if (!ipb_json_values_ok(line, len, IPB_JSON_MAX_VALUES))
        return ipb_strdupf("a tool call may hold at most %zu JSON values", IPB_JSON_MAX_VALUES);
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
    const char *unshowable = ipb_tool_name_problem(json_string_value(t), json_string_length(t));
    if (unshowable) {
        char *m = ipb_strdupf("the tool name %s: it cannot be shown truthfully in an approval question, so ipybox "
                              "does not call it",
                              unshowable);
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

/* The content blocks of res that pass (toolcontent.h); what was dropped is told in *dropped
 * (at most IPB_TOOLMSG_MAX_DROPPED reasons, then a count) and in one log line. */
static json_t *checked_content(json_t *res, json_t *dropped) {
    json_t *content = json_object_get(res, "content"), *out = json_array();
    size_t i, n = 0;
    json_t *block;
    const char *first = NULL;
    if (!out)
        return NULL;
    if (content && !json_is_array(content)) {
        first = "\"content\" is not a list";
        n++;
        json_array_append_new(dropped, json_string(first));
    }
    json_array_foreach(content, i, block) {
        const char *why = NULL;
        json_t *ok = ipb_toolcontent_check(block, &why);
        if (ok) {
            if (json_array_append_new(out, ok) < 0) {
                json_decref(out);
                return NULL;
            }
            continue;
        }
        if (!why) {
            json_decref(out);
            return NULL;
        }
        if (!first)
            first = why;
        if (n++ < IPB_TOOLMSG_MAX_DROPPED)
            json_array_append_new(dropped, json_sprintf("block %zu: %s", i + 1, why));
    }
    if (n > IPB_TOOLMSG_MAX_DROPPED)
        json_array_append_new(dropped, json_sprintf("and %zu more", n - IPB_TOOLMSG_MAX_DROPPED));
    if (n)
        log_warn("a tool's result: %zu content block%s dropped (%s%s)", n, n == 1 ? "" : "s", first,
                 n > 1 ? ", ..." : "");
    return out;
}

json_t *ipb_toolmsg_reply(json_t *res, const ipb_error *err) {
    if (!res)
        return ipb_toolmsg_error(err && err->errnum == ETIMEDOUT ? "timeout" : "failed",
                                 err ? ipb_error_msg(err) : "the call failed");
    json_t *dropped = json_array();
    json_t *content = dropped ? checked_content(res, dropped) : NULL;
    json_t *sc = json_object_get(res, "structuredContent");
    bool is_error = json_is_true(json_object_get(res, "isError"));
    if (json_is_null(sc))
        sc = NULL;
    json_t *ret = NULL;
    json_t *only = json_array_size(content) == 1 ? json_array_get(content, 0) : NULL;
    bool plain = only && !is_error && !sc && json_array_size(dropped) == 0 &&
                 !strcmp(json_string_value(json_object_get(only, "type")), "text");
    if (plain) {
        ret = json_pack("{s:O}", "text", json_object_get(only, "text"));
    } else if (content) {
        json_t *r = json_pack("{s:O}", "content", content);
        ret = json_object();
        bool ok = r && ret && (!sc || json_object_set(r, "structuredContent", sc) == 0) &&
                  (!is_error || json_object_set_new(r, "isError", json_true()) == 0) &&
                  (json_array_size(dropped) == 0 || json_object_set(r, "dropped", dropped) == 0) &&
                  json_object_set(ret, "result", r) == 0;
        json_decref(r);
        if (!ok) {
            json_decref(ret);
            ret = NULL;
        }
    }
    json_decref(content);
    json_decref(dropped);
    return ret ? ret : ipb_toolmsg_error("failed", "the tool's result could not be passed on");
}
