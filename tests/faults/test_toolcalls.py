"""Faults around the kernel's calls of MCP servers' tools: a stdio server killed between calls
is reaped at once (no <defunct> child of the supervisor until the next tool use), and a kernel
killed during a call that never ends has that call cancelled at its server (which keeps
serving: it is not restarted), so nothing makes the next kernel's call to the same server wait."""
import json
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlib  # noqa: E402
from faultlib import Baseline, FaultCase, wait_for  # noqa: E402
import mcp_servers  # noqa: E402

# Well under faultlib.TOOL_TIMEOUT (4 s, the --mcp-timeout of these sessions): an answer that
# took this long waited behind the dead kernel's call.
PROMPT_S = 3.0


def text_of(r):
    return "".join(c.get("text", "") for c in r.get("content", []) if c.get("type") == "text")


def zombies_of(pid):
    """The <defunct> children of pid."""
    return [p for p in faultlib.process_tree(pid) if p.ppid == pid and p.zombie()]


class TestToolCalls(FaultCase):
    def tool_servers(self, s):
        return [p for p in s.tree() if p.role == "tool_server" and not p.zombie()]

    def test_server_killed_between_calls_is_reaped(self):
        s = self.session(*faultlib.tool_options(self.tmp))
        text, r = s.execute(faultlib.TOOL_TOUCH)
        self.assertIn("tool ok", text, r)
        base = Baseline(s)
        sup = s.supervisor().pid
        servers = self.tool_servers(s)
        self.assertEqual(len(servers), 1, "one stdio server expected: %s" % s.tree())
        os.kill(servers[0].pid, signal.SIGKILL)
        # Nothing is called meanwhile: the supervisor notices the end by itself.
        self.assertTrue(wait_for(lambda: not any(p.pid == servers[0].pid for p in faultlib.process_tree(sup)), 5),
                        "the killed server is still a child of the supervisor after 5 s: %s" % zombies_of(sup))
        self.assertEqual(zombies_of(sup), [])
        # The next use starts it again.
        text, r = s.execute(faultlib.TOOL_TOUCH)
        self.assertIn("tool ok", text, r)
        self.assertEqual(len(self.tool_servers(s)), 1, s.tree())
        self.close_and_assert_clean(s, base)

    def test_kernel_killed_during_hanging_call(self):
        # A server that serves calls concurrently (as MCP servers may): the dead kernel's `hang`
        # is cancelled at it, and the server, not restarted, answers the next kernel's call.
        # (Until issue 19 a server was restarted after a call cancelled unanswered.)
        events = os.path.join(self.tmp, "fake.events")
        cfg = os.path.join(self.tmp, "mcp-concurrent.json")
        with open(cfg, "w") as f:
            json.dump({"mcpServers": {"fake": mcp_servers.fake_stdio_params("--tools", "concurrent",
                                                                            "--events", events)}}, f)
        s = self.session("--mcp-config", cfg, "--approve-tools", "fake/hang", "--approve-tools", "fake/fail",
                         "--mcp-timeout", str(faultlib.TOOL_TIMEOUT))
        text, r = s.execute(faultlib.TOOL_TOUCH)
        self.assertIn("tool ok", text, r)
        base = Baseline(s)
        old_server = self.tool_servers(s)[0].pid
        flight = faultlib.start_stage(s, "tool")
        os.kill(s.proc("kernel").pid, signal.SIGKILL)
        kind, value = flight.finish()
        self.assertEqual(kind, "result", value)
        hangs = [e["id"] for e in mcp_servers.read_events(events) if e["event"] == "call" and e["name"] == "hang"]
        self.assertEqual(len(hangs), 1, mcp_servers.read_events(events))
        self.assertTrue(wait_for(lambda: any(e["event"] == "cancelled" and e["requestId"] == hangs[0]
                                             for e in mcp_servers.read_events(events)), 10),
                        "the dead kernel's call was not cancelled at the server: %s" % mcp_servers.read_events(events))
        # The next kernel's call to the same server is answered at once, by the same server.
        t0 = time.monotonic()
        text, r = s.execute(faultlib.TOOL_TOUCH)
        took = time.monotonic() - t0
        self.assertIn("tool ok", text, r)
        self.assertLess(took, PROMPT_S, "the next tool call waited %.1f s behind the dead kernel's call" % took)
        self.assertEqual([p.pid for p in self.tool_servers(s)], [old_server], s.tree())
        sup = s.supervisor().pid
        self.assertEqual(zombies_of(sup), [])
        self.close_and_assert_clean(s, base)


if __name__ == "__main__":
    unittest.main()
