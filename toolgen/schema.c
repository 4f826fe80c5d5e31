#include "schema.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "pyemit.h"

typedef struct tg_field {
    char *base;        /* the reduced property name */
    char *pyname;      /* after tg_module_finish() */
    const char *jname; /* the property name (borrowed from the schema) */
    size_t jname_len;
    char *annot;
    bool required;
    json_t *deflt; /* borrowed; NULL: none */
    json_t *desc;  /* borrowed string; NULL: none */
} tg_field;

typedef struct tg_class {
    char *name;
    char *doc; /* the docstring's first part: the schema's description or the default text */
    size_t doc_len;
    tg_field *fields;
    size_t n, cap;
    size_t left_out; /* properties past the limits */
} tg_class;

struct tg_module {
    tg_class *classes; /* definition order */
    size_t n, cap;
    char **names; /* class names taken (also by classes still being built) */
    size_t nnames, capnames;
    size_t nfields, nodes;
};

/* Names a class body evaluates besides class names: a field must not rebind them. */
static const char *const body_names[] = {"dataclasses", "typing", "json", "str", "int", "float", "bool",
                                         /* run()'s own keyword: a field never takes it */
                                         "call_timeout"};
/* Module-level names a class may not take. */
static const char *const module_names[] = {"Params",      "Result", "SERVER", "TOOL", "run",  "run_async",
                                           "dataclasses", "typing", "json",   "None", "True", "False",
                                           "str",         "int",    "float",  "bool", "_rt",  "mcptools"};

char *tg_reduce(const char *s, size_t len, bool lower, const char *prefix) {
    size_t plen = strlen(prefix);
    char *out = malloc(len + plen + 1);
    if (!out)
        return NULL;
    char *o = out + plen;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '_')
            *o++ = (char)c;
        else if (c >= 'A' && c <= 'Z')
            *o++ = (char)(lower ? c - 'A' + 'a' : c);
        else if (c < 0x80 || c >= 0xC0) /* ASCII or the first byte of a UTF-8 sequence */
            *o++ = '_';
        /* else a continuation byte of the character already replaced */
    }
    *o = '\0';
    char *r = out + plen;
    if (*r && ((*r >= '0' && *r <= '9') || *r == '_' || ipb_py_is_keyword(r))) {
        memcpy(out, prefix, plen);
        return out;
    }
    memmove(out, r, strlen(r) + 1);
    return out;
}

tg_module *tg_module_new(void) { return calloc(1, sizeof(tg_module)); }

static void class_free(tg_class *c) {
    for (size_t j = 0; j < c->n; j++) {
        free(c->fields[j].base);
        free(c->fields[j].pyname);
        free(c->fields[j].annot);
    }
    free(c->fields);
    free(c->name);
    free(c->doc);
}

void tg_module_free(tg_module *m) {
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        class_free(&m->classes[i]);
    free(m->classes);
    for (size_t i = 0; i < m->nnames; i++)
        free(m->names[i]);
    free(m->names);
    free(m);
}

static bool in_list(const char *s, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, list[i]))
            return true;
    return false;
}

static bool name_taken(const tg_module *m, const char *s) {
    return in_list(s, module_names, sizeof(module_names) / sizeof(module_names[0])) ||
           in_list(s, (const char *const *)m->names, m->nnames);
}

static int take_name(tg_module *m, char *name) {
    if (m->nnames == m->capnames) {
        size_t nc = m->capnames ? m->capnames * 2 : 16;
        char **nn = realloc(m->names, nc * sizeof(*nn));
        if (!nn)
            return -ENOMEM;
        m->names = nn;
        m->capnames = nc;
    }
    m->names[m->nnames++] = name;
    return 0;
}

/* "user_info" -> "UserInfo"; "" or only underscores -> "Object". */
static char *camel(const char *s) {
    char *out = malloc(strlen(s) + 7);
    if (!out)
        return NULL;
    char *o = out;
    bool up = true;
    for (const char *p = s; *p; p++) {
        if (*p == '_') {
            up = true;
            continue;
        }
        *o++ = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
        up = false;
    }
    *o = '\0';
    if (!*out || !((out[0] >= 'A' && out[0] <= 'Z') || (out[0] >= 'a' && out[0] <= 'z')))
        strcpy(out, "Object");
    return out;
}

