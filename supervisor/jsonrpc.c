#include "jsonrpc.h"
#include "jsonlimit.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t line_max(const jrpc_reader *r) { return r->max ? r->max : JRPC_MAX_LINE; }

int jrpc_reader_fill(jrpc_reader *r, int fd) { return jrpc_reader_fill_max(r, fd, SIZE_MAX); }

int jrpc_reader_fill_max(jrpc_reader *r, int fd, size_t limit) {
    char chunk[65536];
    for (size_t total = 0; total < limit;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN ? 0 : -errno;
        }
        if (n == 0) {
            r->eof = true;
            return 0;
        }
        total += (size_t)n;
        const char *p = chunk;
        size_t len = (size_t)n;
        if (r->discarding) {
            const char *nl = memchr(p, '\n', len);
            if (!nl)
                continue;
            r->discarding = false;
            len -= (size_t)(nl + 1 - p);
            p = nl + 1;
        }
        int rr = ipb_buf_append(&r->buf, p, len);
        if (rr < 0)
            return rr;
        /* Past the cap, let jrpc_reader_next() judge before reading more. */
        if ((size_t)n < sizeof(chunk) || r->buf.len > line_max(r))
            return 0;
    }
    return 0;
}

/* A NUL-terminated copy of exactly n bytes: lines may contain NUL bytes, so strndup() (which
 * stops at the first NUL) would return a shorter buffer than the length we report. */
static char *dup_bytes(const char *p, size_t n) {
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

/* The line at the start of the buffer, n bytes of it at hand, is dropped: its id is kept. */
static void note_dropped(jrpc_reader *r, size_t n) {
    json_decref(r->dropped_id);
    r->dropped_id = jrpc_peek_id(r->buf.data, n);
}

json_t *jrpc_reader_take_dropped_id(jrpc_reader *r) {
    json_t *id = r->dropped_id;
    r->dropped_id = NULL;
    return id;
}

int jrpc_reader_next(jrpc_reader *r, char **line, size_t *len) {
    free(r->line);
    r->line = NULL;
    char *nl = r->buf.len ? memchr(r->buf.data, '\n', r->buf.len) : NULL;
    if (!nl) {
        if (r->buf.len > line_max(r)) {
            note_dropped(r, r->buf.len);
            ipb_buf_reset(&r->buf);
            r->discarding = true;
            return -E2BIG;
        }
        if (r->eof && r->buf.len) {
            /* A last line without newline still counts. */
            r->line = dup_bytes(r->buf.data, r->buf.len);
            *len = r->buf.len;
            ipb_buf_reset(&r->buf);
            if (!r->line)
                return -ENOMEM;
            *line = r->line;
            return 1;
        }
        return 0;
    }
    size_t l = (size_t)(nl - r->buf.data);
    if (l > line_max(r)) {
        note_dropped(r, l);
        ipb_buf_consume(&r->buf, l + 1);
        return -E2BIG;
    }
    r->line = dup_bytes(r->buf.data, l);
    ipb_buf_consume(&r->buf, l + 1);
    if (!r->line)
        return -ENOMEM;
    if (l && r->line[l - 1] == '\r')
        r->line[--l] = '\0';
    *line = r->line;
    *len = l;
    return 1;
}

void jrpc_reader_free(jrpc_reader *r) {
    json_decref(r->dropped_id);
    r->dropped_id = NULL;
    ipb_buf_free(&r->buf);
    free(r->line);
    r->line = NULL;
}

/* --- the id of a message cut short ------------------------------------------------------- */

enum peek { PEEK_OK, PEEK_END, PEEK_BAD }; /* PEEK_END: the text ends first */

static void skip_ws(const char *s, size_t len, size_t *i) {
    while (*i < len && (s[*i] == ' ' || s[*i] == '\t' || s[*i] == '\n' || s[*i] == '\r'))
        (*i)++;
}

/* A string starting at s[*i] == '"'; *i moves past its closing quote. */
static enum peek skip_string(const char *s, size_t len, size_t *i) {
    for (size_t k = *i + 1; k < len; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c == '"') {
            *i = k + 1;
            return PEEK_OK;
        }
        if (c < 0x20)
            return PEEK_BAD;
        if (c == '\\')
            k++;
    }
    return PEEK_END;
}

/* Any value: strings, nesting and bare words (numbers, true, false, null). What is inside a
 * nested value is not checked: only where it ends matters. */
static enum peek skip_value(const char *s, size_t len, size_t *i) {
    size_t depth = 0;
    while (*i < len) {
        char c = s[*i];
        if (c == '"') {
            enum peek p = skip_string(s, len, i);
            if (p != PEEK_OK)
                return p;
        } else if (c == '{' || c == '[') {
            depth++;
            (*i)++;
        } else if (c == '}' || c == ']') {
            if (!depth)
                return PEEK_BAD;
            depth--;
            (*i)++;
        } else if (depth) {
            (*i)++;
        } else if (strchr("-+.0123456789eEabcdefghijklmnopqrstuvwxyz", c) && c) {
            while (*i < len && s[*i] && strchr("-+.0123456789eEabcdefghijklmnopqrstuvwxyz", s[*i]))
                (*i)++;
            return *i < len ? PEEK_OK : PEEK_END;
        } else {
            return PEEK_BAD;
        }
        if (!depth)
            return PEEK_OK;
    }
    return PEEK_END;
}

