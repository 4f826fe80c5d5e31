/* Unit tests for toolgen/: Python literals and identifiers (pyemit.c), module and server names,
 * schema to annotation (schema.c), the generated module's shape, the limits against hostile
 * schemas, skipped tools, and writing the package and the runtime to a directory. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_suite.h"
#include "cleanup.h"
#include "fdio.h"
#include "pyemit.h"
#include "runtime.h"
#include "schema.h"
#include "strbuf.h"
#include "toolgen.h"
#include "tree.h"

/* ---- literals ---- */

static char *lit(const char *s, size_t len) {
    ipb_buf b = {0};
    ck_assert_int_eq(ipb_py_str(&b, s, len), 0);
    return b.data;
}

static void expect_lit(const char *s, size_t len, const char *want) {
    cleanup_free char *got = lit(s, len);
    ck_assert_msg(!strcmp(got, want), "literal of '%s': got %s, expected %s", s, got, want);
}

START_TEST(str_plain_and_quotes) {
    expect_lit("", 0, "''");
    expect_lit("hello world", 11, "'hello world'");
    expect_lit("it's", 4, "'it\\'s'");
    expect_lit("say \"hi\"", 8, "'say \\\"hi\\\"'");
    expect_lit("a\\b", 3, "'a\\\\b'");
    expect_lit("'''", 3, "'\\'\\'\\''");
    expect_lit("\"\"\"", 3, "'\\\"\\\"\\\"'");
    expect_lit("\\'", 2, "'\\\\\\''"); /* a backslash cannot eat the quote escape */
}
END_TEST

START_TEST(str_control_characters) {
    expect_lit("a\nb", 3, "'a\\nb'");
    expect_lit("a\r\n\tb", 5, "'a\\r\\n\\tb'");
    expect_lit("a\0b", 3, "'a\\x00b'");
    expect_lit("\x01\x1f\x7f", 3, "'\\x01\\x1f\\x7f'");
    expect_lit("x\nimport os; os.system('id')", 28, "'x\\nimport os; os.system(\\'id\\')'");
    /* #, { and } are plain characters inside a str literal */
    expect_lit("# {x}", 5, "'# {x}'");
}
END_TEST

START_TEST(str_non_ascii) {
    expect_lit("caf\xc3\xa9", 5, "'caf\\xe9'");
    expect_lit("\xe2\x82\xac", 3, "'\\u20ac'");
    expect_lit("\xf0\x9f\x98\x80", 4, "'\\U0001f600'");
    expect_lit("\xf4\x8f\xbf\xbf", 4, "'\\U0010ffff'");
    expect_lit("\xe2\x80\xa8", 3, "'\\u2028'"); /* LINE SEPARATOR: not a newline in the output */
    /* bytes jansson never gives: each bad byte becomes U+FFFD */
    expect_lit("\xff", 1, "'\\ufffd'");
    expect_lit("\xc3", 1, "'\\ufffd'");
    expect_lit("\xc0\x80", 2, "'\\ufffd\\ufffd'");                       /* overlong NUL */
    expect_lit("\xf4\x90\x80\x80", 4, "'\\ufffd\\ufffd\\ufffd\\ufffd'"); /* past U+10FFFF */
    expect_lit("\xe2\x82", 2, "'\\ufffd\\ufffd'");                       /* cut short */
}
END_TEST

START_TEST(str_output_is_printable_ascii) {
    /* every byte value, every position: one line of printable ASCII, balanced quotes */
    char in[256];
    for (int i = 0; i < 256; i++)
        in[i] = (char)i;
    cleanup_free char *got = lit(in, sizeof(in));
    size_t n = strlen(got);
    ck_assert_int_ge(n, 2);
    ck_assert_int_eq(got[0], '\'');
    ck_assert_int_eq(got[n - 1], '\'');
    for (size_t i = 1; i + 1 < n; i++) {
        ck_assert_msg(got[i] >= 0x20 && got[i] < 0x7f, "byte %zu is 0x%02x", i, (unsigned char)got[i]);
        if (got[i] == '\\')
            i++; /* the escaped character */
        else
            ck_assert_msg(got[i] != '\'' && got[i] != '"', "unescaped quote at %zu in %s", i, got);
    }
}
END_TEST

static void expect_float(double d, const char *want) {
    ipb_buf b = {0};
    ck_assert_int_eq(ipb_py_float(&b, d), 0);
    ck_assert_msg(!strcmp(b.data, want), "float %.17g: got %s, expected %s", d, b.data, want);
    ck_assert(strtod(b.data, NULL) == d);
    ipb_buf_free(&b);
}

