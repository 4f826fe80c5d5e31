"""A stand-in for the Brave Search MCP server (stdio) that ipybox's documented examples call:
one tool, brave_image_search {query, count}, answering `count` made-up images as structured
content with an output schema, so that the generated `Result` has `items`. Nothing leaves
this machine. Standard library only; test_ipybox_port.py runs it with /usr/bin/python3."""
import json
import sys

ITEM = {"type": "object", "properties": {
    "title": {"type": "string"},
    "properties": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}},
    "required": ["title", "properties"]}
TOOL = {
    "name": "brave_image_search",
    "description": "Searches images (made up: this is a test server).",
    "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}, "count": {"type": "integer"}},
                    "required": ["query"]},
    "outputSchema": {"type": "object", "properties": {"items": {"type": "array", "items": ITEM}},
                     "required": ["items"]},
}


def answer(mid, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
    sys.stdout.flush()


def main():
    for line in sys.stdin:
        m = json.loads(line)
        meth, mid, params = m.get("method"), m.get("id"), m.get("params") or {}
        if mid is None:
            continue  # notifications
        if meth == "initialize":
            answer(mid, {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                         "capabilities": {"tools": {}}, "serverInfo": {"name": "brave-search-stand-in",
                                                                      "version": "0"}})
        elif meth == "tools/list":
            answer(mid, {"tools": [TOOL]})
        elif meth == "tools/call":
            args = params.get("arguments") or {}
            items = [{"title": "%s %d" % (args.get("query"), i), "properties": {"url": "https://images.test/%d" % i}}
                     for i in range(int(args.get("count", 1)))]
            answer(mid, {"content": [{"type": "text", "text": json.dumps({"items": items})}],
                         "structuredContent": {"items": items}})
        else:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601,
                                                                                "message": "no " + str(meth)}}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
