#include "tools.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "fdio.h"
#include "files.h"
#include "pathrules.h"
#include "refusals.h"
#include "strbuf.h"
#include "transfer.h"

#define DEFAULT_TIMEOUT 120.0
#define MAX_TIMEOUT 86400.0
/* upload_file / download_file: abandoned after this long (their own optional timeout). */
#define IPB_TRANSFER_DEFAULT_TIMEOUT 600.0

static const char exec_description[] =
    "Execute Python code in a stateful IPython kernel running in a sandbox. Variables, imports and "
    "definitions persist across calls until `reset`. The working directory is /app, the workspace that "
    "upload_file and download_file use. Install packages with `!pip install name`; they stay installed "
    "after reset. The kernel runs an asyncio event loop: use top-level `await`, never `asyncio.run()`. "
    "Executions run one at a time. Plots (matplotlib) and other images are returned as images and saved "
    "under /app/images/. Returns the output (stdout and stderr merged, and the value of the last "
    "expression); when the code raises, the output printed before the error and the traceback.";

static const char transfer_timeout_description[] =
    "Seconds after which a transfer that has not finished (a host file system that does not answer) is "
    "abandoned, leaving nothing behind (default 600).";

static json_t *register_tool_def(void);

json_t *ipb_tools_list(void) {
    json_t *tools = json_pack(
        "[{s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s, s:f, s:f}, s:{s:s, s:s, s:i}}, s:[s]}},"
        " {s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s}, s:{s:s, s:s, s:f, s:f}}, s:[s, s]}},"
        " {s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s}, s:{s:s, s:s, s:f, s:f}}, s:[s, s]}},"
        " {s:s, s:s, s:{s:s, s:{}}}]",
        "name", "execute_ipython_cell", "description", exec_description, "inputSchema", "type", "object", "properties",
        "code", "type", "string", "description",
        "Python code to execute (IPython syntax: magics and "
        "`!shell` lines work).",
        "timeout", "type", "number", "description", "Seconds to wait before interrupting the cell (default 120).",
        "default", DEFAULT_TIMEOUT, "maximum", MAX_TIMEOUT, "max_output_chars", "type", "integer", "description",
        "Cap on the returned text; the head and the tail "
        "are kept and the result says what was cut.",
        "minimum", 100, "required", "code", "name", "upload_file", "description",
        "Copy a file from the host into the sandbox's /app workspace.", "inputSchema", "type", "object", "properties",
        "relpath", "type", "string", "description",
        "Destination path relative to /app (parent directories are created).", "local_path", "type", "string",
        "description", "Absolute path of the file on the host, inside the allowed directories.", "timeout", "type",
        "number", "description", transfer_timeout_description, "default", IPB_TRANSFER_DEFAULT_TIMEOUT, "maximum",
        MAX_TIMEOUT, "required", "relpath", "local_path", "name", "download_file", "description",
        "Copy a file from the sandbox's /app workspace to the host.", "inputSchema", "type", "object", "properties",
        "relpath", "type", "string", "description", "Source path relative to /app.", "local_path", "type", "string",
        "description",
        "Absolute destination path on the host, inside the allowed directories (parent directories are "
        "created).",
        "timeout", "type", "number", "description", transfer_timeout_description, "default",
        IPB_TRANSFER_DEFAULT_TIMEOUT, "maximum", MAX_TIMEOUT, "required", "relpath", "local_path", "name", "reset",
        "description",
        "Reset the kernel: start a fresh Python process. Variables, imports and "
        "definitions are cleared; files in /app and packages installed with pip are kept.",
        "inputSchema", "type", "object", "properties");
    json_array_append_new(tools, register_tool_def());
    return tools;
}

