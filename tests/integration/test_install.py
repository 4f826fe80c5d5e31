"""make install: binaries, the systemd unit (checked with systemd-analyze verify), the default
configuration (never overwritten) and the man pages; SYSCONFDIR derived from PREFIX; make
uninstall removes what install wrote.

An install with another PREFIX rebuilds what has the paths compiled in: those tests build in a
copy of BUILD, so that the build the other tests use is left as it is."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("BUILD", "build")


def private_build(tmp):
    """A copy of BUILD (times kept, so only what depends on the install paths is rebuilt)."""
    copy = os.path.join(tmp, "build")
    shutil.copytree(os.path.join(ROOT, BUILD), copy, symlinks=True)
    return copy


def files_under(top):
    """Every non-directory under top, relative."""
    out = set()
    for d, dirs, files in os.walk(top):
        for f in files:
            out.add(os.path.relpath(os.path.join(d, f), top))
    return out


def make(*args, timeout=600):
    return subprocess.run(["make", "-s"] + list(args), cwd=ROOT, capture_output=True, text=True, timeout=timeout)


INSTALLED = {"bin/ipybox", "bin/ipyboxd", "libexec/ipybox/ipybox-shim", "libexec/ipybox/ipybox-monitor",
             "lib/systemd/system/ipyboxd.service",
             "share/man/man1/ipybox.1", "share/man/man8/ipyboxd.8",
             "share/ipybox/.claude-plugin/marketplace.json",
             "share/ipybox/claude-code-plugin/.claude-plugin/plugin.json",
             "share/ipybox/claude-code-plugin/.mcp.json",
             "share/ipybox/claude-code-plugin/skills/code-actions/SKILL.md"}


class Install(unittest.TestCase):
    def test_install_places_everything_and_the_unit_verifies(self):
        with tempfile.TemporaryDirectory(prefix="ipybox-install-") as tmp:
            BUILD = private_build(tmp)  # noqa: N806 (this test's own build)
            prefix = os.path.join(tmp, "usr")
            etc = os.path.join(tmp, "etc")
            os.makedirs(os.path.join(etc, "ipybox"))
            with open(os.path.join(etc, "ipybox", "ipyboxd.conf"), "w") as f:
                f.write("users = group admins-choice\n")
            r = subprocess.run(["make", "-s", "install", "BUILD=" + BUILD, "PREFIX=" + prefix, "SYSCONFDIR=" + etc],
                               cwd=ROOT, capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stderr)
            for rel in ("bin/ipybox", "bin/ipyboxd", "libexec/ipybox/ipybox-shim", "libexec/ipybox/ipybox-monitor",
                        "lib/systemd/system/ipyboxd.service",
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


    def test_prefix_alone_writes_nothing_outside_it_and_uninstall_removes_it(self):
        with tempfile.TemporaryDirectory(prefix="ipybox-install-") as tmp:
            build = private_build(tmp)
            prefix = os.path.join(tmp, "x")
            # Every path the install commands name is under the prefix (or the checkout).
            r = make("-n", "install", "BUILD=" + build, "PREFIX=" + prefix)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = [ln for ln in r.stdout.splitlines()
                     if ln.split()[:1] and ln.split()[0] in ("install", "ln", "sed", "chmod", "test")]
            self.assertTrue(lines, r.stdout)
            for ln in lines:
                for word in re.findall(r"(?<![\w@|])/[^\s'|>]+", ln):
                    if word.startswith(prefix) or word.startswith(build) or word.startswith(ROOT):
                        continue
                    self.fail("install names %s outside %s: %s" % (word, prefix, ln))
            r = make("install", "BUILD=" + build, "PREFIX=" + prefix)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(files_under(prefix), INSTALLED | {"etc/ipybox/ipyboxd.conf"})
            with open(os.path.join(prefix, "lib/systemd/system/ipyboxd.service")) as f:
                self.assertIn("ExecStart=%s/bin/ipyboxd --config %s/etc/ipybox/ipyboxd.conf" % (prefix, prefix),
                              f.read())
            # The system service's default configuration, compiled in, is the installed one.
            with open(os.path.join(prefix, "bin/ipybox"), "rb") as f:
                self.assertIn(("%s/etc/ipybox/ipyboxd.conf" % prefix).encode(), f.read())
            r = make("uninstall", "BUILD=" + build, "PREFIX=" + prefix)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(files_under(prefix), set())
            self.assertFalse(os.path.exists(os.path.join(prefix, "etc/ipybox")))
            self.assertFalse(os.path.exists(os.path.join(prefix, "libexec/ipybox")))

    def test_system_prefixes_keep_etc(self):
        for prefix in ("/usr", "/usr/local"):
            r = make("-n", "install", "PREFIX=" + prefix, "DESTDIR=/nonexistent-ipybox-destdir")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("/nonexistent-ipybox-destdir/etc/ipybox/ipyboxd.conf", r.stdout)
            self.assertNotIn("%s/etc/ipybox" % prefix, r.stdout)

    def test_destdir_install_and_uninstall_keep_an_edited_configuration(self):
        with tempfile.TemporaryDirectory(prefix="ipybox-install-") as tmp:
            dest = os.path.join(tmp, "dest")
            r = make("install", "BUILD=" + BUILD, "DESTDIR=" + dest)  # the build's own paths: nothing rebuilt
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(files_under(dest), {"usr/local/" + p for p in INSTALLED} | {"etc/ipybox/ipyboxd.conf"})
            with open(os.path.join(dest, "etc/ipybox/ipyboxd.conf"), "a") as f:
                f.write("# edited\n")
            r = make("uninstall", "BUILD=" + BUILD, "DESTDIR=" + dest)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("kept", r.stdout)
            self.assertEqual(files_under(dest), {"etc/ipybox/ipyboxd.conf"})


if __name__ == "__main__":
    unittest.main()
