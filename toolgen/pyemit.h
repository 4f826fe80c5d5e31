/* Python source text from untrusted data: string literals that no input can end, numbers that
 * read back as the same value, and the checks every generated identifier passes. Server text
 * reaches generated code only through ipb_py_str() and ipb_py_scalar(). */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "strbuf.h"

/* Appends s[0..len) (UTF-8, NULs allowed) as a Python str literal in single quotes. Only
 * printable ASCII other than \ ' " is written as itself; \n \r \t as those escapes; other
 * code points as \xNN, \uNNNN or \UNNNNNNNN; a byte that does not begin a valid UTF-8 sequence
 * as \ufffd. The literal is one line and no input can end it early. 0 or -ENOMEM. */
int ipb_py_str(ipb_buf *b, const char *s, size_t len);
static inline int ipb_py_cstr(ipb_buf *b, const char *s) { return ipb_py_str(b, s, __builtin_strlen(s)); }

/* Appends a literal for a JSON scalar: None, True, False, an int, a float that reads back as
 * the same double (always with a '.' or an exponent), or a str (ipb_py_str). -EINVAL for
 * arrays, objects and non-finite reals (which jansson does not produce), -ENOMEM. */
int ipb_py_scalar(ipb_buf *b, json_t *v);

/* A float literal for d, the shortest that reads back as d. -EINVAL when d is not finite. */
int ipb_py_float(ipb_buf *b, double d);

/* Python's hard keywords (3.9 to 3.13): False None True and as assert async await break class
 * continue def del elif else except finally for from global if import in is lambda nonlocal
 * not or pass raise return try while with yield. Soft keywords (match case type _) are valid
 * identifiers and not counted. */
bool ipb_py_is_keyword(const char *s);

/* [A-Za-z_][A-Za-z0-9_]* and not a hard keyword. */
bool ipb_py_ident_ok(const char *s);
