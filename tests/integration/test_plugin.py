"""The Claude Code plugin (dist/claude-code-plugin/): its manifest and skill have the shape Claude
Code reads, and its MCP server entry, as `make install` writes it, starts `ipybox mcp` and
answers `tools/list` with the tools the skill teaches."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import McpClient, require_sandbox, text_of  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("BUILD", "build")
PLUGIN = os.path.join(ROOT, "dist", "claude-code-plugin")
SKILL = "code-actions"
# A prefix that exists nowhere on the host: the entry can only work through the staged copy.
PREFIX = "/opt/ipybox-plugin-test"
PLUGIN_REL = "share/ipybox/claude-code-plugin"
TOOLS = {"execute_ipython_cell", "upload_file", "download_file", "reset", "register_mcp_server"}
# Fields of .claude-plugin/plugin.json in Claude Code's plugins reference.
MANIFEST_FIELDS = {"name", "version", "description", "author", "homepage", "repository", "license", "keywords",
                   "commands", "agents", "skills", "hooks", "mcpServers", "outputStyles", "lspServers"}
# snake_case names the skill may put in backticks besides tools and their parameters: mcptools'.
PYTHON_NAMES = {"run_async", "run_full", "call_timeout"}


def load_json(path):
    with open(path) as f:
        return json.load(f)


def read(path):
    with open(path) as f:
        return f.read()


def frontmatter(text):
    """The YAML frontmatter of a SKILL.md as {key: value}, for the plain one-line scalars a
    skill's name and description are (anything else fails the test that reads it)."""
    lines = text.split("\n")
    if lines[0] != "---":
        raise ValueError("SKILL.md does not start with a '---' line")
    end = lines.index("---", 1)
    fields = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(": ")
        if not sep or not re.fullmatch(r"[a-z][a-z-]*", key) or key in fields:
            raise ValueError("not a 'key: value' line: %r" % line)
        # A YAML plain scalar: no ': ' or ' #' inside, no indicator character first.
        if not value or ": " in value or " #" in value or value[0] in "-?:,[]{}#&*!|>'\"%@`":
            raise ValueError("not a plain YAML scalar: %r" % value)
        fields[key] = value.strip()
    return fields, "\n".join(lines[end + 1:])


class PluginFiles(unittest.TestCase):
    def test_manifest_has_the_fields_claude_code_reads(self):
        m = load_json(os.path.join(PLUGIN, ".claude-plugin", "plugin.json"))
        self.assertLessEqual(set(m), MANIFEST_FIELDS)
        self.assertRegex(m["name"], r"^[a-z0-9]+(-[a-z0-9]+)*$")
        self.assertRegex(m["version"], r"^\d+\.\d+\.\d+$")
        self.assertIsInstance(m["description"], str)
        self.assertGreater(len(m["description"]), 20)
        self.assertIsInstance(m["author"]["name"], str)
        self.assertTrue(all(isinstance(k, str) for k in m["keywords"]))
        # Only the manifest lives in .claude-plugin/; components sit at the plugin's root.
        self.assertEqual(os.listdir(os.path.join(PLUGIN, ".claude-plugin")), ["plugin.json"])

    def test_server_entry_runs_ipybox_mcp(self):
        servers = load_json(os.path.join(PLUGIN, ".mcp.json"))["mcpServers"]
        self.assertEqual(list(servers), ["ipybox"])
        # From the checkout the plugin finds ipybox on PATH; make install names the binary.
        self.assertEqual(servers["ipybox"], {"command": "ipybox", "args": ["mcp"]})

    def test_marketplace_lists_the_plugin(self):
        check_marketplace(self, os.path.join(ROOT, "dist"))

    def test_skill_has_frontmatter(self):
        self.assertEqual(os.listdir(os.path.join(PLUGIN, "skills")), [SKILL])
        fields, body = frontmatter(read(os.path.join(PLUGIN, "skills", SKILL, "SKILL.md")))
        self.assertEqual(set(fields), {"name", "description"})
        self.assertEqual(fields["name"], SKILL)
        self.assertRegex(fields["name"], r"^[a-z0-9-]{1,64}$")
        self.assertLessEqual(len(fields["description"]), 1024)
        self.assertIn("execute_ipython_cell", fields["description"])
        self.assertIn("mcptools", body)

    def test_frontmatter_parser_refuses_what_yaml_would_misread(self):
        with self.assertRaises(ValueError):
            frontmatter("---\nname: x\ndescription: Use it: for code\n---\n")
        with self.assertRaises(ValueError):
            frontmatter("name: x\n---\n")
        self.assertEqual(frontmatter("---\nname: x\ndescription: ok\n---\nbody")[0], {"name": "x", "description": "ok"})


