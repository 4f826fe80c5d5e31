#include "pyemit.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Decodes one UTF-8 sequence at s (n > 0 bytes left). Returns its length and sets *cp, or 0
 * when the bytes are not a valid sequence (overlong forms and code points past U+10FFFF
 * included; encoded surrogates are decoded, Python can hold them). */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char c = s[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF)
        return 0;
    *cp = v;
    return len;
}

int ipb_py_str(ipb_buf *b, const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    char tmp[16];
    int r = ipb_buf_append(b, "'", 1);
    size_t run = 0; /* bytes at p[i - run .. i) that are written as themselves */
    for (size_t i = 0; r == 0 && i < len;) {
        unsigned char c = p[i];
        if (c >= 0x20 && c < 0x7F && c != '\\' && c != '\'' && c != '"') {
            run++;
            i++;
            continue;
        }
        if (run)
            r = ipb_buf_append(b, p + i - run, run);
        run = 0;
        if (r < 0)
            break;
        uint32_t cp;
        size_t n = utf8_decode(p + i, len - i, &cp);
        if (n == 0) {
            cp = 0xFFFD;
            n = 1;
        }
        i += n;
        if (cp == '\\' || cp == '\'' || cp == '"')
            snprintf(tmp, sizeof(tmp), "\\%c", (char)cp);
        else if (cp == '\n')
            snprintf(tmp, sizeof(tmp), "\\n");
        else if (cp == '\r')
            snprintf(tmp, sizeof(tmp), "\\r");
        else if (cp == '\t')
            snprintf(tmp, sizeof(tmp), "\\t");
        else if (cp <= 0xFF)
            snprintf(tmp, sizeof(tmp), "\\x%02x", (unsigned)cp);
        else if (cp <= 0xFFFF)
            snprintf(tmp, sizeof(tmp), "\\u%04x", (unsigned)cp);
        else
            snprintf(tmp, sizeof(tmp), "\\U%08x", (unsigned)cp);
        r = ipb_buf_append(b, tmp, strlen(tmp));
    }
    if (r == 0 && run)
        r = ipb_buf_append(b, p + len - run, run);
    if (r == 0)
        r = ipb_buf_append(b, "'", 1);
    return r;
}

int ipb_py_float(ipb_buf *b, double d) {
    if (!isfinite(d))
        return -EINVAL;
    /* The fewest significant digits that read back as d, then laid out as Python's repr()
     * does: positional for decimal exponents -4 to 15, else with an exponent. */
    char tmp[400];
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, d);
    const char *e = strchr(tmp, 'e');
    int exp10 = e ? atoi(e + 1) : 0;
    if (exp10 >= -4 && exp10 < 16) {
        int decimals = prec - 1 - exp10;
        snprintf(tmp, sizeof(tmp), "%.*f", decimals > 0 ? decimals : 0, d);
    }
    /* "%e" and "%f" never give a ',' in the C locale: never setlocale() the numeric category. */
    if (!strpbrk(tmp, ".e"))
        strcat(tmp, ".0");
    return ipb_buf_append(b, tmp, strlen(tmp));
}

int ipb_py_scalar(ipb_buf *b, json_t *v) {
    switch (json_typeof(v)) {
    case JSON_NULL:
        return ipb_buf_append(b, "None", 4);
    case JSON_TRUE:
        return ipb_buf_append(b, "True", 4);
    case JSON_FALSE:
        return ipb_buf_append(b, "False", 5);
    case JSON_INTEGER:
        return ipb_buf_appendf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    case JSON_REAL:
        return ipb_py_float(b, json_real_value(v));
    case JSON_STRING:
        return ipb_py_str(b, json_string_value(v), json_string_length(v));
    default:
        return -EINVAL;
    }
}

static const char *const keywords[] = {
    "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
    "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
    "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
    "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield",
};

bool ipb_py_is_keyword(const char *s) {
    for (size_t i = 0; i < sizeof(keywords) / sizeof(keywords[0]); i++)
        if (!strcmp(s, keywords[i]))
            return true;
    return false;
}

static bool ident_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

bool ipb_py_ident_ok(const char *s) {
    if (!s || !ident_start(s[0]))
        return false;
    for (const char *p = s + 1; *p; p++)
        if (!ident_char(*p))
            return false;
    return !ipb_py_is_keyword(s);
}
