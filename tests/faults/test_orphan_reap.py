"""A sandbox's PID 1 outlives its outer shim by a moment when the shim is killed: it must come
back to the private monitor, which reaps it at once, and not to the host's PID 1. A PID 1 that
reaps late (this machine's reaps about once a second) kept the zombie, and with it the sandbox's
uid slot, taken: the monitor's stop waited for it and `ipybox mcp` took 1 to 2 s to exit at the
end of its input (the TypeScript SDK kills a server that takes over 2 s)."""
import os
import signal
import time
import unittest

import faultlib
from faultlib import FaultCase


class OrphanedPid1(FaultCase):
    def test_pid1_of_a_killed_shim_goes_to_the_monitor(self):
        if os.geteuid() != 0:
            self.skipTest("only root's sandboxes go through a private monitor")
        s = self.session()
        text, r = s.execute("print(6 * 7)")
        self.assertEqual(text.strip(), "42")
        # With a zygote, the shim's child is S0, PID 1 of the namespace above the kernels' (and
        # its PID 1's parent): that is the one orphaned.
        top = "s0" if s.roles().get("s0") else "pid1"
        mon, shim, pid1 = s.proc("monitor"), s.proc("shim"), s.proc(top)
        self.assertEqual(pid1.ppid, shim.pid)
        os.kill(shim.pid, signal.SIGKILL)
        parents = []
        deadline = time.time() + 30
        while time.time() < deadline:
            st = faultlib._stat(pid1.pid)
            if st is None or st[2] != pid1.start:
                break
            if not parents or parents[-1] != st[0]:
                parents.append(st[0])
            time.sleep(0.001)
        else:
            self.fail("PID 1 of the sandbox (%d) was not reaped in 30 s; its parents: %s" % (pid1.pid, parents))
        self.assertNotIn(1, parents, "the orphaned PID 1 went to the host's PID 1 (parents seen: %s, monitor %d)"
                         % (parents, mon.pid))
        self.assertTrue(set(parents) <= {shim.pid, mon.pid}, "parents seen: %s" % parents)
        # The session goes on with a new sandbox.
        text, r = s.execute("print('again')")
        self.assertIn("again", text)


if __name__ == "__main__":
    unittest.main()