START_TEST(numbers) {
    expect_float(0.1, "0.1");
    expect_float(100.0, "100.0");
    expect_float(-0.0, "-0.0");
    expect_float(1e300, "1e+300");
    expect_float(1.0 / 3.0, "0.3333333333333333");
    expect_float(5e-324, "5e-324");
    expect_float(1e16, "1e+16");
    expect_float(123456.789, "123456.789");
    expect_float(0.0001, "0.0001");
    expect_float(0.00001, "1e-05");
    expect_float(-2.5, "-2.5");
    ipb_buf b = {0};
    ck_assert_int_eq(ipb_py_float(&b, INFINITY), -EINVAL);
    ck_assert_int_eq(ipb_py_float(&b, NAN), -EINVAL);
    json_t *v = json_integer(INT64_MIN);
    ck_assert_int_eq(ipb_py_scalar(&b, v), 0);
    ck_assert_str_eq(b.data, "-9223372036854775808");
    json_decref(v);
    ipb_buf_reset(&b);
    v = json_pack("[nbbs#]", 1, 0, "a'\0", (size_t)3);
    for (size_t i = 0; i < json_array_size(v); i++) {
        ck_assert_int_eq(ipb_py_scalar(&b, json_array_get(v, i)), 0);
        ipb_buf_append(&b, ",", 1);
    }
    ck_assert_str_eq(b.data, "None,True,False,'a\\'\\x00',");
    ck_assert_int_eq(ipb_py_scalar(&b, v), -EINVAL); /* an array is no scalar */
    json_decref(v);
    ipb_buf_free(&b);
}
END_TEST

START_TEST(identifiers) {
    ck_assert(ipb_py_ident_ok("a"));
    ck_assert(ipb_py_ident_ok("_x1"));
    ck_assert(ipb_py_ident_ok("match"));
    ck_assert(ipb_py_ident_ok("type"));
    ck_assert(!ipb_py_ident_ok(""));
    ck_assert(!ipb_py_ident_ok("1a"));
    ck_assert(!ipb_py_ident_ok("a-b"));
    ck_assert(!ipb_py_ident_ok("a b"));
    ck_assert(!ipb_py_ident_ok("import"));
    ck_assert(!ipb_py_ident_ok("None"));
    ck_assert(!ipb_py_ident_ok("caf\xc3\xa9"));
    ck_assert(ipb_py_is_keyword("await"));
    ck_assert(!ipb_py_is_keyword("print"));
}
END_TEST

/* ---- names ---- */

static void expect_module(const char *tool, const char *want) {
    cleanup_free char *got = ipb_toolgen_module_name(tool);
    ck_assert_ptr_nonnull(got);
    ck_assert_msg(!strcmp(got, want), "module name of '%s': got '%s', expected '%s'", tool, got, want);
    if (*got)
        ck_assert(ipb_py_ident_ok(got));
}

START_TEST(module_names) {
    expect_module("echo", "echo");
    expect_module("get-sum", "get_sum");
    expect_module("Get.Structured Content", "get_structured_content");
    expect_module("printEnv", "printenv");
    expect_module("2fa", "t_2fa");
    expect_module("import", "t_import");
    expect_module("CLASS", "t_class"); /* lowercased first, then a keyword */
    expect_module("None", "none");
    expect_module("match", "match");
    expect_module("type", "type");
    expect_module("__init__", "t___init__");
    expect_module("_private", "t__private");
    expect_module("-", "t__");
    expect_module("", "");
    expect_module("caf\xc3\xa9", "caf_"); /* one '_' per character, not per byte */
    expect_module("a\xf0\x9f\x98\x80z", "a_z");
    expect_module("x); import os #", "x___import_os__");
    char longname[200];
    memset(longname, 'a', sizeof(longname));
    longname[128] = '\0';
    expect_module(longname, longname);
    longname[128] = 'a';
    longname[129] = '\0';
    expect_module(longname, "");
    longname[0] = '9';
    longname[127] = '\0'; /* 127 characters and the prefix: 129 */
    expect_module(longname, "");
}
END_TEST

START_TEST(server_names) {
    ck_assert(ipb_toolgen_server_name_ok("everything", NULL));
    ck_assert(ipb_toolgen_server_name_ok("fs_2", NULL));
    ck_assert(ipb_toolgen_server_name_ok("A", NULL));
    char n[70];
    memset(n, 'x', sizeof(n));
    n[64] = '\0';
    ck_assert(ipb_toolgen_server_name_ok(n, NULL));
    n[64] = 'x';
    n[65] = '\0';
    const char *bad[] = {"", "1x", "_x", "a-b", "a.b", "a b", "import", "None", "caf\xc3\xa9", n};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ipb_error *err = NULL;
        ck_assert_msg(!ipb_toolgen_server_name_ok(bad[i], &err), "'%s' accepted", bad[i]);
        ck_assert_ptr_nonnull(err);
        ck_assert(strlen(ipb_error_msg(err)) > 10);
        ipb_error_free(err);
    }
    ck_assert(!ipb_toolgen_server_name_ok(NULL, NULL));
}
END_TEST

