#include "jsonfast.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

static int hex4(const char *p, uint32_t *ret) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return -1;
    }
    *ret = v;
    return 0;
}

/* Writes cp as UTF-8 into u; returns the length (1-4). */
static size_t put_utf8(char u[4], uint32_t cp) {
    if (cp < 0x80) {
        u[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    u[0] = (char)(0xF0 | (cp >> 18));
    u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    u[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t ipb_utf8_seq(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    size_t n;
    uint32_t cp;
    if (c < 0xC2)
        return 0;
    if (c < 0xE0) {
        n = 2;
        cp = c & 0x1F;
    } else if (c < 0xF0) {
        n = 3;
        cp = c & 0x0F;
    } else if (c < 0xF5) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if ((size_t)(end - p) < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return n;
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Whether 8 bytes are all plain string content: ASCII, not a control character, not '"' or
 * '\\'. May say false for a plain word (the byte loop then decides), never true for another. */
static inline bool word_plain(const char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    if (w & HIGHS)
        return false;
    uint64_t ctl = (w - 0x20 * ONES) & ~w & HIGHS;
    uint64_t q = w ^ (0x22 * ONES), b = w ^ (0x5C * ONES);
    uint64_t quote = (q - ONES) & ~q & HIGHS, bslash = (b - ONES) & ~b & HIGHS;
    return !(ctl | quote | bslash);
}

/* Parses a JSON string starting at the opening quote; returns the position after the closing
 * quote, or NULL. Decodes into out unless it is NULL (then it only validates). *unclean is set
 * when an escape stands for NUL or ESC, characters that output text must not carry. */
static const char *parse_string(const char *p, const char *end, ipb_buf *out, bool *unclean) {
    if (p >= end || *p != '"')
        return NULL;
    p++;
    for (;;) {
        const char *run = p;
        while (end - p >= 8 && word_plain(p))
            p += 8;
        while (p < end && (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x80 && *p != '"' && *p != '\\')
            p++;
        if (out && p > run && ipb_buf_append(out, run, (size_t)(p - run)) < 0)
            return NULL;
        if (p >= end)
            return NULL;
        unsigned char c = (unsigned char)*p;
        if (c == '"')
            return p + 1;
        if (c < 0x20)
            return NULL;
        if (c >= 0x80) {
            size_t n = ipb_utf8_seq((const unsigned char *)p, (const unsigned char *)end);
            if (!n || (out && ipb_buf_append(out, p, n) < 0))
                return NULL;
            p += n;
            continue;
        }
        /* backslash */
        if (end - p < 2)
            return NULL;
        char e = p[1];
        p += 2;
        char ch;
        switch (e) {
        case '"':
            ch = '"';
            break;
        case '\\':
            ch = '\\';
            break;
        case '/':
            ch = '/';
            break;
        case 'b':
            ch = '\b';
            break;
        case 'f':
            ch = '\f';
            break;
        case 'n':
            ch = '\n';
            break;
        case 'r':
            ch = '\r';
            break;
        case 't':
            ch = '\t';
            break;
        case 'u': {
            uint32_t cp, lo;
            if (end - p < 4 || hex4(p, &cp) < 0)
                return NULL;
            p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return NULL; /* lone low surrogate */
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
                    return NULL;
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp == 0 || cp == 0x1b)
                *unclean = true;
            if (out) {
                char u[4];
                if (ipb_buf_append(out, u, put_utf8(u, cp)) < 0)
                    return NULL;
            }
            continue;
        }
        default:
            return NULL;
        }
        if (out && ipb_buf_append(out, &ch, 1) < 0)
            return NULL;
    }
}

int ipb_stream_content_scan(const char *json, size_t len, ipb_stream_view *v) {
    const char *p = json, *end = json + len;
    ipb_buf key = {0}, name = {0};
    const char *text = NULL;
    size_t text_len = 0;
    bool have_name = false, have_text = false, unclean = false, name_unclean = false;
    p = skip_ws(p, end);
    if (p >= end || *p != '{')
        goto no;
    p = skip_ws(p + 1, end);
    for (;;) {
        bool key_unclean = false;
        ipb_buf_reset(&key);
        if (!(p = parse_string(p, end, &key, &key_unclean)))
            goto no;
        p = skip_ws(p, end);
        if (p >= end || *p != ':')
            goto no;
        p = skip_ws(p + 1, end);
        if (key.len == 4 && !memcmp(key.data, "name", 4) && !have_name) {
            have_name = true;
            if (!(p = parse_string(p, end, &name, &name_unclean)))
                goto no;
        } else if (key.len == 4 && !memcmp(key.data, "text", 4) && !have_text) {
            have_text = true;
            text = p + 1;
            if (!(p = parse_string(p, end, NULL, &unclean)))
                goto no;
            text_len = (size_t)(p - 1 - text); /* the body, between the quotes */
        } else {
            goto no; /* another key, or a duplicate: jansson decides */
        }
        p = skip_ws(p, end);
        if (p < end && *p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == '}') {
            p = skip_ws(p + 1, end);
            break;
        }
        goto no;
    }
    if (p != end || !have_name || !have_text || memchr(name.data ? name.data : "", '\0', name.len))
        goto no;
    ipb_buf_free(&key);
    v->name = name.data ? name.data : strdup("");
    if (!v->name)
        return 0;
    v->text = text;
    v->text_len = text_len;
    v->text_clean = !unclean;
    return 1;
no:
    ipb_buf_free(&key);
    ipb_buf_free(&name);
    return 0;
}

size_t ipb_json_unescape_chunk(const char *body, size_t len, char *out, size_t cap, size_t *out_len) {
    size_t i = 0, o = 0;
    while (i < len) {
        const char *bs = memchr(body + i, '\\', len - i);
        size_t run = bs ? (size_t)(bs - (body + i)) : len - i;
        if (run > cap - o) {
            /* Take what fits, ending on a character boundary. */
            size_t take = cap - o;
            while (take > 0 && ((unsigned char)body[i + take] & 0xC0) == 0x80)
                take--;
            memcpy(out + o, body + i, take);
            o += take;
            i += take;
            break;
        }
        memcpy(out + o, body + i, run);
        o += run;
        i += run;
        if (i >= len || cap - o < 4 || len - i < 2)
            break;
        char e = body[i + 1];
        if (e != 'u') {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *f = memchr(from, e, sizeof(from) - 1);
            if (!f)
                break; /* not from the scanner: stop rather than guess */
            out[o++] = to[f - from];
            i += 2;
            continue;
        }
        uint32_t cp, lo;
        if (len - i < 6 || hex4(body + i + 2, &cp) < 0)
            break;
        size_t used = 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (len - i < 12 || hex4(body + i + 8, &lo) < 0)
                break;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            used = 12;
        }
        o += put_utf8(out + o, cp);
        i += used;
    }
    *out_len = o;
    return i;
}

size_t ipb_json_body_prefix(const char *body, size_t len, size_t text_len) {
    size_t i = 0, o = 0;
    while (o < text_len) {
        if (i >= len)
            return 0;
        const char *bs = memchr(body + i, '\\', len - i);
        size_t run = bs ? (size_t)(bs - (body + i)) : len - i;
        if (run >= text_len - o)
            return i + (text_len - o);
        o += run;
        i += run;
        if (i >= len || len - i < 2)
            return 0;
        if (body[i + 1] != 'u') {
            o += 1;
            i += 2;
            continue;
        }
        uint32_t cp, lo;
        if (len - i < 6 || hex4(body + i + 2, &cp) < 0)
            return 0;
        size_t used = 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (len - i < 12 || hex4(body + i + 8, &lo) < 0)
                return 0;
            cp = 0x10000;
            used = 12;
        }
        char u[4];
        o += put_utf8(u, cp);
        i += used;
    }
    return o == text_len ? i : 0;
}

int ipb_stream_content_decode(const char *json, size_t len, char **ret_name, char **ret_text, size_t *ret_text_len) {
    ipb_stream_view v;
    if (!ipb_stream_content_scan(json, len, &v))
        return 0;
    /* Decoding never lengthens the text; the slack lets the last escape fit the chunk rule. */
    size_t cap = v.text_len + 16;
    char *text = malloc(cap + 1);
    if (!text) {
        free(v.name);
        return 0;
    }
    size_t n = 0;
    if (ipb_json_unescape_chunk(v.text, v.text_len, text, cap, &n) != v.text_len) {
        free(v.name);
        free(text);
        return 0;
    }
    text[n] = '\0';
    *ret_name = v.name;
    *ret_text = text;
    *ret_text_len = n;
    return 1;
}

/* Whether 8 bytes need no escaping in a JSON string: no control character, '"' or '\\'
 * (bytes >= 0x80 pass). May say false for such a word, never true for another. */
static inline bool word_safe(const char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t ctl = (w - 0x20 * ONES) & ~w & HIGHS;
    uint64_t q = w ^ (0x22 * ONES), b = w ^ (0x5C * ONES);
    uint64_t quote = (q - ONES) & ~q & HIGHS, bslash = (b - ONES) & ~b & HIGHS;
    return !(ctl | quote | bslash);
}

int ipb_json_escape_body_append(ipb_buf *out, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    int r = 0;
    size_t i = 0;
    while (r == 0 && i < len) {
        size_t run = i;
        while (len - i >= 8 && word_safe(s + i))
            i += 8;
        while (i < len && (unsigned char)s[i] >= 0x20 && s[i] != '"' && s[i] != '\\')
            i++;
        if (i > run)
            r = ipb_buf_append(out, s + run, i - run);
        if (r < 0 || i >= len)
            break;
        unsigned char c = (unsigned char)s[i++];
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t n = 2;
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        r = ipb_buf_append(out, esc, n);
    }
    return r;
}
