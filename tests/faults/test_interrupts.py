"""Interrupts that never cost the kernel: a timeout that fires while no user code runs (before
the cell began, or as it ends) does not restart the kernel; only code that really ignores the
interrupt is restarted."""
import collections
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from ipybox_test import McpClient, require_sandbox  # noqa: E402


def status(r):
    return r["_meta"]["ipybox/execution"]["status"]


class TinyTimeouts(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.c = McpClient()
        self.addCleanup(self.c.close)
        text, r = self.c.execute("import os, time\nx = 42\nprint(os.getpid())")
        self.pid = text.strip()

    def assert_same_kernel(self):
        text, r = self.c.execute("print(x, os.getpid())")
        self.assertEqual(text.split(), ["42", self.pid], "the kernel's state was lost: " + text)

    def test_a_thousand_calls(self):
        seen = collections.Counter()
        for i in range(1000):
            _, r = self.c.execute("y = %d" % i, timeout=0.001)
            seen[status(r)] += 1
        # Each cell either ran to its end (ok) or was interrupted inside its code (timeout).
        self.assertEqual(set(seen) - {"ok", "timeout"}, set(), seen)
        self.assert_same_kernel()

    def test_pipelined_calls(self):
        ids = [self.c.send_request("tools/call", {"name": "execute_ipython_cell",
                                                  "arguments": {"code": "y = %d" % i, "timeout": 0.001}})
               for i in range(60)]
        seen = collections.Counter()
        for rid in ids:
            seen[status(self.c.wait_response(rid, 120)["result"])] += 1
        self.assertEqual(set(seen) - {"ok", "timeout"}, set(), seen)
        self.assert_same_kernel()

    def test_interrupt_before_the_code_began_still_stops_it(self):
        # The first interrupt can come before the cell's code runs (then it is dropped); the
        # supervisor sends it again, so a long cell still stops within the grace.
        for _ in range(5):
            text, r = self.c.execute("time.sleep(30)", timeout=0.001)
            self.assertEqual(status(r), "timeout", text)
            self.assertIn("KeyboardInterrupt", text)
        self.assert_same_kernel()

    def test_async_cell_is_interrupted_not_restarted(self):
        # Top-level await runs as a task; the interrupt cancels it (ipykernel 6.17 alone never
        # ended it: a restart).
        text, r = self.c.execute("import asyncio\nawait asyncio.sleep(30)", timeout=1)
        self.assertEqual(status(r), "timeout", text)
        self.assert_same_kernel()

    def test_code_that_ignores_the_interrupt_is_restarted(self):
        text, r = self.c.execute("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)",
                                 timeout=1)
        self.assertEqual(status(r), "timeout_restarted", text)
        text, r = self.c.execute("print('x' in dir())")
        self.assertEqual(text.strip(), "False")

    def test_code_that_catches_it_and_finishes(self):
        text, r = self.c.execute("try:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    print('caught')\n",
                                 timeout=0.5)
        # It ran to its end: that is its outcome.
        self.assertEqual((status(r), text.strip()), ("ok", "caught"))
        self.assert_same_kernel()


if __name__ == "__main__":
    unittest.main()
