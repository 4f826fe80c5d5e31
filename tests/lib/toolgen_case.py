"""What the toolgen tests share (test_toolgen.py, test_toolgen_run.py): tool lists (realistic,
injected, hostile, deep), generate() through tests/tools/toolgen_dump, AstChecker (only the
statements the generator writes), Imported (a generated package imported in a fresh
interpreter) and ToolgenCase."""
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ipybox_test import BUILD  # noqa: E402

DUMP = os.path.join(BUILD, "tests", "tools", "toolgen_dump")

EVERYTHING = [
    {"name": "echo", "description": "Echoes back the input",
     "inputSchema": {"type": "object", "properties": {"message": {"type": "string", "description": "Message to echo"}},
                     "required": ["message"], "additionalProperties": False,
                     "$schema": "http://json-schema.org/draft-07/schema#"}},
    {"name": "get-sum", "description": "Returns the sum of two numbers",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "number", "description": "First number"},
                                                      "b": {"type": "number", "description": "Second number"}},
                     "required": ["a", "b"]}},
    {"name": "get-structured-content",
     "description": "Returns structured content along with an output schema for client data validation",
     "inputSchema": {"type": "object",
                     "properties": {"location": {"type": "string", "enum": ["New York", "Chicago", "Los Angeles"],
                                                 "description": "Choose city"}},
                     "required": ["location"]},
     "outputSchema": {"type": "object",
                      "properties": {"temperature": {"type": "number", "description": "Temperature in celsius"},
                                     "conditions": {"type": "string", "description": "Weather conditions description"},
                                     "humidity": {"type": "number", "description": "Humidity percentage"}},
                      "required": ["temperature", "conditions", "humidity"]}},
    {"name": "longRunningOperation", "description": "Demonstrates a long running operation with progress updates",
     "inputSchema": {"type": "object", "properties": {
         "duration": {"type": "number", "default": 10, "description": "Duration of the operation in seconds"},
         "steps": {"type": "number", "default": 5, "description": "Number of steps in the operation"}}}},
    {"name": "annotatedMessage", "description": "Demonstrates how annotations can be used",
     "inputSchema": {"type": "object", "properties": {
         "messageType": {"type": "string", "enum": ["error", "success", "debug"]},
         "includeImage": {"type": "boolean", "default": False}}, "required": ["messageType"]}},
]

# Text that would be code if it ever left a string literal. CANARY is replaced by a path.
INJECT = [
    "'''\nimport os; os.system('touch CANARY')\n'''",
    '"""\nopen("CANARY", "w")\n"""',
    "\\'; open('CANARY', 'w'); x = '\\",
    "x\\\nopen('CANARY','w')",
    "\n\n\nopen('CANARY', 'w')  # comment",
    "\x00\x01\x1b[31m\u2028\u2029\U0001f600 caf\u00e9 \ud7ff",
    "}}{{ %s %(x)s {0} \\N{BULLET} \\x41 \\u0041",
    "\r\nopen('CANARY','w')\r",
]


def hostile_tools(canary):
    inj = [s.replace("CANARY", canary) for s in INJECT]
    props = {
        "class": {"type": "string", "description": inj[0], "default": inj[1]},
        "x'y\"z": {"type": "string", "enum": [inj[2], inj[3], "plain"]},
        "import": {"type": "integer", "default": -12345678901234},
        "lambda": {"type": "number", "default": 1e-300},
        "str": {"type": "string"},
        "Params": {"type": "object", "properties": {"typing": {"type": "string", "description": inj[4]}}},
        "__init__": {"type": "object", "default": {"k": [inj[5], None, True, 1.5]}},
        "): import os #": {"type": ["string", "null"], "default": inj[6]},
        "": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"const": inj[7]}}]},
        "dataclasses": {"type": "boolean", "default": True},
    }
    return [
        {"name": "x); import os #", "description": inj[0], "inputSchema": {"type": "object", "properties": props,
                                                                           "required": ["str", "Params", "zzz"]}},
        {"name": "'''", "description": inj[1], "inputSchema": {"type": "object"}},
        {"name": "\"\"\"\nimport os", "description": inj[2]},
        {"name": "import", "description": inj[3], "outputSchema": {
            "type": "object", "description": inj[4],
            "properties": {"r\n": {"type": "string", "description": inj[5]}}}},
        {"name": "__init__", "description": inj[6]},
        {"name": "_runtime", "description": inj[7]},
        {"name": "\u00e9t\u00e9\U0001f600", "description": ""},
        {"name": "ECHO"}, {"name": "echo"},  # the second one collides and is skipped
        {"name": ""}, {"name": None}, {"description": "no name"}, "not a tool",
        {"name": "bad-schemas", "inputSchema": {"type": "object", "properties": {
            "a": True, "b": {"type": 7}, "c": {"$ref": "#/x"}, "d": {"anyOf": "x"}, "e": {"enum": [[1], {}]},
            "f": {"type": ["null"]}, "g": {"items": [1, 2]}, "h": {"properties": []}, "i": {"default": []}}}},
    ]


