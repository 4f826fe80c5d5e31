"""Faults around the kernel's calls of MCP servers' tools: a stdio server killed between calls
is reaped at once (no <defunct> child of the supervisor until the next tool use), and a kernel
killed during a call that never ends leaves nothing behind that makes the next kernel's call to
the same server wait."""
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlib  # noqa: E402
from faultlib import Baseline, FaultCase, wait_for  # noqa: E402

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
        s = self.session(*faultlib.tool_options(self.tmp))
        text, r = s.execute(faultlib.TOOL_TOUCH)
        self.assertIn("tool ok", text, r)
        base = Baseline(s)
        old_server = self.tool_servers(s)[0].pid
        flight = faultlib.start_stage(s, "tool")
        os.kill(s.proc("kernel").pid, signal.SIGKILL)
        kind, value = flight.finish()
        self.assertEqual(kind, "result", value)
        # The next kernel's call to the same server (it serves one call at a time and is still
        # in the dead kernel's `hang`) is answered at once.
        t0 = time.monotonic()
        text, r = s.execute(faultlib.TOOL_TOUCH)
        took = time.monotonic() - t0
        self.assertIn("tool ok", text, r)
        self.assertLess(took, PROMPT_S, "the next tool call waited %.1f s behind the dead kernel's call" % took)
        # The old server, busy with a call nobody waits for, was stopped and reaped.
        sup = s.supervisor().pid
        self.assertFalse(any(p.pid == old_server for p in faultlib.process_tree(sup)), s.tree())
        self.assertEqual(zombies_of(sup), [])
        self.close_and_assert_clean(s, base)


if __name__ == "__main__":
    unittest.main()