/* ---- annotations ---- */

static void expect_annot(const char *schema, const char *want) {
    json_error_t je;
    json_t *s = json_loads(schema, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    ck_assert_msg(s != NULL, "bad test schema %s: %s", schema, je.text);
    tg_module *m = tg_module_new();
    cleanup_free char *got = tg_annotation(m, s, "field");
    ck_assert_msg(got && !strcmp(got, want), "%s: got %s, expected %s", schema, got, want);
    tg_module_free(m);
    json_decref(s);
}

START_TEST(annotations_scalars) {
    expect_annot("{\"type\":\"string\"}", "str");
    expect_annot("{\"type\":\"integer\"}", "int");
    expect_annot("{\"type\":\"number\"}", "float");
    expect_annot("{\"type\":\"boolean\"}", "bool");
    expect_annot("{\"type\":\"null\"}", "None");
    expect_annot("{}", "typing.Any");
    expect_annot("true", "typing.Any");
    expect_annot("{\"type\":\"weird\"}", "typing.Any");
    expect_annot("{\"type\":7}", "typing.Any");
    expect_annot("{\"$ref\":\"#/definitions/X\",\"type\":\"string\"}", "typing.Any");
}
END_TEST

START_TEST(annotations_containers) {
    expect_annot("{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", "typing.List[int]");
    expect_annot("{\"type\":\"array\"}", "typing.List[typing.Any]");
    expect_annot("{\"items\":{\"type\":\"string\"}}", "typing.List[str]");
    expect_annot("{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"number\"}}}",
                 "typing.List[typing.List[float]]");
    expect_annot("{\"type\":\"object\"}", "typing.Dict[str, typing.Any]");
    expect_annot("{\"type\":\"object\",\"properties\":{}}", "typing.Dict[str, typing.Any]");
    expect_annot("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}", "typing.Dict[str, str]");
    expect_annot("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}", "Field");
    expect_annot("{\"properties\":{\"a\":{}}}", "Field");
    expect_annot("{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"a\":{}}}}",
                 "typing.List[FieldItem]");
}
END_TEST

START_TEST(annotations_enums_and_unions) {
    expect_annot("{\"type\":\"string\",\"enum\":[\"a\",\"b'c\"]}", "typing.Literal['a', 'b\\'c']");
    expect_annot("{\"enum\":[1,2.5,true,\"x\"]}", "typing.Literal[1, 2.5, True, 'x']");
    expect_annot("{\"enum\":[\"a\",null]}", "typing.Optional[typing.Literal['a']]");
    expect_annot("{\"enum\":[null]}", "None");
    expect_annot("{\"enum\":[[1]],\"type\":\"string\"}", "str"); /* not all scalars: the type */
    expect_annot("{\"enum\":[],\"type\":\"integer\"}", "int");
    expect_annot("{\"const\":\"fixed\"}", "typing.Literal['fixed']");
    expect_annot("{\"type\":[\"string\",\"null\"]}", "typing.Optional[str]");
    expect_annot("{\"type\":[\"string\",\"integer\"]}", "typing.Union[str, int]");
    expect_annot("{\"type\":[\"string\",\"integer\",\"null\"]}", "typing.Optional[typing.Union[str, int]]");
    expect_annot("{\"type\":\"string\",\"nullable\":true}", "typing.Optional[str]");
    expect_annot("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}", "typing.Optional[str]");
    expect_annot("{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"number\"}]}", "typing.Union[str, float]");
    expect_annot("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"string\"}]}", "str");
    expect_annot("{\"anyOf\":[{\"type\":\"string\"},{}]}", "typing.Any");
    expect_annot("{\"anyOf\":[{\"type\":\"null\"}]}", "None");
    expect_annot("{\"allOf\":[{\"type\":\"integer\"}]}", "int");
    expect_annot("{\"allOf\":[{\"type\":\"integer\"},{\"minimum\":1}]}", "typing.Any");
}
END_TEST

/* ---- modules ---- */

static json_t *load(const char *text) {
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    ck_assert_msg(v != NULL, "bad test JSON: %s", je.text);
    return v;
}

static void build(const char *tools, ipb_toolgen_pkg *p) {
    json_t *t = load(tools);
    ipb_error *err = NULL;
    int r = ipb_toolgen_build("srv", t, p, &err);
    ck_assert_msg(r == 0, "build failed: %s", err ? ipb_error_msg(err) : "?");
    json_decref(t);
}

static const char *file(const ipb_toolgen_pkg *p, const char *relpath) {
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->files[i].relpath, relpath))
            return p->files[i].content;
    return NULL;
}

