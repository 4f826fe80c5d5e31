/* libFuzzer harness: the generated Python API of an MCP server (toolgen/).
 *
 * The bytes are parsed as JSON (NULs in strings allowed): an array is a tools/list array, an
 * object one tool. The package is built for server "srv" and every generated file is checked
 * with a small Python tokenizer written here:
 *  - only printable ASCII and newlines; no comments; every string literal single-quoted, on one
 *    line, closed, with only the escapes the generator writes;
 *  - every line has one of the shapes the generator makes (imports, SERVER/TOOL, decorators,
 *    class headers, fields, the four run functions, docstrings, __all__), with literals and
 *    numbers abstracted; identifiers are the fixed vocabulary or names declared by a class
 *    header or a field, each a valid identifier and no keyword; annotations use only typing
 *    names, builtins and classes defined above;
 *  - literals decode back to the server's text: TOOL to the tool's name, the module docstring
 *    to its description, __all__ to the module names reported, defaults to JSON that parses.
 *
 * FUZZ_SOURCES: toolgen/toolgen.c toolgen/toolname.c toolgen/schema.c toolgen/pyemit.c common/strbuf.c common/error.c common/nofile.c
 * FUZZ_PKGS: jansson
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../toolgen/pyemit.h"
#include "../../toolgen/toolgen.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_toolgen: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                   \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

enum { T_NAME, T_STR, T_NUM, T_OP };

typedef struct tok {
    int kind;
    const char *p; /* in the file */
    size_t len;
} tok;

#define MAX_TOKS 4096

typedef struct line {
    int indent;
    tok t[MAX_TOKS];
    size_t n;
    char shape[8192]; /* tokens joined by spaces, literals as S, numbers as N */
} line;