static const char register_description[] =
    "Register an MCP server whose tools the code in the kernel may then call through a generated Python "
    "API: `from mcptools.<server_name> import <module>` and `<module>.run(...)` (or `await "
    "<module>.run_async(...)`), one module per tool with typed Params (and Result when the tool declares an "
    "output schema). The server runs on the host: stdio params {command, args, env, cwd} start it there; "
    "HTTP params {url, headers} (Streamable HTTP, or SSE when the path contains /sse or type is 'sse') "
    "connect to it. ${VAR} in params is filled from the host environment. Every call from the kernel "
    "needs the application's approval; a rejection raises mcptools.ToolRejected. Returns the generated "
    "module names.";

static json_t *register_tool_def(void) {
    /* It starts a command on the host (stdio params): clients that confirm tool calls should
     * confirm this one. */
    return json_pack(
        "{s:s, s:s, s:{s:s, s:{s:{s:s, s:s, s:s}, s:{s:s, s:s}}, s:[s, s]}, s:{s:b, s:b, s:b}}", "name",
        "register_mcp_server", "description", register_description, "inputSchema", "type", "object", "properties",
        "server_name", "type", "string", "pattern", "^[A-Za-z][A-Za-z0-9_]{0,63}$", "description",
        "Name of the package under mcptools (letters, digits, '_').", "server_params", "type", "object", "description",
        "stdio: {command, args, env, cwd}; HTTP: {url, headers, type ('streamable_http' or 'sse')}.", "required",
        "server_name", "server_params", "annotations", "readOnlyHint", 0, "destructiveHint", 1, "openWorldHint", 1);
}

bool ipb_tool_exists(const char *name) {
    return !strcmp(name, "execute_ipython_cell") || !strcmp(name, "register_mcp_server") ||
           !strcmp(name, "upload_file") || !strcmp(name, "download_file") || !strcmp(name, "reset");
}

static json_t *text_result(const char *text, bool is_error) {
    json_t *r = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text, "isError", is_error);
    /* A text that is not UTF-8 (a name or message from the sandbox in it) still gets an answer. */
    return r ? r
             : json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                         "[the message could not be encoded as UTF-8 text]", "isError", is_error);
}

