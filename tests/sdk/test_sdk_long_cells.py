"""The Python SDK and ipybox's progress heartbeat: a silent cell longer than 10 s gets
"still running" notifications, which stream() does not yield as output (they are marked in
_meta); a progress bar's carriage returns arrive collapsed."""
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import ipybox_native as ib  # noqa: E402
from ipybox_test import IPYBOX, require_sandbox  # noqa: E402


class LongCells(unittest.IsolatedAsyncioTestCase):
    def setUp(self):
        require_sandbox(self)
        self.tmp = tempfile.TemporaryDirectory(prefix="ipybox-sdk-long-", dir="/tmp")
        self.addCleanup(self.tmp.cleanup)
        self.ws = os.path.join(self.tmp.name, "ws")
        os.mkdir(self.ws)
        old = os.environ.get("XDG_STATE_HOME")
        os.environ["XDG_STATE_HOME"] = os.path.join(self.tmp.name, "state")
        self.addCleanup(lambda: os.environ.pop("XDG_STATE_HOME") if old is None
                        else os.environ.__setitem__("XDG_STATE_HOME", old))

    async def test_heartbeats_are_not_output(self):
        async with ib.Sandbox(ipybox=IPYBOX, transport="embedded", workspace=self.ws) as sb:
            code = ("import time\nfor i in range(3):\n    print(f'\\r{i}', end='', flush=True)\n    time.sleep(0.2)\n"
                    "print()\ntime.sleep(12)\nprint('woke')")
            items = [i async for i in sb.stream(code, timeout=60)]
        chunks = [i.text for i in items if isinstance(i, ib.OutputChunk)]
        self.assertEqual("".join(chunks), "2\nwoke\n", chunks)
        self.assertNotIn("still running", "".join(chunks))
        self.assertEqual(items[-1].text.strip(), "2\nwoke")


if __name__ == "__main__":
    unittest.main()
