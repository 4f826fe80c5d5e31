/* Checks the content blocks of a tool's result (toolcontent.h says what passes). */
#include "toolcontent.h"

#include <string.h>

static bool b64_char(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

bool ipb_toolcontent_base64_ok(const char *s, size_t len) {
    if (len % 4)
        return false;
    size_t pad = 0;
    if (len >= 1 && s[len - 1] == '=')
        pad++;
    if (len >= 2 && s[len - 2] == '=')
        pad++;
    for (size_t i = 0; i < len - pad; i++)
        if (!b64_char((unsigned char)s[i]))
            return false;
    return true;
}

/* A string field: NULL when absent, or with *bad set when present but not a string. */
static json_t *str_field(json_t *obj, const char *key, bool *bad) {
    json_t *v = json_object_get(obj, key);
    if (v && !json_is_string(v)) {
        *bad = true;
        return NULL;
    }
    return v;
}

static bool mime_ok(json_t *v) {
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (!s || n == 0 || n > IPB_TOOLCONTENT_MAX_MIME)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] > '~')
            return false;
    return true;
}

static bool base64_value_ok(json_t *v) {
    return ipb_toolcontent_base64_ok(json_string_value(v), json_string_length(v));
}

/* Adds key: v (borrowed) when v is not NULL; false when out of memory. */
static bool put(json_t *out, const char *key, json_t *v) { return !v || json_object_set(out, key, v) == 0; }

static json_t *finish(json_t *out, bool ok, const char **ret_why) {
    if (!ok) {
        json_decref(out);
        *ret_why = NULL;
        return NULL;
    }
    return out;
}

static json_t *check_text(json_t *block, const char **ret_why) {
    bool bad = false;
    json_t *text = str_field(block, "text", &bad);
    if (!text) {
        *ret_why = "a text block without a string \"text\"";
        return NULL;
    }
    json_t *out = json_pack("{s:s, s:O}", "type", "text", "text", text);
    return finish(out, out != NULL, ret_why);
}

static json_t *check_media(json_t *block, const char *type, const char **ret_why) {
    bool bad = false;
    json_t *data = str_field(block, "data", &bad), *mime = str_field(block, "mimeType", &bad);
    bool image = !strcmp(type, "image");
    if (!data) {
        *ret_why = image ? "an image block without a string \"data\"" : "an audio block without a string \"data\"";
        return NULL;
    }
    if (!base64_value_ok(data)) {
        *ret_why =
            image ? "an image block whose \"data\" is not base64" : "an audio block whose \"data\" is not base64";
        return NULL;
    }
    if (!mime_ok(mime)) {
        *ret_why =
            image ? "an image block without a valid \"mimeType\"" : "an audio block without a valid \"mimeType\"";
        return NULL;
    }
    json_t *out = json_pack("{s:s, s:O, s:O}", "type", type, "data", data, "mimeType", mime);
    return finish(out, out != NULL, ret_why);
}

static json_t *check_resource(json_t *block, const char **ret_why) {
    json_t *r = json_object_get(block, "resource");
    if (!json_is_object(r)) {
        *ret_why = "a resource block without a \"resource\" object";
        return NULL;
    }
    bool bad = false;
    json_t *uri = str_field(r, "uri", &bad), *mime = str_field(r, "mimeType", &bad);
    json_t *text = str_field(r, "text", &bad), *blob = str_field(r, "blob", &bad);
    if (bad) {
        *ret_why = "a resource block with a field of the wrong type";
        return NULL;
    }
    if (!uri || json_string_length(uri) == 0) {
        *ret_why = "a resource block without a \"uri\"";
        return NULL;
    }
    if (mime && !mime_ok(mime)) {
        *ret_why = "a resource block with an invalid \"mimeType\"";
        return NULL;
    }
    if (!text == !blob) {
        *ret_why = "a resource block without exactly one of \"text\" and \"blob\"";
        return NULL;
    }
    if (blob && !base64_value_ok(blob)) {
        *ret_why = "a resource block whose \"blob\" is not base64";
        return NULL;
    }
    json_t *out = json_pack("{s:s, s:O}", "type", "resource", "uri", uri);
    bool ok = out && put(out, "mimeType", mime) && put(out, "text", text) && put(out, "blob", blob);
    return finish(out, ok, ret_why);
}

static json_t *check_link(json_t *block, const char **ret_why) {
    bool bad = false;
    json_t *uri = str_field(block, "uri", &bad), *name = str_field(block, "name", &bad);
    json_t *mime = str_field(block, "mimeType", &bad), *title = str_field(block, "title", &bad);
    json_t *desc = str_field(block, "description", &bad);
    json_t *size = json_object_get(block, "size");
    if (bad || (size && (!json_is_integer(size) || json_integer_value(size) < 0))) {
        *ret_why = "a resource link with a field of the wrong type";
        return NULL;
    }
    if (!uri || json_string_length(uri) == 0 || !name) {
        *ret_why = "a resource link without a \"uri\" and a \"name\"";
        return NULL;
    }
    if (mime && !mime_ok(mime)) {
        *ret_why = "a resource link with an invalid \"mimeType\"";
        return NULL;
    }
    json_t *out = json_pack("{s:s, s:O, s:O}", "type", "resource_link", "uri", uri, "name", name);
    bool ok = out && put(out, "mimeType", mime) && put(out, "title", title) && put(out, "description", desc) &&
              put(out, "size", size);
    return finish(out, ok, ret_why);
}

json_t *ipb_toolcontent_check(json_t *block, const char **ret_why) {
    const char *type = json_string_value(json_object_get(block, "type"));
    if (!json_is_object(block) || !type) {
        *ret_why = "a block that is not an object with a string \"type\"";
        return NULL;
    }
    if (!strcmp(type, "text"))
        return check_text(block, ret_why);
    if (!strcmp(type, "image") || !strcmp(type, "audio"))
        return check_media(block, type, ret_why);
    if (!strcmp(type, "resource"))
        return check_resource(block, ret_why);
    if (!strcmp(type, "resource_link"))
        return check_link(block, ret_why);
    *ret_why = "a block of an unknown type";
    return NULL;
}