def check_marketplace(test, root):
    """root/.claude-plugin/marketplace.json lists one plugin, the one at root/claude-code-plugin."""
    m = load_json(os.path.join(root, ".claude-plugin", "marketplace.json"))
    test.assertLessEqual(set(m), {"name", "owner", "metadata", "plugins"})
    test.assertRegex(m["name"], r"^[a-z0-9]+(-[a-z0-9]+)*$")
    test.assertIsInstance(m["owner"]["name"], str)
    test.assertEqual(len(m["plugins"]), 1)
    entry = m["plugins"][0]
    test.assertTrue(entry["source"].startswith("./"), entry["source"])
    plugin = os.path.normpath(os.path.join(root, entry["source"]))
    test.assertEqual(plugin, os.path.join(root, "claude-code-plugin"))
    test.assertEqual(entry["name"], load_json(os.path.join(plugin, ".claude-plugin", "plugin.json"))["name"])


class InstalledPlugin(unittest.TestCase):
    """`make install DESTDIR=... PREFIX=/opt/ipybox-plugin-test`, then the staged entry is run as
    written, its command looked up under DESTDIR."""

    @classmethod
    def setUpClass(cls):
        require_sandbox(cls)
        cls.tmp = tempfile.mkdtemp(prefix="ipybox-plugin-")
        # Class cleanups run also when setUpClass fails half-way.
        cls.addClassCleanup(shutil.rmtree, cls.tmp)
        # As installed prefixes are: run by root, the sandbox executes the shim as a uid of
        # its pool, which must reach it.
        os.chmod(cls.tmp, 0o755)
        cls.destdir = os.path.join(cls.tmp, "dest")
        r = make("install", cls.destdir)
        if r.returncode != 0:
            raise AssertionError("make install failed: " + r.stderr)
        cls.root = cls.destdir + os.path.join(PREFIX, PLUGIN_REL)
        cls.entry = load_json(os.path.join(cls.root, ".mcp.json"))["mcpServers"]["ipybox"]
        command = [cls.destdir + cls.entry["command"], *cls.entry["args"]]
        cls.c = McpClient(wrap=lambda _cmd: command)
        cls.addClassCleanup(cls.c.close)
        cls.tools = {t["name"]: t for t in cls.c.request("tools/list")["tools"]}

    def test_entry_names_the_installed_binary(self):
        self.assertEqual(self.entry, {"command": PREFIX + "/bin/ipybox", "args": ["mcp"]})
        for rel in (".claude-plugin/plugin.json", "skills/%s/SKILL.md" % SKILL):
            self.assertEqual(read(os.path.join(self.root, rel)), read(os.path.join(PLUGIN, rel)), rel)
        self.assertEqual(os.stat(os.path.join(self.root, ".mcp.json")).st_mode & 0o777, 0o644)

    def test_installed_marketplace_lists_the_installed_plugin(self):
        check_marketplace(self, os.path.dirname(self.root))

    def test_server_answers_tools_list(self):
        self.assertEqual(set(self.tools), TOOLS)
        manifest = load_json(os.path.join(self.root, ".claude-plugin", "plugin.json"))
        self.assertEqual(self.c.init_result["serverInfo"]["name"], "ipybox")
        self.assertEqual(self.c.init_result["serverInfo"]["version"], manifest["version"])

    def test_server_runs_a_cell(self):
        r = self.c.call("execute_ipython_cell", {"code": "x = 6 * 7\nx"})
        self.assertFalse(r.get("isError"), r)
        self.assertEqual(text_of(r).strip(), "42")

    def test_skill_names_only_the_tools_the_server_lists(self):
        body = read(os.path.join(self.root, "skills", SKILL, "SKILL.md"))
        table = set(re.findall(r"^\| `([a-z_]+)` \|", body, re.M))
        self.assertEqual(table, set(self.tools))
        params = {p for t in self.tools.values() for p in t["inputSchema"].get("properties", {})}
        named = set(re.findall(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`", body))
        self.assertGreaterEqual(named, set(self.tools) - {"reset"})
        self.assertEqual(named - set(self.tools) - params - PYTHON_NAMES, set())

    def test_uninstall_removes_the_plugin_and_keeps_what_else_is_there(self):
        dest = os.path.join(self.tmp, "dest2")
        r = make("install", dest)
        self.assertEqual(r.returncode, 0, r.stderr)
        share = dest + os.path.join(PREFIX, "share", "ipybox")
        with open(os.path.join(share, "notes.txt"), "w") as f:
            f.write("mine\n")
        r = make("uninstall", dest)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(share, "claude-code-plugin")))
        self.assertFalse(os.path.exists(os.path.join(share, ".claude-plugin")))
        self.assertEqual(os.listdir(share), ["notes.txt"])


def make(target, destdir):
    return subprocess.run(["make", "-s", target, "BUILD=" + BUILD, "PREFIX=" + PREFIX, "DESTDIR=" + destdir],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


if __name__ == "__main__":
    unittest.main()
