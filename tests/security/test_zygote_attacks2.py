"""An attacker's review of issue 21's second part (package R2): the held zygote, its boot after
the first kernel answered, S1's bounded waits. Attacks from kernel code in a cell with the real
binaries; each test here failed on the code before its fix. What stopped the attacks that
failed is in the report of the review."""
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
sys.path.insert(0, os.path.dirname(__file__))
from ipybox_test import McpClient, require_sandbox, text_of, wait_for  # noqa: E402
from test_zygote import start_of, zygote_pids  # noqa: E402
from test_zygote_attacks import COUNT_TASKS, left, session_processes  # noqa: E402

LIMIT = "24"


def tasks(c):
    """How many tasks the kernel's tree holds at most (COUNT_TASKS)."""
    out, _ = c.execute(COUNT_TASKS, timeout=120)
    if "TASKS" not in out:
        raise AssertionError("no count: %s" % out)
    return int(out.split("TASKS", 1)[1].split()[0])


class LostZygoteSlot(unittest.TestCase):
    """The pids limit is raised by 2 for S0 and the zygote. Once the zygote is lost (OOM, a
    missed boot bound: a kernel can starve the boot of CPU or memory; the host kills it here)
    its slot must not become the kernel's: before the fix, a new zygote was made only after
    the next kernel had started the slow way (which could fill the slot first, so that S0's
    fork failed), and none after two failed boots, so every kernel of the session got one
    task more than it asked for."""

    def setUp(self):
        require_sandbox(self)

    def test_given_up_zygote_keeps_its_slot(self):
        with McpClient("--max-processes", LIMIT, "--no-zygote") as c:
            c.execute("1")
            without = tasks(c)
        with McpClient("--max-processes", LIMIT) as c:
            c.execute("1")
            # Two zygotes lost before READY: the session gives up on them.
            notes = []
            for _ in range(2):
                # The held zygote boots once its kernel answered; it is killed while it boots
                # (or at the latest once booted: the first one may count as booted).
                self.assertTrue(wait_for(lambda: zygote_pids(c), 30), "no zygote")
                for z in zygote_pids(c):
                    os.kill(z, signal.SIGKILL)
                r = c.call("reset")
                self.assertFalse(r["isError"], text_of(r))
                self.assertEqual(start_of(r), "exec", text_of(r))
                notes.append(text_of(r))
            if "twice before it was ready" not in notes[-1]:
                # The first one was READY when killed: lose one more before READY.
                self.assertTrue(wait_for(lambda: zygote_pids(c), 30), "no zygote")
                for z in zygote_pids(c):
                    os.kill(z, signal.SIGKILL)
                r = c.call("reset")
                self.assertFalse(r["isError"], text_of(r))
                notes.append(text_of(r))
            self.assertIn("twice before it was ready", notes[-1], notes)
            # A later kernel of the session (started the slow way) gets what it asked for.
            r = c.call("reset")
            self.assertEqual(start_of(r), "exec", text_of(r))
            with_given_up = tasks(c)
            procs = session_processes(c)
        self.assertEqual(with_given_up, without,
                         "a kernel of a session whose zygote was given up holds more of the pids limit")
        # What holds the slot goes with the session.
        self.assertTrue(wait_for(lambda: not left(procs), 30), "the session left processes: %s" % left(procs))


if __name__ == "__main__":
    unittest.main()
