"""ipyboxd as root, refusing to start (tests/lib/system_fixture.py): what the service cannot
work with is named at start, before any user is served: a uid pool that meets a user's
delegated subordinate ids, a /proc covered in part, defaults above the host's memory, a build
users cannot reach."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX  # noqa: E402
import system_fixture as sf  # noqa: E402
from system_fixture import IPYBOXD, USERS  # noqa: E402


class SubordinateIdChecks(sf.UsersCase):
    """With the test's users (useradd gives each a range in /etc/subuid)."""

    def test_a_pool_that_meets_delegated_subordinate_ids_is_refused(self):
        lines = []
        if os.path.exists("/etc/subuid"):
            with open("/etc/subuid") as f:
                lines = f.read().splitlines()
        mine = [(n + 1, ln) for n, ln in enumerate(lines) if ln.startswith(USERS[0] + ":")]
        if not mine:
            self.skipTest("useradd gave %s no /etc/subuid range" % USERS[0])
        line, text = mine[0]
        start = int(text.split(":")[1])
        with tempfile.NamedTemporaryFile("w", suffix=".conf") as conf:
            # A group that does not exist: a service started by mistake would serve no one.
            conf.write("users = group no-such-group-ipbt\nuid_pool_start = %d\nuid_pool_size = 1\n"
                       "uid_min = 1000\nuid_max = %d\n" % (start, min(start - 1, 59999)))
            conf.flush()
            r = subprocess.run([IPYBOXD, "--config", conf.name], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("meets the range on line %d of /etc/subuid" % line, r.stderr)


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("unshare"), "needs root and unshare")
class ServiceStartChecks(unittest.TestCase):
    """What the service cannot work with is named at start, before any user is served."""

    def start(self, conf, prelude="", binary=IPYBOXD):
        with tempfile.TemporaryDirectory(prefix="ipybox-start-") as tmp:
            path = os.path.join(tmp, "ipyboxd.conf")
            with open(path, "w") as f:
                f.write(conf)
            # A private mount namespace: the service's /proc may be changed there only. Other
            # proc mounts (a chroot's) are taken away, so the service's own is the one judged.
            script = ("for m in $(awk '$9 == \"proc\" && $5 != \"/proc\" {print $5}' /proc/self/mountinfo); do "
                      "umount -l \"$m\"; done; %s exec \"$0\" --config \"$1\"" % prelude)
            # Its own process group: a service that did start (the check missed) is ended with
            # everything it started, not left serving.
            p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script, binary, path],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
            try:
                out, err = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                out, err = p.communicate()
                self.fail("the service started (it was stopped after 60 s): " + err)
            return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def test_a_proc_covered_in_part_is_named(self):
        # A file of /proc covered by a bind (as a unit's BindPaths= or InaccessiblePaths= there
        # would): sandboxes could not mount their own /proc; the service says so, not starting.
        r = self.start("users = group root\n", "mount --bind /dev/null /proc/kmsg;")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("cannot mount a /proc for a sandbox's pid namespace", r.stderr)
        self.assertIn("InaccessiblePaths=", r.stderr)

    def test_defaults_above_the_hosts_are_refused(self):
        with open("/proc/meminfo") as f:
            total = int(f.readline().split()[1]) << 10
        big = (total >> 20) + 1024
        r = self.start("memory_max = %dM\nmemory_max_bound = %dM\n" % (big, big))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("memory_max = %d MiB is more than this host's memory" % big, r.stderr)

    def test_a_build_users_cannot_reach_is_named(self):
        # Users' frontends run the service's own binary as them: from a checkout under a
        # directory closed to others (/root is 0700) none could start.
        with tempfile.TemporaryDirectory(prefix="ipybox-closed-") as tmp:
            # The program itself (IPYBOXD may be a wrapper), and its shim beside it.
            real = os.path.realpath(IPYBOX)
            bindir = os.path.join(tmp, "bin")
            os.mkdir(bindir)
            shutil.copy2(real, os.path.join(bindir, "ipyboxd"))
            shutil.copytree(os.path.join(os.path.dirname(os.path.dirname(real)), "libexec", "ipybox"),
                            os.path.join(tmp, "libexec", "ipybox"))
            os.chmod(tmp, 0o700)
            r = self.start("users = group root\n", binary=os.path.join(bindir, "ipyboxd"))
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("users cannot run %s/ipyboxd, which their frontends run as them: %s is mode 0700"
                          % (bindir, tmp), r.stderr)


if __name__ == "__main__":
    unittest.main()