static void expect_in(const char *text, const char *needle) {
    ck_assert_msg(text && strstr(text, needle), "'%.300s' not found in:\n%.3000s", needle, text ? text : "(null)");
}

/* run()'s own keyword call_timeout is never a field's name: a property of that name is renamed. */
START_TEST(call_timeout_never_a_field) {
    ipb_toolgen_pkg p;
    build("[{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"call_timeout\":{\"type\":"
          "\"integer\"}}}}]",
          &p);
    const char *m = file(&p, "t.py");
    expect_in(m, "    f_call_timeout: typing.Optional[int] = dataclasses.field(default=None, metadata={'json': "
                 "'call_timeout', 'required': False})\n");
    expect_in(m, "\ndef run(params=None, /, *, call_timeout=None, **kwargs):\n");
    ipb_toolgen_pkg_free(&p);
}
END_TEST

START_TEST(module_shape) {
    ipb_toolgen_pkg p;
    build("[{\"name\":\"get-sum\",\"description\":\"Adds.\\n'''\\\"\\\"\\\"\",\"inputSchema\":{\"type\":\"object\","
          "\"properties\":{\"z\":{\"type\":\"string\",\"default\":\"q'\\n\"},\"b\":{\"type\":\"number\"},"
          "\"a\":{\"type\":\"number\",\"description\":\"First\"},\"class\":{\"type\":\"integer\",\"default\":5},"
          "\"obj\":{\"type\":\"object\",\"default\":{\"k\":[1,\"'\"]}},\"n\":{\"type\":\"string\",\"default\":null}},"
          "\"required\":[\"a\",\"b\",\"nope\"]}}]",
          &p);
    ck_assert_int_eq(p.n, 2);
    const char *m = file(&p, "get_sum.py");
    ck_assert_ptr_nonnull(m);
    ck_assert_msg(!strncmp(m, "'Adds.\\n\\'\\'\\'\\\"\\\"\\\"'\nimport dataclasses\n", 40), "%s", m);
    expect_in(m, "\nSERVER = 'srv'\nTOOL = 'get-sum'\n");
    expect_in(m, "\nfrom mcptools import _runtime as _rt\n");
    /* required fields first, in property order, without defaults */
    const char *b = strstr(m, "    b: float = dataclasses.field(metadata={'json': 'b', 'required': True})\n");
    const char *a = strstr(m, "    a: float = dataclasses.field(metadata={'json': 'a', 'required': True})\n");
    const char *z =
        strstr(m, "    z: str = dataclasses.field(default='q\\'\\n', metadata={'json': 'z', 'required': False})\n");
    ck_assert_msg(b && a && z && b < a && a < z, "field order or form:\n%s", m);
    expect_in(m, "    f_class: int = dataclasses.field(default=5, metadata={'json': 'class', 'required': False})\n");
    expect_in(m, "    obj: typing.Dict[str, typing.Any] = dataclasses.field(default_factory=lambda: "
                 "json.loads('{\\\"k\\\":[1,\\\"\\'\\\"]}'), metadata={'json': 'obj', 'required': False})\n");
    expect_in(
        m,
        "    n: typing.Optional[str] = dataclasses.field(default=None, metadata={'json': 'n', 'required': False})\n");
    expect_in(m, "a (float, required): First");
    expect_in(m, "\ndef run(params=None, /, *, call_timeout=None, **kwargs):\n");
    expect_in(m, "\nasync def run_async(params=None, /, *, call_timeout=None, **kwargs):\n");
    expect_in(m, "    return _rt.call(SERVER, TOOL, _rt.to_json(_rt.make_params(Params, params, kwargs)), "
                 "call_timeout=call_timeout)\n");
    expect_in(m, "    call_timeout: seconds to wait for the answer at most");
    expect_in(m, "\ndef run_full(params=None, /, *, call_timeout=None, **kwargs):\n");
    expect_in(m, "\nasync def run_full_async(params=None, /, *, call_timeout=None, **kwargs):\n");
    ck_assert_ptr_null(strstr(m, "class Result"));
    const char *init = file(&p, "__init__.py");
    expect_in(init, "\n__all__ = ['get_sum']\n");
    ck_assert_ptr_null(strstr(init, "import"));
    ck_assert_int_eq(json_array_size(p.modules), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(p.modules, 0), "module")), "get_sum");
    ipb_toolgen_pkg_free(&p);
}
END_TEST

