"""The fault sweep: SIGKILL and SIGSTOP (held STOP_SECONDS, then SIGCONT) of each process of a
session (the supervisor, the private monitor, the outer shim, S0 and the zygote above the
kernels' pid namespace, PID 1 of the sandbox, the kernel, a stdio MCP server) at each stage (idle; in a cell; while a cell streams output with a progress
token; during an upload_file; during the kernel's call to an MCP tool). Each case asserts that
the call in flight ends within a deadline (a result, a clear error, or the end of the
connection when the supervisor itself was killed), that nothing is left (processes, zombies,
mounts, the supervisor's fds, files in the workspace and the state directory, the sandbox's
cgroups and slot lock), and that the next call works: in the same session when the supervisor
lived (its kernel's state kept when nothing died), else in a new session on the same workspace
and state directory. One session per process is shared by its cases while it lives.
Embedded sessions (`ipybox mcp --embedded`) and daemon sessions (a private `ipyboxd --user`)."""
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlib  # noqa: E402
from faultlib import STAGES, Baseline, FaultCase, start_stage  # noqa: E402

def log(line):
    if os.environ.get("FAULTS_VERBOSE"):
        print("  " + line, file=sys.stderr, flush=True)


SIGNALS = (signal.SIGKILL, signal.SIGSTOP)
STATE = ("faults_x", 41)


class Sweep(FaultCase):
    def sweep(self, role, stages=STAGES, signals=SIGNALS, daemon=False):
        self.src = faultlib.make_upload_source(self.tmp)
        self.opts = faultlib.tool_options(self.tmp)
        self.daemon_ = self.daemon() if daemon else None
        self.daemon_fds = None
        s = base = None
        for stage in stages:
            for sig in signals:
                with self.subTest(process=role, stage=stage, signal=sig.name):
                    if s is None:
                        s, base = self.fresh_session()
                    try:
                        s, base = self.one_case(s, base, role, stage, sig)
                    except BaseException:
                        # Whatever state the sessions are in, the next case starts from a new one.
                        self.close_sessions()
                        s = base = None
                        raise
        if s is not None:
            self.close_and_assert_clean(s, base)
        if self.daemon_fds is not None:
            d = faultlib.fd_table(self.daemon_.proc.pid)
            self.assertTrue(faultlib.wait_for(lambda: len(faultlib.fd_table(self.daemon_.proc.pid)) <= self.daemon_fds, 20),
                            "the daemon holds %d fds, %d before any session" % (len(d), self.daemon_fds))

    def fresh_session(self):
        if self.daemon_ is not None and self.daemon_fds is None:
            self.daemon_fds = len(faultlib.fd_table(self.daemon_.proc.pid))
        s = self.session(*self.opts, daemon=self.daemon_)
        self.prime(s)
        return s, Baseline(s)

    def prime(self, s):
        text, r = s.execute("%s = %d\nprint('primed')" % STATE)
        self.assertIn("primed", text)
        text, r = s.execute(faultlib.TOOL_TOUCH)
        self.assertIn("tool ok", text)
        s.proc("kernel")
        s.proc("tool_server")

    def one_case(self, s, base, role, stage, sig):
        t0 = time.time()
        if role == "zygote":
            # The case is a lost zygote that was READY: a reset waits for READY and forks. The
            # first kernel after an earlier case killed it starts the slow way (the new zygote
            # boots once that kernel answered); the next reset forks.
            for _ in range(2):
                r = s.client.call("reset")
                self.assertFalse(r["isError"], r)
                if r["_meta"]["ipybox/kernel"]["start"] == "zygote":
                    break
            else:
                self.fail("no kernel forked from a zygote in two resets")
            self.prime(s)
            base = Baseline(s)
        victim = s.proc(role)
        sup = s.supervisor()
        flight = start_stage(s, stage, self.src)
        self.inject(victim, sig)
        kind, value = flight.finish()
        survived = sup.alive()
        if sig == signal.SIGSTOP:
            self.assert_call_succeeded(kind, value, stage)
        else:
            self.assert_clear_outcome(kind, value, stage, survived)
        self.assert_upload_not_half_written(s, flight)
        if survived:
            if sig == signal.SIGKILL:
                self.assertNotEqual(role, "supervisor", "the supervisor outlived SIGKILL")
            stopped = sig == signal.SIGSTOP
            self.assert_next_call_works(s, STATE if stopped else None, may_report_death=not stopped)
            self.assert_settled(s, base)
            if sig != signal.SIGSTOP:
                self.prime(s)
            log("%s %s %s: %.1f s, %s" % (role, stage, sig.name, time.time() - t0, kind))
            return s, base
        # The session ended with its supervisor: all of it must go, and a new session on the
        # same workspace and state directory must work and see nothing of the old one.
        self.assertEqual(role, "supervisor", "the supervisor died of a fault in the %s" % role)
        s.close()
        self.assert_gone(s, base)
        s2, base2 = self.fresh_session()
        self.assertEqual(self._workspace_now(s2) - base.workspace, set(),
                         "the killed session left files in the workspace")
        self.assertEqual(self._state_now(s2, base) - base.state, set(),
                         "the killed session left files in the state directory")
        if s2.daemon is None:
            self.assertEqual(len(faultlib._listdir(os.path.join(s2.state_dir, "sessions"))), 1,
                             "the killed session's directory is still there after the next start")
        self.assert_upload_not_half_written(s2, flight)
        log("%s %s %s: %.1f s, %s (new session)" % (role, stage, sig.name, time.time() - t0, kind))
        return s2, base2


class TestEmbeddedSweep(Sweep):
    def test_supervisor(self):
        self.sweep("supervisor")

    def test_monitor(self):
        self.sweep("monitor")

    def test_shim(self):
        self.sweep("shim")

    def test_pid1(self):
        self.sweep("pid1")

    def test_kernel(self):
        self.sweep("kernel")

    def test_s0(self):
        self.sweep("s0", stages=("idle", "cell"))

    def test_zygote(self):
        self.sweep("zygote", stages=("idle", "cell"))

    def test_tool_server(self):
        self.sweep("tool_server", stages=("idle", "tool"))


class TestDaemonSweep(Sweep):
    """The same through a daemon: its worker, its monitor and the sandbox, idle and in a cell;
    the daemon's fds come back to what they were before any session."""

    def test_worker(self):
        self.sweep("supervisor", stages=("idle", "cell"), daemon=True)

    def test_monitor(self):
        self.sweep("monitor", stages=("idle", "cell"), daemon=True)

    def test_pid1(self):
        self.sweep("pid1", stages=("idle", "cell"), daemon=True)

    def test_kernel(self):
        self.sweep("kernel", stages=("idle", "cell"), daemon=True)


if __name__ == "__main__":
    unittest.main()
