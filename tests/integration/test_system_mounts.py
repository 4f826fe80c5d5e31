"""ipyboxd as root, what a session shows of the host (tests/lib/system_fixture.py): a symlink
in a workspace leads nowhere on the host, a bind shows what is mounted below it and not what
that covers, and a venv in a private home runs the kernel in a pool uid."""
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import system_fixture as sf  # noqa: E402
from system_fixture import USERS  # noqa: E402


class SystemServiceMounts(sf.SystemServiceCase):
    def test_symlinks_in_a_workspace_lead_nowhere_on_the_host(self):
        # A's workspace holds a symlink to a host directory anyone may write to; a bind whose
        # destination passes through it is placed inside the sandbox, never on the host.
        ua = pwd.getpwnam(USERS[0])
        target = tempfile.mkdtemp(prefix="ipbt-target-")
        os.chmod(target, 0o1777)
        ws = os.path.join(ua.pw_dir, "ws-link")
        src = os.path.join(ua.pw_dir, "src-dir")
        for d in (ws, src):
            os.makedirs(d, exist_ok=True)
            os.chown(d, ua.pw_uid, ua.pw_gid)
        link = os.path.join(ws, "link")
        os.symlink(target, link)
        os.lchown(link, ua.pw_uid, ua.pw_gid)
        try:
            try:
                c = self.client(USERS[0], "--workspace", ws, "--container-bind", "%s:link/x" % src)
                c.execute("print(1)")
            except EOFError:
                pass  # refusing the session is as good
            self.assertEqual(os.listdir(target), [])
        finally:
            shutil.rmtree(target)
            shutil.rmtree(ws)
            shutil.rmtree(src)

    def test_a_bind_shows_what_is_mounted_below_it_not_what_that_covers(self):
        ua = pwd.getpwnam(USERS[0])
        parent = os.path.join(ua.pw_dir, "parent")
        cover = os.path.join(parent, "cover")
        os.makedirs(cover, exist_ok=True)
        with open(os.path.join(cover, "hidden.txt"), "w") as f:
            f.write("under the mount")
        for d in (parent, cover, os.path.join(cover, "hidden.txt")):
            os.chown(d, ua.pw_uid, ua.pw_gid)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "cover", cover], check=True)
        try:
            with open(os.path.join(cover, "on-top.txt"), "w") as f:
                f.write("on top")
            try:
                c = self.client(USERS[0], "--container-bind", "%s:p" % parent)
            except EOFError as e:
                # Kernels before 6.3 cannot idmap tmpfs (Debian 12's 6.1): the bind is refused
                # and says why; what the mount covers is never shown either way.
                self.assertIn("cannot make an idmapped mount of bind 1", str(e))
                self.assertIn("its filesystem may not support idmapped mounts", str(e))
                return
            out, res = c.execute("import os; print(sorted(os.listdir('/app/p/cover')))")
            self.assertFalse(res["isError"], out)
            self.assertEqual(out, "['on-top.txt']\n")
        finally:
            subprocess.run(["umount", cover])
            shutil.rmtree(parent)

    def test_a_venv_in_a_private_home_runs_the_kernel_in_a_pool_uid(self):
        """--python in a 0700 home: the worker opens the environment with the user's rights and
        the monitor idmaps it, so the pool uid runs it; nothing else of the home is shown."""
        ua = pwd.getpwnam(USERS[0])
        mode = os.stat(ua.pw_dir).st_mode & 0o7777
        os.chmod(ua.pw_dir, 0o700)
        venv = os.path.join(ua.pw_dir, "venv-pyenv")
        try:
            r = subprocess.run(["runuser", "-u", USERS[0], "--", "/usr/bin/python3", "-m", "venv",
                                "--system-site-packages", "--without-pip", venv], cwd="/tmp", capture_output=True,
                               text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            c = self.client(USERS[0], "--python", venv + "/bin/python")
            out, res = c.execute("import os, sys\nprint(sys.prefix, os.getuid())\nprint(sorted(os.listdir(%r)))\n"
                                 "print(os.access(sys.prefix, os.W_OK))" % ua.pw_dir)
            self.assertFalse(res["isError"], out)
            self.assertEqual(out.splitlines(), ["%s 1000" % venv, "['venv-pyenv']", "False"])
        finally:
            os.chmod(ua.pw_dir, mode)
            shutil.rmtree(venv, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
