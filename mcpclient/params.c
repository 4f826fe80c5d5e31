/* MCP server params as ipybox takes them: the check (transport rules, types, NUL bytes, URLs)
 * and ${VAR} placeholders filled from the host environment. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "curl_load.h"
#include "mcp_sandbox_check.h"
#include "mcpc_internal.h"
#include "strbuf.h"

#define KNOWN_KEYS "command, args, env, cwd, sandbox, url, headers, type"
#define MAX_VAR_NAME 256
#define MAX_HEADER_NAME 256

static bool is_one_of(const char *s, const char *const *list) {
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

/* A key or a value for a sentence: at most 60 bytes, printable. */
static const char *shown(const char *s, char buf[64]) {
    mcpc_excerpt(s, strlen(s), buf, 60);
    return buf;
}

static bool has_nul(json_t *str) { return strlen(json_string_value(str)) != json_string_length(str); }

static int want_string(json_t *v, const char *what, bool nonempty, ipb_error **err) {
    if (!json_is_string(v))
        return mcpc_fail(err, EINVAL, "%s must be a string", what);
    if (has_nul(v))
        return mcpc_fail(err, EINVAL, "%s contains a NUL byte", what);
    if (nonempty && json_string_length(v) == 0)
        return mcpc_fail(err, EINVAL, "%s is empty", what);
    return 0;
}

static bool is_tchar(unsigned char c) { return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c)); }

static int check_args(json_t *args, ipb_error **err) {
    if (!json_is_array(args))
        return mcpc_fail(err, EINVAL, "'args' must be an array of strings");
    size_t i;
    json_t *a;
    json_array_foreach(args, i, a) {
        char what[48];
        snprintf(what, sizeof(what), "'args'[%zu]", i);
        if (want_string(a, what, false, err) < 0)
            return -1;
    }
    return 0;
}

/* An object of strings: env (names without '=') or headers (HTTP token names, values without line
 * breaks, none of the headers the transport sets itself). */
static int check_string_map(json_t *map, const char *what, bool headers, ipb_error **err) {
    static const char *const reserved[] = {"content-type",
                                           "accept",
                                           "content-length",
                                           "transfer-encoding",
                                           "host",
                                           "connection",
                                           "mcp-session-id",
                                           "mcp-protocol-version",
                                           "last-event-id",
                                           "expect",
                                           NULL};
    if (!json_is_object(map))
        return mcpc_fail(err, EINVAL, "'%s' must be an object of strings", what);
    const char *k;
    json_t *v;
    char b1[64], b2[96];
    json_object_foreach(map, k, v) {
        size_t klen = json_object_iter_key_len(json_object_key_to_iter(k));
        if (klen != strlen(k))
            return mcpc_fail(err, EINVAL, "a name in '%s' contains a NUL byte", what);
        if (!*k)
            return mcpc_fail(err, EINVAL, "'%s' has an empty name", what);
        if (headers) {
            if (klen > MAX_HEADER_NAME)
                return mcpc_fail(err, EINVAL, "a header name in 'headers' is longer than %d bytes", MAX_HEADER_NAME);
            for (const char *p = k; *p; p++)
                if (!is_tchar((unsigned char)*p))
                    return mcpc_fail(err, EINVAL, "'%s' is not a valid HTTP header name", shown(k, b1));
            char lower[MAX_HEADER_NAME + 1];
            for (size_t i = 0; i <= klen; i++)
                lower[i] = (char)tolower((unsigned char)k[i]);
            if (is_one_of(lower, reserved))
                return mcpc_fail(err, EINVAL, "header '%s' is set by the MCP client itself and cannot be configured",
                                 k);
        } else if (strchr(k, '=')) {
            return mcpc_fail(err, EINVAL, "'%s' in 'env' is not a variable name (it contains '=')", shown(k, b1));
        }
        snprintf(b2, sizeof(b2), "'%s' %s", what, shown(k, b1));
        if (want_string(v, b2, false, err) < 0)
            return -1;
        if (headers && strpbrk(json_string_value(v), "\r\n"))
            return mcpc_fail(err, EINVAL, "%s contains a line break", b2);
    }
    return 0;
}

/* http(s) URLs only. A URL with placeholders is checked again, whole, once they are filled.
 * *ret_sse: its path contains "/sse". */
