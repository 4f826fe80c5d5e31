"""Rich tool results end to end (`ipybox mcp`, embedded supervisor): what a tool returns reaches
kernel code typed, through the generated mcptools package. Images from
@modelcontextprotocol/server-everything arrive as bytes with their MIME type and display in a
cell, text blocks stay in order, embedded resources and resource links are typed, structured
content is the typed Result; a server that answers with malformed blocks loses only those
blocks, and the kernel and the log are told. The reply format and the block checks are
unit-tested in tests/unit/test_toolmsg.c, the runtime against a fake channel in
test_toolgen.py."""
import base64
import hashlib
import json
import os
import re
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
from ipybox_test import McpClient, require_sandbox  # noqa: E402
import mcp_servers  # noqa: E402

# A stdio MCP server whose tool "mixed" answers with good blocks around malformed ones, and
# "many" with 5000 malformed blocks and one good one.
BAD_SERVER = textwrap.dedent('''
    import json, sys
    GOOD_PNG = "iVBORw0KGgo="
    def answer(name):
        if name == "mixed":
            return {"content": [
                {"type": "text", "text": "first"},
                {"type": "image", "data": "not base64!", "mimeType": "image/png"},
                {"type": "image", "data": GOOD_PNG},
                {"type": "audio", "data": 12, "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "x://y"}},
                {"type": "resource_link", "name": "no uri"},
                {"type": "hologram", "data": GOOD_PNG},
                "just a string",
                {"type": "image", "data": GOOD_PNG, "mimeType": "image/png"},
                {"type": "text", "text": "last"}]}
        return {"content": [{"type": "nope"}] * 5000 + [{"type": "text", "text": "kept"}]}
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        method, result = msg.get("method"), None
        if method == "initialize":
            result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "bad-blocks", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("mixed", "many")]}
        elif method == "tools/call":
            result = answer(msg["params"]["name"])
        else:
            result = {}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\\n")
        sys.stdout.flush()
''')


def tiny_image_b64():
    """The PNG that server-everything's get-tiny-image returns, from its source."""
    path = os.path.join(os.path.dirname(mcp_servers.EVERYTHING_DIST), "tools", "get-tiny-image.js")
    with open(path) as f:
        return re.search(r'MCP_TINY_IMAGE = "([A-Za-z0-9+/=]+)"', f.read()).group(1)


class ToolResultsCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ipybox-results-")
        cls.config = os.path.join(cls.tmp.name, "mcp.json")
        servers = {"everything": mcp_servers.everything_stdio_params(),
                   "bad": {"command": mcp_servers.PYTHON, "args": ["-c", BAD_SERVER]}}
        with open(cls.config, "w") as f:
            json.dump({"mcpServers": servers}, f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        require_sandbox(self)
        self.c = McpClient("--mcp-config", self.config, "--approve-tools", "everything/*", "--approve-tools", "bad/*")
        self.addCleanup(self.c.close)

    def cell(self, code, **kw):
        text, r = self.c.execute(code, **kw)
        self.assertFalse(r.get("isError"), text)
        return text, r

    def lines(self, code):
        """The JSON lines the cell printed."""
        text, _ = self.cell(code)
        return [json.loads(line) for line in text.splitlines() if line.startswith(("{", "["))]


class TestImages(ToolResultsCase):
    def test_an_image_arrives_as_bytes_with_its_mime_type_between_its_text_blocks(self):
        want = base64.b64decode(tiny_image_b64())
        (got,) = self.lines(
            "import hashlib, json, mcptools\n"
            "from mcptools.everything import get_tiny_image\n"
            "r = get_tiny_image.run()\n"
            "print(json.dumps([b if isinstance(b, str) else [type(b).__name__, type(b.data).__name__, b.mime_type,\n"
            "                  hashlib.sha256(b.data).hexdigest(), isinstance(b, mcptools.Image)] for b in r]))\n")
        self.assertEqual(got, ["Here's the image you requested:",
                               ["Image", "bytes", "image/png", hashlib.sha256(want).hexdigest(), True],
                               "The image above is the MCP logo."])

    def test_an_image_shown_in_a_cell_is_displayed(self):
        want = base64.b64decode(tiny_image_b64())
        _, r = self.cell("from mcptools.everything import get_tiny_image\nget_tiny_image.run()[1]\n")
        images = [b for b in r["content"] if b["type"] == "image"]
        self.assertEqual(len(images), 1, r)
        self.assertEqual(images[0]["mimeType"], "image/png")
        self.assertEqual(base64.b64decode(images[0]["data"]), want)
        # and with display(), next to the full result's other blocks
        _, r = self.cell("from mcptools.everything import get_tiny_image\n"
                         "full = get_tiny_image.run_full()\n"
                         "display(full.content[1]); print(full.text)\n")
        self.assertEqual([b["mimeType"] for b in r["content"] if b["type"] == "image"], ["image/png"])

    def test_annotated_blocks_keep_their_content(self):
        (got,) = self.lines(
            "import json\nfrom mcptools.everything import get_annotated_message as g\n"
            "r = g.run({'messageType': 'success', 'includeImage': True})\n"
            "print(json.dumps([b if isinstance(b, str) else b.mime_type for b in r]))\n")
        self.assertEqual(got, ["Operation completed successfully", "image/png"])


class TestResources(ToolResultsCase):
    def test_embedded_resources_are_typed_with_text_or_bytes(self):
        got = self.lines(
            "import json, mcptools\nfrom mcptools.everything import get_resource_reference as g\n"
            "for kind in ('Text', 'Blob'):\n"
            "    r = g.run({'resourceType': kind, 'resourceId': 2})\n"
            "    res = r[1]\n"
            "    print(json.dumps([isinstance(res, mcptools.Resource), res.uri, res.mime_type, res.text,\n"
            "                      None if res.data is None else res.data.decode(), isinstance(r[0], str),\n"
            "                      r[2].startswith('You can access this resource using the URI')]))\n")
        self.assertEqual(len(got), 2, got)
        text, blob = got
        self.assertEqual(text[:3], [True, "demo://resource/dynamic/text/2", "text/plain"])
        self.assertRegex(text[3], r"^Resource 2: This is a plaintext resource")
        self.assertIsNone(text[4])
        self.assertEqual(blob[:4], [True, "demo://resource/dynamic/blob/2", "text/plain", None])
        self.assertRegex(blob[4], r"^Resource 2: This is a base64 blob")  # decoded from base64
        self.assertEqual(text[5:] + blob[5:], [True, True, True, True])

    def test_resource_links_are_typed(self):
        (got,) = self.lines(
            "import json, mcptools\nfrom mcptools.everything import get_resource_links as g\n"
            "r = g.run({'count': 3})\n"
            "print(json.dumps([r[0]] + [[type(b).__name__, b.name, b.mime_type, b.description, bool(b.uri)]\n"
            "                           for b in r[1:]]))\n")
        self.assertEqual(got[0], "Here are 3 resource links to resources available in this server:")
        self.assertEqual([b[0] for b in got[1:]], ["ResourceLink"] * 3)
        self.assertEqual([b[1] for b in got[1:]], ["Blob Resource 1", "Text Resource 2", "Blob Resource 3"])
        # (server-everything gives its blob resources the MIME type text/plain too)
        self.assertEqual([b[2:4] for b in got[1:]], [["text/plain", "Resource %d: plaintext resource" % i]
                                                     for i in (1, 2, 3)])
        self.assertTrue(all(b[4] for b in got[1:]))


class TestStructured(ToolResultsCase):
    def test_structured_content_is_the_typed_result_and_the_full_result_has_it_all(self):
        (got,) = self.lines(
            "import json, mcptools\nfrom mcptools.everything import get_structured_content as g, echo\n"
            "r = g.run(location='Chicago')\n"
            "full = g.run_full(location='Chicago')\n"
            "e = echo.run_full(message='x')\n"
            "print(json.dumps([type(r).__name__, isinstance(r, g.Result), isinstance(full, mcptools.ToolResult),\n"
            "                  isinstance(full.structured, g.Result), full.structured == r, full.is_error,\n"
            "                  [type(b).__name__ for b in full.content], e.content, e.structured]))\n")
        self.assertEqual(got, ["Result", True, True, True, True, False, ["str"], ["Echo: x"], None])


class TestMalformed(ToolResultsCase):
    def test_malformed_blocks_are_dropped_and_told_the_rest_arrives_in_order(self):
        (got,) = self.lines(
            "import json\nfrom mcptools.bad import mixed\n"
            "r = mixed.run()\nfull = mixed.run_full()\n"
            "print(json.dumps([[b if isinstance(b, str) else [b.mime_type, b.data.hex()] for b in r],\n"
            "                  full.dropped]))\n")
        blocks, dropped = got
        self.assertEqual(blocks, ["first", ["image/png", "89504e470d0a1a0a"], "last"])
        self.assertEqual(dropped, [
            "block 2: an image block whose \"data\" is not base64",
            "block 3: an image block without a valid \"mimeType\"",
            "block 4: an audio block without a string \"data\"",
            "block 5: a resource block without exactly one of \"text\" and \"blob\"",
            "block 6: a resource link without a \"uri\" and a \"name\"",
            "block 7: a block of an unknown type",
            "block 8: a block that is not an object with a string \"type\""])
        self.c.proc.stdin.close()  # the session ends; then its log is read whole
        self.c.proc.wait(60)
        self.assertIn("a tool's result: 7 content blocks dropped (an image block whose \"data\" is not base64, ...)",
                      self.c.proc.stderr.read().decode(errors="replace"))

    def test_thousands_of_bad_blocks_are_counted_not_listed(self):
        (got,) = self.lines("import json\nfrom mcptools.bad import many\n"
                            "full = many.run_full()\nprint(json.dumps([full.content, full.dropped[-1],"
                            " len(full.dropped)]))\n")
        self.assertEqual(got, [["kept"], "and 4984 more", 17])


if __name__ == "__main__":
    unittest.main()
