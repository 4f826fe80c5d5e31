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
from ipybox_test import McpClient, descendants, require_sandbox, text_of, wait_for  # noqa: E402
from test_zygote import comm, ppid_of, start_of, zygote_pids  # noqa: E402
from test_zygote_attacks import COUNT_TASKS, left, session_processes  # noqa: E402

LIMIT = "24"


def tasks(c):
    """How many tasks the kernel's tree holds at most (COUNT_TASKS)."""
    out, _ = c.execute(COUNT_TASKS, timeout=120)
    if "TASKS" not in out:
        raise AssertionError("no count: %s" % out)
    return int(out.split("TASKS", 1)[1].split()[0])


def held_zpres(s0, zygote):
    """S0's held Zpres: its ipybox-shim children with no child (S1 has the kernels)."""
    return [p for p in descendants(s0) if p != zygote and ppid_of(p) == s0
            and comm(p) == "ipybox-shim" and not descendants(p)]

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

    def test_zygote_lost_while_a_kernel_runs_keeps_its_slot(self):
        # The zygote ends (the host kills it here; OOM could) while a kernel runs: before the
        # fix its slot stayed free until the next START, and the running kernel could fork into
        # it. Now S1 has S0 hold a Zpre at once; the next reset still takes the slow way.
        with McpClient("--max-processes", LIMIT, "--no-zygote") as c:
            c.execute("1")
            without = tasks(c)
        with McpClient("--max-processes", LIMIT) as c:
            c.execute("1")
            zs = zygote_pids(c)
            self.assertEqual(len(zs), 1, "no zygote")
            s0 = ppid_of(zs[0])
            before = held_zpres(s0, zs[0])
            os.kill(zs[0], signal.SIGKILL)
            # What the fix holds the slot with (on the old code nothing comes: the count fails).
            wait_for(lambda: len(held_zpres(s0, zs[0])) > len(before), 10)
            self.assertEqual(tasks(c), without,
                             "the running kernel got the lost zygote's place in the pids limit")
            r = c.call("reset")
            self.assertFalse(r["isError"], text_of(r))
            self.assertEqual(start_of(r), "exec", text_of(r))
            self.assertIn("The zygote ended", text_of(r))
            # The held one boots once that kernel answered; the reset after forks from it.
            self.assertTrue(wait_for(lambda: zygote_pids(c), 30), "no new zygote")
            r = c.call("reset")
            self.assertEqual(start_of(r), "zygote", text_of(r))
            self.assertEqual(tasks(c), without)


if __name__ == "__main__":
    unittest.main()