/* A new class name from hint: hint, hint2, hint3, ... NULL when out of memory. */
static char *unique_class_name(tg_module *m, const char *hint) {
    cleanup_free char *base = camel(hint);
    if (!base)
        return NULL;
    char *name = strdup(base);
    for (unsigned i = 2; name && (name_taken(m, name) || !ipb_py_ident_ok(name)); i++) {
        free(name);
        name = ipb_strdupf("%s%u", base, i);
    }
    return name;
}

static int push_class(tg_module *m, tg_class *c) {
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 8;
        tg_class *n = realloc(m->classes, nc * sizeof(*n));
        if (!n)
            return -ENOMEM;
        m->classes = n;
        m->cap = nc;
    }
    m->classes[m->n++] = *c;
    memset(c, 0, sizeof(*c));
    return 0;
}

static int push_field(tg_class *c, tg_field *f) {
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 8;
        tg_field *n = realloc(c->fields, nc * sizeof(*n));
        if (!n)
            return -ENOMEM;
        c->fields = n;
        c->cap = nc;
    }
    c->fields[c->n++] = *f;
    memset(f, 0, sizeof(*f));
    return 0;
}

static bool is_scalar(json_t *v) {
    return json_is_string(v) || json_is_integer(v) || json_is_real(v) || json_is_boolean(v) || json_is_null(v);
}

static bool is_null_schema(json_t *s) {
    json_t *t = json_object_get(s, "type");
    return json_is_object(s) && json_is_string(t) && !strcmp(json_string_value(t), "null") &&
           !json_object_get(s, "anyOf") && !json_object_get(s, "oneOf") && !json_object_get(s, "enum");
}

static bool is_any(const char *a) { return !strcmp(a, "typing.Any"); }

/* A list of distinct annotations, joined into typing.Union[...]. */
typedef struct annots {
    char *a[TG_MAX_UNION];
    size_t n;
    bool any; /* a member was typing.Any: the union is typing.Any */
} annots;

static void annots_free(annots *u) {
    for (size_t i = 0; i < u->n; i++)
        free(u->a[i]);
    u->n = 0;
}

/* Takes ownership of a. -ENOMEM when a is NULL. */
static int annots_add(annots *u, char *a) {
    if (!a)
        return -ENOMEM;
    if (is_any(a))
        u->any = true;
    for (size_t i = 0; i < u->n; i++) {
        if (!strcmp(u->a[i], a)) {
            free(a);
            return 0;
        }
    }
    if (u->n == TG_MAX_UNION) {
        u->any = true;
        free(a);
        return 0;
    }
    u->a[u->n++] = a;
    return 0;
}

/* The union as one annotation (Optional when nullable). Frees the members. */
static char *annots_join(annots *u, bool nullable) {
    char *r;
    if (u->any) {
        r = strdup("typing.Any");
    } else if (u->n == 0) {
        r = strdup(nullable ? "None" : "typing.Any");
        nullable = false;
    } else if (u->n == 1) {
        r = u->a[0];
        u->a[0] = NULL;
    } else {
        ipb_buf b = {0};
        int e = ipb_buf_append(&b, "typing.Union[", 13);
        for (size_t i = 0; e == 0 && i < u->n; i++)
            e = ipb_buf_appendf(&b, "%s%s", i ? ", " : "", u->a[i]);
        if (e == 0)
            e = ipb_buf_append(&b, "]", 1);
        r = e == 0 ? b.data : NULL;
        if (e)
            ipb_buf_free(&b);
    }
    annots_free(u);
    if (r && nullable && strcmp(r, "typing.Any") && strcmp(r, "None") && strncmp(r, "typing.Optional[", 16)) {
        char *o = ipb_strdupf("typing.Optional[%s]", r);
        free(r);
        r = o;
    }
    return r;
}

static char *annotation(tg_module *m, json_t *s, const char *hint, int depth);

/* A nested dataclass for an object schema with properties; NULL name (and no error) when the
 * limits leave no room: the caller falls back to a dict. */
static int nested_class(tg_module *m, json_t *s, const char *hint, int depth, char **ret);