static int check_url(const char *url, bool *ret_sse, ipb_error **err) {
    char b[64];
    size_t skip;
    if (strncasecmp(url, "http://", 7) == 0)
        skip = 7;
    else if (strncasecmp(url, "https://", 8) == 0)
        skip = 8;
    else
        return mcpc_fail(err, EINVAL, "'url' must be an http:// or https:// URL, not '%s'", shown(url, b));
    for (const char *p = url; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f)
            return mcpc_fail(err, EINVAL, "'url' contains a space or a control character");
    const char *auth = url + skip;
    size_t alen = strcspn(auth, "/?#");
    if (alen == 0)
        return mcpc_fail(err, EINVAL, "'url' has no host: '%s'", shown(url, b));
    const char *path = auth + alen;
    size_t plen = strcspn(path, "?#");
    *ret_sse = memmem(path, plen, "/sse", 4) != NULL;
    if (strstr(url, "${"))
        return 0;
    /* libcurl's parser, which the transports use: loaded here if no transport did yet. */
    if (ipb_curl_load(err) < 0)
        return -1;
    CURLU *u = curl_url();
    if (!u)
        return mcpc_fail(err, ENOMEM, "out of memory");
    CURLUcode rc = curl_url_set(u, CURLUPART_URL, url, 0);
    curl_url_cleanup(u);
    if (rc != CURLUE_OK)
        return mcpc_fail(err, EINVAL, "'url' is not a valid URL (%s): '%s'", curl_url_strerror(rc), shown(url, b));
    return 0;
}

int ipb_mcp_params_check(json_t *params, ipb_error **err) {
    static const char *const stdio_keys[] = {"command", "args", "env", "cwd", "sandbox", NULL};
    static const char *const http_keys[] = {"url", "headers", NULL};
    if (!json_is_object(params))
        return mcpc_fail(err, EINVAL, "MCP server params must be a JSON object");
    const char *k;
    json_t *v;
    char b[64];
    json_object_foreach(params, k, v) {
        if (json_object_iter_key_len(json_object_key_to_iter(k)) != strlen(k))
            return mcpc_fail(err, EINVAL, "a key of the MCP server params contains a NUL byte");
        if (strcmp(k, "type") != 0 && !is_one_of(k, stdio_keys) && !is_one_of(k, http_keys))
            return mcpc_fail(err, EINVAL, "unknown key '%s' in MCP server params (known: " KNOWN_KEYS ")", shown(k, b));
    }
    json_t *type = json_object_get(params, "type");
    json_t *command = json_object_get(params, "command");
    json_t *url = json_object_get(params, "url");
    int transport;
    if (type) {
        if (want_string(type, "'type'", true, err) < 0)
            return -1;
        const char *t = json_string_value(type);
        if (strcmp(t, "stdio") == 0)
            transport = IPB_MCP_STDIO;
        else if (strcmp(t, "streamable_http") == 0)
            transport = IPB_MCP_HTTP;
        else if (strcmp(t, "sse") == 0)
            transport = IPB_MCP_SSE;
        else
            return mcpc_fail(err, EINVAL, "'type' must be \"stdio\", \"streamable_http\" or \"sse\", not \"%s\"",
                             shown(t, b));
    } else if (command) {
        transport = IPB_MCP_STDIO;
    } else if (url) {
        transport = 0; /* from the URL, below */
    } else {
        return mcpc_fail(err, EINVAL, "MCP server params need 'command' (a stdio server) or 'url' (an HTTP server)");
    }

    if (transport == IPB_MCP_STDIO) {
        json_object_foreach(params, k, v) {
            if (is_one_of(k, http_keys))
                return mcpc_fail(err, EINVAL, "'%s' is for HTTP servers, not for a stdio server (one with 'command')",
                                 k);
        }
        if (!command)
            return mcpc_fail(err, EINVAL, "a stdio MCP server needs 'command'");
        if (want_string(command, "'command'", true, err) < 0)
            return -1;
        json_t *args = json_object_get(params, "args");
        if (args && check_args(args, err) < 0)
            return -1;
        json_t *env = json_object_get(params, "env");
        if (env && check_string_map(env, "env", false, err) < 0)
            return -1;
        json_t *cwd = json_object_get(params, "cwd");
        if (cwd && want_string(cwd, "'cwd'", true, err) < 0)
            return -1;
        json_t *sandbox = json_object_get(params, "sandbox");
        if (sandbox && ipb_mcp_sandbox_check(params, sandbox, err) < 0)
            return -1;
        return transport;
    }

    json_object_foreach(params, k, v) {
        if (is_one_of(k, stdio_keys))
            return mcpc_fail(err, EINVAL, "'%s' is for stdio servers, not for an HTTP server (one with 'url')", k);
    }
    if (!url)
        return mcpc_fail(err, EINVAL, "an HTTP MCP server needs 'url'");
    if (want_string(url, "'url'", true, err) < 0)
        return -1;
    bool sse_path = false;
    if (check_url(json_string_value(url), &sse_path, err) < 0)
        return -1;
    json_t *headers = json_object_get(params, "headers");
    if (headers && check_string_map(headers, "headers", true, err) < 0)
        return -1;
    if (!transport)
        transport = sse_path ? IPB_MCP_SSE : IPB_MCP_HTTP;
    return transport;
}