START_TEST(result_class) {
    ipb_toolgen_pkg p;
    build("[{\"name\":\"w\",\"inputSchema\":{\"type\":\"object\"},\"outputSchema\":{\"type\":\"object\","
          "\"properties\":{\"t\":{\"type\":\"number\"},\"params\":{\"type\":\"object\",\"properties\":{\"x\":{}}}},"
          "\"required\":[\"t\"]}},"
          "{\"name\":\"v\",\"outputSchema\":{\"type\":\"object\"}}]",
          &p);
    const char *m = file(&p, "w.py");
    expect_in(m, "class Params:\n    'The arguments of the tool.'\n\n\n");
    expect_in(m, "class Result:\n");
    expect_in(m, "    t: float = dataclasses.field(metadata={'json': 't', 'required': True})\n");
    /* a nested class named from the property, defined before its use */
    const char *nested = strstr(m, "class Params2:");
    ck_assert_msg(nested && nested < strstr(m, "class Result:"), "%s", m);
    expect_in(m, "    params: typing.Optional[Params2] = dataclasses.field(default=None,");
    expect_in(m, "        return _rt.from_json(Result, value)\n");
    expect_in(m, "    return _rt.call_full(SERVER, TOOL, _rt.to_json(_rt.make_params(Params, params, kwargs)), Result, "
                 "call_timeout=call_timeout)\n");
    expect_in(m, "    return await _rt.acall_full(SERVER, TOOL, _rt.to_json(_rt.make_params(Params, params, kwargs)), "
                 "Result, call_timeout=call_timeout)\n");
    /* an output schema without properties: no Result */
    const char *v = file(&p, "v.py");
    ck_assert_ptr_null(strstr(v, "class Result"));
    ck_assert_ptr_null(strstr(v, " Result"));
    expect_in(v, "    return _rt.call_full(SERVER, TOOL, _rt.to_json(_rt.make_params(Params, params, kwargs)), None, "
                 "call_timeout=call_timeout)\n");
    ipb_toolgen_pkg_free(&p);
}
END_TEST

START_TEST(field_names) {
    ipb_toolgen_pkg p;
    build("[{\"name\":\"f\",\"inputSchema\":{\"properties\":{\"a-b\":{},\"a_b\":{},\"import\":{},\"2x\":{},"
          "\"\":{},\"_meta\":{},\"typing\":{},\"str\":{},\"x'y\\\"z\":{},\"sub\":{\"properties\":{\"q\":{}}},"
          "\"Sub\":{},\"type\":{}}}}]",
          &p);
    const char *m = file(&p, "f.py");
    const char *want[] = {
        "    a_b: typing.Any = dataclasses.field(default=None, metadata={'json': 'a-b', ",
        "    a_b_2: typing.Any = dataclasses.field(default=None, metadata={'json': 'a_b', ",
        "    f_import: typing.Any = dataclasses.field(default=None, metadata={'json': 'import', ",
        "    f_2x: typing.Any = dataclasses.field(default=None, metadata={'json': '2x', ",
        "    f_: typing.Any = dataclasses.field(default=None, metadata={'json': '', ",
        "    f__meta: typing.Any = dataclasses.field(default=None, metadata={'json': '_meta', ",
        "    f_typing: typing.Any = dataclasses.field(default=None, metadata={'json': 'typing', ",
        "    f_str: typing.Any = dataclasses.field(default=None, metadata={'json': 'str', ",
        "    x_y_z: typing.Any = dataclasses.field(default=None, metadata={'json': 'x\\'y\\\"z', ",
        "    sub: typing.Optional[Sub] = dataclasses.field(default=None, metadata={'json': 'sub', ",
        "    f_Sub: typing.Any = dataclasses.field(default=None, metadata={'json': 'Sub', ",
        "    type: typing.Any = dataclasses.field(default=None, metadata={'json': 'type', ",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        expect_in(m, want[i]);
    ipb_toolgen_pkg_free(&p);

    /* NUL in a property name (jansson's parser refuses it, its API does not) */
    json_t *props = json_object();
    json_object_setn_new(props, "a\0b", 3, json_object());
    json_t *tools = json_pack("[{s:s,s:{s:o}}]", "name", "n", "inputSchema", "properties", props);
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_toolgen_build("srv", tools, &p, &err), 0);
    expect_in(file(&p, "n.py"), "    a_b: typing.Any = dataclasses.field(default=None, metadata={'json': 'a\\x00b', ");
    ipb_toolgen_pkg_free(&p);
    json_decref(tools);
}
END_TEST