static char *dict_of(tg_module *m, json_t *s, const char *hint, int depth) {
    json_t *ap = json_object_get(s, "additionalProperties");
    if (!json_is_object(ap) || json_object_size(ap) == 0)
        return strdup("typing.Dict[str, typing.Any]");
    cleanup_free char *h = ipb_strdupf("%sValue", hint);
    cleanup_free char *v = h ? annotation(m, ap, h, depth + 1) : NULL;
    return v ? ipb_strdupf("typing.Dict[str, %s]", v) : NULL;
}

/* One JSON Schema type name (not "null"). */
static char *of_type(tg_module *m, json_t *s, const char *t, const char *hint, int depth) {
    if (!strcmp(t, "string"))
        return strdup("str");
    if (!strcmp(t, "integer"))
        return strdup("int");
    if (!strcmp(t, "number"))
        return strdup("float");
    if (!strcmp(t, "boolean"))
        return strdup("bool");
    if (!strcmp(t, "array")) {
        json_t *items = json_object_get(s, "items");
        if (!json_is_object(items))
            return strdup("typing.List[typing.Any]");
        cleanup_free char *h = ipb_strdupf("%sItem", hint);
        cleanup_free char *a = h ? annotation(m, items, h, depth + 1) : NULL;
        return a ? ipb_strdupf("typing.List[%s]", a) : NULL;
    }
    if (!strcmp(t, "object")) {
        json_t *props = json_object_get(s, "properties");
        if (json_is_object(props) && json_object_size(props) > 0) {
            char *name = NULL;
            if (nested_class(m, s, hint, depth, &name) < 0)
                return NULL;
            if (name)
                return name;
        }
        return dict_of(m, s, hint, depth);
    }
    return strdup("typing.Any");
}

static char *literal(json_t *values, bool *nullable) {
    ipb_buf b = {0};
    int e = ipb_buf_append(&b, "typing.Literal[", 15);
    size_t n = 0, i;
    json_t *v;
    json_array_foreach(values, i, v) {
        if (e)
            break;
        if (json_is_null(v)) {
            *nullable = true;
            continue;
        }
        if (n++)
            e = ipb_buf_append(&b, ", ", 2);
        if (e == 0)
            e = ipb_py_scalar(&b, v);
    }
    if (e == 0)
        e = ipb_buf_append(&b, "]", 1);
    if (e) {
        ipb_buf_free(&b);
        return NULL;
    }
    if (n == 0) {
        ipb_buf_free(&b);
        *nullable = false;
        return strdup("None");
    }
    return b.data;
}

static bool literal_ok(json_t *values) {
    if (!json_is_array(values) || json_array_size(values) == 0 || json_array_size(values) > TG_MAX_ENUM)
        return false;
    size_t i;
    json_t *v;
    json_array_foreach(values, i, v) {
        if (!is_scalar(v) || (json_is_real(v) && !isfinite(json_real_value(v))))
            return false;
    }
    return true;
}

