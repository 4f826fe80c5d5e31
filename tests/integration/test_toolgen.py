"""The generated Python API of MCP servers (toolgen/), driven through tests/tools/toolgen_dump:
realistic and hostile tool lists give modules that compile, contain only the statements the
generator writes, run nothing on import, keep every server text exactly as data, and call
tools through mcptools._runtime over a fake tool channel (a unix socket of the test's own)."""
import ast
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
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


class GeneratedTest(ToolgenCase):
    def test_everything_server(self):
        result = generate(self.root, "everything", EVERYTHING)
        self.assertEqual([m["module"] for m in result["modules"]],
                         ["echo", "get_sum", "get_structured_content", "longrunningoperation", "annotatedmessage"])
        self.assertEqual(result["skipped"], [])
        files, infos = self.check_files("everything", result)
        self.assertEqual(infos["get_structured_content"]["classes"], ["Params", "Result"])
        self.assertEqual(infos["get_sum"]["fields"]["Params"], [("a", "a"), ("b", "b")])
        with Imported(self.root) as im:
            pkg = im.module("mcptools.everything")
            self.assertEqual(pkg.__all__, ["echo", "get_sum", "get_structured_content", "longrunningoperation",
                                           "annotatedmessage"])
            gs = im.module("mcptools.everything.get_sum")
            self.assertEqual(gs.__doc__, "Returns the sum of two numbers")
            self.assertEqual((gs.SERVER, gs.TOOL), ("everything", "get-sum"))
            self.assertEqual(gs.Params(a=1, b=2.5), gs.Params(1, 2.5))
            with self.assertRaises(TypeError):
                gs.Params(a=1)  # b is required
            self.assertIn("a (float, required): First number", gs.run.__doc__)
            lro = im.module("mcptools.everything.longrunningoperation")
            self.assertEqual(lro.Params(), lro.Params(duration=10, steps=5))
            am = im.module("mcptools.everything.annotatedmessage")
            import typing
            hints = typing.get_type_hints(am.Params)
            self.assertEqual(hints["messageType"], typing.Literal["error", "success", "debug"])
            self.assertEqual(hints["includeImage"], bool)
            self.assertIs(am.Params(messageType="error").includeImage, False)
            gsc = im.module("mcptools.everything.get_structured_content")
            hints = typing.get_type_hints(gsc.Result)
            self.assertEqual(hints, {"temperature": float, "conditions": str, "humidity": float})
            import mcptools
            self.assertTrue(issubclass(mcptools.ToolTimeout, TimeoutError))

    def test_hostile_server(self):
        canary = os.path.join(self.tmp, "canary")
        tools = hostile_tools(canary)
        result = generate(self.root, "evil", tools)
        modules = {m["module"]: m["tool"] for m in result["modules"]}
        self.assertEqual(modules, {
            "x___import_os__": "x); import os #",
            "t_import": "import", "t___init__": "__init__", "t__runtime": "_runtime", "t__t__": "\u00e9t\u00e9\U0001f600",
            "echo": "ECHO", "bad_schemas": "bad-schemas"})
        skipped = result["skipped"]
        # Names with quotes or line breaks cannot be shown in an approval question (toolname.h).
        self.assertEqual([s["tool"] for s in skipped], ["'''", "\"\"\"\nimport os", "echo", "", None, None, None])
        self.assertTrue(all(len(s["reason"]) > 10 for s in skipped))
        files, infos = self.check_files("evil", result)
        with Imported(self.root) as im:
            for mod, tool_name in modules.items():
                with self.subTest(module=mod):
                    m = im.module("mcptools.evil." + mod)
                    tool = next(t for t in tools if isinstance(t, dict) and t.get("name") == tool_name)
                    self.assertEqual(m.TOOL, tool_name)
                    self.assertEqual(m.SERVER, "evil")
                    if "description" in tool:
                        self.assertEqual(m.__doc__, tool["description"])
            self.assertFalse(os.path.exists(canary), "importing a generated module ran server text")

            # Field names, JSON names, defaults and enum values of the hostile properties.
            import dataclasses
            import typing
            x = im.module("mcptools.evil.x___import_os__")
            fields = {f.name: f for f in dataclasses.fields(x.Params)}
            json_names = {f.metadata["json"]: name for name, f in fields.items()}
            self.assertEqual(json_names, {
                "str": "f_str", "Params": "f_Params", "class": "f_class", "x'y\"z": "x_y_z", "import": "f_import",
                "lambda": "f_lambda", "__init__": "f___init__", "): import os #": "f____import_os__", "": "f_",
                "dataclasses": "f_dataclasses"})
            self.assertEqual([f.name for f in dataclasses.fields(x.Params)][:2], ["f_str", "f_Params"])
            inj = [s.replace("CANARY", canary) for s in INJECT]
            self.assertEqual(fields["f_class"].default, inj[1])
            self.assertEqual(fields["f_import"].default, -12345678901234)
            self.assertEqual(fields["f_lambda"].default, 1e-300)
            self.assertEqual(fields["f____import_os__"].default, inj[6])
            self.assertEqual(fields["f___init__"].default_factory(), {"k": [inj[5], None, True, 1.5]})
            self.assertIs(fields["f_dataclasses"].default, True)
            hints = typing.get_type_hints(x.Params)
            self.assertEqual(typing.get_args(typing.get_args(hints["x_y_z"])[0]), (inj[2], inj[3], "plain"))
            self.assertIs(hints["f_Params"], x.Params2)
            self.assertIn(inj[0], x.Params.__doc__)
            self.assertIn(inj[4], x.Params2.__doc__)
            # the schemas that are not schemas
            bad = im.module("mcptools.evil.bad_schemas")
            hints = typing.get_type_hints(bad.Params)
            self.assertEqual(hints["a"], typing.Any)
            self.assertEqual(hints["c"], typing.Any)
            self.assertEqual(hints["f"], type(None))
            imp = im.module("mcptools.evil.t_import")
            self.assertEqual(imp.Result.__doc__.split("\n\nAttributes:")[0], inj[4])
        self.assertFalse(os.path.exists(canary))

    def test_import_runs_nothing(self):
        # Importing under an audit hook: the only files opened are the modules themselves, the
        # only code compiled is theirs and what dataclasses generates; no process, socket or
        # file operation happens.
        canary = os.path.join(self.tmp, "canary")
        result = generate(self.root, "evil", hostile_tools(canary))
        code = textwrap.dedent("""
            import sys, importlib, json
            root = sys.argv[1]
            bad = []
            DANGER = ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "subprocess.Popen",
                      "socket.", "os.remove", "os.rename", "os.mkdir", "os.rmdir", "os.chmod", "shutil.",
                      "ctypes.", "os.kill", "urllib.", "builtins.input", "os.putenv", "os.unsetenv")
            def audit(event, args):
                if event.startswith(DANGER):
                    bad.append(event)
                elif event == "open":
                    path = str(args[0])
                    if not (path.startswith(root) and path.endswith((".py", ".pyc"))):
                        bad.append("open " + path)
                elif event == "compile":
                    src, filename = args
                    if isinstance(src, bytes):
                        src = src.decode("ascii", "replace")
                    ok = (str(filename).startswith(root) and str(filename).endswith(".py")) or \\
                        (isinstance(src, str) and src.startswith("def __create_fn__"))
                    if not ok:
                        bad.append("compile %r %r" % (filename, str(src)[:60]))
            sys.path.insert(0, root)
            import mcptools._runtime, dataclasses, typing, asyncio
            sys.addaudithook(audit)
            for m in json.loads(sys.argv[2]):
                importlib.import_module("mcptools.evil." + m)
            print(json.dumps(bad))
            """)
        modules = [m["module"] for m in result["modules"]]
        r = subprocess.run([sys.executable, "-I", "-B", "-c", code, self.root, json.dumps(modules)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), [])
        self.assertFalse(os.path.exists(canary))

    def test_limits(self):
        many = {"p%d" % i: {"type": "object", "properties": {"x": {"type": "integer"}}} for i in range(300)}
        wide = {"anyOf": [{"anyOf": [{"type": t} for t in ("string", "integer", "number", "boolean")] * 4}] * 16}
        tools = [
            {"name": "deep", "inputSchema": deep_schema(100)},
            {"name": "many", "inputSchema": {"type": "object", "properties": many}},
            {"name": "wide", "inputSchema": {"type": "object", "properties": {"w%d" % i: wide for i in range(100)}}},
            {"name": "enum", "inputSchema": {"properties": {"e": {"type": "string",
                                                                  "enum": ["v%d" % i for i in range(1000)]}}}},
        ]
        t0 = time.monotonic()
        result = generate(self.root, "big", tools)
        self.assertLess(time.monotonic() - t0, 10)
        files, infos = self.check_files("big", result)
        self.assertLessEqual(len(infos["deep"]["classes"]), 10)
        self.assertLessEqual(len(infos["many"]["classes"]), 64)
        self.assertEqual(len(infos["many"]["fields"]["Params"]), 256)
        for name, src in files.items():
            self.assertLess(len(src), 2 * 1024 * 1024, name)
        with Imported(self.root) as im:
            import typing
            deep = im.module("mcptools.big.deep")
            self.assertIn("Level99", deep.__dict__)
            cls, depth = deep.Params, 0
            while True:
                h = typing.get_type_hints(cls)
                (ann,) = h.values()
                if ann is typing.Any or not isinstance(ann, type) or ann is str:
                    break
                cls, depth = ann, depth + 1
            self.assertIs(ann, typing.Any)
            self.assertLessEqual(depth, 9)
            many_mod = im.module("mcptools.big.many")
            self.assertIn("44 more properties are left out", many_mod.Params.__doc__)
            enum_mod = im.module("mcptools.big.enum")
            self.assertEqual(typing.get_type_hints(enum_mod.Params)["e"], typing.Optional[str])

    def test_replace_and_remove(self):
        generate(self.root, "srv", EVERYTHING)
        generate(self.root, "other", EVERYTHING[:1])
        result = generate(self.root, "srv", [{"name": "fresh"}])
        self.assertEqual(sorted(self.files("srv")), ["__init__.py", "fresh.py"])
        self.assertEqual(sorted(os.listdir(os.path.join(self.root, "mcptools"))),
                         ["__init__.py", "_runtime.py", "other", "srv"])
        self.assertEqual(result["modules"], [{"tool": "fresh", "module": "fresh"}])
        r = subprocess.run([DUMP, self.root, "--remove", "srv"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(os.listdir(os.path.join(self.root, "mcptools"))),
                         ["__init__.py", "_runtime.py", "other"])
        r = subprocess.run([DUMP, self.root], input=json.dumps({"server": "no-good", "tools": []}),
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no-good", r.stderr)


def structured(value, *blocks):
    """A reply with structured content (and content blocks)."""
    return {"result": {"content": list(blocks), "structuredContent": value}}


class FakeChannel:
    """A tool channel on a unix socket: records each request line and answers it with
    replies[tool] (a dict, bytes, or a callable given the connection)."""

    def __init__(self, path, replies):
        self.path = path
        self.replies = replies
        self.requests = []
        self.closed = threading.Event()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                buf = b""
                while not buf.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                self.requests.append(buf)
                try:
                    tool = json.loads(buf)["tool"]
                except ValueError:
                    continue
                reply = self.replies.get(tool, {"error": {"kind": "refused", "message": "no such tool"}})
                if callable(reply):
                    reply(conn)
                    continue
                conn.sendall(reply if isinstance(reply, bytes) else json.dumps(reply).encode() + b"\n")

    def close(self):
        self.sock.close()


class RunTest(ToolgenCase):
    def setUp(self):
        super().setUp()
        generate(self.root, "everything", EVERYTHING)
        self.canary = os.path.join(self.tmp, "canary")
        generate(self.root, "evil", hostile_tools(self.canary))
        self.im = Imported(self.root).__enter__()
        self.rt = self.im.module("mcptools._runtime")
        self.mcptools = self.im.module("mcptools")
        self.sock_path = os.path.join(self.tmp, "tool.sock")
        self.rt.SOCKET_PATH = self.sock_path
        self.replies = {}
        self.chan = FakeChannel(self.sock_path, self.replies)

    def tearDown(self):
        self.chan.close()
        self.im.__exit__(None, None, None)
        super().tearDown()

    def request(self, i=-1):
        line = self.chan.requests[i]
        self.assertTrue(line.endswith(b"\n"))
        self.assertEqual(line.count(b"\n"), 1)
        req = json.loads(line)
        # compact and ASCII only
        self.assertEqual(line, json.dumps(req, separators=(",", ":"), ensure_ascii=True).encode() + b"\n")
        self.assertEqual(list(req), ["server", "tool", "arguments"])
        return req

    def test_text_and_structured(self):
        echo = self.im.module("mcptools.everything.echo")
        self.replies["echo"] = {"text": "Echo: h\u00e9llo"}
        self.assertEqual(echo.run(message="h\u00e9llo"), "Echo: h\u00e9llo")
        self.assertEqual(self.request(), {"server": "everything", "tool": "echo", "arguments": {"message": "h\u00e9llo"}})
        self.assertEqual(echo.run(echo.Params(message="x")), "Echo: h\u00e9llo")
        self.assertEqual(self.request()["arguments"], {"message": "x"})

        gsc = self.im.module("mcptools.everything.get_structured_content")
        self.replies["get-structured-content"] = structured({"temperature": 22, "conditions": "Sunny",
                                                                "humidity": 65, "extra": [1]})
        r = gsc.run(location="Chicago")
        self.assertIsInstance(r, gsc.Result)
        self.assertEqual((r.temperature, r.conditions, r.humidity), (22.0, "Sunny", 65.0))
        self.assertIsInstance(r.temperature, float)
        self.assertEqual(self.request()["arguments"], {"location": "Chicago"})
        # a text answer from a tool with an output schema stays text
        self.replies["get-structured-content"] = {"text": "plain"}
        self.assertEqual(gsc.run(location="Chicago"), "plain")
        # tolerant conversion: missing keys become None, mismatched values stay as they are
        self.replies["get-structured-content"] = structured({"temperature": "hot"})
        r = gsc.run(location="Chicago")
        self.assertEqual((r.temperature, r.conditions, r.humidity), ("hot", None, None))
        # structured content that is not an object is returned as it is
        self.replies["get-structured-content"] = structured([1, 2])
        self.assertEqual(gsc.run(location="Chicago"), [1, 2])

        # run_async
        self.replies["get-structured-content"] = structured({"temperature": 1.5, "conditions": "c", "humidity": 2})
        r = asyncio.run(gsc.run_async(location="New York"))
        self.assertEqual(r, gsc.Result(temperature=1.5, conditions="c", humidity=2.0))
        self.assertEqual(self.request()["arguments"], {"location": "New York"})
        self.assertEqual(asyncio.run(echo.run_async(message="a")), "Echo: h\u00e9llo")

    def test_rich_results(self):
        import base64
        import pickle
        m = self.mcptools
        echo = self.im.module("mcptools.everything.echo")
        gsc = self.im.module("mcptools.everything.get_structured_content")
        png, wav, blob = b"\x89PNG\r\n\x1a\n\x00\xff", b"RIFF\x00\x01", b"\x00\x01\x02"
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        blocks = [{"type": "text", "text": "before"},
                  {"type": "image", "data": b64(png), "mimeType": "image/png"},
                  {"type": "audio", "data": b64(wav), "mimeType": "audio/wav"},
                  {"type": "resource", "uri": "test://t", "mimeType": "text/plain", "text": "T"},
                  {"type": "resource", "uri": "test://b", "blob": b64(blob)},
                  {"type": "resource_link", "uri": "test://l", "name": "L", "mimeType": "text/plain",
                   "description": "d", "size": 3},
                  {"type": "text", "text": "after"}]
        self.replies["echo"] = {"result": {"content": blocks}}
        want = ["before", m.Image(png, "image/png"), m.Audio(wav, "audio/wav"),
                m.Resource("test://t", "text/plain", text="T"), m.Resource("test://b", data=blob),
                m.ResourceLink("test://l", "L", "text/plain", description="d", size=3), "after"]
        for run in (lambda: echo.run(message="m"), lambda: asyncio.run(echo.run_async(message="m"))):
            got = run()
            self.assertEqual(got, want)
            self.assertIsInstance(got[1].data, bytes)
        full = echo.run_full(message="m")
        self.assertIsInstance(full, m.ToolResult)
        self.assertEqual((full.content, full.structured, full.is_error, full.dropped), (want, None, False, []))
        self.assertEqual(full.text, "before\nafter")
        self.assertEqual(asyncio.run(echo.run_full_async(message="m")), full)
        self.assertEqual(repr(got[1]), "Image(image/png, 10 bytes)")
        self.assertNotIn("\\x00", repr(got[4]))  # blob bytes are not in the repr
        # displaying: the image's own MIME type (base64, as Jupyter carries it) and text/plain
        bundle = got[1]._repr_mimebundle_()
        self.assertEqual(bundle["image/png"], b64(png))
        self.assertEqual(got[1]._repr_png_(), png)
        self.assertIsNone(got[1]._repr_jpeg_())
        svg = m.Image(b"<svg/>", "image/svg+xml")
        self.assertEqual(svg._repr_mimebundle_()["image/svg+xml"], "<svg/>")
        self.assertEqual(list(m.Image(b"x", "image/x-odd")._repr_mimebundle_()), ["text/plain"])

        # text only: a str as before; several text blocks joined; none: ""
        self.replies["echo"] = {"result": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}
        self.assertEqual(echo.run(message="m"), "a\nb")
        self.assertEqual(echo.run_full(message="m").content, ["a", "b"])
        self.replies["echo"] = {"result": {"content": []}}
        self.assertEqual(echo.run(message="m"), "")
        self.replies["echo"] = {"text": "one"}
        self.assertEqual(echo.run_full(message="m"), m.ToolResult(["one"]))
        # dropped blocks are told in the full result
        self.replies["echo"] = {"result": {"content": [{"type": "text", "text": "a"}], "dropped": ["block 2: why"]}}
        self.assertEqual(echo.run(message="m"), "a")
        self.assertEqual(echo.run_full(message="m").dropped, ["block 2: why"])

        # structured content with blocks: run() gives the Result, run_full() both, typed
        self.replies["get-structured-content"] = structured({"temperature": 1, "conditions": "c", "humidity": 2},
                                                            {"type": "text", "text": "{...}"})
        self.assertIsInstance(gsc.run(location="x"), gsc.Result)
        full = gsc.run_full(location="x")
        self.assertEqual(full.structured, gsc.Result(temperature=1.0, conditions="c", humidity=2.0))
        self.assertEqual(full.content, ["{...}"])
        self.replies["echo"] = structured({"k": 1})
        self.assertEqual(echo.run_full(message="m").structured, {"k": 1})

        # isError: run() raises ToolError carrying the whole answer; run_full() returns it
        self.replies["echo"] = {"result": {"content": [{"type": "text", "text": "bad"}, blocks[1]], "isError": True}}
        with self.assertRaises(m.ToolError) as cm:
            echo.run(message="m")
        self.assertEqual((cm.exception.kind, cm.exception.message), ("tool_error", "bad"))
        self.assertEqual(cm.exception.result.content, ["bad", m.Image(png, "image/png")])
        e = pickle.loads(pickle.dumps(cm.exception))
        self.assertEqual((type(e), e.message, e.result), (m.ToolError, "bad", cm.exception.result))
        full = echo.run_full(message="m")
        self.assertTrue(full.is_error)
        self.replies["echo"] = {"result": {"content": [], "isError": True}}
        with self.assertRaises(m.ToolError) as cm:
            echo.run(message="m")
        self.assertIn("without a message", cm.exception.message)
        # run_full still raises when there is no answer
        self.replies["echo"] = {"error": {"kind": "rejected", "message": "no"}}
        with self.assertRaises(m.ToolRejected):
            echo.run_full(message="m")

        # results of a shape the supervisor never sends fail clearly, never half-typed
        for bad in ({"content": "x"}, {"content": [1]}, {"content": [{"type": "video"}]},
                    {"content": [{"type": "image", "data": "AAA", "mimeType": "image/png"}]},
                    {"content": [{"type": "image", "data": "AA\nA=", "mimeType": "image/png"}]},
                    {"content": [{"type": "image", "data": "AAAA"}]},
                    {"content": [{"type": "resource", "uri": "u"}]},
                    {"content": [{"type": "resource_link", "uri": "u", "name": "n", "size": True}]},
                    {"content": [], "dropped": [1]}, {"structuredContent": 1}):
            with self.subTest(result=bad):
                self.replies["echo"] = {"result": bad}
                with self.assertRaises(m.ToolCallError) as cm:
                    echo.run_full(message="m")
                self.assertEqual(cm.exception.kind, "failed")
                self.assertIn("unknown shape", cm.exception.message)

    def test_arguments(self):
        x = self.im.module("mcptools.evil.x___import_os__")
        self.replies["x); import os #"] = {"text": "ok"}
        p = x.Params(f_str="s", f_Params=x.Params2(f_typing="t"), f_class=None)
        self.assertEqual(x.run(p), "ok")
        req = self.request()
        self.assertEqual(req["tool"], "x); import os #")
        args = req["arguments"]
        # JSON names; None left out unless required; defaults included
        self.assertEqual(args["str"], "s")
        self.assertEqual(args["Params"], {"typing": "t"})
        self.assertNotIn("class", args)
        self.assertEqual(args["import"], -12345678901234)
        self.assertEqual(args["__init__"]["k"][1:], [None, True, 1.5])
        self.assertNotIn("", args)
        # keyword arguments and a Params instance, but not both
        self.assertEqual(x.run(f_str="a", f_Params=None), "ok")
        self.assertEqual(self.request()["arguments"]["Params"], None)  # required: sent as null
        with self.assertRaises(TypeError):
            x.run(p, f_str="b")
        with self.assertRaises(TypeError):
            asyncio.run(x.run_async(p, f_str="b"))
        with self.assertRaises(TypeError):
            x.run(42)
        with self.assertRaises(TypeError):
            x.run(nope=1)
        n = len(self.chan.requests)
        self.assertEqual(len(self.chan.requests), n)  # refused before any call
        # a dict passes through as the arguments
        self.assertEqual(x.run({"raw": [1]}), "ok")
        self.assertEqual(self.request()["arguments"], {"raw": [1]})

    def test_errors(self):
        echo = self.im.module("mcptools.everything.echo")
        m = self.mcptools
        cases = [("rejected", m.ToolRejected), ("tool_error", m.ToolError), ("timeout", m.ToolTimeout),
                 ("refused", m.ToolCallError), ("failed", m.ToolCallError), ("other", m.ToolCallError)]
        for kind, cls in cases:
            with self.subTest(kind=kind):
                self.replies["echo"] = {"error": {"kind": kind, "message": "why: " + kind}}
                for call in (lambda: echo.run(message="m"), lambda: asyncio.run(echo.run_async(message="m"))):
                    with self.assertRaises(m.ToolCallError) as cm:
                        call()
                    e = cm.exception
                    self.assertIs(type(e), cls)
                    self.assertEqual((e.server, e.tool, e.kind, e.message), ("everything", "echo", kind, "why: " + kind))
                    self.assertIn("why: " + kind, str(e))
        self.assertTrue(issubclass(m.ToolTimeout, TimeoutError))
        self.assertTrue(issubclass(m.ToolRejected, m.ToolCallError))
        # unknown tool (the fake channel's default answer)
        with self.assertRaises(m.ToolCallError) as cm:
            self.rt.call("everything", "nope", {})
        self.assertEqual(cm.exception.kind, "refused")
        # malformed replies and an empty one
        for reply in (b"not json\n", b"[1]\n", b'{"text": 5}\n', b'{"a": 1, "b": 2}\n', b"\n",
                      lambda conn: None):
            with self.subTest(reply=reply):
                self.replies["echo"] = reply
                with self.assertRaises(m.ToolCallError) as cm:
                    echo.run(message="m")
                self.assertEqual(cm.exception.kind, "failed")
        # a reply without a newline before EOF still counts
        self.replies["echo"] = b'{"text": "eof"}'
        self.assertEqual(echo.run(message="m"), "eof")
        self.assertEqual(asyncio.run(echo.run_async(message="m")), "eof")

    def test_reply_limit(self):
        echo = self.im.module("mcptools.everything.echo")
        self.rt.MAX_REPLY = 1000
        self.replies["echo"] = {"text": "x" * 5000}
        for call in (lambda: echo.run(message="m"), lambda: asyncio.run(echo.run_async(message="m"))):
            with self.assertRaises(self.mcptools.ToolCallError) as cm:
                call()
            self.assertIn("64 MiB", str(cm.exception))
        self.replies["echo"] = {"text": "x" * 900}
        self.assertEqual(echo.run(message="m"), "x" * 900)
        # a large reply under the real limit, read in linear time
        self.rt.MAX_REPLY = 64 * 1024 * 1024
        big = "\u00e9" * (8 * 1024 * 1024)
        self.replies["echo"] = {"text": big}
        t0 = time.monotonic()
        self.assertEqual(echo.run(message="m"), big)
        self.assertEqual(asyncio.run(echo.run_async(message="m")), big)
        self.assertLess(time.monotonic() - t0, 20)

    def test_channel_unavailable(self):
        echo = self.im.module("mcptools.everything.echo")
        self.rt.SOCKET_PATH = os.path.join(self.tmp, "absent.sock")
        for call in (lambda: echo.run(message="m"), lambda: asyncio.run(echo.run_async(message="m"))):
            with self.assertRaises(self.mcptools.ToolCallError) as cm:
                call()
            self.assertEqual(cm.exception.kind, "failed")
            self.assertIn("tool channel is unavailable", str(cm.exception))

    def test_interrupt_closes_the_connection(self):
        echo = self.im.module("mcptools.everything.echo")
        peer_closed = threading.Event()

        def hold(conn):  # never answers; notes when the client hangs up
            conn.settimeout(10)
            try:
                peer_closed.set() if conn.recv(1) == b"" else None
            except OSError:
                pass

        self.replies["echo"] = hold

        def interrupt(signum, frame):
            raise KeyboardInterrupt

        old = signal.signal(signal.SIGALRM, interrupt)
        kept = None
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            echo.run(message="m")
        except KeyboardInterrupt as e:
            kept = e  # its traceback keeps the frames and their sockets alive: only close() ends it
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        self.assertIsNotNone(kept, "KeyboardInterrupt did not propagate")
        self.assertTrue(peer_closed.wait(5), "the connection stayed open after KeyboardInterrupt")
        del kept

    def test_async_cancel_closes_the_connection(self):
        echo = self.im.module("mcptools.everything.echo")
        peer_closed = threading.Event()

        def hold(conn):
            conn.settimeout(10)
            try:
                peer_closed.set() if conn.recv(1) == b"" else None
            except OSError:
                pass

        self.replies["echo"] = hold

        async def main():
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(echo.run_async(message="m"), 0.3)

        asyncio.run(main())
        self.assertTrue(peer_closed.wait(5), "the connection stayed open after cancellation")


if __name__ == "__main__":
    unittest.main()
