"""An attacker's review of issue 21's third part (package R3): a zygote lost while a kernel runs
is replaced at once by a held Zpre (commit 79eb5ea). Attacks with the real binaries; the loss is
a fault from the host here (SIGKILL, as the OOM killer or a missed bound would end it); each test
here failed on the code before its fix. What stopped the attacks that failed is in the report of
the review."""
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
sys.path.insert(0, os.path.dirname(__file__))
from ipybox_test import McpClient, descendants, require_sandbox, text_of, wait_for  # noqa: E402
from test_zygote import comm, ppid_of, start_of, zygote_pids  # noqa: E402
from test_zygote_attacks import left, session_processes  # noqa: E402
from test_zygote_attacks2 import LIMIT, tasks  # noqa: E402

# A startup file the kernel leaves for its successor: the next kernel runs it in initialize(),
# before it answers the supervisor, so a loss of the zygote can fall inside that handshake.
SLOW_START = r'''
import os
d = get_ipython().profile_dir.startup_dir
os.makedirs(d, exist_ok=True)
with open(os.path.join(d, "00-slow.py"), "w") as f:
    f.write("import time\ntime.sleep(4)\n")
print("SLOW", d)
'''
FAST_START = r'''
import os
os.remove(os.path.join(get_ipython().profile_dir.startup_dir, "00-slow.py"))
print("FAST")
'''


def held_zpres(s0, zygote):
    """S0's held Zpres: its ipybox-shim children with no child (S1 has the kernels)."""
    return [p for p in descendants(s0) if p != zygote and ppid_of(p) == s0
            and comm(p) == "ipybox-shim" and not descendants(p)]


class LossWhileAKernelRuns(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)

    def test_held_zygote_lost_too_keeps_the_slot(self):
        # The READY zygote is lost while a kernel runs (the host kills it here; OOM could):
        # before 79eb5ea its slot stayed free until the next START and the running kernel could
        # fork into it (23 tasks for --max-processes 24, against 22). Then the Zpre held for the
        # slot is lost too (a booting one can be starved or OOM-killed as well): before the
        # review's fix only a READY zygote's loss was replaced, with the same result.
        with McpClient("--max-processes", LIMIT, "--no-zygote") as c:
            c.execute("1")
            without = tasks(c)
        with McpClient("--max-processes", LIMIT) as c:
            c.execute("1")
            zs = zygote_pids(c)
            self.assertEqual(len(zs), 1, "no zygote")
            s0 = ppid_of(zs[0])
            os.kill(zs[0], signal.SIGKILL)
            self.assertTrue(wait_for(lambda: held_zpres(s0, zs[0]), 10), "no Zpre held after the loss")
            self.assertEqual(tasks(c), without,
                             "the running kernel got the lost zygote's place in the pids limit")
            first = held_zpres(s0, zs[0])[0]
            os.kill(first, signal.SIGKILL)
            # What the fix holds the slot with (on the old code nothing comes: the count fails).
            wait_for(lambda: [p for p in held_zpres(s0, zs[0]) if p != first], 10)
            self.assertEqual(tasks(c), without,
                             "the running kernel got the lost Zpre's place in the pids limit")
            r = c.call("reset")
            self.assertFalse(r["isError"], text_of(r))
            self.assertEqual(start_of(r), "exec", text_of(r))
            self.assertIn("The zygote ended", text_of(r))
            self.assertTrue(wait_for(lambda: zygote_pids(c), 30), "no new zygote")
            r = c.call("reset")
            self.assertEqual(start_of(r), "zygote", text_of(r))
            self.assertNotIn("zygote ended", text_of(r))
            self.assertEqual(tasks(c), without)
            procs = session_processes(c)
        self.assertTrue(wait_for(lambda: not left(procs), 30), "the session left processes: %s" % left(procs))

    def test_loss_during_a_forked_kernels_handshake_is_told(self):
        # The zygote is lost after it forked the reset's kernel and before that kernel answered.
        # Before the fix that kernel's answer let the Zpre held for the slot boot: the next reset
        # forked from it and no result ever said that the zygote had ended.
        with McpClient() as c:
            out, _ = c.execute(SLOW_START)
            self.assertIn("SLOW", out)
            self.assertTrue(wait_for(lambda: zygote_pids(c), 30), "no zygote")
            zs = zygote_pids(c)
            got = {}
            t = threading.Thread(target=lambda: got.update(r=c.call("reset")))
            t.start()
            # The reset's kernel is forked at once and sleeps 4 s in its startup file.
            time.sleep(1.5)
            os.kill(zs[0], signal.SIGKILL)
            t.join(60)
            r = got["r"]
            self.assertFalse(r["isError"], text_of(r))
            self.assertEqual(start_of(r), "zygote", text_of(r))
            self.assertNotIn("zygote ended", text_of(r))
            out, _ = c.execute(FAST_START)
            self.assertIn("FAST", out)
            r = c.call("reset")
            self.assertFalse(r["isError"], text_of(r))
            self.assertIn("The zygote ended (it was killed by signal 9", text_of(r),
                          "the loss was never told")
            self.assertEqual(start_of(r), "exec", text_of(r))
            # The held one boots once that kernel answered; the reset after forks from it.
            self.assertTrue(wait_for(lambda: zygote_pids(c), 30), "no new zygote")
            r = c.call("reset")
            self.assertEqual(start_of(r), "zygote", text_of(r))
            self.assertNotIn("zygote ended", text_of(r))
            self.assertEqual(c.execute("print(6 * 7)")[0].strip(), "42")
            procs = session_processes(c)
        self.assertTrue(wait_for(lambda: not left(procs), 30), "the session left processes: %s" % left(procs))


if __name__ == "__main__":
    unittest.main()
