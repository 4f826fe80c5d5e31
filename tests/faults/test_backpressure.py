"""Backpressure: a client that stops reading while a cell streams output costs the supervisor a
bounded amount of memory (the kernel waits on its own writes instead), and the supervisor keeps
handling ping and notifications/cancelled meanwhile."""
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from ipybox_test import McpClient, require_sandbox, wait_for  # noqa: E402

# What the supervisor may hold: its own few MiB of queue and zmq's few messages of about 1 MiB,
# plus what it has at start. A stalled client used to cost the whole output (hundreds of MiB).
BOUND_MIB = 64
FLOOD = "import sys\nfor i in range(%d):\n    print('y' * 1023)\nprint('flood done')"


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return 0


class StalledClient(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.c = McpClient()
        self.addCleanup(self.c.close)
        text, r = self.c.execute("x = 42")
        self.assertFalse(r["isError"], text)
        self.base = rss_mib(self.c.proc.pid)

    def flood(self, mib):
        return self.c.send_request("tools/call", {"name": "execute_ipython_cell",
                                                  "arguments": {"code": FLOOD % (mib * 1024), "timeout": 600}},
                                   meta={"progressToken": "flood"})

    def stall(self, seconds):
        """Reads nothing for a while; returns the supervisor's peak RSS meanwhile."""
        peak, end = 0, time.time() + seconds
        while time.time() < end:
            peak = max(peak, rss_mib(self.c.proc.pid))
            time.sleep(0.1)
        return peak

    def test_memory_is_bounded_and_ping_is_answered(self):
        rid = self.flood(300)
        peak = self.stall(8)
        self.assertLess(peak - self.base, BOUND_MIB, "the supervisor took %d MiB for output nobody read" % peak)
        # The kernel waits on its writes: the cell has not finished while nobody read.
        ping = self.c.send_request("ping")
        seen, streamed, got_ping, result = 0, 0, None, None
        while result is None:
            m = self.c.read_message(300)
            if m.get("id") == ping:
                got_ping = seen
            elif m.get("id") == rid:
                result = m["result"]
            else:
                seen += 1
                streamed += len(m.get("params", {}).get("message", ""))
                if seen % 100 == 0:
                    peak = max(peak, rss_mib(self.c.proc.pid))
        # The answer to ping went ahead of the queued progress: it waited only for what was
        # already in the pipe (1 MiB: four progress notifications of 256 KiB) and the line being
        # written.
        self.assertIsNotNone(got_ping)
        self.assertLessEqual(got_ping, 6, "ping was answered behind %d progress notifications" % got_ping)
        self.assertGreater(seen, 100, "the output was not streamed")
        # Waiting lost nothing: every character was streamed once.
        self.assertEqual(streamed, 300 * 1024 * 1024 + len("flood done\n"))
        self.assertLess(peak - self.base, BOUND_MIB)
        self.assertFalse(result["isError"])
        self.assertIn("flood done", "".join(c.get("text", "") for c in result["content"]))
        text, _ = self.c.execute("print(x)")
        self.assertEqual(text.strip(), "42")

    def test_cancel_while_stalled_keeps_the_kernel(self):
        rid = self.flood(300)
        self.stall(3)
        self.c.notify("notifications/cancelled", {"requestId": rid, "reason": "test"})
        # Still not reading: the supervisor interrupts the kernel on its own.
        self.stall(3)
        text, r = self.c.execute("print(x)", timeout=120)
        self.assertEqual(text.strip(), "42", "the kernel's state was lost: %s" % text[-500:])
        for m in self.c.notifications:
            self.assertNotEqual(m.get("id"), rid, "a cancelled call was answered")

    def test_timeout_while_stalled_keeps_the_kernel(self):
        rid = self.c.send_request("tools/call", {"name": "execute_ipython_cell",
                                                 "arguments": {"code": FLOOD % (300 * 1024), "timeout": 3}},
                                  meta={"progressToken": "t"})
        self.stall(6)
        r = self.c.wait_response(rid, 120)["result"]
        self.assertEqual(r["_meta"]["ipybox/execution"]["status"], "timeout", str(r)[-1000:])
        text, _ = self.c.execute("print(x)")
        self.assertEqual(text.strip(), "42")


class ClientClosedInput(unittest.TestCase):
    """The client closed its input but reads: queued calls run. It closed its input and reads
    nothing: the running call ends and queued ones are not started."""

    def setUp(self):
        require_sandbox(self)

    def queue_and_close(self, c):
        ids = [c.send_request("tools/call", {"name": "execute_ipython_cell",
                                             "arguments": {"code": "import time; time.sleep(1); print('call %d')" % i}})
               for i in range(3)]
        c.proc.stdin.close()
        return ids

    def test_reading_client_gets_every_answer(self):
        c = McpClient()
        self.addCleanup(c.close)
        ids = self.queue_and_close(c)
        for i, rid in enumerate(ids):
            m = c.wait_response(rid, 120)
            self.assertIn("call %d" % i, m["result"]["content"][0]["text"])
        self.assertEqual(c.proc.wait(60), 0)

    def test_client_that_does_not_read_gets_no_queued_call_run(self):
        c = McpClient()
        self.addCleanup(c.close)
        c.execute("open('/app/ran', 'w').close()")
        ids = [c.send_request("tools/call", {"name": "execute_ipython_cell",
                                             "arguments": {"code": "import time, os; time.sleep(1); "
                                                                   "open('/app/ran', 'a').write('%d')" % i}})
               for i in range(4)]
        c.proc.stdin.close()
        # Not reading at all: the answers stay unread in the pipe.
        self.assertEqual(c.proc.wait(120), 0)
        err = c.stderr_text()
        ws = [l.split("/app = ", 1)[1].strip() for l in err.splitlines() if "/app = " in l]
        self.assertTrue(ws, err)
        self.assertIn("3 queued calls not run", err)
        # The running call finished; none of the queued ones started.
        with open(os.path.join(ws[0], "ran")) as f:
            self.assertEqual(f.read(), "0")
        self.assertEqual(len(ids), 4)


if __name__ == "__main__":
    unittest.main()
