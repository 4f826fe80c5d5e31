"""A killed private monitor (`ipyboxd --private-monitor`, which builds root's sandboxes) is
replaced: the next call of the same session runs in a sandbox of a new monitor, started as the
first was; root's daemon replaces its own monitor when a new session needs it. Nothing of the
dead monitor stays: its sandbox, its zombie, the supervisor's or the daemon's fds, and the
empty sandbox cgroups a killed monitor leaves (the next one removes those of slots no monitor
holds)."""
import fcntl
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlib  # noqa: E402
from faultlib import SLOT_SIZE, SLOTS_DIR, Baseline, FaultCase, fd_table, process_tree, wait_for  # noqa: E402

# The pool's size when /etc/ipybox/ipyboxd.conf does not set it (monitor/sysconf.c).
DEFAULT_POOL_SIZE = 256


def slot_of(cgroup):
    """The pool slot of a sandbox cgroup (.../sb-<slot>)."""
    return int(os.path.basename(cgroup)[3:])


class TestEmbedded(FaultCase):
    def started(self):
        s = self.session()
        text, r = s.execute("x = 41\nprint('primed')")
        self.assertIn("primed", text)
        return s, Baseline(s)

    def kill_monitor(self, s):
        """SIGKILLs the session's monitor; returns the processes of the sandbox it ran."""
        roles = s.roles()
        sandbox = [p for r in ("shim", "pid1", "kernel") for p in roles.get(r, [])]
        self.inject(roles["monitor"][0], signal.SIGKILL)
        self.assertTrue(wait_for(lambda: not [p for p in sandbox if p.alive()], 20),
                        "the dead monitor's sandbox still runs: %s" % [p for p in sandbox if p.alive()])
        return roles["monitor"][0], sandbox

    def test_replaced_each_time(self):
        s, base = self.started()
        for round_ in range(3):
            old, sandbox = self.kill_monitor(s)
            self.assert_next_call_works(s, may_report_death=True)
            monitors = s.roles().get("monitor", [])
            self.assertEqual(len(monitors), 1, "round %d: monitors now: %s" % (round_, monitors))
            self.assertNotEqual((monitors[0].pid, monitors[0].start), (old.pid, old.start))
            self.assertFalse(old.alive() or old.zombie(), "round %d: the dead monitor was not reaped" % round_)
            # Only the new sandbox runs in the old one's uid range (it may have the same slot).
            # (Its zombies are orphans, reaped by init at its own pace.)
            ours = {(p.pid, p.start) for p in sandbox}
            left = []

            def gone():
                left[:] = [p for p in faultlib.slot_processes(base.slot) if (p.pid, p.start) in ours]
                return not left
            self.assertTrue(wait_for(gone, 20), "processes of the dead monitor's sandbox in its uid range: %s" % left)
            self.assert_settled(s, base)
        self.close_and_assert_clean(s, base)

    def test_leftover_cgroups_removed(self):
        if os.path.exists("/etc/ipybox/ipyboxd.conf"):
            self.skipTest("the pool is configured: its size is not known here")
        s, base = self.started()
        if not base.cgroups:
            self.skipTest("the monitor uses no cgroups here")
        k = slot_of(base.cgroups[0])
        start = base.slot - k * SLOT_SIZE
        j = DEFAULT_POOL_SIZE - 1 if k != DEFAULT_POOL_SIZE - 1 else DEFAULT_POOL_SIZE - 2
        # Slot j as a killed monitor leaves it: its empty cgroups, its lock free. Made while
        # holding its lock, so that no monitor uses it meanwhile.
        lock = os.open(os.path.join(SLOTS_DIR, str(start + j * SLOT_SIZE)), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self.skipTest("slot %d is in use by another monitor" % j)
            orphans = [os.path.join(os.path.dirname(cg), "sb-%d" % j) for cg in base.cgroups]
            for o in orphans:
                if os.path.isdir(o):
                    self.skipTest("slot %d has a cgroup already: %s" % (j, o))
            for o in orphans:
                os.mkdir(o)
                self.addCleanup(lambda o=o: os.path.isdir(o) and os.rmdir(o))
        finally:
            os.close(lock)
        self.kill_monitor(s)
        self.assert_next_call_works(s, may_report_death=True)
        self.assertTrue(wait_for(lambda: not [o for o in orphans if os.path.isdir(o)], 10),
                        "the new monitor left the empty cgroups of a free slot: %s" % orphans)
        self.close_and_assert_clean(s, base)


class TestDaemon(FaultCase):
    def daemon_monitors(self, d):
        return [p for p in process_tree(d.proc.pid) if p.role == "monitor" and p.ppid == d.proc.pid]

    def test_daemon_replaces_its_monitor(self):
        d = self.daemon()
        before = len(fd_table(d.proc.pid))
        s = self.session(daemon=d)
        text, r = s.execute("print('primed')")
        self.assertIn("primed", text)
        old = self.daemon_monitors(d)
        self.assertEqual(len(old), 1, process_tree(d.proc.pid))
        self.inject(old[0], signal.SIGKILL)
        # A new session gets a sandbox (the daemon starts another monitor for it) ...
        s2 = self.session(daemon=d, workspace=os.path.join(self.tmp, "ws2"))
        text, r = s2.execute("print(1+1)")
        self.assertFalse(r.get("isError"), text)
        self.assertIn("2", text)
        now = self.daemon_monitors(d)
        self.assertEqual(len(now), 1, process_tree(d.proc.pid))
        self.assertNotEqual((now[0].pid, now[0].start), (old[0].pid, old[0].start))
        self.assertFalse(old[0].alive() or old[0].zombie(), "the dead monitor was not reaped")
        # ... and the old session's next call works.
        self.assert_next_call_works(s, may_report_death=True)
        s.close()
        s2.close()
        self.assertTrue(wait_for(lambda: len(fd_table(d.proc.pid)) <= before, 20),
                        "the daemon holds %d fds, %d before any session" % (len(fd_table(d.proc.pid)), before))
        self.assertIn("started another", d.log_text())


if __name__ == "__main__":
    unittest.main()
