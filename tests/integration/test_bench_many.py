"""The benchmarks' own machinery (issue 21, package B): bench/many.py's concurrent sessions on
a private ipyboxd --user, and bench/bench.py's warm-pool side. Outcomes only (every session
answered, its memory counted with its kernel, nothing left behind); no timing is asserted."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.append(os.path.join(os.path.dirname(__file__), "..", "..", "bench"))  # last: nothing shadowed
from daemon_fixture import Daemon  # noqa: E402
from ipybox_test import descendants, is_private_monitor, wait_for  # noqa: E402

import bench  # noqa: E402
import many  # noqa: E402


def alive(pid):
    """Running, not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


class ManySessions(unittest.TestCase):
    def setUp(self):
        self.d = Daemon("--max-sessions", "8")
        self.addCleanup(self.d.close)

    def below(self):
        """The running processes below the daemon but its private monitor (as root)."""
        return [p for p in descendants(self.d.proc.pid) if alive(p) and not is_private_monitor(p)]

    def test_sessions_answer_and_close(self):
        seen = []

        def measure(label):
            seen.append((label, len(self.below())))

        res = many.run(self.d.sock, 3, 2, measure, idle_before=0.5, settle=0.5)
        self.assertEqual([label for label, _ in seen], ["base", "idle"])
        self.assertEqual(seen[0][1], 0, "processes below the daemon before any session")
        self.assertGreater(seen[1][1], 0, "no session's processes when idle")
        self.assertEqual(res["answered"], 3)
        self.assertEqual(len(res["create"]), 3)
        self.assertEqual(len(res["answer"]), 3)
        self.assertLessEqual(max(res["answer"]), res["answer_total"] + 1e-6)
        idle = res["phases"][0][1]
        self.assertGreater(idle["true_n"], 0)
        self.assertGreater(idle["probe_n"], 0)
        self.assertEqual(sum(p["probe_wrong"] for _, p in res["phases"]), 0)
        # The connections are closed: every session (private to its connection) ends, the
        # probe's too, and the sampler process is gone.
        self.assertTrue(wait_for(lambda: not self.below(), 30), "sessions left: %s" % self.below())
        self.assertEqual([p for p in descendants(os.getpid()) if p != self.d.proc.pid
                          and p not in descendants(self.d.proc.pid) and alive(p)], [])
        rows = many.rows(res, {"base": (1024, 1024), "idle": (4096, 8192), "nproc": 9, "what": "x"})
        self.assertIn("3 of 3 answered 2", rows[1][2])

    def test_a_failed_create_is_reported(self):
        # More sessions than --max-sessions 8 allows: the run says so and still closes all.
        with self.assertRaises(many.ManyError) as cm:
            many.run(self.d.sock, 10, 2, lambda label: None, idle_before=0.2, settle=0.2)
        self.assertIn("createSession failed", str(cm.exception))
        self.assertTrue(wait_for(lambda: not self.below(), 30), "sessions left: %s" % self.below())


class WarmSide(unittest.TestCase):
    def test_memory_holds_the_kernel_and_close_leaves_nothing(self):
        w = bench.WarmSide()
        try:
            w.open()
            w.quiesce()
            w.start()
            w.rt()
            w.quiesce()  # the refill is ready: the pool holds the session and a spare
            mine = [w.worker] + descendants(w.worker)
            self.assertNotIn(w.spare, mine)
            # A kernel is tens of MiB; a worker alone is a few.
            self.assertGreater(w.mem(), 20)
            self.assertIn(w.reset(), (None, "zygote", "exec"))
            w.stop()
            self.assertFalse(alive(w.worker))
        finally:
            daemon = w.proc.pid
            w.close()
        self.assertFalse(alive(daemon))
        self.assertFalse(os.path.exists(w.dir))


if __name__ == "__main__":
    unittest.main()