START_TEST(skipped_tools) {
    ipb_toolgen_pkg p;
    build("[{\"name\":\"get-sum\"},{\"name\":\"GET_SUM\"},{\"description\":\"no name\"},{\"name\":7},\"x\","
          "{\"name\":\"!!!\"},{\"name\":\"ok\"},{\"name\":\"\"}]",
          &p);
    ck_assert_int_eq(json_array_size(p.modules), 3);
    ck_assert_int_eq(json_array_size(p.skipped), 5);
    json_t *s0 = json_array_get(p.skipped, 0);
    ck_assert_str_eq(json_string_value(json_object_get(s0, "tool")), "GET_SUM");
    expect_in(json_string_value(json_object_get(s0, "reason")), "already taken");
    ck_assert(json_is_null(json_object_get(json_array_get(p.skipped, 1), "tool")));
    ck_assert(json_is_null(json_object_get(json_array_get(p.skipped, 2), "tool")));
    ck_assert(json_is_null(json_object_get(json_array_get(p.skipped, 3), "tool")));
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(p.skipped, 4), "tool")), "");
    for (size_t i = 0; i < 5; i++)
        ck_assert(json_string_length(json_object_get(json_array_get(p.skipped, i), "reason")) > 10);
    ck_assert_int_eq(p.n, 4);
    expect_in(file(&p, "__init__.py"), "__all__ = ['get_sum', 't____', 'ok']"); /* "!!!" */
    ipb_toolgen_pkg_free(&p);

    /* a bad server name or a tool list that is not an array: an error, nothing built */
    ipb_error *err = NULL;
    json_t *t = load("[]");
    ck_assert_int_eq(ipb_toolgen_build("a-b", t, &p, &err), -1);
    ck_assert_ptr_nonnull(err);
    ipb_error_free(err);
    err = NULL;
    json_decref(t);
    t = load("{}");
    ck_assert_int_eq(ipb_toolgen_build("ok", t, &p, &err), -1);
    ck_assert_ptr_nonnull(err);
    ipb_error_free(err);
    json_decref(t);
}
END_TEST

/* ---- limits ---- */

START_TEST(depth_limit) {
    /* 30 nested objects: classes stop at the depth limit, the rest is typing.Any */
    json_t *s = json_object();
    for (int i = 0; i < 30; i++)
        s = json_pack("{s:s,s:{s:o}}", "type", "object", "properties", "p", s);
    tg_module *m = tg_module_new();
    ck_assert_int_eq(tg_module_add_class(m, "Params", s, "doc"), 0);
    ck_assert_int_eq(tg_module_finish(m), 0);
    ck_assert_int_le(tg_module_nclasses(m), TG_MAX_DEPTH + 1);
    ck_assert_int_ge(tg_module_nclasses(m), TG_MAX_DEPTH - 1);
    const char *annot = NULL;
    ck_assert_ptr_nonnull(tg_module_field(m, 0, 0, &annot)); /* the deepest class */
    ck_assert_str_eq(annot, "typing.Any");
    tg_module_free(m);
    json_decref(s);

    /* the same through arrays and anyOf */
    s = json_pack("{s:s}", "type", "string");
    for (int i = 0; i < 30; i++)
        s = i % 2 ? json_pack("{s:s,s:o}", "type", "array", "items", s) : json_pack("{s:[o]}", "anyOf", s);
    m = tg_module_new();
    cleanup_free char *a = tg_annotation(m, s, "x");
    ck_assert_msg(strstr(a, "typing.Any") && strlen(a) < 400, "%s", a);
    tg_module_free(m);
    json_decref(s);
}
END_TEST