static void put_utf8(ipb_buf *b, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp, n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | (cp >> 6 & 0x3F)), u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | (cp >> 12 & 0x3F));
        u[2] = (char)(0x80 | (cp >> 6 & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    CHECK(ipb_buf_append(b, u, n) == 0);
}

static uint32_t hex(const char *p, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        char c = p[i];
        CHECK((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
        v = v * 16 + (uint32_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    return v;
}

/* The value of a literal token (as UTF-8); every escape is one the generator writes. */
static void decode(const tok *t, ipb_buf *out) {
    ipb_buf_reset(out);
    CHECK(t->kind == T_STR && t->len >= 2 && t->p[0] == '\'' && t->p[t->len - 1] == '\'');
    for (size_t i = 1; i + 1 < t->len; i++) {
        char c = t->p[i];
        if (c != '\\') {
            CHECK(c >= 0x20 && c < 0x7F && c != '\'' && c != '"');
            CHECK(ipb_buf_append(out, &c, 1) == 0);
            continue;
        }
        char e = t->p[++i];
        uint32_t cp;
        switch (e) {
        case '\\':
        case '\'':
        case '"':
            cp = (uint32_t)e;
            break;
        case 'n':
            cp = '\n';
            break;
        case 'r':
            cp = '\r';
            break;
        case 't':
            cp = '\t';
            break;
        case 'x':
            cp = hex(t->p + i + 1, 2), i += 2;
            CHECK(cp < 0x20 || cp >= 0x7F); /* printable ASCII is written as itself */
            break;
        case 'u':
            cp = hex(t->p + i + 1, 4), i += 4;
            CHECK(cp >= 0x100);
            break;
        case 'U':
            cp = hex(t->p + i + 1, 8), i += 8;
            CHECK(cp >= 0x10000 && cp <= 0x10FFFF);
            break;
        default:
            CHECK(!"unknown escape");
            return;
        }
        CHECK(i + 1 < t->len);
        put_utf8(out, cp);
    }
}

/* The decoded literal equals s[0..n). */
static bool same(const ipb_buf *v, const char *s, size_t n) {
    return v->len == n && (n == 0 || !memcmp(v->data, s, n));
}

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Tokenizes one line [p, end). */
static void tokenize(const char *p, const char *end, line *l) {
    l->n = 0;
    l->indent = 0;
    l->shape[0] = '\0';
    size_t sl = 0;
    while (p < end && *p == ' ')
        p++, l->indent++;
    while (p < end) {
        CHECK(*p != '\t' && *p != '#' && *p != '"' && *p != '\\');
        if (*p == ' ') {
            p++;
            continue;
        }
        CHECK(l->n < MAX_TOKS);
        tok *t = &l->t[l->n++];
        t->p = p;
        if (*p == '\'') {
            const char *q = p + 1;
            while (q < end && *q != '\'')
                q += *q == '\\' ? 2 : 1;
            CHECK(q < end); /* closed on this line */
            t->kind = T_STR;
            t->len = (size_t)(q + 1 - p);
            CHECK(t->len < 3 || memcmp(p, "'''", 3)); /* never a triple quote */
        } else if (is_alpha(*p)) {
            const char *q = p;
            while (q < end && (is_alpha(*q) || is_digit(*q)))
                q++;
            t->kind = T_NAME;
            t->len = (size_t)(q - p);
        } else if (is_digit(*p)) {
            const char *q = p;
            while (q < end && (is_digit(*q) || *q == '.' || *q == 'e' || ((*q == '+' || *q == '-') && q[-1] == 'e')))
                q++;
            t->kind = T_NUM;
            t->len = (size_t)(q - p);
            char num[64];
            CHECK(t->len < sizeof(num));
            memcpy(num, p, t->len);
            num[t->len] = '\0';
            char *rest;
            strtod(num, &rest);
            CHECK(*rest == '\0');
            CHECK(num[0] != '0' || t->len == 1 || num[1] == '.' || num[1] == 'e'); /* no 0-prefixed ints */
        } else {
            CHECK(strchr("()[]{}:,.=@/*-", *p));
            t->kind = T_OP;
            t->len = (*p == '*' && p + 1 < end && p[1] == '*') ? 2 : 1;
        }
        p += t->len;
        const char *s = t->kind == T_STR ? "S" : t->kind == T_NUM ? "N" : NULL;
        size_t add = s ? 1 : t->len;
        if (sl + add + 2 < sizeof(l->shape)) {
            if (sl)
                l->shape[sl++] = ' ';
            memcpy(l->shape + sl, s ? s : t->p, add);
            sl += add;
            l->shape[sl] = '\0';
        } else {
            strcpy(l->shape, "(too long)");
            sl = sizeof(l->shape); /* only field lines may be this long */
        }
    }
}

static bool tok_is(const tok *t, const char *s) { return t->len == strlen(s) && !memcmp(t->p, s, t->len); }

/* Names declared in this module (classes and fields). */
typedef struct names {
    char *v[2048];
    size_t n;
} names;

static bool names_has(const names *ns, const tok *t) {
    for (size_t i = 0; i < ns->n; i++)
        if (tok_is(t, ns->v[i]))
            return true;
    return false;
}

static char *tok_dup(const tok *t) {
    char *s = strndup(t->p, t->len);
    CHECK(s);
    return s;
}

static const char *const annot_vocab[] = {"typing", "Optional", "List",  "Dict", "Union", "Literal", "Any",
                                          "str",    "int",      "float", "bool", "None",  "True",    "False"};
static const char *const value_vocab[] = {"dataclasses", "field", "default", "default_factory",
                                          "lambda",      "json",  "loads",   "metadata",
                                          "None",        "True",  "False"};

static bool in_vocab(const tok *t, const char *const *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (tok_is(t, v[i]))
            return true;
    return false;
}

/* "    name: annotation = dataclasses.field(...)" in a class body. */
static void check_field(const line *l, names *classes, names *fields) {
    CHECK(l->indent == 4 && l->n >= 8);
    CHECK(l->t[0].kind == T_NAME && tok_is(&l->t[1], ":"));
    char *name = tok_dup(&l->t[0]);
    CHECK(ipb_py_ident_ok(name));
    CHECK(!names_has(classes, &l->t[0])); /* a field never rebinds a class name */
    CHECK(!in_vocab(&l->t[0], annot_vocab, sizeof(annot_vocab) / sizeof(annot_vocab[0])) ||
          tok_is(&l->t[0], "Optional") || tok_is(&l->t[0], "List") || tok_is(&l->t[0], "Dict") ||
          tok_is(&l->t[0], "Union") || tok_is(&l->t[0], "Literal") || tok_is(&l->t[0], "Any"));
    CHECK(!tok_is(&l->t[0], "dataclasses") && !tok_is(&l->t[0], "json"));
    CHECK(fields->n < 2048);
    fields->v[fields->n++] = name;
    size_t i = 2;
    int depth = 0;
    for (; i < l->n && !(depth == 0 && tok_is(&l->t[i], "=")); i++) {
        const tok *t = &l->t[i];
        if (t->kind == T_NAME)
            CHECK(in_vocab(t, annot_vocab, sizeof(annot_vocab) / sizeof(annot_vocab[0])) || names_has(classes, t));
        else if (t->kind == T_OP)
            CHECK(strchr("[],.-", t->p[0]));
        depth += tok_is(t, "[") - tok_is(t, "]");
        CHECK(depth >= 0);
    }
    CHECK(depth == 0 && i + 4 < l->n);
    CHECK(tok_is(&l->t[i + 1], "dataclasses") && tok_is(&l->t[i + 2], ".") && tok_is(&l->t[i + 3], "field") &&
          tok_is(&l->t[i + 4], "("));
    CHECK(tok_is(&l->t[l->n - 1], ")") && tok_is(&l->t[l->n - 2], "}"));
    bool meta = false;
    ipb_buf v = {0};
    for (size_t j = i + 5; j < l->n; j++) {
        const tok *t = &l->t[j];
        if (t->kind == T_NAME)
            CHECK(in_vocab(t, value_vocab, sizeof(value_vocab) / sizeof(value_vocab[0])));
        else if (t->kind == T_OP)
            CHECK(strchr("(){}:,.=-", t->p[0]));
        if (tok_is(t, "metadata")) {
            CHECK(j + 10 < l->n + 1);
            CHECK(tok_is(&l->t[j + 1], "=") && tok_is(&l->t[j + 2], "{") && l->t[j + 3].kind == T_STR &&
                  tok_is(&l->t[j + 4], ":") && l->t[j + 5].kind == T_STR && tok_is(&l->t[j + 6], ",") &&
                  l->t[j + 7].kind == T_STR && tok_is(&l->t[j + 8], ":") &&
                  (tok_is(&l->t[j + 9], "True") || tok_is(&l->t[j + 9], "False")) && j + 12 == l->n);
            decode(&l->t[j + 3], &v);
            CHECK(same(&v, "json", 4));
            decode(&l->t[j + 5], &v); /* the property name: any text */
            decode(&l->t[j + 7], &v);
            CHECK(same(&v, "required", 8));
            meta = true;
            break;
        }
        if (tok_is(t, "loads")) { /* default_factory=lambda: json.loads('<JSON>') */
            CHECK(tok_is(&l->t[j + 1], "(") && l->t[j + 2].kind == T_STR && tok_is(&l->t[j + 3], ")"));
            decode(&l->t[j + 2], &v);
            json_t *d = json_loadb(v.data, v.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
            CHECK(json_is_object(d) || json_is_array(d));
            json_decref(d);
        }
        if (t->kind == T_STR)
            decode(t, &v);
    }
    CHECK(meta);
    ipb_buf_free(&v);
}

static const char *const fixed_lines[] = {
    "import dataclasses",
    "import json",
    "import typing",
    "from mcptools import _runtime as _rt",
    "@ dataclasses . dataclass",
    "def run ( params = None , / , * , call_timeout = None , ** kwargs ) :",
    "async def run_async ( params = None , / , * , call_timeout = None , ** kwargs ) :",
    "def run_full ( params = None , / , * , call_timeout = None , ** kwargs ) :",
    "async def run_full_async ( params = None , / , * , call_timeout = None , ** kwargs ) :",
    "value = _rt . call ( SERVER , TOOL , _rt . to_json ( _rt . make_params ( Params , params , kwargs ) ) , "
    "call_timeout = call_timeout )",
    "value = await _rt . acall ( SERVER , TOOL , _rt . to_json ( _rt . make_params ( Params , params , kwargs ) ) , "
    "call_timeout = call_timeout )",
    "return _rt . call ( SERVER , TOOL , _rt . to_json ( _rt . make_params ( Params , params , kwargs ) ) , "
    "call_timeout = call_timeout )",
    "return await _rt . acall ( SERVER , TOOL , _rt . to_json ( _rt . make_params ( Params , params , kwargs ) ) , "
    "call_timeout = call_timeout )",
    "return _rt . call_full ( SERVER , TOOL , _rt . to_json ( _rt . make_params ( Params , params , kwargs ) ) , None "
    ", call_timeout = call_timeout )",
    "return _rt . call_full ( SERVER , TOOL , _rt . to_json ( _rt . make_params ( Params , params , kwargs ) ) , "
    "Result , call_timeout = call_timeout )",
    "return await _rt . acall_full ( SERVER , TOOL , _rt . to_json ( _rt . make_params ( Params , params , kwargs ) ) "
    ", None , call_timeout = call_timeout )",
    "return await _rt . acall_full ( SERVER , TOOL , _rt . to_json ( _rt . make_params ( Params , params , kwargs ) ) "
    ", Result , call_timeout = call_timeout )",
    "if isinstance ( value , dict ) :",
    "return _rt . from_json ( Result , value )",
    "return value",
};

static bool is_fixed(const char *shape) {
    for (size_t i = 0; i < sizeof(fixed_lines) / sizeof(fixed_lines[0]); i++)
        if (!strcmp(shape, fixed_lines[i]))
            return true;
    return false;
}

static void free_names(names *ns) {
    for (size_t i = 0; i < ns->n; i++)
        free(ns->v[i]);
    ns->n = 0;
}

/* Checks a tool module; returns the decoded TOOL value in *tool_name. */
static void check_module(const char *text, json_t *tool, line *l) {
    CHECK(text[strlen(text) - 1] == '\n');
    names classes = {0}, fields = {0};
    ipb_buf v = {0};
    bool in_class = false, seen_tool = false, seen_params = false, seen_result = false;
    int lineno = 0, runs = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        CHECK(nl);
        for (const char *c = p; c < nl; c++)
            CHECK(*c >= 0x20 && *c < 0x7F);
        tokenize(p, nl, l);
        lineno++;
        if (lineno == 1) { /* the module docstring: the description, exactly */
            CHECK(!strcmp(l->shape, "S") && l->indent == 0);
            json_t *d = json_object_get(tool, "description");
            decode(&l->t[0], &v);
            if (json_is_string(d))
                CHECK(same(&v, json_string_value(d), json_string_length(d)));
        } else if (l->n == 0) {
            CHECK(l->indent == 0);
        } else if (l->indent == 0 && !strcmp(l->shape, "SERVER = S")) {
            decode(&l->t[2], &v);
            CHECK(same(&v, "srv", 3));
        } else if (l->indent == 0 && !strcmp(l->shape, "TOOL = S")) {
            json_t *name = json_object_get(tool, "name");
            decode(&l->t[2], &v);
            CHECK(same(&v, json_string_value(name), json_string_length(name)));
            seen_tool = true;
        } else if (l->indent == 0 && l->n == 3 && tok_is(&l->t[0], "class") && tok_is(&l->t[2], ":")) {
            CHECK(l->t[1].kind == T_NAME);
            char *name = tok_dup(&l->t[1]);
            CHECK(ipb_py_ident_ok(name));
            CHECK(!names_has(&classes, &l->t[1]) && !names_has(&fields, &l->t[1]));
            CHECK(name[0] >= 'A' && name[0] <= 'Z');
            if (!strcmp(name, "Params"))
                seen_params = true;
            if (!strcmp(name, "Result"))
                seen_result = true;
            CHECK(classes.n < 2048);
            classes.v[classes.n++] = name;
            in_class = true;
        } else if (l->indent == 0) {
            CHECK(is_fixed(l->shape));
            runs += !strncmp(l->shape, "def run", 7) || !strncmp(l->shape, "async def run", 13);
            in_class = false;
        } else if (l->indent == 4 && !strcmp(l->shape, "S")) {
            decode(&l->t[0], &v); /* a class or function docstring */
        } else if (l->indent == 4 && in_class) {
            check_field(l, &classes, &fields);
        } else {
            CHECK((l->indent == 4 || l->indent == 8) && is_fixed(l->shape));
            CHECK(!strstr(l->shape, "Result") || seen_result); /* a class defined above */
        }
        p = nl + 1;
    }
    CHECK(seen_tool && seen_params);
    CHECK(runs == 4); /* run, run_async, run_full, run_full_async */
    CHECK(classes.n <= 64);
    free_names(&classes);
    free_names(&fields);
    ipb_buf_free(&v);
}

static void check_init(const char *text, json_t *modules, line *l) {
    const char *nl = strchr(text, '\n');
    CHECK(nl);
    tokenize(text, nl, l);
    CHECK(!strcmp(l->shape, "S") && l->indent == 0);
    const char *p = nl + 1;
    nl = strchr(p, '\n');
    CHECK(nl && nl[1] == '\0');
    tokenize(p, nl, l);
    CHECK(l->n >= 4 && tok_is(&l->t[0], "__all__") && tok_is(&l->t[1], "=") && tok_is(&l->t[2], "["));
    ipb_buf v = {0};
    size_t k = 0;
    for (size_t i = 3; i + 1 < l->n; i += 2, k++) {
        decode(&l->t[i], &v);
        const char *m = json_string_value(json_object_get(json_array_get(modules, k), "module"));
        CHECK(m && same(&v, m, strlen(m)));
        CHECK(tok_is(&l->t[i + 1], i + 2 == l->n ? "]" : ","));
    }
    CHECK(k == json_array_size(modules));
    ipb_buf_free(&v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!v)
        return 0;
    json_t *tools = json_is_array(v) ? json_incref(v) : json_pack("[O]", v);
    ipb_toolgen_pkg pkg;
    ipb_error *err = NULL;
    CHECK(ipb_toolgen_build("srv", tools, &pkg, &err) == 0);
    CHECK(pkg.n == json_array_size(pkg.modules) + 1);
    CHECK(json_array_size(pkg.modules) + json_array_size(pkg.skipped) == json_array_size(tools));
    static line l;
    for (size_t i = 0; i < pkg.n; i++) {
        const char *rel = pkg.files[i].relpath;
        if (i + 1 == pkg.n) {
            CHECK(!strcmp(rel, "__init__.py"));
            check_init(pkg.files[i].content, pkg.modules, &l);
            continue;
        }
        json_t *m = json_array_get(pkg.modules, i);
        const char *mod = json_string_value(json_object_get(m, "module"));
        CHECK(mod && ipb_py_ident_ok(mod) && mod[0] != '_' && strlen(mod) <= IPB_TOOLGEN_MAX_MODULE_NAME);
        CHECK(strlen(rel) == strlen(mod) + 3 && !strncmp(rel, mod, strlen(mod)) && !strcmp(rel + strlen(mod), ".py"));
        /* the tool this module is for */
        json_t *name = json_object_get(m, "tool"), *tool = NULL;
        size_t j;
        json_t *t;
        json_array_foreach(tools, j, t) {
            if (json_equal(json_object_get(t, "name"), name)) {
                tool = t;
                break;
            }
        }
        CHECK(tool);
        char *expect = ipb_toolgen_module_name(json_string_value(name));
        if (strlen(json_string_value(name)) == json_string_length(name)) /* no NUL in the name */
            CHECK(expect && !strcmp(expect, mod));
        free(expect);
        check_module(pkg.files[i].content, tool, &l);
    }
    ipb_toolgen_pkg_free(&pkg);
    json_decref(tools);
    json_decref(v);
    return 0;
}