def deep_schema(depth):
    s = {"type": "string"}
    for i in range(depth):
        s = {"type": "object", "properties": {"level%d" % i: s}, "required": ["level%d" % i]}
    return s


def generate(root, server, tools):
    r = subprocess.run([DUMP, root], input=json.dumps({"server": server, "tools": tools}),
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("toolgen_dump failed: " + r.stderr)
    return json.loads(r.stdout)


ALLOWED_CALLS = {("dataclasses", "field"), ("json", "loads"), ("_rt", "call"), ("_rt", "acall"), ("_rt", "call_full"),
                 ("_rt", "acall_full"),
                 ("_rt", "to_json"), ("_rt", "make_params"), ("_rt", "from_json"), (None, "isinstance")}
TYPING_NAMES = {"Optional", "List", "Dict", "Union", "Literal", "Any"}


def call_name(node):
    f = node.func
    if isinstance(f, ast.Name):
        return (None, f.id)
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        return (f.value.id, f.attr)
    return None


class AstChecker:
    """Walks a generated module: only the statement kinds and calls the generator writes."""

    def __init__(self, test):
        self.t = test

    def annotation(self, node, classes):
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                self.t.assertIn(n.id, {"typing", "str", "int", "float", "bool"} | classes)
            elif isinstance(n, ast.Attribute):
                self.t.assertTrue(isinstance(n.value, ast.Name) and n.value.id == "typing" and n.attr in TYPING_NAMES,
                                  ast.dump(n))
            else:
                self.t.assertIsInstance(n, (ast.Subscript, ast.Tuple, ast.Constant, ast.Load, ast.UnaryOp, ast.USub,
                                            ast.Index if hasattr(ast, "Index") else ast.Load))

    def field_value(self, node):
        self.t.assertIsInstance(node, ast.Call)
        self.t.assertEqual(call_name(node), ("dataclasses", "field"))
        self.t.assertEqual(node.args, [])
        kw = {k.arg: k.value for k in node.keywords}
        self.t.assertLessEqual(set(kw), {"default", "default_factory", "metadata"})
        meta = kw["metadata"]
        self.t.assertIsInstance(meta, ast.Dict)
        self.t.assertEqual([k.value for k in meta.keys], ["json", "required"])
        self.t.assertIsInstance(meta.values[0].value, str)
        self.t.assertIn(meta.values[1].value, (True, False))
        if "default" in kw:
            d = kw["default"]
            if isinstance(d, ast.UnaryOp):
                self.t.assertIsInstance(d.op, ast.USub)
                d = d.operand
            self.t.assertIsInstance(d, ast.Constant)
        if "default_factory" in kw:
            lam = kw["default_factory"]
            self.t.assertIsInstance(lam, ast.Lambda)
            self.t.assertEqual(call_name(lam.body), ("json", "loads"))
            self.t.assertEqual(len(lam.body.args), 1)
            self.t.assertIsInstance(lam.body.args[0].value, str)
        return meta.values[0].value

    def module(self, tree):
        body = tree.body
        self.t.assertIsInstance(body[0], ast.Expr)
        self.t.assertIsInstance(body[0].value.value, str)
        classes = set()
        info = {"classes": [], "fields": {}}
        for st in body[1:]:
            if isinstance(st, ast.Import):
                self.t.assertIn([a.name for a in st.names], (["dataclasses"], ["json"], ["typing"]))
                self.t.assertIsNone(st.names[0].asname)
            elif isinstance(st, ast.ImportFrom):
                self.t.assertEqual((st.module, st.level), ("mcptools", 0))
                self.t.assertEqual([(a.name, a.asname) for a in st.names], [("_runtime", "_rt")])
            elif isinstance(st, ast.Assign):
                self.t.assertEqual(len(st.targets), 1)
                self.t.assertIn(st.targets[0].id, ("SERVER", "TOOL"))
                self.t.assertIsInstance(st.value.value, str)
            elif isinstance(st, ast.ClassDef):
                self.t.assertEqual((st.bases, st.keywords), ([], []))
                self.t.assertEqual(len(st.decorator_list), 1)
                dec = st.decorator_list[0]
                self.t.assertEqual((dec.value.id, dec.attr), ("dataclasses", "dataclass"))
                self.t.assertIsInstance(st.body[0].value.value, str)
                fields = []
                for f in st.body[1:]:
                    self.t.assertIsInstance(f, ast.AnnAssign)
                    self.t.assertIsInstance(f.target, ast.Name)
                    self.t.assertNotIn(f.target.id, classes | {"dataclasses", "typing", "str", "int", "float", "bool"})
                    self.annotation(f.annotation, classes)
                    fields.append((f.target.id, self.field_value(f.value)))
                classes.add(st.name)
                info["classes"].append(st.name)
                info["fields"][st.name] = fields
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.t.assertIn(st.name, ("run", "run_full") if isinstance(st, ast.FunctionDef)
                                else ("run_async", "run_full_async"))
                self.t.assertEqual(st.decorator_list, [])
                self.t.assertIsInstance(st.body[0].value.value, str)
                for n in ast.walk(st):
                    if isinstance(n, ast.Call):
                        self.t.assertIn(call_name(n), ALLOWED_CALLS)
                    self.t.assertNotIsInstance(n, (ast.Lambda, ast.Import, ast.ImportFrom, ast.Global, ast.Delete))
            else:
                self.t.fail("unexpected statement %s" % ast.dump(st))
        # Calls anywhere are only the allowed ones.
        for n in ast.walk(tree):
            if isinstance(n, ast.Call):
                self.t.assertIn(call_name(n), ALLOWED_CALLS, ast.dump(n))
        return info


class Imported:
    """Imports from a generated root, then forgets mcptools again."""

    def __init__(self, root):
        self.root = root

    def _purge(self):
        for name in list(sys.modules):
            if name == "mcptools" or name.startswith("mcptools."):
                del sys.modules[name]

    def __enter__(self):
        self._purge()
        sys.path.insert(0, self.root)
        return self

    def __exit__(self, *exc):
        sys.path.remove(self.root)
        self._purge()

    def module(self, name):
        import importlib
        return importlib.import_module(name)


class ToolgenCase(unittest.TestCase):
    def setUp(self):
        if not os.access(DUMP, os.X_OK):
            self.fail("%s is missing: build it with make %s" % (DUMP, os.path.relpath(DUMP)))
        self.tmp = tempfile.mkdtemp(prefix="ipybox-toolgen-")
        self.root = os.path.join(self.tmp, "root")
        os.mkdir(self.root)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def files(self, server):
        d = os.path.join(self.root, "mcptools", server)
        files = {}
        for f in sorted(os.listdir(d)):
            with open(os.path.join(d, f), encoding="ascii") as fh:
                files[f] = fh.read()
        return files

    def check_files(self, server, result):
        """Every file of the package compiles (3.9 grammar too) and has only expected statements."""
        files = self.files(server)
        self.assertEqual(sorted(files), sorted(["__init__.py"] + [m["module"] + ".py" for m in result["modules"]]))
        infos = {}
        for name, src in files.items():
            with self.subTest(file=name):
                compile(src, name, "exec")
                tree = ast.parse(src, feature_version=(3, 9))
                if name == "__init__.py":
                    self.assertEqual(len(tree.body), 2)
                    self.assertIsInstance(tree.body[0].value.value, str)
                    self.assertEqual(tree.body[1].targets[0].id, "__all__")
                    self.assertEqual([e.value for e in tree.body[1].value.elts],
                                     [m["module"] for m in result["modules"]])
                else:
                    infos[name[:-3]] = AstChecker(self).module(tree)
                for line in src.splitlines():
                    self.assertTrue(all(0x20 <= ord(c) < 0x7f for c in line), repr(line))
        return files, infos