START_TEST(size_limits) {
    /* too many properties: the first TG_MAX_CLASS_FIELDS are kept and the docstring says so */
    json_t *props = json_object();
    for (int i = 0; i < 300; i++) {
        char k[16];
        snprintf(k, sizeof(k), "p%d", i);
        json_object_set_new(props, k, json_pack("{s:s}", "type", "integer"));
    }
    json_t *tools = json_pack("[{s:s,s:{s:o}}]", "name", "big", "inputSchema", "properties", props);
    ipb_toolgen_pkg p;
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_toolgen_build("srv", tools, &p, &err), 0);
    const char *m = file(&p, "big.py");
    expect_in(m, "    p255: typing.Optional[int]");
    ck_assert_ptr_null(strstr(m, "    p256:"));
    expect_in(m, "44 more properties are left out");
    ipb_toolgen_pkg_free(&p);
    json_decref(tools);

    /* many nested objects: at most TG_MAX_CLASSES classes, the rest are dicts */
    props = json_object();
    for (int i = 0; i < 200; i++) {
        char k[16];
        snprintf(k, sizeof(k), "o%d", i);
        json_object_set_new(props, k, json_pack("{s:s,s:{s:{}}}", "type", "object", "properties", "x"));
    }
    json_t *s = json_pack("{s:o}", "properties", props);
    tg_module *tm = tg_module_new();
    ck_assert_int_eq(tg_module_add_class(tm, "Params", s, "doc"), 0);
    ck_assert_int_le(tg_module_nclasses(tm), TG_MAX_CLASSES);
    size_t nf = 0;
    tg_module_class(tm, tg_module_nclasses(tm) - 1, &nf);
    ck_assert_int_eq(nf, 200);
    const char *annot = NULL;
    tg_module_field(tm, tg_module_nclasses(tm) - 1, 199, &annot);
    ck_assert_str_eq(annot, "typing.Optional[typing.Dict[str, typing.Any]]");
    tg_module_free(tm);
    json_decref(s);

    /* a wide anyOf fan-out at every level stays bounded (TG_MAX_NODES) */
    s = json_pack("{s:s}", "type", "string");
    for (int i = 0; i < 8; i++) {
        json_t *alts = json_array();
        for (int j = 0; j < TG_MAX_UNION; j++) {
            if (j)
                json_array_append(alts, s);
            else
                json_array_append_new(alts, json_pack("{s:s}", "type", i % 2 ? "integer" : "boolean"));
        }
        json_decref(s);
        s = json_pack("{s:o}", "anyOf", alts);
    }
    tm = tg_module_new();
    cleanup_free char *a = tg_annotation(tm, s, "x");
    ck_assert_ptr_nonnull(a);
    ck_assert_int_lt(strlen(a), 200000);
    tg_module_free(tm);
    json_decref(s);

    /* enums longer than TG_MAX_ENUM fall back to the type */
    json_t *e = json_array();
    for (int i = 0; i <= TG_MAX_ENUM; i++)
        json_array_append_new(e, json_integer(i));
    s = json_pack("{s:s,s:o}", "type", "integer", "enum", e);
    tm = tg_module_new();
    cleanup_free char *ea = tg_annotation(tm, s, "x");
    ck_assert_str_eq(ea, "int");
    tg_module_free(tm);
    json_decref(s);
}
END_TEST

/* ---- writing ---- */

static char tmpdir[64];

static void dir_setup(void) {
    strcpy(tmpdir, "/tmp/test_toolgen.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void dir_teardown(void) { ipb_rm_rf(tmpdir); }

static char *read_at(const char *rel) {
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    ipb_buf b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        ipb_buf_append(&b, chunk, n);
    fclose(f);
    return b.data ? b.data : strdup("");
}

static int mode_of(const char *rel) {
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
    struct stat st;
    if (lstat(path, &st) < 0)
        return -1;
    return (int)(st.st_mode & 07777) | (S_ISDIR(st.st_mode) ? 010000 : 0) | (S_ISLNK(st.st_mode) ? 020000 : 0);
}

static int count_entries(const char *rel) {
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "ls -A '%s/%s' | wc -l", tmpdir, rel);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        pclose(f);
    }
    return n;
}

START_TEST(write_package) {
    mode_t old = umask(077);
    cleanup_close int dfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_toolgen_write_runtime(dfd, &err), 0);
    ipb_toolgen_pkg p;
    build("[{\"name\":\"one\"},{\"name\":\"two\"}]", &p);
    ck_assert_int_eq(ipb_toolgen_write(dfd, "srv", &p, &err), 0);
    ipb_toolgen_pkg_free(&p);
    umask(old);

    cleanup_free char *rt = read_at("mcptools/_runtime.py");
    ck_assert_ptr_nonnull(rt);
    ck_assert_int_eq(strlen(rt), ipb_mcptools_runtime_py_len);
    ck_assert_str_eq(rt, ipb_mcptools_runtime_py);
    expect_in(rt, "SOCKET_PATH = \"/opt/ipybox/tool.sock\"");
    cleanup_free char *init = read_at("mcptools/__init__.py");
    ck_assert_str_eq(init, ipb_mcptools_init_py);
    expect_in(init, "ToolTimeout");
    ck_assert_int_eq(mode_of("mcptools"), 010755);
    ck_assert_int_eq(mode_of("mcptools/_runtime.py"), 0644);
    ck_assert_int_eq(mode_of("mcptools/srv"), 010755);
    ck_assert_int_eq(mode_of("mcptools/srv/one.py"), 0644);
    ck_assert_int_eq(mode_of("mcptools/srv/__init__.py"), 0644);
    ck_assert_int_eq(count_entries("mcptools/srv"), 3);

    /* a new listing replaces the old package as a whole; no temporary directory is left */
    build("[{\"name\":\"three\"}]", &p);
    ck_assert_int_eq(ipb_toolgen_write(dfd, "srv", &p, &err), 0);
    ipb_toolgen_pkg_free(&p);
    ck_assert_int_eq(mode_of("mcptools/srv/one.py"), -1);
    ck_assert_int_eq(mode_of("mcptools/srv/three.py"), 0644);
    ck_assert_int_eq(count_entries("mcptools"), 3);

    /* the runtime again: replaced, not duplicated */
    ck_assert_int_eq(ipb_toolgen_write_runtime(dfd, &err), 0);
    ck_assert_int_eq(count_entries("mcptools"), 3);

    /* remove */
    ck_assert_int_eq(ipb_toolgen_remove(dfd, "srv"), 0);
    ck_assert_int_eq(mode_of("mcptools/srv"), -1);
    ck_assert_int_eq(ipb_toolgen_remove(dfd, "srv"), 0);
    ck_assert_int_eq(ipb_toolgen_remove(dfd, "../x"), -EINVAL);
    ck_assert_ptr_null(err);
}
END_TEST

