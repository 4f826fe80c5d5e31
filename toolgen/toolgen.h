/* The generated Python API of an MCP server: from the tools a server lists (name,
 * description, inputSchema, outputSchema) to a package mcptools/<server>/ with one module per
 * tool. No text from a server ever becomes code: names are reduced to identifiers, everything
 * else is emitted as escaped string literals (pyemit.h).
 *
 * A module <module>.py holds, and runs nothing else on import:
 *   a docstring: the tool's description, exactly;
 *   SERVER, TOOL: the server name and the tool's exact name;
 *   @dataclass Params (from inputSchema), nested dataclasses for object properties, and
 *   Result (from outputSchema, when it has properties); every field keeps its JSON name in
 *   dataclasses.field(metadata={'json': <name>, 'required': bool});
 *   run(params=None, /, **kwargs) and async run_async(...): a Params or keyword arguments (not
 *   both), calling mcptools._runtime; a Result for a structured answer when there is a Result
 *   class, else the structured value, the text (str) or the list of blocks (docs/tools.md);
 *   run_full(...) and async run_full_async(...): all of the answer, a mcptools.ToolResult
 *   (its structured content a Result when there is a Result class).
 * Schema to annotation: string str, integer int, number float, boolean bool, null None, array
 * typing.List[item], object with properties a dataclass named from the property (CamelCase,
 * made unique with 2, 3, ...), other objects typing.Dict[str, value], enum/const of scalars
 * typing.Literal[...], a "null" member (type list, anyOf/oneOf, nullable: true)
 * typing.Optional[...], other anyOf/oneOf/type lists typing.Union[...], $ref, allOf of several
 * and anything unknown typing.Any. Limits against hostile schemas: schema.h.
 *
 * Field names: the property name with every character outside [A-Za-z0-9_] replaced by '_'
 * (case kept); a name that is empty, starts with a digit or '_', or is a hard keyword gets the
 * prefix "f_"; a name the class body evaluates (a class name of the module, dataclasses,
 * typing, json, str, int, float, bool) also gets "f_"; a repeat within one class gets _2, _3. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define IPB_TOOLGEN_MAX_SERVER_NAME 64
#define IPB_TOOLGEN_MAX_MODULE_NAME 128 /* the prefix included */
#define IPB_TOOLGEN_MAX_TOOLS 10000

/* A server name usable as a package: [A-Za-z][A-Za-z0-9_]{0,63}, not a Python keyword.
 * false with a sentence in *err otherwise. */
bool ipb_toolgen_server_name_ok(const char *name, ipb_error **err);

/* ipybox's module name for a tool, made a safe identifier:
 *   1. every character (Unicode code point) outside [A-Za-z0-9_] becomes '_';
 *   2. ASCII letters are lowercased;
 *   3. a result that starts with a digit or '_', or is a hard Python keyword (pyemit.h), gets
 *      the prefix "t_": "2fa" -> "t_2fa", "import" -> "t_import", "__init__" -> "t___init__",
 *      "_x" -> "t__x". Soft keywords (match, case, type) are valid names and stay as they are.
 *   4. "" when nothing is left (empty name) or the result is longer than 128 characters: no
 *      module (the tool is skipped).
 * Two tools with the same module name: the first keeps it, later ones are skipped.
 * Returns a malloc'd string, NULL when out of memory. */
char *ipb_toolgen_module_name(const char *tool_name);

typedef struct ipb_toolgen_file {
    char *relpath; /* "<module>.py" or "__init__.py", relative to the package directory */
    char *content;
} ipb_toolgen_file;

typedef struct ipb_toolgen_pkg {
    ipb_toolgen_file *files; /* the modules in listing order, then __init__.py */
    size_t n;
    json_t *modules; /* array of {"tool": name, "module": module name} in listing order */
    json_t *skipped; /* array of {"tool": name (or null), "reason": sentence}: tools left out */
} ipb_toolgen_pkg;

/* Builds the package for server `server` from a tools/list array. Tools that are not objects,
 * with a missing or non-string name, without a module name, with names colliding after
 * reduction, or past the first IPB_TOOLGEN_MAX_TOOLS are skipped (and said so in `skipped`),
 * never fatal. Returns 0, or -1 with *err for a bad server name, a `tools` that is not an
 * array, or memory. */
int ipb_toolgen_build(const char *server, json_t *tools, ipb_toolgen_pkg *ret, ipb_error **err);
void ipb_toolgen_pkg_free(ipb_toolgen_pkg *p);

/* Writes the package as <dirfd>/mcptools/<server>/, replacing an older one atomically: the
 * files go to a new directory beside it (files 0644, directories 0755, openat/mkdirat with
 * O_NOFOLLOW), which is then renamed into place (RENAME_EXCHANGE with the old one, which is
 * then removed without following symlinks). mcptools/ is created when missing. 0, or -1 with
 * *err. */
int ipb_toolgen_write(int dirfd, const char *server, const ipb_toolgen_pkg *pkg, ipb_error **err);

/* Removes <dirfd>/mcptools/<server>/ (symlinks removed, never followed). 0 when it is gone or
 * was never there, -EINVAL for a bad server name, else -errno. */
int ipb_toolgen_remove(int dirfd, const char *server);

/* Writes <dirfd>/mcptools/__init__.py (the exceptions) and mcptools/_runtime.py (the tool
 * channel client), each replacing an older copy atomically (a new file renamed over it).
 * 0, or -1 with *err. */
int ipb_toolgen_write_runtime(int dirfd, ipb_error **err);
