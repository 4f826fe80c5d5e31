#include "toolgen.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "pyemit.h"
#include "schema.h"
#include "toolname.h"
#include "strbuf.h"

bool ipb_toolgen_server_name_ok(const char *name, ipb_error **err) {
    if (!name || !*name) {
        ipb_error_set(err, 0, "An MCP server needs a name");
        return false;
    }
    size_t len = strlen(name);
    bool chars_ok = (name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z');
    for (size_t i = 1; chars_ok && i < len; i++) {
        char c = name[i];
        chars_ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    }
    if (!chars_ok || len > IPB_TOOLGEN_MAX_SERVER_NAME) {
        ipb_error_set(err, 0,
                      "The MCP server name '%.80s' cannot name a Python package: it must be a letter followed "
                      "by at most %d letters, digits or underscores",
                      name, IPB_TOOLGEN_MAX_SERVER_NAME - 1);
        return false;
    }
    if (ipb_py_is_keyword(name)) {
        ipb_error_set(err, 0, "The MCP server name '%s' is a Python keyword and cannot name a package", name);
        return false;
    }
    return true;
}

/* The module name, "" when there is none (no usable character, or too long). */
static char *module_name_n(const char *tool_name, size_t len) {
    char *m = tg_reduce(tool_name, len, true, "t_");
    if (m && strlen(m) > IPB_TOOLGEN_MAX_MODULE_NAME)
        m[0] = '\0';
    return m;
}

char *ipb_toolgen_module_name(const char *tool_name) { return module_name_n(tool_name, strlen(tool_name)); }

void ipb_toolgen_pkg_free(ipb_toolgen_pkg *p) {
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->files[i].relpath);
        free(p->files[i].content);
    }
    free(p->files);
    json_decref(p->modules);
    json_decref(p->skipped);
    memset(p, 0, sizeof(*p));
}

static int add_file(ipb_toolgen_pkg *p, char *relpath, char *content) {
    ipb_toolgen_file *f = realloc(p->files, (p->n + 1) * sizeof(*f));
    if (!relpath || !content || !f) {
        if (f)
            p->files = f;
        free(relpath);
        free(content);
        return -ENOMEM;
    }
    p->files = f;
    p->files[p->n++] = (ipb_toolgen_file){.relpath = relpath, .content = content};
    return 0;
}

static int skip(ipb_toolgen_pkg *p, json_t *name, const char *reason) {
    json_t *e = json_pack("{s:O?,s:s}", "tool", name, "reason", reason);
    return e && json_array_append_new(p->skipped, e) == 0 ? 0 : -ENOMEM;
}

static int append_str(ipb_buf *b, const char *s) { return ipb_buf_append(b, s, strlen(s)); }

/* The docstring of run() / run_async() (full: run_full() / run_full_async()). */
static int run_doc(ipb_buf *d, tg_module *m, const char *server, json_t *name, bool has_result, bool async, bool full) {
    int e = append_str(d, async ? "Calls (awaitable) the tool " : "Calls the tool ");
    if (e == 0)
        e = ipb_buf_append(d, json_string_value(name), json_string_length(name));
    if (e == 0)
        e = ipb_buf_appendf(d, " of the MCP server %s.\n\n", server);
    if (e == 0)
        e = append_str(d, "Args:\n    params: a Params instance, or instead its fields as keyword arguments (not "
                          "both):");
    if (e == 0)
        e = tg_module_describe(m, "Params", d);
    if (e == 0)
        e = append_str(d, "\n    call_timeout: seconds to wait for the answer at most (None: the supervisor's "
                          "limit); then mcptools.ToolTimeout is raised and the call is cancelled at its server.");
    if (e == 0 && full)
        e = append_str(d, has_result ? "\n\nReturns:\n    All of the answer, a mcptools.ToolResult: content (its "
                                       "blocks in order: str, Image, Audio, Resource, ResourceLink), structured (a "
                                       "Result when the structured content is an object), is_error, dropped.\n"
                                     : "\n\nReturns:\n    All of the answer, a mcptools.ToolResult: content (its "
                                       "blocks in order: str, Image, Audio, Resource, ResourceLink), structured (JSON "
                                       "values or None), is_error, dropped.\n");
    else if (e == 0)
        e = append_str(d, has_result ? "\n\nReturns:\n    A Result when the tool answers with structured content, "
                                       "else the text of its answer (str) when it has only text, else its blocks in "
                                       "order (a list of str, mcptools.Image, Audio, Resource, ResourceLink).\n"
                                     : "\n\nReturns:\n    The tool's structured content (as JSON values) when it "
                                       "gives one, else the text of its answer (str) when it has only text, else its "
                                       "blocks in order (a list of str, mcptools.Image, Audio, Resource, "
                                       "ResourceLink).\n");
    if (e == 0 && full)
        e = append_str(d, "\nRaises:\n    mcptools.ToolRejected: the application refused the call.\n"
                          "    mcptools.ToolTimeout: the call took too long.\n"
                          "    mcptools.ToolCallError: any other failure (unknown tool, broken connection); an "
                          "error the tool reports is in the result (is_error).");
    else if (e == 0)
        e = append_str(d, "\nRaises:\n    mcptools.ToolRejected: the application refused the call.\n"
                          "    mcptools.ToolError: the tool answered with an error.\n"
                          "    mcptools.ToolTimeout: the call took too long.\n"
                          "    mcptools.ToolCallError: any other failure (unknown tool, broken connection).");
    return e;
}