static char *annotation(tg_module *m, json_t *s, const char *hint, int depth) {
    if (depth > TG_MAX_DEPTH || !json_is_object(s) || ++m->nodes > TG_MAX_NODES)
        return strdup("typing.Any");
    bool nullable = json_is_true(json_object_get(s, "nullable"));

    json_t *e = json_object_get(s, "enum");
    if (literal_ok(e)) {
        char *r = literal(e, &nullable);
        if (!r || !nullable || !strcmp(r, "None"))
            return r;
        char *o = ipb_strdupf("typing.Optional[%s]", r);
        free(r);
        return o;
    }
    json_t *c = json_object_get(s, "const");
    if (c && is_scalar(c)) {
        json_t *one = json_pack("[O]", c);
        char *r = one ? literal(one, &nullable) : NULL;
        json_decref(one);
        if (!r || !nullable || !strcmp(r, "None"))
            return r;
        char *o = ipb_strdupf("typing.Optional[%s]", r);
        free(r);
        return o;
    }

    annots u = {0};
    json_t *alt = json_object_get(s, "anyOf");
    if (!json_is_array(alt))
        alt = json_object_get(s, "oneOf");
    if (json_is_array(alt) && json_array_size(alt) > 0) {
        if (json_array_size(alt) > TG_MAX_UNION)
            return strdup("typing.Any");
        size_t i;
        json_t *v;
        json_array_foreach(alt, i, v) {
            if (is_null_schema(v)) {
                nullable = true;
                continue;
            }
            if (annots_add(&u, annotation(m, v, hint, depth + 1)) < 0) {
                annots_free(&u);
                return NULL;
            }
        }
        return annots_join(&u, nullable);
    }
    json_t *all = json_object_get(s, "allOf");
    if (json_is_array(all) && json_array_size(all) == 1)
        return annotation(m, json_array_get(all, 0), hint, depth + 1);
    if (json_is_array(all) || json_object_get(s, "$ref"))
        return strdup("typing.Any");

    json_t *t = json_object_get(s, "type");
    const char *types[TG_MAX_UNION];
    size_t nt = 0;
    if (json_is_string(t)) {
        types[nt++] = json_string_value(t);
    } else if (json_is_array(t)) {
        if (json_array_size(t) > TG_MAX_UNION)
            return strdup("typing.Any");
        size_t i;
        json_t *v;
        json_array_foreach(t, i, v) {
            if (json_is_string(v))
                types[nt++] = json_string_value(v);
        }
        if (nt == 0)
            return strdup("typing.Any");
    } else if (json_is_object(json_object_get(s, "properties"))) {
        types[nt++] = "object";
    } else if (json_object_get(s, "items")) {
        types[nt++] = "array";
    } else {
        return strdup("typing.Any");
    }
    for (size_t i = 0; i < nt; i++) {
        if (!strcmp(types[i], "null")) {
            nullable = true;
            continue;
        }
        if (annots_add(&u, of_type(m, s, types[i], hint, depth)) < 0) {
            annots_free(&u);
            return NULL;
        }
    }
    return annots_join(&u, nullable);
}

char *tg_annotation(tg_module *m, json_t *schema, const char *hint) { return annotation(m, schema, hint, 1); }

static bool has_default_none(const tg_field *f) { return !f->required && (!f->deflt || json_is_null(f->deflt)); }

static int fields_from(tg_module *m, tg_class *c, json_t *props, json_t *req, int depth);

/* The fields of class c from an object schema's properties: required ones first. */
static int add_fields(tg_module *m, tg_class *c, json_t *s, int depth) {
    json_t *props = json_object_get(s, "properties");
    if (!json_is_object(props))
        return 0;
    /* The required names as a set (an array of them may be long). */
    json_t *req = json_object();
    if (!req)
        return -ENOMEM;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(s, "required"), i, r) {
        if (json_is_string(r) &&
            json_object_setn_new(req, json_string_value(r), json_string_length(r), json_true()) < 0) {
            json_decref(req);
            return -ENOMEM;
        }
    }
    int ret = fields_from(m, c, props, req, depth);
    json_decref(req);
    return ret;
}

