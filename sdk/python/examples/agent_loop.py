#!/usr/bin/env python3
"""An agent-style loop: a "model" writes code actions, the sandbox runs them, results go
back into the conversation, and every MCP tool call the code makes is put to an approval
callback first.

    python3 examples/agent_loop.py [--yes]

The model here is scripted so that the example runs anywhere; replace `model()` with a call
to your LLM. The MCP server is examples/weather_server.py, started on the host by the
supervisor; the code in the sandbox reaches it only through the generated `mcptools`
package, and only with your approval. Without --yes the callback asks on the terminal.
"""
import asyncio
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from ipybox_native import ApprovalRequest, ExecutionError, Sandbox  # noqa: E402

SCRIPT = [
    # 1. Look at the generated API.
    "import mcptools.weather as w, pkgutil\n"
    "print([m.name for m in pkgutil.iter_modules(w.__path__)])",
    # 2. Compose several tool calls in one action; only the summary reaches the model.
    "from mcptools.weather import get_weather\n"
    "cities = ['Oslo', 'Lisbon', 'Nairobi', 'Lima']\n"
    "report = {c: get_weather.run(get_weather.Params(city=c)) for c in cities}\n"
    "coldest = min(report.values(), key=lambda r: r.temperature_c)\n"
    "print(f'coldest: {coldest.city} at {coldest.temperature_c} °C ({coldest.conditions})')",
    # 3. A side effect the application does not allow: the callback rejects it and the
    #    code handles the rejection.
    "from mcptools.weather import send_alert\n"
    "from mcptools import ToolRejected\n"
    "try:\n"
    "    send_alert.run(send_alert.Params(text=f'cold in {coldest.city}'))\n"
    "except ToolRejected as e:\n"
    "    print('alert not sent:', e)",
]


def model(history):
    """The next code action, or None when done (a real agent asks its LLM here)."""
    step = sum(1 for role, _ in history if role == "tool")
    return SCRIPT[step] if step < len(SCRIPT) else None


def make_approval(auto_yes):
    def approve(req: ApprovalRequest) -> bool:
        # Read-only tools are fine; anything else is refused in this example.
        ok = req.tool_name.startswith("get_")
        if not auto_yes and ok:
            ok = input("allow %s/%s %s? [y/N] " % (req.server_name, req.tool_name, req.tool_args)).lower() == "y"
        print("  %s %s/%s %s" % ("approve" if ok else "rejected", req.server_name, req.tool_name, req.tool_args))
        return ok

    return approve


async def main(auto_yes):
    history = [("user", "Which of these cities is coldest today?")]
    async with Sandbox(approval=make_approval(auto_yes)) as sb:
        await sb.register_mcp_server("weather", {"command": sys.executable,
                                                 "args": [os.path.join(HERE, "weather_server.py")]})
        while True:
            code = model(history)
            if code is None:
                break
            print(">>> action %d" % (len([h for h in history if h[0] == "tool"]) + 1))
            try:
                out = (await sb.execute(code, timeout=60)).text
            except ExecutionError as e:
                out = "error: %s: %s" % (e.ename, e.evalue)  # the model sees it and can fix its code
            print(out.rstrip())
            history += [("assistant", code), ("tool", out)]
    print("final answer:", [o for role, o in history if role == "tool"][1].strip())


if __name__ == "__main__":
    asyncio.run(main("--yes" in sys.argv[1:]))
