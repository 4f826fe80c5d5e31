"""PID 1 of a sandbox (S1 with a zygote, or the sandbox's only PID 1 without) never waits
without a bound for processes sandbox code made (architecture.md, "Zygote kernels"). After
SIGKILL to every process (a reset's KILL_ALL, or a failed fork from the zygote), a process whose
end is not reported in time (here: its exit status held by a host tracer that does not collect
it, as a process stuck in its exit would be) is left to PID 1's SIGCHLD loop: the reset
completes, and the process is reaped once its end is reported. Before, PID 1 blocked in
waitpid(-1) and the reset failed after the supervisor's 10 s ("did not stop its processes")."""
import ctypes
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from ipybox_test import (McpClient, descendants, require_sandbox, text_of, wait_for,  # noqa: E402
                         proc_comm as comm)

PTRACE_SEIZE = 0x4206
WALL = 0x40000000  # __WALL: wait for a traced process that is not our child



def state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


class KillAllBounded(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        if os.geteuid() != 0:
            self.skipTest("needs root to trace a sandbox process from the host")

    def held_exit(self, *options):
        libc = ctypes.CDLL(None, use_errno=True)
        with McpClient(*options) as c:
            text, r = c.execute("import subprocess\nsubprocess.Popen(['sleep', '1000'])\nprint('bg')")
            self.assertIn("bg", text)
            self.assertTrue(wait_for(lambda: [p for p in descendants(c.proc.pid) if comm(p) == "sleep"], 30))
            victim = [p for p in descendants(c.proc.pid) if comm(p) == "sleep"][0]
            if libc.ptrace(PTRACE_SEIZE, victim, None, None) != 0:
                self.skipTest("cannot trace a sandbox process: %s" % os.strerror(ctypes.get_errno()))
            collected = False
            try:
                r = c.call("reset", timeout=120)
                self.assertFalse(r["isError"], text_of(r))
                # It got SIGKILL and ended; only its report to PID 1 waits for us.
                self.assertEqual(state(victim), "Z")
                self.assertEqual(c.execute("print(1 + 1)")[0].strip(), "2")
                os.waitpid(victim, WALL)
                collected = True
                # Now PID 1 is told, and reaps it.
                self.assertTrue(wait_for(lambda: state(victim) is None, 30), "PID 1 did not reap it")
                text, r = c.execute("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit() "
                                    "and int(p) != os.getpid()))")
                self.assertEqual(text.strip(), "[1]", text)
                r = c.call("reset")
                self.assertFalse(r["isError"], text_of(r))
            finally:
                if not collected:
                    try:
                        os.kill(victim, signal.SIGKILL)  # nothing if it is a zombie already
                        os.waitpid(victim, WALL)
                    except (ChildProcessError, ProcessLookupError):
                        pass

    def test_reset_with_an_exit_held_with_zygote(self):
        self.held_exit()

    def test_reset_with_an_exit_held_without_zygote(self):
        self.held_exit("--no-zygote")


if __name__ == "__main__":
    unittest.main()
