"""ipyboxd as root, stopped and restarted (tests/lib/system_fixture.py): SIGKILL of the service
leaves no sandbox process of it, and the next start removes the cgroups it left; SIGTERM (at
the end of every class with a service: system_fixture.SystemServiceCase) leaves nothing."""
import os
import pwd
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import wait_for  # noqa: E402
import system_fixture as sf  # noqa: E402
from system_fixture import USERS, pool_pids, proc_uids  # noqa: E402


class SystemServiceRestart(sf.SystemServiceCase):
    def test_zz_sigkill_leaves_no_sandbox_and_restart_cleans_up(self):
        a = self.client(USERS[0])
        a.execute("print(1)")
        self.assertTrue(pool_pids())
        self.svc.proc.kill()
        self.svc.proc.wait()
        self.assertTrue(wait_for(lambda: not pool_pids(), 20), "left: %s" % pool_pids())
        users = {pwd.getpwnam(u).pw_uid for u in USERS}
        self.assertTrue(wait_for(lambda: not [p for p, u in proc_uids() if u in users], 20))
        left = {d: os.stat(d).st_ino for d in self.svc.sandbox_cgroups()}
        self.assertTrue(left)
        self.svc.start()
        # Every cgroup the killed service left is gone (the new service's warm sandboxes may
        # have made cgroups of the same names since: new ones).
        again = [d for d, ino in left.items() if os.path.isdir(d) and os.stat(d).st_ino == ino]
        self.assertFalse(again)
        self.assertIn("removed sandbox cgroups an earlier run left", self.svc.log_text()[self.svc.log_from:])
        c = self.client(USERS[1])
        self.assertEqual(c.execute("print('back')")[0], "back\n")


if __name__ == "__main__":
    unittest.main()