json_t *jrpc_peek_id(const char *s, size_t len) {
    size_t i = 0;
    json_t *found = NULL;
    bool seen = false;
    skip_ws(s, len, &i);
    if (i >= len || s[i] != '{')
        return NULL;
    i++;
    for (bool first = true;; first = false) {
        skip_ws(s, len, &i);
        if (i >= len)
            break;
        if (first && s[i] == '}')
            break;
        if (s[i] != '"')
            goto bad;
        size_t k0 = i;
        enum peek p = skip_string(s, len, &i);
        if (p == PEEK_END)
            break;
        if (p == PEEK_BAD)
            goto bad;
        /* The key, decoded when it has escapes ("\u0069d" is "id" too); no escaped form of a
         * two-character key is longer than 14 bytes with its quotes. */
        bool is_id = i - k0 == 4 && !memcmp(s + k0, "\"id\"", 4);
        if (!is_id && memchr(s + k0, '\\', i - k0) && i - k0 <= 14) {
            json_t *key = json_loadb(s + k0, i - k0, JSON_DECODE_ANY, NULL);
            is_id = key && json_string_length(key) == 2 && !memcmp(json_string_value(key), "id", 2);
            json_decref(key);
        }
        skip_ws(s, len, &i);
        if (i >= len)
            break;
        if (s[i] != ':')
            goto bad;
        i++;
        skip_ws(s, len, &i);
        size_t v0 = i;
        p = skip_value(s, len, &i);
        if (p == PEEK_BAD)
            goto bad;
        if (is_id) {
            /* Only a whole value counts, and only one. */
            if (p == PEEK_END || seen || i - v0 > JRPC_PEEK_ID_MAX)
                goto bad;
            seen = true;
            found = json_loadb(s + v0, i - v0, JSON_DECODE_ANY, NULL);
            if (!found || !(json_is_string(found) || json_is_integer(found)))
                goto bad;
        }
        if (p == PEEK_END)
            break;
        skip_ws(s, len, &i);
        if (i >= len)
            break;
        if (s[i] == '}')
            break;
        if (s[i] != ',')
            goto bad;
        i++;
    }
    return found;
bad:
    json_decref(found);
    return NULL;
}

static void invalid(jrpc_msg *m, int code, const char *msg) {
    m->kind = JRPC_INVALID;
    m->error_code = code;
    m->error_msg = msg;
}

void jrpc_parse(const char *line, size_t len, jrpc_msg *m) {
    memset(m, 0, sizeof(*m));
    json_error_t e;
    /* Nesting is capped by jansson's parser depth; duplicates would make intent ambiguous. */
    /* NUL characters in strings are let through so that tools can refuse them by name. */
    if (!ipb_json_values_ok(line, len, IPB_JSON_MAX_VALUES))
        return invalid(m, JRPC_PARSE_ERROR, "Parse error: the message has more than 1048576 values");
    m->root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!m->root)
        return invalid(m, JRPC_PARSE_ERROR, "Parse error: the message is not valid JSON");
    if (json_is_array(m->root))
        return invalid(m, JRPC_INVALID_REQUEST, "Batches are not supported");
    if (!json_is_object(m->root))
        return invalid(m, JRPC_INVALID_REQUEST, "Invalid Request: expected a JSON object");
    json_t *id = json_object_get(m->root, "id");
    if (id && !(json_is_string(id) || json_is_integer(id) || json_is_null(id)))
        return invalid(m, JRPC_INVALID_REQUEST, "Invalid Request: id must be a string or an integer");
    if (id && !json_is_null(id))
        m->id = id;
    const char *ver = json_string_value(json_object_get(m->root, "jsonrpc"));
    if (!ver || strcmp(ver, "2.0"))
        return invalid(m, JRPC_INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"");
    json_t *method = json_object_get(m->root, "method");
    if (!method) {
        if (m->id && (json_object_get(m->root, "result") || json_object_get(m->root, "error"))) {
            m->kind = JRPC_RESPONSE;
            return;
        }
        return invalid(m, JRPC_INVALID_REQUEST, "Invalid Request: no method");
    }
    if (!json_is_string(method) || strlen(json_string_value(method)) != json_string_length(method))
        return invalid(m, JRPC_INVALID_REQUEST, "Invalid Request: method must be a string");
    m->method = json_string_value(method);
    m->params = json_object_get(m->root, "params");
    if (m->params && !json_is_object(m->params) && !json_is_array(m->params))
        return invalid(m, JRPC_INVALID_REQUEST, "Invalid Request: params must be an object");
    m->kind = m->id ? JRPC_REQUEST : JRPC_NOTIFICATION;
}

void jrpc_msg_free(jrpc_msg *m) {
    json_decref(m->root);
    memset(m, 0, sizeof(*m));
}

json_t *jrpc_result(json_t *id, json_t *result) {
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result", result);
}

json_t *jrpc_error(json_t *id, int code, const char *msg) {
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", "code", code,
                     "message", msg);
}

json_t *jrpc_notification(const char *method, json_t *params) {
    return json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params", params);
}

char *jrpc_dump(json_t *msg, size_t *ret_len) {
    char *s = json_dumps(msg, JSON_COMPACT);
    if (!s)
        return NULL;
    size_t l = strlen(s);
    char *n = realloc(s, l + 2);
    if (!n) {
        free(s);
        return NULL;
    }
    n[l] = '\n';
    n[l + 1] = '\0';
    *ret_len = l + 1;
    return n;
}
