"""Deaths are told: a kernel or sandbox that died between calls is reported by the next cell's
result (the note first, `_meta["ipybox/execution"]["kernelLost"]`), once, and not after a reset."""
import os
import signal
import time
import unittest

from faultlib import FaultCase, wait_for


def meta(r):
    return r["_meta"]["ipybox/execution"]


class DeathsBetweenCalls(FaultCase):
    def killed_between_calls(self, s, role):
        text, r = s.execute("x = 42\nprint('set')")
        self.assertFalse(r["isError"], text)
        victim = s.proc(role)
        self.inject(victim, signal.SIGKILL)
        # Between calls: the supervisor notices on its own (the shim tells it) well before this.
        time.sleep(1)
        text, r = s.execute("print(x)")
        m = meta(r)
        self.assertTrue(m.get("kernelLost"), "the death was not told: %s" % text)
        self.assertEqual((m["status"], m.get("ename")), ("error", "NameError"), text)
        self.assertIn("fresh kernel", m["note"])
        self.assertIn(m["note"], text)
        # Told once: the next cell is plain.
        text, r = s.execute("x = 1\nprint(x)")
        self.assertNotIn("kernelLost", meta(r))
        self.assertNotIn("note", meta(r))
        self.assertEqual(text.strip(), "1")
        return m["note"]

    def test_kernel_killed(self):
        s = self.session()
        note = self.killed_between_calls(s, "kernel")
        self.assertIn("killed by signal 9", note)

    def test_sandbox_pid1_killed(self):
        s = self.session()
        note = self.killed_between_calls(s, "pid1")
        self.assertIn("sandbox ended", note)

    def test_through_the_daemon(self):
        d = self.daemon()
        s = self.session(daemon=d)
        note = self.killed_between_calls(s, "kernel")
        self.assertIn("killed by signal 9", note)

    def test_sandbox_killed_just_before_a_call(self):
        # The call may race the supervisor's noticing: either way the death is told once, by
        # that call, and the call after it works.
        s = self.session()
        for _ in range(3):
            s.execute("x = 42")
            victim = s.proc("pid1")
            os.kill(victim.pid, signal.SIGKILL)
            text, r = s.execute("print(x)")
            told = "fresh kernel" in text and (r.get("isError") or meta(r).get("kernelLost"))
            if not told:
                # The kernel answered before it died: PID 1's death kills the namespace's
                # processes as its exit runs, after kill() returned (seen in CI, and 1 in 30
                # under load here, before and after cells got faster). Then the next call,
                # once the sandbox is gone, tells it.
                self.assertEqual(text.strip(), "42", text)
                self.assertTrue(wait_for(lambda: not victim.alive(), 20), "%r outlived SIGKILL" % victim)
                text, r = s.execute("print(x)")
                told = "fresh kernel" in text and (r.get("isError") or meta(r).get("kernelLost"))
            self.assertTrue(told, "the death was not told: %s" % text)
            text, r = s.execute("print('next')")
            self.assertFalse(r.get("isError"), text)
            self.assertEqual(text.strip(), "next")

    def test_not_told_after_reset(self):
        s = self.session()
        s.execute("x = 42")
        self.inject(s.proc("kernel"), signal.SIGKILL)
        r = s.call("reset")
        self.assertFalse(r.get("isError"), r)
        text, r = s.execute("print('fresh')")
        self.assertNotIn("kernelLost", meta(r))
        self.assertEqual(text.strip(), "fresh")

    def test_death_in_a_cell_is_told_by_that_cell_only(self):
        s = self.session()
        text, r = s.execute("import os; os.kill(os.getpid(), 9)")
        self.assertEqual(meta(r)["status"], "kernel_died", text)
        text, r = s.execute("print('next')")
        self.assertNotIn("kernelLost", meta(r))
        self.assertEqual(text.strip(), "next")


if __name__ == "__main__":
    unittest.main()