START_TEST(write_does_not_follow_symlinks) {
    cleanup_close int dfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char path[256], link[256];
    snprintf(path, sizeof(path), "%s/outside", tmpdir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/outside/keep", tmpdir);
    ck_assert_int_eq(ipb_write_file(path, "x", 1, 0644), 0);

    /* mcptools itself a symlink: refused, nothing written through it */
    snprintf(link, sizeof(link), "%s/mcptools", tmpdir);
    ck_assert_int_eq(symlink("outside", link), 0);
    ipb_toolgen_pkg p;
    build("[{\"name\":\"one\"}]", &p);
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_toolgen_write(dfd, "srv", &p, &err), -1);
    ck_assert_ptr_nonnull(err);
    ipb_error_free(err);
    err = NULL;
    ck_assert_int_eq(ipb_toolgen_write_runtime(dfd, &err), -1);
    ipb_error_free(err);
    err = NULL;
    ck_assert_int_eq(count_entries("outside"), 1);

    /* mcptools/srv a symlink: replaced by the package, the link removed, its target untouched */
    ck_assert_int_eq(unlink(link), 0);
    ck_assert_int_eq(mkdir(link, 0755), 0);
    snprintf(link, sizeof(link), "%s/mcptools/srv", tmpdir);
    ck_assert_int_eq(symlink("../outside", link), 0);
    ck_assert_int_eq(ipb_toolgen_write(dfd, "srv", &p, &err), 0);
    ck_assert_int_eq(mode_of("mcptools/srv"), 010755);
    ck_assert_int_eq(mode_of("mcptools/srv/one.py"), 0644);
    ck_assert_int_eq(count_entries("outside"), 1);
    ck_assert_int_eq(count_entries("mcptools"), 1);

    /* remove: a symlink in its place is removed, never followed */
    ck_assert_int_eq(ipb_toolgen_remove(dfd, "srv"), 0);
    ck_assert_int_eq(symlink("../outside", link), 0);
    ck_assert_int_eq(ipb_toolgen_remove(dfd, "srv"), 0);
    ck_assert_int_eq(mode_of("mcptools/srv"), -1);
    ck_assert_int_eq(count_entries("outside"), 1);
    ipb_toolgen_pkg_free(&p);
}
END_TEST

Suite *toolgen_suite(void);
Suite *toolgen_suite(void) {
    Suite *s = suite_create("toolgen");
    TCase *l = tcase_create("literals");
    tcase_add_test(l, str_plain_and_quotes);
    tcase_add_test(l, str_control_characters);
    tcase_add_test(l, str_non_ascii);
    tcase_add_test(l, str_output_is_printable_ascii);
    tcase_add_test(l, numbers);
    tcase_add_test(l, identifiers);
    suite_add_tcase(s, l);
    TCase *n = tcase_create("names");
    tcase_add_test(n, module_names);
    tcase_add_test(n, server_names);
    suite_add_tcase(s, n);
    TCase *a = tcase_create("annotations");
    tcase_add_test(a, annotations_scalars);
    tcase_add_test(a, annotations_containers);
    tcase_add_test(a, annotations_enums_and_unions);
    suite_add_tcase(s, a);
    TCase *m = tcase_create("modules");
    tcase_add_test(m, module_shape);
    tcase_add_test(m, call_timeout_never_a_field);
    tcase_add_test(m, result_class);
    tcase_add_test(m, field_names);
    tcase_add_test(m, skipped_tools);
    tcase_add_test(m, depth_limit);
    tcase_add_test(m, size_limits);
    suite_add_tcase(s, m);
    TCase *w = tcase_create("write");
    tcase_add_checked_fixture(w, dir_setup, dir_teardown);
    tcase_add_test(w, write_package);
    tcase_add_test(w, write_does_not_follow_symlinks);
    suite_add_tcase(s, w);
    return s;
}

int main(void) { return ipb_run_suite(toolgen_suite()); }
