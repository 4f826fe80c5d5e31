"""What parsing costs the supervisor: JSON text made of many tiny values ("[[],[],...]") costs
jansson tens of times its size once parsed (16 MiB of it took 1.3 GB), so every parser fed by
something untrusted counts the values first (common/jsonlimit.h, at most 2^20 per message).
Here the kernel, which is untrusted, sends such messages for real and the supervisor's peak
memory is read from /proc."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
from ipybox_test import McpClient, require_sandbox  # noqa: E402


def peak_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM for %d" % pid)


class KernelMessages(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.c = McpClient()
        self.addCleanup(self.c.close)

    def test_a_message_of_tiny_values_does_not_swamp_the_supervisor(self):
        text, r = self.c.execute("1+1")
        self.assertEqual(text.strip(), "2")
        before = peak_kib(self.c.proc.pid)
        # 4 million empty lists in one display_data message: about 16 MB of JSON, which
        # jansson would take about 750 MB to hold.
        text, r = self.c.execute(
            "from IPython.display import display\n"
            "display({'application/json': [[]] * 4_000_000, 'text/plain': 'big'}, raw=True)\n"
            "print('sent')", timeout=120)
        self.assertIn("sent", text)
        after = peak_kib(self.c.proc.pid)
        self.assertLess(after - before, 200 * 1024, "the supervisor's peak grew by %d KiB" % (after - before))
        # The session goes on.
        text, r = self.c.execute("print(6*7)")
        self.assertEqual(text.strip(), "42")

    def test_the_kernel_messages_that_matter_still_arrive(self):
        # A display of a modest JSON value (well under the bound) arrives as it did.
        text, r = self.c.execute(
            "from IPython.display import display\n"
            "display({'application/json': list(range(1000)), 'text/plain': 'small json'}, raw=True)")
        self.assertIn("small json", text)


if __name__ == "__main__":
    unittest.main()
