"""The generated Python API of MCP servers (toolgen/), driven through tests/tools/toolgen_dump:
realistic and hostile tool lists give modules that compile, contain only the statements the
generator writes, run nothing on import and keep every server text exactly as data. Calls
through the generated modules are tested in test_toolgen_run.py."""
import json
import os
import subprocess
import sys
import textwrap
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from toolgen_case import (DUMP, EVERYTHING, INJECT, ToolgenCase, deep_schema, generate,  # noqa: E402,F401
                          hostile_tools, Imported)


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

