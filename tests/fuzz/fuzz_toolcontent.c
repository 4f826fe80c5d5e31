/* Fuzzing of supervisor/toolcontent.c, the checks on a tool result's content blocks.
 * FUZZ_SOURCES: supervisor/toolcontent.c
 * FUZZ_PKGS: jansson
 * The input is one JSON value (jansson, with the flags the MCP client parses with). For a
 * block that passes, the checked copy must be an object of one of the five types whose fields
 * all have the type toolcontent.h promises (base64 fields passing the base64 check, which must
 * agree with a plain reference decoder); a block that fails must come with a reason. Checking
 * the copy again must give an equal copy. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "toolcontent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reference: RFC 4648 base64 with padding, no whitespace, decoded one quantum at a time. */
static int b64_val(char c) {
    const char *alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c ? strchr(alpha, c) : NULL;
    return p ? (int)(p - alpha) : -1;
}

static bool ref_b64(const char *s, size_t len) {
    if (len % 4)
        return false;
    for (size_t i = 0; i < len; i += 4) {
        bool last = i + 4 == len;
        for (size_t k = 0; k < 4; k++) {
            if (s[i + k] == '=') {
                /* padding only in the last quantum, in its last one or two places, to its end */
                if (!last || k < 2)
                    return false;
                for (size_t j = k; j < 4; j++)
                    if (s[i + j] != '=')
                        return false;
                break;
            }
            if (b64_val(s[i + k]) < 0)
                return false;
        }
    }
    return true;
}

static bool is_str(json_t *o, const char *k) { return json_is_string(json_object_get(o, k)); }
static bool opt_str(json_t *o, const char *k) { return !json_object_get(o, k) || is_str(o, k); }
static bool b64_field(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_string(v) && ipb_toolcontent_base64_ok(json_string_value(v), json_string_length(v));
}

static void check_out(json_t *out) {
    const char *t = json_string_value(json_object_get(out, "type"));
    if (!json_is_object(out) || !t)
        abort();
    size_t want;
    if (!strcmp(t, "text")) {
        if (!is_str(out, "text"))
            abort();
        want = 2;
    } else if (!strcmp(t, "image") || !strcmp(t, "audio")) {
        if (!b64_field(out, "data") || !is_str(out, "mimeType"))
            abort();
        want = 3;
    } else if (!strcmp(t, "resource")) {
        bool text = is_str(out, "text"), blob = b64_field(out, "blob");
        if (!is_str(out, "uri") || text == blob || !opt_str(out, "mimeType"))
            abort();
        want = 3 + (json_object_get(out, "mimeType") != NULL);
    } else if (!strcmp(t, "resource_link")) {
        json_t *size = json_object_get(out, "size");
        if (!is_str(out, "uri") || !is_str(out, "name") || !opt_str(out, "mimeType") || !opt_str(out, "title") ||
            !opt_str(out, "description") || (size && (!json_is_integer(size) || json_integer_value(size) < 0)))
            abort();
        want = 3;
        const char *opt[] = {"mimeType", "title", "description", "size"};
        for (size_t i = 0; i < 4; i++)
            want += json_object_get(out, opt[i]) != NULL;
    } else {
        abort();
    }
    if (json_object_size(out) != want)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 0 && ipb_toolcontent_base64_ok((const char *)data, size) != ref_b64((const char *)data, size))
        abort();
    json_error_t jerr;
    json_t *root =
        json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
    if (!root)
        return 0;
    json_t *blocks = json_is_array(root) ? root : NULL;
    size_t n = blocks ? json_array_size(blocks) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *block = blocks ? json_array_get(blocks, i) : root;
        const char *why = NULL;
        json_t *out = ipb_toolcontent_check(block, &why);
        if (!out) {
            if (!why || !*why)
                abort();
            continue;
        }
        check_out(out);
        /* a block rebuilt from a resource is flat; recheck only the types that stay the same */
        const char *t = json_string_value(json_object_get(out, "type"));
        if (strcmp(t, "resource")) {
            json_t *again = ipb_toolcontent_check(out, &why);
            if (!again || !json_equal(again, out))
                abort();
            json_decref(again);
        }
        json_decref(out);
    }
    json_decref(root);
    return 0;
}