static int run_def(ipb_buf *b, tg_module *m, const char *server, json_t *name, bool has_result, bool async, bool full) {
    ipb_buf d = {0};
    int e = run_doc(&d, m, server, name, has_result, async, full);
    if (e == 0)
        e = ipb_buf_appendf(b, "%sdef run%s%s(params=None, /, *, call_timeout=None, **kwargs):\n    ",
                            async ? "async " : "", full ? "_full" : "", async ? "_async" : "");
    if (e == 0)
        e = ipb_py_str(b, d.data ? d.data : "", d.len);
    ipb_buf_free(&d);
    const char *call = async ? "await _rt.acall" : "_rt.call";
    const char *args = "_rt.to_json(_rt.make_params(Params, params, kwargs)), call_timeout=call_timeout";
    if (e == 0 && full)
        e = ipb_buf_appendf(b,
                            "\n    return %s_full(SERVER, TOOL, _rt.to_json(_rt.make_params(Params, params, "
                            "kwargs)), %s, call_timeout=call_timeout)\n",
                            call, has_result ? "Result" : "None");
    else if (e == 0 && has_result)
        e = ipb_buf_appendf(b,
                            "\n    value = %s(SERVER, TOOL, %s)\n"
                            "    if isinstance(value, dict):\n"
                            "        return _rt.from_json(Result, value)\n"
                            "    return value\n",
                            call, args);
    else if (e == 0)
        e = ipb_buf_appendf(b, "\n    return %s(SERVER, TOOL, %s)\n", call, args);
    return e;
}

/* A Result class only for an outputSchema with properties (else run() returns the JSON value). */
static bool wants_result(json_t *out) {
    json_t *props = json_object_get(out, "properties");
    return json_is_object(out) && json_is_object(props) && json_object_size(props) > 0;
}

static int gen_module(const char *server, json_t *tool, json_t *name, char **ret) {
    *ret = NULL;
    tg_module *m = tg_module_new();
    if (!m)
        return -ENOMEM;
    json_t *out = json_object_get(tool, "outputSchema");
    bool has_result = wants_result(out);
    int e = tg_module_add_class(m, "Params", json_object_get(tool, "inputSchema"), "The arguments of the tool.");
    if (e == 0 && has_result)
        e = tg_module_add_class(m, "Result", out, "The structured result of the tool.");
    if (e == 0)
        e = tg_module_finish(m);

    ipb_buf b = {0};
    json_t *desc = json_object_get(tool, "description");
    if (e == 0 && json_is_string(desc)) {
        e = ipb_py_str(&b, json_string_value(desc), json_string_length(desc));
    } else if (e == 0) {
        ipb_buf d = {0};
        e = append_str(&d, "The tool ");
        if (e == 0)
            e = ipb_buf_append(&d, json_string_value(name), json_string_length(name));
        if (e == 0)
            e = ipb_buf_appendf(&d, " of the MCP server %s.", server);
        if (e == 0)
            e = ipb_py_str(&b, d.data, d.len);
        ipb_buf_free(&d);
    }
    if (e == 0)
        e = append_str(&b, "\nimport dataclasses\nimport json\nimport typing\n\nfrom mcptools import _runtime as "
                           "_rt\n\nSERVER = ");
    if (e == 0)
        e = ipb_py_cstr(&b, server);
    if (e == 0)
        e = append_str(&b, "\nTOOL = ");
    if (e == 0)
        e = ipb_py_str(&b, json_string_value(name), json_string_length(name));
    if (e == 0)
        e = append_str(&b, "\n\n\n");
    if (e == 0)
        e = tg_module_emit(m, &b);
    for (int i = 0; i < 4 && e == 0; i++) {
        if (i)
            e = append_str(&b, "\n\n");
        if (e == 0)
            e = run_def(&b, m, server, name, has_result, i & 1, i >= 2);
    }
    tg_module_free(m);
    if (e < 0) {
        ipb_buf_free(&b);
        return -ENOMEM;
    }
    *ret = b.data;
    return 0;
}