static json_t *error_result(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *error_result(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = ipb_vstrdupf(fmt, ap);
    va_end(ap);
    json_t *r = text_result(s ? s : "error", true);
    free(s);
    return r;
}

/* A required or optional string argument; NUL bytes are refused. */
static int get_string(json_t *args, const char *key, bool required, const char **ret, json_t **ret_err) {
    json_t *v = json_object_get(args, key);
    if (!v) {
        if (required)
            *ret_err = error_result("Invalid arguments: '%s' is required.", key);
        *ret = NULL;
        return required ? -1 : 0;
    }
    if (!json_is_string(v)) {
        *ret_err = error_result("Invalid arguments: '%s' must be a string.", key);
        return -1;
    }
    if (strlen(json_string_value(v)) != json_string_length(v)) {
        *ret_err = error_result("Invalid arguments: '%s' contains a NUL byte.", key);
        return -1;
    }
    *ret = json_string_value(v);
    return 0;
}

static int b64_decode(const char *in, size_t len, unsigned char **ret, size_t *ret_len) {
    char *clean = malloc(len + 1);
    if (!clean)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (in[i] != '\n' && in[i] != '\r' && in[i] != ' ')
            clean[n++] = in[i];
    if (n % 4) {
        free(clean);
        return -EINVAL;
    }
    unsigned char *out = malloc(n / 4 * 3 + 1);
    if (!out) {
        free(clean);
        return -ENOMEM;
    }
    int got = EVP_DecodeBlock(out, (unsigned char *)clean, (int)n);
    size_t pad = (n >= 1 && clean[n - 1] == '=') + (n >= 2 && clean[n - 2] == '=');
    free(clean);
    if (got < 0) {
        free(out);
        return -EINVAL;
    }
    *ret = out;
    *ret_len = (size_t)got - pad;
    return 0;
}

static char *b64_encode(const unsigned char *in, size_t len) {
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    if (out)
        EVP_EncodeBlock((unsigned char *)out, in, (int)len);
    return out;
}

/* Saves an image under /app/images/ and returns its MCP content block. */
static json_t *image_block(ipb_session *s, const ipb_image *img, ipb_buf *text, json_t *meta_images) {
    const char *ext = !strcmp(img->mime, "image/png") ? "png" : !strcmp(img->mime, "image/jpeg") ? "jpg" : "svg";
    unsigned char rnd[6];
    char hex[13], rel[64];
    ipb_random(rnd, sizeof(rnd));
    ipb_hex(rnd, sizeof(rnd), hex);
    snprintf(rel, sizeof(rel), "images/%s.%s", hex, ext);
    unsigned char *bytes = NULL;
    size_t blen = 0;
    char *b64 = NULL;
    bool svg = !strcmp(ext, "svg");
    if (svg) {
        bytes = (unsigned char *)strdup(img->data);
        blen = bytes ? strlen((char *)bytes) : 0;
        b64 = bytes ? b64_encode(bytes, blen) : NULL;
    } else if (b64_decode(img->data, strlen(img->data), &bytes, &blen) == 0) {
        b64 = b64_encode(bytes, blen);
    }
    if (!bytes || !b64) {
        ipb_buf_appendf(text, "\n[an %s image could not be decoded and was dropped]", img->mime);
        free(bytes);
        free(b64);
        return NULL;
    }
    ipb_error *err = NULL;
    bool saved = ipb_ws_write(s->ws_fd, rel, bytes, blen, &err) == 0;
    if (saved)
        ipb_buf_appendf(text, "%s[image saved to /app/%s]", text->len ? "\n" : "", rel);
    else
        ipb_buf_appendf(text, "\n[image not saved: %s]", ipb_error_msg(err));
    char path[80];
    snprintf(path, sizeof(path), "/app/%s", rel);
    json_array_append_new(meta_images, json_pack("{s:s, s:s?}", "mimeType", img->mime, "path", saved ? path : NULL));
    ipb_error_free(err);
    free(bytes);
    json_t *block = json_pack("{s:s, s:s, s:s}", "type", "image", "data", b64, "mimeType", img->mime);
    free(b64);
    return block;
}

static const char *const outcome_names[] = {
    [IPB_EXEC_OK] = "ok",
    [IPB_EXEC_ERROR] = "error",
    [IPB_EXEC_TIMEOUT] = "timeout",
    [IPB_EXEC_TIMEOUT_RESTARTED] = "timeout_restarted",
    [IPB_EXEC_CANCELLED] = "cancelled",
    [IPB_EXEC_DIED] = "kernel_died",
};

/* What a program needs to tell the outcome without reading the text (the Python SDK):
 * status, the error's parts, the saved images in content order, how many bytes of the
 * text block are the cell's own output (the rest is image and limit notes), the note. */
static json_t *execution_meta(const ipb_exec_result *res, json_t *images) {
    json_t *m = json_pack("{s:s, s:o, s:I}", "status", outcome_names[res->outcome], "images", images, "outputBytes",
                          (json_int_t)res->output_len);
    if (!m)
        return json_object();
    if (res->ename) {
        json_object_set_new(m, "ename", json_string(res->ename));
        json_object_set_new(m, "evalue", json_string(res->evalue ? res->evalue : ""));
        if (res->traceback)
            json_object_set_new(m, "traceback", json_string(res->traceback));
    }
    if (res->note)
        json_object_set_new(m, "note", json_string(res->note));
    return m;
}

static json_t *tool_execute(ipb_session *s, json_t *args, const ipb_exec_hooks *hooks, bool *ret_cancelled) {
    const char *code;
    json_t *bad = NULL;
    if (get_string(args, "code", true, &code, &bad) < 0)
        return bad;
    double timeout = DEFAULT_TIMEOUT;
    json_t *t = json_object_get(args, "timeout");
    if (t && !json_is_null(t)) {
        if (!json_is_number(t) || json_number_value(t) <= 0 || json_number_value(t) > MAX_TIMEOUT)
            return error_result("Invalid arguments: 'timeout' must be a number of seconds between 0 and %g.",
                                MAX_TIMEOUT);
        timeout = json_number_value(t);
    }
    long max_chars = s->opts->max_output_chars;
    json_t *mc = json_object_get(args, "max_output_chars");
    if (mc && !json_is_null(mc)) {
        if (!json_is_integer(mc) || json_integer_value(mc) < 100 || json_integer_value(mc) > 10000000)
            return error_result("Invalid arguments: 'max_output_chars' must be an integer between 100 and 10000000.");
        max_chars = (long)json_integer_value(mc);
    }
    ipb_error *err = NULL;
    if (ipb_session_ensure_kernel(s, &err) < 0) {
        /* A zygote's end is told with the call whose start it concerned, failed or not: told
         * later, it would come with a kernel that did not start the slow way. */
        char *sn = ipb_session_take_start_note(s);
        json_t *r =
            error_result("The kernel is not available: %s%s%s", ipb_error_msg(err), sn ? " " : "", sn ? sn : "");
        free(sn);
        ipb_error_free(err);
        return r;
    }
    /* A death since the last cell is told first: this cell ran in a fresh kernel. */
    char *lost = ipb_session_take_lost(s);
    ipb_exec_result res;
    ipb_refusals_begin(&s->kernel.sb);
    if (ipb_execute(&s->kernel, code, timeout, (size_t)max_chars, hooks, &res, &err) < 0) {
        bool gone = s->kernel.sb.fd < 0; /* the sandbox ended under this call */
        char *sn = ipb_session_take_start_note(s);
        json_t *r =
            gone ? error_result("%s%sThe sandbox ended before this cell could finish (%s). The next call starts a "
                                "fresh kernel in a new sandbox: variables are lost; files in /app and "
                                "installed packages are kept.%s%s",
                                lost ? lost : "", lost ? " " : "", ipb_error_msg(err), sn ? " " : "", sn ? sn : "")
                 : error_result("%s%sExecution failed: %s%s%s", lost ? lost : "", lost ? " " : "", ipb_error_msg(err),
                                sn ? " " : "", sn ? sn : "");
        free(sn);
        s->end_told = gone;
        ipb_error_free(err);
        free(lost);
        return r;
    }
    bool lost_told = lost != NULL;
    char *sn = ipb_session_take_start_note(s);
    if (sn) {
        char *note = ipb_strdupf("%s%s%s", res.note ? res.note : "", res.note ? " " : "", sn);
        free(res.note);
        res.note = note;
        free(sn);
    }
    if (lost) {
        char *note = ipb_strdupf("%s This cell ran in a fresh kernel: variables, imports and definitions of earlier "
                                 "cells are lost; files in /app and installed packages are kept.%s%s",
                                 lost, res.note ? " " : "", res.note ? res.note : "");
        free(res.note);
        res.note = note;
        free(lost);
    }
    if (res.outcome == IPB_EXEC_CANCELLED)
        *ret_cancelled = true;
    ipb_buf text = {0};
    ipb_buf_append(&text, res.text, strlen(res.text));
    json_t *content = json_array();
    json_array_append_new(content, json_null()); /* placeholder for the text block */
    json_t *meta_images = json_array();
    for (size_t i = 0; i < res.n_images; i++) {
        json_t *b = image_block(s, &res.images[i], &text, meta_images);
        if (b)
            json_array_append_new(content, b);
    }
    if (res.images_dropped)
        ipb_buf_appendf(&text, "\n[%zu more images were dropped: at most %d per cell]", res.images_dropped,
                        IPB_MAX_IMAGES);
    ipb_egress_notes refused;
    ipb_refusals_take(&s->kernel.sb, &refused);
    ipb_refusals_append_text(&refused, &text);
    if (res.note)
        ipb_buf_appendf(&text, "%s%s", text.len ? "\n" : "", res.note);
    json_t *block = json_pack("{s:s, s:s}", "type", "text", "text", ipb_buf_cstr(&text));
    if (!block) /* not valid UTF-8: say so rather than send a null block */
        block = json_pack("{s:s, s:s}", "type", "text", "text", "[the output could not be encoded as UTF-8 text]");
    json_array_set_new(content, 0, block);
    ipb_buf_free(&text);
    bool is_error = res.outcome != IPB_EXEC_OK;
    json_t *meta = execution_meta(&res, meta_images);
    if (lost_told)
        json_object_set_new(meta, "kernelLost", json_true());
    ipb_refusals_add_meta(&refused, meta);
    ipb_exec_result_free(&res);
    return json_pack("{s:o, s:b, s:{s:o}}", "content", content, "isError", is_error, "_meta", IPB_META_EXECUTION, meta);
}

/* upload_file / download_file: the optional 'timeout' (seconds) after which a transfer that
 * has not finished is abandoned. */
static int transfer_timeout_ms(json_t *args, int *ret_ms, json_t **ret_err) {
    double t = IPB_TRANSFER_DEFAULT_TIMEOUT;
    json_t *v = json_object_get(args, "timeout");
    if (v && !json_is_null(v)) {
        if (!json_is_number(v) || json_number_value(v) <= 0 || json_number_value(v) > MAX_TIMEOUT) {
            *ret_err =
                error_result("Invalid arguments: 'timeout' must be a number of seconds between 0 and %g.", MAX_TIMEOUT);
            return -1;
        }
        t = json_number_value(v);
    }
    *ret_ms = t * 1000 < 1 ? 1 : (int)(t * 1000);
    return 0;
}

static json_t *tool_transfer(ipb_session *s, json_t *args, bool download, const ipb_exec_hooks *hooks,
                             bool *ret_cancelled) {
    const char *tool = download ? "download_file" : "upload_file";
    const char *relpath, *local;
    json_t *bad = NULL;
    int timeout_ms;
    if (get_string(args, "relpath", true, &relpath, &bad) < 0 ||
        get_string(args, "local_path", true, &local, &bad) < 0 || transfer_timeout_ms(args, &timeout_ms, &bad) < 0)
        return bad;
    ipb_error *err = NULL;
    if (ipb_check_relpath(relpath, strlen(relpath), &err) < 0)
        goto fail;
    ipb_transfer_req req = {.download = download, .local_path = local, .app_path = relpath, .dirs = &s->host_dirs};
    ipb_session_locate(s, relpath, &req.ws_fd, &req.relpath);
    enum ipb_transfer_outcome outcome;
    if (ipb_transfer_run(&req, timeout_ms, hooks, &outcome, &err) < 0) {
        if (outcome == IPB_TRANSFER_CANCELLED)
            *ret_cancelled = true;
        goto fail;
    }
    char msg[8192];
    if (download)
        snprintf(msg, sizeof(msg), "Downloaded /app/%s to %s", relpath, local);
    else
        snprintf(msg, sizeof(msg), "Uploaded %s to /app/%s", local, relpath);
    return text_result(msg, false);
fail : {
    json_t *r = error_result("%s failed: %s", tool, ipb_error_msg(err));
    ipb_error_free(err);
    return r;
}
}

static json_t *tool_reset(ipb_session *s) {
    ipb_error *err = NULL;
    long t0 = ipb_now_ms();
    if (ipb_session_reset(s, &err) < 0) {
        char *sn = ipb_session_take_start_note(s);
        json_t *r = error_result("reset failed: %s%s%s", ipb_error_msg(err), sn ? " " : "", sn ? sn : "");
        free(sn);
        ipb_error_free(err);
        return r;
    }
    long ms = ipb_now_ms() - t0;
    char *sn = ipb_session_take_start_note(s);
    json_t *r = text_result("The kernel was reset: a fresh Python process is ready. Files in /app and installed "
                            "packages are kept.",
                            false);
    if (sn) {
        json_t *c = json_array_get(json_object_get(r, "content"), 0);
        char *t = ipb_strdupf("%s\n%s", json_string_value(json_object_get(c, "text")), sn);
        json_object_set_new(c, "text", json_string(t));
        free(t);
        free(sn);
    }
    /* Which way the kernel started and how long the reset took, for tests and benchmarks. */
    json_t *meta = json_object_get(r, "_meta");
    if (!meta)
        json_object_set_new(r, "_meta", meta = json_object());
    json_object_set_new(meta, "ipybox/kernel",
                        json_pack("{s:s, s:I}", "start",
                                  s->kernel.start_kind == SHIM_START_STANDBY  ? "standby"
                                  : s->kernel.start_kind == SHIM_START_ZYGOTE ? "zygote"
                                  : s->kernel.start_kind == SHIM_START_RESCUE ? "rescue"
                                                                              : "exec",
                                  "ms", (json_int_t)ms));
    return r;
}

static json_t *tool_register(ipb_session *s, json_t *args) {
    const char *name;
    json_t *bad = NULL;
    if (get_string(args, "server_name", true, &name, &bad) < 0)
        return bad;
    json_t *params = json_object_get(args, "server_params");
    if (!json_is_object(params))
        return error_result("Invalid arguments: 'server_params' must be an object: {command, args, env, cwd} or "
                            "{url, headers}.");
    ipb_error *err = NULL;
    json_t *res = ipb_mcp_servers_register(&s->mcp, name, params, &err);
    if (!res) {
        json_t *r = error_result("%s", ipb_error_msg(err));
        ipb_error_free(err);
        return r;
    }
    json_t *modules = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(res, "modules"), i, m) json_array_append(modules, json_object_get(m, "module"));
    char *list = json_dumps(modules, JSON_COMPACT);
    ipb_buf note = {0};
    ipb_buf_appendf(&note,
                    "Registered MCP server '%s': %zu tool modules. In the kernel: `from mcptools.%s import "
                    "%s` then `%s.run(...)`; read a module's source under /opt/ipybox/mcptools/%s/ for its "
                    "parameters. Every call waits for the application's approval.",
                    name, json_array_size(modules), name,
                    json_array_size(modules) ? json_string_value(json_array_get(modules, 0)) : "<module>",
                    json_array_size(modules) ? json_string_value(json_array_get(modules, 0)) : "<module>", name);
    size_t ns = json_array_size(json_object_get(res, "skipped"));
    if (ns)
        ipb_buf_appendf(&note, " %zu tools were left out: %s", ns,
                        json_string_value(json_object_get(json_array_get(json_object_get(res, "skipped"), 0), "reason"))
                            ?: "see the log");
    json_t *r = json_pack("{s:[{s:s, s:s}, {s:s, s:s}], s:b}", "content", "type", "text", "text", list ? list : "[]",
                          "type", "text", "text", ipb_buf_cstr(&note), "isError", 0);
    free(list);
    ipb_buf_free(&note);
    json_decref(modules);
    json_decref(res);
    return r;
}

json_t *ipb_tools_call(ipb_session *s, const char *name, json_t *args, const ipb_exec_hooks *hooks,
                       bool *ret_cancelled) {
    *ret_cancelled = false;
    if (args && !json_is_object(args))
        return error_result("Invalid arguments: 'arguments' must be an object.");
    json_t *empty = NULL;
    if (!args)
        args = empty = json_object();
    json_t *r;
    if (!strcmp(name, "execute_ipython_cell"))
        r = tool_execute(s, args, hooks, ret_cancelled);
    else if (!strcmp(name, "register_mcp_server"))
        r = tool_register(s, args);
    else if (!strcmp(name, "upload_file"))
        r = tool_transfer(s, args, false, hooks, ret_cancelled);
    else if (!strcmp(name, "download_file"))
        r = tool_transfer(s, args, true, hooks, ret_cancelled);
    else
        r = tool_reset(s);
    json_decref(empty);
    return r;
}
