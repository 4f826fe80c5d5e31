"""ipyboxd as root, its sessions and their limits (tests/lib/system_fixture.py): memory,
processes, CPU and /tmp contained and reported while another user's session stays responsive;
a warm sandbox serves the next session; each user's processes in a bounded cgroup of their own;
options within the administrator's bounds; many concurrent sessions; with standby = true, the
standby and a user's own --no-zygote."""
import os
import pwd
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import resets_until, wait_for  # noqa: E402
import system_fixture as sf  # noqa: E402
from system_fixture import USERS, cmdline, proc_uids, read, text  # noqa: E402


class SystemServiceSessions(sf.SystemServiceCase):
    def test_limits_are_contained_and_reported(self):
        a = self.client(USERS[0])
        b = self.client(USERS[1])
        self.assertEqual(b.execute("print('b is here')")[0], "b is here\n")
        # Memory: 256M with no swap; the kernel is killed, reported, and a fresh one started.
        out, res = a.execute("x = b'x' * (600 << 20)\nprint('survived')")
        self.assertTrue(res["isError"])
        self.assertNotIn("survived", out)
        self.assertIn("ran out of memory (its limit is 256 MiB", text(res))
        self.assertIn("A fresh kernel was started", text(res))
        self.assertEqual(a.execute("print(1 + 1)")[0], "2\n")
        self.assertEqual(b.execute("print('b still here')")[0], "b still here\n")
        # Processes: 64; forks fail, the cell says why, the service and B are unaffected.
        out, res = a.execute(
            "import os, time\nn = 0\nfor i in range(500):\n    try:\n        pid = os.fork()\n"
            "    except OSError as e:\n        print('fork failed', e.errno)\n        break\n"
            "    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n    n += 1\nprint('forked', n)")
        self.assertIn("fork failed 11", out)
        self.assertIn("reached its limit of 64 processes", text(res))
        self.assertEqual(b.execute("print('b again')")[0], "b again\n")
        a.call("reset")
        self.assertEqual(a.execute("print('after reset')")[0], "after reset\n")
        # A full /tmp (32M): ENOSPC inside the sandbox only.
        out, res = a.execute("try:\n    with open('/tmp/fill', 'wb') as f:\n"
                             "        for i in range(100):\n            f.write(b'0' * (1 << 20))\n"
                             "except OSError as e:\n    print('full', e.errno)")
        self.assertIn("full 28", out)
        # CPU: a spinning cell is interrupted at its timeout while B keeps working.
        done = {}
        t = threading.Thread(target=lambda: done.setdefault("r", a.execute("while True: pass", timeout=6)))
        t.start()
        time.sleep(1)
        start = time.time()
        self.assertEqual(b.execute("print(sum(range(1000)))")[0], "499500\n")
        self.assertLess(time.time() - start, 5)
        t.join(60)
        self.assertIn("timed out", text(done["r"][1]))

    def test_a_warm_sandbox_serves_the_next_session(self):
        # warm_sessions = 1: once a user has connected, their frontend keeps one session
        # started ahead, in the pool (none is started for users who do not come).
        a = self.client(USERS[0])
        self.assertEqual(a.execute("import os; print(os.getuid(), 'x' in dir())")[0], "1000 False\n")
        log = self.svc.log_text
        self.assertTrue(wait_for(lambda: "): ready in" in log(), 30), log())
        taken = log().count("started (warm worker")
        b = self.client(USERS[0])
        self.assertEqual(b.execute("print('next')")[0], "next\n")
        self.assertEqual(log().count("started (warm worker"), taken + 1)
        self.assertRegex(log(), r"session #\d+: started \(warm worker \d+, ready\)")

    def test_the_users_processes_run_in_their_own_bounded_cgroup(self):
        # Each user's frontend and workers: in u-<uid> (user_memory_max = 700M, user_pids_max
        # = 300), never in the monitor's own cgroup, and without a way out (root's cgroup).
        ua = pwd.getpwnam(USERS[0])
        a = self.client(USERS[0])
        self.assertEqual(a.execute("print('here')")[0], "here\n")
        # The frontend (ipyboxd --frontend) and the session's worker (ipybox mcp --embedded);
        # not the client's own `ipybox mcp`, which runs where the test started it.
        mine = [p for p, u in proc_uids() if u == ua.pw_uid and {"--frontend", "--embedded"} & set(cmdline(p))]
        self.assertGreaterEqual(len(mine), 2, "no frontend and worker of %s found" % USERS[0])
        for pid in mine:
            try:
                with open("/proc/%d/cgroup" % pid) as f:
                    lines = f.read().splitlines()
            except FileNotFoundError:
                continue
            groups = {}
            for line in lines:
                _, ctrls, path = line.split(":", 2)
                groups[ctrls] = path
            mem = groups.get("memory") or groups.get("")
            pids = groups.get("pids") or groups.get("")
            for path in (mem, pids):
                self.assertTrue(path.endswith("/u-%d" % ua.pw_uid), "%d in %s" % (pid, groups))
            if "memory" in groups:
                base = "/sys/fs/cgroup/memory" + mem
                limit = read(base + "/memory.limit_in_bytes")
                npids = read("/sys/fs/cgroup/pids" + pids + "/pids.max")
            else:
                base = "/sys/fs/cgroup" + mem
                limit = read(base + "/memory.max")
                npids = read(base + "/pids.max")
            self.assertEqual((limit, npids), (str(700 << 20), "300"))
            self.assertEqual(os.stat(base).st_uid, 0)

    def test_limits_within_the_administrators_bounds(self):
        # The bridge's session cannot start: it says why and ends.
        with self.assertRaises(EOFError):
            self.client(USERS[0], "--memory", "2G")
        self.assertIn("--memory 2048 MiB is outside what the administrator allows (16 to 512 MiB)",
                      self.svc.log_text())
        c = self.client(USERS[0], "--memory", "400M", "--max-processes", "100")
        self.assertEqual(c.execute("print('ok')")[0], "ok\n")
        limits = [open(os.path.join(d, f)).read().strip() for d in self.svc.sandbox_cgroups()
                  for f in ("memory.limit_in_bytes", "memory.max") if os.path.exists(os.path.join(d, f))]
        self.assertIn(str(400 << 20), limits)

    def test_many_concurrent_sessions(self):
        # 20 by default; the VM tier asks for fewer under software emulation (IPYBOX_TEST_CONCURRENT).
        n = int(os.environ.get("IPYBOX_TEST_CONCURRENT", "20"))
        results = {}

        def run(i):
            c = self.svc.client(USERS[i % 2])
            try:
                results[i] = c.execute("import time; time.sleep(0.5); print('session %d')" % i)[0]
            finally:
                c.close()
        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        self.assertEqual(results, {i: "session %d\n" % i for i in range(n)})


class SystemServiceStandby(sf.SystemServiceCase):
    """standby = true (with zygote = true): the service's sessions get the standby; a user's own
    --no-zygote, given after the service's --standby, turns it off (it was refused), and
    --no-standby turns off only the standby."""
    conf = sf.CONF + "zygote = true\nstandby = true\n"

    def test_sessions_and_their_own_options(self):
        for user, options, want in ((USERS[0], (), "standby"), (USERS[1], ("--no-zygote",), "exec"),
                                    (USERS[1], ("--no-standby",), "zygote")):
            c = self.client(user, *options)
            self.assertEqual(c.execute("print(1 + 1)")[0], "2\n", options)
            # Reset until the standby is taken (2 s apart: the service's host is busier); the
            # others never take one.
            starts = resets_until(c, want, pause=2)
            self.assertEqual(starts[-1], want, (options, starts))
            self.assertTrue(want == "standby" or set(starts) == {want}, (options, starts))
            self.assertEqual(c.execute("print('x' in dir(), 1 + 1)")[0], "False 2\n")
            c.close()


if __name__ == "__main__":
    unittest.main()