static bool name_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }

char *ipb_mcp_expand(const char *s, ipb_error **err) {
    ipb_buf out = {0};
    const char *p = s;
    while (*p) {
        const char *dollar = strstr(p, "${");
        size_t plain = dollar ? (size_t)(dollar - p) : strlen(p);
        if (ipb_buf_append(&out, p, plain) < 0)
            goto oom;
        if (!dollar)
            break;
        const char *name = dollar + 2;
        const char *end = name;
        while (name_char(*end))
            end++;
        size_t off = (size_t)(dollar - s);
        if (*end != '}' || end == name || !name_start(*name)) {
            ipb_buf_free(&out);
            if (!strchr(name, '}'))
                mcpc_fail(err, EINVAL, "unterminated '${' at offset %zu (a placeholder is ${NAME})", off);
            else
                mcpc_fail(err, EINVAL,
                          "invalid placeholder at offset %zu: a variable name is letters, digits and '_', not "
                          "starting with a digit",
                          off);
            return NULL;
        }
        size_t nlen = (size_t)(end - name);
        if (nlen > MAX_VAR_NAME) {
            ipb_buf_free(&out);
            mcpc_fail(err, EINVAL, "the variable name at offset %zu is longer than %d characters", off, MAX_VAR_NAME);
            return NULL;
        }
        char var[MAX_VAR_NAME + 1];
        memcpy(var, name, nlen);
        var[nlen] = '\0';
        const char *val = getenv(var);
        if (!val) {
            ipb_buf_free(&out);
            mcpc_fail(err, ENOENT, "environment variable %s is not set (needed for ${%s})", var, var);
            return NULL;
        }
        if (ipb_buf_append(&out, val, strlen(val)) < 0)
            goto oom;
        p = end + 1;
    }
    const char *r = ipb_buf_cstr(&out);
    if (!out.data) /* the empty string */
        goto oom;
    (void)r;
    return out.data;
oom:
    ipb_buf_free(&out);
    mcpc_fail(err, ENOMEM, "out of memory");
    return NULL;
}

/* Replaces the string v in place with its expansion. */
static int expand_value(json_t *v, const char *what, ipb_error **err) {
    char *x = ipb_mcp_expand(json_string_value(v), err);
    if (!x)
        return ipb_error_wrap(err, "%s", what);
    int r = json_string_set(v, x);
    free(x);
    return r < 0 ? mcpc_fail(err, ENOMEM, "out of memory") : 0;
}

json_t *mcpc_params_expand(json_t *params, ipb_error **err) {
    json_t *copy = json_deep_copy(params);
    if (!copy) {
        mcpc_fail(err, ENOMEM, "out of memory");
        return NULL;
    }
    static const char *const singles[] = {"command", "cwd", "url"};
    for (size_t i = 0; i < sizeof(singles) / sizeof(singles[0]); i++) {
        json_t *v = json_object_get(copy, singles[i]);
        char what[32];
        snprintf(what, sizeof(what), "in '%s'", singles[i]);
        if (v && expand_value(v, what, err) < 0)
            goto fail;
    }
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(copy, "args"), i, v) {
        char what[48];
        snprintf(what, sizeof(what), "in 'args'[%zu]", i);
        if (expand_value(v, what, err) < 0)
            goto fail;
    }
    static const char *const maps[] = {"env", "headers"};
    for (size_t m = 0; m < 2; m++) {
        const char *k;
        char b[64];
        json_object_foreach(json_object_get(copy, maps[m]), k, v) {
            char what[96];
            snprintf(what, sizeof(what), "in '%s' %s", maps[m], shown(k, b));
            if (expand_value(v, what, err) < 0)
                goto fail;
        }
    }
    return copy;
fail:
    json_decref(copy);
    return NULL;
}
