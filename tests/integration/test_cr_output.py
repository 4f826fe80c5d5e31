"""Carriage returns in a cell's output are handled as a terminal shows them: text after a '\\r'
overwrites its line from the start, so a progress bar (tqdm, pip) leaves only its last state,
in the result and in the streamed progress alike, however the kernel's stream messages split
the output; "\\r\\n" is a newline."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
from ipybox_test import McpClient, require_sandbox  # noqa: E402

TQDM_LIKE = r'''
import sys, time
for i in range(0, 101, 5):
    sys.stderr.write(f"\r{i:3d}%|{'#' * (i // 10):<10}| {i}/100")
    sys.stderr.flush()
    time.sleep(0.02)
sys.stderr.write("\n")
sys.stderr.flush()
print("done")
'''

PIP_LIKE = r'''
import sys, time
print("Collecting tabulate")
print("  Downloading tabulate-0.9.0-py3-none-any.whl (35 kB)")
for k in range(0, 36, 7):
    sys.stdout.write(f"\r     {'━' * (k // 3):<12} {k}/35 kB")
    sys.stdout.flush()
    time.sleep(0.05)
sys.stdout.write("\r     " + "━" * 12 + " 35/35 kB 1.2 MB/s eta 0:00:00\r\n")
print("Successfully installed tabulate-0.9.0")
'''


class CarriageReturns(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_sandbox(cls)
        cls.c = McpClient("--embedded")

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def run_cell(self, code, token):
        self.c.notifications.clear()
        text, r = self.c.execute(code, progress_token=token, max_output_chars=1_000_000)
        self.assertFalse(r.get("isError"), r)
        streamed = "".join(n["params"].get("message", "") for n in self.c.notifications
                           if n.get("method") == "notifications/progress" and n["params"]["progressToken"] == token
                           and "ipybox/heartbeat" not in n["params"].get("_meta", {}))
        return text, streamed

    def test_tqdm_like_bar_keeps_its_last_state(self):
        text, streamed = self.run_cell(TQDM_LIKE, "tqdm")
        self.assertEqual(text, "100%|##########| 100/100\ndone\n")
        self.assertEqual(streamed, text)

    def test_pip_like_download_keeps_its_last_state(self):
        text, streamed = self.run_cell(PIP_LIKE, "pip")
        self.assertEqual(text, "Collecting tabulate\n"
                               "  Downloading tabulate-0.9.0-py3-none-any.whl (35 kB)\n"
                               "     ━━━━━━━━━━━━ 35/35 kB 1.2 MB/s eta 0:00:00\n"
                               "Successfully installed tabulate-0.9.0\n")
        self.assertEqual(streamed, text)

    def test_two_thousand_updates(self):
        text, streamed = self.run_cell('for i in range(2000): print(f"\\r{i}", end="")', "count")
        self.assertEqual(text, "1999")
        self.assertEqual(streamed, "1999")

    def test_overwrite_across_stream_messages(self):
        # A terminal keeps what the shorter text did not overwrite.
        text, streamed = self.run_cell('import time\nprint("abcdef", end="", flush=True)\ntime.sleep(0.5)\n'
                                       'print("\\rXY")\nprint("one\\r\\ntwo")', "split")
        self.assertEqual(text, "XYcdef\none\ntwo\n")
        self.assertEqual(streamed, text)

    def test_plain_output_unchanged(self):
        text, streamed = self.run_cell('print("a\\nb"); print("x" * 300000)', "plain")
        self.assertEqual(text, "a\nb\n" + "x" * 300000 + "\n")
        self.assertEqual(streamed, text)


if __name__ == "__main__":
    unittest.main()
