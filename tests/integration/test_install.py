"""make install: binaries, the systemd unit (checked with systemd-analyze verify), the default
configuration (never overwritten) and the man pages."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("BUILD", "build")


class Install(unittest.TestCase):
    def test_install_places_everything_and_the_unit_verifies(self):
        with tempfile.TemporaryDirectory(prefix="ipybox-install-") as tmp:
            prefix = os.path.join(tmp, "usr")
            etc = os.path.join(tmp, "etc")
            os.makedirs(os.path.join(etc, "ipybox"))
            with open(os.path.join(etc, "ipybox", "ipyboxd.conf"), "w") as f:
                f.write("users = group admins-choice\n")
            r = subprocess.run(["make", "-s", "install", "BUILD=" + BUILD, "PREFIX=" + prefix, "SYSCONFDIR=" + etc],
                               cwd=ROOT, capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stderr)
            for rel in ("bin/ipybox", "bin/ipyboxd", "libexec/ipybox/ipybox-shim", "lib/systemd/system/ipyboxd.service",
                        "share/man/man1/ipybox.1", "share/man/man8/ipyboxd.8"):
                self.assertTrue(os.path.exists(os.path.join(prefix, rel)), rel)
            self.assertEqual(os.stat(os.path.join(prefix, "bin/ipybox")).st_ino,
                             os.stat(os.path.join(prefix, "bin/ipyboxd")).st_ino)
            with open(os.path.join(etc, "ipybox", "ipyboxd.conf")) as f:
                self.assertEqual(f.read(), "users = group admins-choice\n")
            unit = os.path.join(prefix, "lib/systemd/system/ipyboxd.service")
            with open(unit) as f:
                text = f.read()
            self.assertIn("ExecStart=%s/bin/ipyboxd --config %s/ipybox/ipyboxd.conf" % (prefix, etc), text)
            for line in ("Type=notify", "Delegate=yes", "KillMode=mixed"):
                self.assertIn(line, text)
            # The installed configuration parses (the service refuses a bad one at start).
            shutil.rmtree(os.path.join(etc, "ipybox"))
            r = subprocess.run(["make", "-s", "install", "BUILD=" + BUILD, "PREFIX=" + prefix, "SYSCONFDIR=" + etc],
                               cwd=ROOT, capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.exists(os.path.join(etc, "ipybox", "ipyboxd.conf")))
            if shutil.which("systemd-analyze"):
                r = subprocess.run(["systemd-analyze", "verify", "--man=no", unit], capture_output=True, text=True,
                                   timeout=120)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertEqual(r.stderr.strip(), "")
            else:
                print("systemd-analyze not installed: the unit was not verified", file=sys.stderr)
            r = subprocess.run(["man", "-l", os.path.join(prefix, "share/man/man8/ipyboxd.8")],
                               capture_output=True, text=True, env=dict(os.environ, MANPAGER="cat", PAGER="cat"))
            if r.returncode == 0:
                self.assertIn("/run/ipybox/<user>/ipybox.sock", r.stdout.replace("\u2010", "-"))


if __name__ == "__main__":
    unittest.main()
