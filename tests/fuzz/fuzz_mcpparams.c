/* libFuzzer harness: MCP server params (mcpclient/params.c).
 *
 * The first byte picks what is fuzzed:
 *  even: the rest is JSON (NUL bytes allowed in strings) given to ipb_mcp_params_check(); an
 *        accepted object is then expanded (mcpc_params_expand) with a fixed environment and
 *        checked again, and what was accepted must have the shape the transports rely on;
 *  odd:  the rest is a string for ipb_mcp_expand(), compared with a reference expansion written
 *        here: the same output or the same failure (an error sentence either way).
 *
 * FUZZ_SOURCES: mcpclient/params.c mcpclient/curl_load.c mcpclient/sandbox_params.c mcpclient/util.c policy/egress.c common/strbuf.c common/error.c common/nofile.c
 * FUZZ_PKGS: jansson libcurl
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mcp_client.h"
#include "mcpc_internal.h"
#include "strbuf.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_mcpparams: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                 \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static bool plain_string(json_t *v) {
    return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

static bool string_map(json_t *m) {
    if (!m)
        return true;
    if (!json_is_object(m))
        return false;
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        if (!*k || !plain_string(v))
            return false;
    }
    return true;
}

static void check_shape(json_t *p, int t) {
    CHECK(t == IPB_MCP_STDIO || t == IPB_MCP_HTTP || t == IPB_MCP_SSE);
    if (t == IPB_MCP_STDIO) {
        json_t *cmd = json_object_get(p, "command");
        CHECK(plain_string(cmd) && json_string_length(cmd) > 0);
        CHECK(!json_object_get(p, "url") && !json_object_get(p, "headers"));
        json_t *args = json_object_get(p, "args");
        CHECK(!args || json_is_array(args));
        size_t i;
        json_t *a;
        json_array_foreach(args, i, a) CHECK(plain_string(a));
        CHECK(string_map(json_object_get(p, "env")));
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(p, "env"), k, v) CHECK(!strchr(k, '='));
    } else {
        json_t *url = json_object_get(p, "url");
        CHECK(plain_string(url));
        const char *u = json_string_value(url);
        CHECK(strncasecmp(u, "http://", 7) == 0 || strncasecmp(u, "https://", 8) == 0);
        CHECK(!json_object_get(p, "command"));
        CHECK(string_map(json_object_get(p, "headers")));
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(p, "headers"), k, v) {
            CHECK(!strpbrk(json_string_value(v), "\r\n"));
            CHECK(!strpbrk(k, " :\r\n"));
        }
    }
}

static bool placeholder_left(json_t *v) {
    if (json_is_string(v))
        return strstr(json_string_value(v), "${") != NULL;
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) if (placeholder_left(e)) return true;
    }
    if (json_is_object(v)) {
        const char *k;
        json_t *e;
        json_object_foreach(v, k, e) if (placeholder_left(e)) return true;
    }
    return false;
}

static void fuzz_check(const char *text, size_t len) {
    json_t *p = json_loadb(text, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, NULL);
    if (!p)
        return;
    ipb_error *err = NULL;
    int t = ipb_mcp_params_check(p, &err);
    if (t < 0) {
        CHECK(err && err->msg && *err->msg);
        ipb_error_free(err);
        json_decref(p);
        return;
    }
    CHECK(!err);
    check_shape(p, t);
    json_t *x = mcpc_params_expand(p, &err);
    if (!x) {
        CHECK(err && err->msg && *err->msg);
        ipb_error_free(err);
    } else {
        CHECK(!err);
        int t2 = ipb_mcp_params_check(x, &err);
        if (t2 < 0) {
            CHECK(err && err->msg);
            ipb_error_free(err);
        } else {
            check_shape(x, t2);
            /* the environment's values have no '{': no placeholder is left in a value (keys are
             * not filled) */
            CHECK(!placeholder_left(x));
        }
        json_decref(x);
    }
    json_decref(p);
}

static bool name_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }

/* The reference: returns the expansion or NULL. */
static char *ref_expand(const char *s) {
    ipb_buf out = {0};
    ipb_buf_append(&out, "", 0);
    for (size_t i = 0; s[i];) {
        if (s[i] == '$' && s[i + 1] == '{') {
            size_t j = i + 2;
            if (!name_start(s[j])) {
                ipb_buf_free(&out);
                return NULL;
            }
            while (name_char(s[j]))
                j++;
            if (s[j] != '}' || j - (i + 2) > 256) {
                ipb_buf_free(&out);
                return NULL;
            }
            char name[300];
            memcpy(name, s + i + 2, j - (i + 2));
            name[j - (i + 2)] = '\0';
            const char *v = getenv(name);
            if (!v) {
                ipb_buf_free(&out);
                return NULL;
            }
            ipb_buf_append(&out, v, strlen(v));
            i = j + 1;
        } else {
            ipb_buf_append(&out, s + i, 1);
            i++;
        }
    }
    return out.data;
}

static void fuzz_expand(const char *text, size_t len) {
    char *s = strndup(text, len); /* up to a NUL, as a C string would be */
    if (!s)
        return;
    ipb_error *err = NULL;
    char *got = ipb_mcp_expand(s, &err);
    char *want = ref_expand(s);
    CHECK(!got == !want);
    if (got) {
        CHECK(!err);
        CHECK(strcmp(got, want) == 0);
    } else {
        CHECK(err && err->msg && *err->msg);
        CHECK(err->errnum == EINVAL || err->errnum == ENOENT);
    }
    ipb_error_free(err);
    free(got);
    free(want);
    free(s);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    setenv("A", "alpha", 1);
    setenv("TOKEN", "t0k3n", 1);
    setenv("EMPTY", "", 1);
    setenv("HOSTNAME_X", "example.test", 1);
    setenv("NL", "a\r\nb", 1);
    unsetenv("UNSET");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    /* An exact-size copy so that a read past the end is caught. */
    char *copy = malloc(size - 1 ? size - 1 : 1);
    if (!copy)
        return 0;
    memcpy(copy, data + 1, size - 1);
    if (data[0] & 1)
        fuzz_expand(copy, size - 1);
    else
        fuzz_check(copy, size - 1);
    free(copy);
    return 0;
}
