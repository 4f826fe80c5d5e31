/* toolgen internals: JSON Schema to Python annotations and dataclasses, for one module.
 *
 * A module collects classes (Params, Result and the nested dataclasses they need) in
 * definition order: a nested class comes before the class that uses it. Annotations and names
 * are generated text; server text (descriptions, property names, enum values, defaults) is
 * emitted only through pyemit.h's literals. Hostile schemas are bounded: past the limits below
 * a schema becomes typing.Any (or a class typing.Dict[str, typing.Any]). */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "strbuf.h"

#define TG_MAX_DEPTH 8            /* nesting of schemas below a class's properties */
#define TG_MAX_CLASSES 64         /* dataclasses per module, Params and Result included */
#define TG_MAX_CLASS_FIELDS 256   /* properties of one class; the rest are left out */
#define TG_MAX_FIELDS 1024        /* fields per module */
#define TG_MAX_NODES 4096         /* schemas looked at per module (anyOf fan-out) */
#define TG_MAX_ENUM 64            /* values in a typing.Literal */
#define TG_MAX_UNION 16           /* members of anyOf / oneOf / a type list */
#define TG_MAX_DEFAULT_JSON 65536 /* bytes of an object or array default */

typedef struct tg_module tg_module;

tg_module *tg_module_new(void);
void tg_module_free(tg_module *m);

/* Adds the dataclass `name` (an identifier the caller chose: "Params", "Result") for an object
 * schema: one field per property (none when the schema has no properties). doc is the
 * docstring text used when the schema has no description. 0 or -ENOMEM (-EINVAL for a bad
 * or taken name). */
int tg_module_add_class(tg_module *m, const char *name, json_t *schema, const char *doc);

/* The annotation for a schema, as a field of a class would get it (nested classes are added
 * to m). malloc'd, NULL when out of memory. */
char *tg_annotation(tg_module *m, json_t *schema, const char *hint);

/* Fixes the Python names of all fields (after the last class was added): a field may not take
 * a name its class body evaluates (a class name, dataclasses, typing, json, str, int, float,
 * bool); such a name gets the prefix "f_", and repeats in one class a suffix _2, _3, ... */
int tg_module_finish(tg_module *m);

/* Appends every class, in definition order, each followed by two blank lines. */
int tg_module_emit(tg_module *m, ipb_buf *out);

/* Appends, for the run() docstring, one line per field of class `name`:
 * "        pyname (annotation, required|optional): description". */
int tg_module_describe(tg_module *m, const char *name, ipb_buf *doc);

size_t tg_module_nclasses(const tg_module *m);
/* Class i's name (definition order) and its number of fields. */
const char *tg_module_class(const tg_module *m, size_t i, size_t *nfields);
/* Field j of class i: its Python name (after tg_module_finish) and annotation. */
const char *tg_module_field(const tg_module *m, size_t i, size_t j, const char **annot);

/* The identifier reduction shared by module and field names: every character (code point)
 * outside [A-Za-z0-9_] becomes '_', letters are lowercased when `lower`; then a result that
 * starts with a digit or '_' or is a hard keyword gets `prefix` in front. "" stays "".
 * malloc'd, NULL when out of memory. */
char *tg_reduce(const char *s, size_t len, bool lower, const char *prefix);