static int fields_from(tg_module *m, tg_class *c, json_t *props, json_t *req, int depth) {
    for (int pass = 0; pass < 2; pass++) {
        const char *key;
        size_t klen;
        json_t *p;
        json_object_keylen_foreach(props, key, klen, p) {
            bool required = json_object_getn(req, key, klen) != NULL;
            if (required != (pass == 0))
                continue;
            if (c->n >= TG_MAX_CLASS_FIELDS || m->nfields >= TG_MAX_FIELDS) {
                c->left_out++;
                continue;
            }
            m->nfields++;
            tg_field f = {.jname = key, .jname_len = klen, .required = required};
            f.base = tg_reduce(key, klen, false, "f_");
            if (f.base && !*f.base) {
                free(f.base);
                f.base = strdup("f_");
            }
            if (!f.base)
                return -ENOMEM;
            if (json_is_object(p)) {
                json_t *d = json_object_get(p, "description");
                f.desc = json_is_string(d) ? d : NULL;
                f.deflt = required ? NULL : json_object_get(p, "default");
            }
            if (f.deflt && json_is_real(f.deflt) && !isfinite(json_real_value(f.deflt)))
                f.deflt = NULL;
            if (f.deflt && (json_is_object(f.deflt) || json_is_array(f.deflt))) {
                char *d = json_dumps(f.deflt, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
                if (!d || strlen(d) > TG_MAX_DEFAULT_JSON)
                    f.deflt = NULL;
                free(d);
            }
            f.annot = annotation(m, p, f.base, depth + 1);
            if (f.annot && has_default_none(&f) && strcmp(f.annot, "typing.Any") && strcmp(f.annot, "None") &&
                strncmp(f.annot, "typing.Optional[", 16)) {
                char *o = ipb_strdupf("typing.Optional[%s]", f.annot);
                free(f.annot);
                f.annot = o;
            }
            if (!f.annot || push_field(c, &f) < 0) {
                free(f.base);
                free(f.annot);
                return -ENOMEM;
            }
        }
    }
    return 0;
}

static int build_class(tg_module *m, char *name, json_t *s, const char *doc, int depth) {
    tg_class c = {.name = name};
    json_t *d = json_object_get(s, "description");
    if (json_is_string(d)) {
        c.doc_len = json_string_length(d);
        c.doc = malloc(c.doc_len + 1);
        if (c.doc)
            memcpy(c.doc, json_string_value(d), c.doc_len + 1);
    } else {
        c.doc = strdup(doc);
        c.doc_len = c.doc ? strlen(c.doc) : 0;
    }
    int r = c.doc ? add_fields(m, &c, s, depth) : -ENOMEM;
    if (r == 0)
        r = push_class(m, &c);
    if (r < 0)
        class_free(&c);
    return r;
}

static int nested_class(tg_module *m, json_t *s, const char *hint, int depth, char **ret) {
    *ret = NULL;
    if (m->nnames >= TG_MAX_CLASSES || m->nfields >= TG_MAX_FIELDS)
        return 0;
    char *name = unique_class_name(m, hint);
    if (!name)
        return -ENOMEM;
    if (take_name(m, name) < 0) {
        free(name);
        return -ENOMEM;
    }
    char *copy = strdup(name);
    if (!copy)
        return -ENOMEM;
    if (build_class(m, copy, s, "An object value.", depth) < 0)
        return -ENOMEM;
    *ret = strdup(name);
    return *ret ? 0 : -ENOMEM;
}

int tg_module_add_class(tg_module *m, const char *name, json_t *schema, const char *doc) {
    if (!ipb_py_ident_ok(name) || in_list(name, (const char *const *)m->names, m->nnames))
        return -EINVAL;
    char *n1 = strdup(name), *n2 = strdup(name);
    if (!n1 || !n2 || take_name(m, n1) < 0) {
        free(n1);
        free(n2);
        return -ENOMEM;
    }
    return build_class(m, n2, json_is_object(schema) ? schema : NULL, doc, 0);
}

/* A name the class body evaluates (or no identifier at all). */
static bool clashes_in_body(const tg_module *m, const char *s) {
    return !ipb_py_ident_ok(s) || in_list(s, body_names, sizeof(body_names) / sizeof(body_names[0])) ||
           in_list(s, (const char *const *)m->names, m->nnames);
}

static bool field_name_taken(const tg_module *m, const tg_class *c, size_t upto, const char *s) {
    if (clashes_in_body(m, s))
        return true;
    for (size_t j = 0; j < upto; j++)
        if (!strcmp(c->fields[j].pyname, s))
            return true;
    return false;
}

int tg_module_finish(tg_module *m) {
    for (size_t i = 0; i < m->n; i++) {
        tg_class *c = &m->classes[i];
        for (size_t j = 0; j < c->n; j++) {
            tg_field *f = &c->fields[j];
            free(f->pyname);
            f->pyname = clashes_in_body(m, f->base) ? ipb_strdupf("f_%s", f->base) : strdup(f->base);
            cleanup_free char *stem = f->pyname ? strdup(f->pyname) : NULL;
            for (unsigned k = 2; stem && f->pyname && field_name_taken(m, c, j, f->pyname); k++) {
                free(f->pyname);
                f->pyname = ipb_strdupf("%s_%u", stem, k);
            }
            if (!f->pyname || !stem)
                return -ENOMEM;
        }
    }
    return 0;
}

static int append_str(ipb_buf *b, const char *s) { return ipb_buf_append(b, s, strlen(s)); }

static int field_doc(ipb_buf *d, const tg_field *f, const char *indent) {
    int e = ipb_buf_appendf(d, "\n%s%s (%s, %s)", indent, f->pyname, f->annot, f->required ? "required" : "optional");
    if (e == 0 && (f->jname_len != strlen(f->pyname) || memcmp(f->jname, f->pyname, f->jname_len))) {
        e = append_str(d, " [JSON name: ");
        if (e == 0)
            e = ipb_buf_append(d, f->jname, f->jname_len);
        if (e == 0)
            e = append_str(d, "]");
    }
    if (e == 0 && f->desc) {
        e = append_str(d, ": ");
        if (e == 0)
            e = ipb_buf_append(d, json_string_value(f->desc), json_string_length(f->desc));
    }
    return e;
}

static int emit_field(ipb_buf *b, const tg_field *f) {
    int e = ipb_buf_appendf(b, "    %s: %s = dataclasses.field(", f->pyname, f->annot);
    if (e == 0 && !f->required) {
        if (!f->deflt || json_is_null(f->deflt)) {
            e = append_str(b, "default=None, ");
        } else if (json_is_object(f->deflt) || json_is_array(f->deflt)) {
            cleanup_free char *j = json_dumps(f->deflt, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
            e = j ? append_str(b, "default_factory=lambda: json.loads(") : -ENOMEM;
            if (e == 0)
                e = ipb_py_cstr(b, j);
            if (e == 0)
                e = append_str(b, "), ");
        } else {
            e = append_str(b, "default=");
            if (e == 0)
                e = ipb_py_scalar(b, f->deflt);
            if (e == 0)
                e = append_str(b, ", ");
        }
    }
    if (e == 0)
        e = append_str(b, "metadata={'json': ");
    if (e == 0)
        e = ipb_py_str(b, f->jname, f->jname_len);
    if (e == 0)
        e = ipb_buf_appendf(b, ", 'required': %s})\n", f->required ? "True" : "False");
    return e;
}

static int emit_class(ipb_buf *b, const tg_class *c) {
    ipb_buf d = {0};
    int e = ipb_buf_append(&d, c->doc, c->doc_len);
    if (e == 0 && c->n)
        e = append_str(&d, "\n\nAttributes:");
    for (size_t j = 0; e == 0 && j < c->n; j++)
        e = field_doc(&d, &c->fields[j], "    ");
    if (e == 0 && c->left_out)
        e = ipb_buf_appendf(&d, "\n\n%zu more properties are left out (the schema is too large).", c->left_out);
    if (e == 0)
        e = ipb_buf_appendf(b, "@dataclasses.dataclass\nclass %s:\n    ", c->name);
    if (e == 0)
        e = ipb_py_str(b, d.data ? d.data : "", d.len);
    ipb_buf_free(&d);
    if (e == 0)
        e = append_str(b, "\n\n");
    for (size_t j = 0; e == 0 && j < c->n; j++)
        e = emit_field(b, &c->fields[j]);
    if (e == 0)
        e = append_str(b, c->n ? "\n\n" : "\n");
    return e;
}

int tg_module_emit(tg_module *m, ipb_buf *out) {
    for (size_t i = 0; i < m->n; i++)
        if (emit_class(out, &m->classes[i]) < 0)
            return -ENOMEM;
    return 0;
}

int tg_module_describe(tg_module *m, const char *name, ipb_buf *doc) {
    for (size_t i = 0; i < m->n; i++) {
        const tg_class *c = &m->classes[i];
        if (strcmp(c->name, name))
            continue;
        for (size_t j = 0; j < c->n; j++)
            if (field_doc(doc, &c->fields[j], "        ") < 0)
                return -ENOMEM;
    }
    return 0;
}

size_t tg_module_nclasses(const tg_module *m) { return m->n; }

const char *tg_module_class(const tg_module *m, size_t i, size_t *nfields) {
    if (i >= m->n)
        return NULL;
    if (nfields)
        *nfields = m->classes[i].n;
    return m->classes[i].name;
}

const char *tg_module_field(const tg_module *m, size_t i, size_t j, const char **annot) {
    if (i >= m->n || j >= m->classes[i].n)
        return NULL;
    if (annot)
        *annot = m->classes[i].fields[j].annot;
    return m->classes[i].fields[j].pyname ? m->classes[i].fields[j].pyname : m->classes[i].fields[j].base;
}