static char *gen_init(const char *server, json_t *modules) {
    ipb_buf d = {0}, b = {0};
    int e = ipb_buf_appendf(&d, "The tools of the MCP server %s, one module each:\n", server);
    size_t i;
    json_t *v;
    json_array_foreach(modules, i, v) {
        json_t *t = json_object_get(v, "tool");
        if (e == 0)
            e = ipb_buf_appendf(&d, "\n%s: the tool ", json_string_value(json_object_get(v, "module")));
        if (e == 0)
            e = ipb_buf_append(&d, json_string_value(t), json_string_length(t));
    }
    if (e == 0)
        e = append_str(&d, "\n\nEach module has Params, run(), run_async(), run_full() and run_full_async(); "
                           "Result when the tool declares an output schema.");
    if (e == 0)
        e = ipb_py_str(&b, d.data, d.len);
    if (e == 0)
        e = append_str(&b, "\n__all__ = [");
    json_array_foreach(modules, i, v) {
        if (e == 0 && i)
            e = append_str(&b, ", ");
        if (e == 0)
            e = ipb_py_cstr(&b, json_string_value(json_object_get(v, "module")));
    }
    if (e == 0)
        e = append_str(&b, "]\n");
    ipb_buf_free(&d);
    if (e < 0) {
        ipb_buf_free(&b);
        return NULL;
    }
    return b.data;
}

static int build_tool(ipb_toolgen_pkg *p, const char *server, json_t *tool, json_t *taken) {
    json_t *name = json_object_get(tool, "name");
    if (!json_is_object(tool))
        return skip(p, NULL, "The tool is not a JSON object");
    if (!json_is_string(name))
        return skip(p, NULL, "The tool has no name (a string)");
    const char *unshowable = ipb_tool_name_problem(json_string_value(name), json_string_length(name));
    if (unshowable) {
        cleanup_free char *why =
            ipb_strdupf("Its name %s: an approval question could not show it truthfully", unshowable);
        return why ? skip(p, name, why) : -ENOMEM;
    }
    cleanup_free char *mod = module_name_n(json_string_value(name), json_string_length(name));
    if (!mod)
        return -ENOMEM;
    if (!*mod) {
        cleanup_free char *reduced = tg_reduce(json_string_value(name), json_string_length(name), true, "t_");
        if (!reduced)
            return -ENOMEM;
        if (!*reduced)
            return skip(p, name, "Its name has no letter, digit or underscore to make a module name of");
        cleanup_free char *why =
            ipb_strdupf("Its module name would be longer than %d characters", IPB_TOOLGEN_MAX_MODULE_NAME);
        return why ? skip(p, name, why) : -ENOMEM;
    }
    json_t *other = json_object_get(taken, mod);
    if (other) {
        cleanup_free char *why = ipb_strdupf("Its module name %s is already taken by an earlier tool", mod);
        return why ? skip(p, name, why) : -ENOMEM;
    }
    if (!ipb_py_ident_ok(mod)) /* cannot happen: tg_reduce makes identifiers */
        return skip(p, name, "Its module name is not a Python identifier");
    char *content = NULL;
    if (gen_module(server, tool, name, &content) < 0)
        return -ENOMEM;
    if (add_file(p, ipb_strdupf("%s.py", mod), content) < 0)
        return -ENOMEM;
    if (json_object_set(taken, mod, name) < 0 ||
        json_array_append_new(p->modules, json_pack("{s:O,s:s}", "tool", name, "module", mod)) < 0)
        return -ENOMEM;
    return 0;
}

int ipb_toolgen_build(const char *server, json_t *tools, ipb_toolgen_pkg *ret, ipb_error **err) {
    memset(ret, 0, sizeof(*ret));
    if (!ipb_toolgen_server_name_ok(server, err))
        return -1;
    if (!json_is_array(tools))
        return ipb_error_set(err, 0, "The tool list of the MCP server %s is not an array", server);
    ipb_toolgen_pkg p = {.modules = json_array(), .skipped = json_array()};
    json_t *taken = json_object();
    int e = p.modules && p.skipped && taken ? 0 : -ENOMEM;
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        if (e < 0)
            break;
        if (i >= IPB_TOOLGEN_MAX_TOOLS)
            e = skip(&p, json_is_string(json_object_get(tool, "name")) ? json_object_get(tool, "name") : NULL,
                     "The server lists more tools than ipybox generates modules for");
        else
            e = build_tool(&p, server, tool, taken);
    }
    json_decref(taken);
    if (e == 0)
        e = add_file(&p, strdup("__init__.py"), gen_init(server, p.modules));
    if (e < 0) {
        ipb_toolgen_pkg_free(&p);
        return ipb_error_set(err, ENOMEM, "Cannot generate the Python API of the MCP server %s", server);
    }
    *ret = p;
    return 0;
}
