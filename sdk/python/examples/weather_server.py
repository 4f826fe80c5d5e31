#!/usr/bin/env python3
"""A small MCP server over stdio, standard library only, for the examples: made-up weather
for a city (a structured result) and a running order log. Real agents would register real
servers the same way (see agent_loop.py)."""
import json
import sys

TOOLS = [
    {
        "name": "get_weather",
        "description": "Today's weather for a city (made up, but the same for the same city).",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "outputSchema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "temperature_c": {"type": "number"},
                           "conditions": {"type": "string"}},
            "required": ["city", "temperature_c", "conditions"],
        },
    },
    {
        "name": "send_alert",
        "description": "Sends an alert message to the operations team.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
]


def weather(city):
    h = sum(ord(c) for c in city.lower())
    return {"city": city, "temperature_c": round(-5 + (h % 350) / 10, 1),
            "conditions": ["sunny", "cloudy", "rain", "snow", "fog"][h % 5]}


def answer(req):
    method, params = req.get("method"), req.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"), "capabilities": {"tools": {}},
                "serverInfo": {"name": "weather", "version": "1"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        args = params.get("arguments") or {}
        if params.get("name") == "get_weather":
            w = weather(str(args.get("city", "")))
            return {"content": [{"type": "text", "text": json.dumps(w)}], "structuredContent": w}
        if params.get("name") == "send_alert":
            return {"content": [{"type": "text", "text": "alert sent: %s" % args.get("text", "")}]}
        return {"content": [{"type": "text", "text": "no such tool"}], "isError": True}
    if method == "ping":
        return {}
    return None


def main():
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        if "id" not in req:
            continue  # a notification
        result = answer(req)
        if result is None:
            msg = {"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32601, "message": "method not found"}}
        else:
            msg = {"jsonrpc": "2.0", "id": req["id"], "result": result}
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
