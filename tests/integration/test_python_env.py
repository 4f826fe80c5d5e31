"""--python PATH: an interpreter of the host's own (here a venv made in the test from Debian's
Python with --system-site-packages, which brings Debian's ipykernel) runs the kernel, its
environment visible read-only at its own path and nothing else of the home around it; bad
interpreters are refused at start with errors that say what to do, and nothing is left."""
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX, host_scratch, McpClient, McpError, require_sandbox  # noqa: E402
from daemon_fixture import Daemon  # noqa: E402

SYSTEM_PYTHON = "/usr/bin/python3"


def _has_ipykernel():
    r = subprocess.run([SYSTEM_PYTHON, "-c", "import ipykernel"], capture_output=True)
    return r.returncode == 0


class PythonEnv(unittest.TestCase):
    """One fake home (0700) per class, with a venv that sees Debian's packages and one that
    does not. The home is made in host_scratch(): /tmp is a place of the sandbox's
    own, where no host tree is bound."""

    @classmethod
    def setUpClass(cls):
        require_sandbox(cls)
        if not _has_ipykernel():
            raise unittest.SkipTest("Debian's python3-ipykernel is not installed (scripts/deps.sh)")
        cls.base = host_scratch("pyenv-test-")
        cls.home = os.path.join(cls.base, "home")
        os.mkdir(cls.home, 0o700)
        cls.venv = os.path.join(cls.home, "venv")
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", "--without-pip", cls.venv],
                       check=True, timeout=120)
        cls.bare = os.path.join(cls.home, "bare")
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", cls.bare], check=True, timeout=120)
        site = subprocess.run([os.path.join(cls.venv, "bin", "python"), "-c",
                               "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        with open(os.path.join(site, "p3_planted.py"), "w") as f:
            f.write("VALUE = 'from the venv'\n")
        cls.secret = os.path.join(cls.home, "secret.txt")
        with open(cls.secret, "w") as f:
            f.write("not for the sandbox\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.base, ignore_errors=True)

    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="ipybox-pyenv-state-")
        self.addCleanup(shutil.rmtree, self.state, True)
        self.env = dict(os.environ, XDG_STATE_HOME=self.state)

    def sessions_left(self):
        d = os.path.join(self.state, "ipybox", "sessions")
        return os.listdir(d) if os.path.isdir(d) else []

    def start_fails(self, python):
        """`ipybox mcp --python python`: its exit status and stderr (it must not start)."""
        p = subprocess.run([IPYBOX, "mcp", "--python", python], input=b"", capture_output=True, timeout=120,
                           env=self.env)
        return p.returncode, p.stderr.decode(errors="replace")

    # -- a venv of the host's runs the kernel

    def test_venv_kernel_sees_its_packages_and_nothing_else_of_the_home(self):
        py = os.path.join(self.venv, "bin", "python")
        with McpClient("--python", py, env=self.env) as c:
            text, r = c.execute(
                "import json, os, sys, p3_planted\n"
                "out = {'prefix': sys.prefix, 'planted': p3_planted.VALUE, 'home': sorted(os.listdir(%r)),\n"
                "       'secret': os.path.exists(%r)}\n"
                "try:\n"
                "    open(os.path.join(sys.prefix, 'written-by-kernel'), 'w').close(); out['write'] = 'ok'\n"
                "except OSError as e:\n"
                "    out['write'] = e.errno\n"
                "print(json.dumps(out))" % (self.home, self.secret))
            self.assertFalse(r.get("isError"), text)
            out = json.loads(text.strip().splitlines()[-1])
        self.assertEqual(out["prefix"], os.path.realpath(self.venv))
        self.assertEqual(out["planted"], "from the venv")
        # Only the venv's own tree is there: not the other venv, not the file beside them.
        self.assertEqual(out["home"], ["venv"])
        self.assertFalse(out["secret"])
        self.assertEqual(out["write"], errno.EROFS)
        self.assertFalse(os.path.exists(os.path.join(self.venv, "written-by-kernel")))

    def test_run_uses_the_same_interpreter(self):
        py = os.path.join(self.venv, "bin", "python")
        r = subprocess.run([IPYBOX, "run", "--python", py, "--", py, "-c",
                            "import sys, p3_planted; print(sys.prefix)"],
                           capture_output=True, text=True, timeout=120, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), os.path.realpath(self.venv))

    # -- bad interpreters: refused at start, with what to do, nothing left

    def test_venv_without_ipykernel_says_how_to_install_it(self):
        py = os.path.join(self.bare, "bin", "python")
        rc, err = self.start_fails(py)
        self.assertNotEqual(rc, 0)
        # Named by the path it runs at (its directory resolved), not the base it links to.
        inside = os.path.join(os.path.realpath(os.path.dirname(py)), "python")
        self.assertIn("the interpreter %s cannot import ipykernel" % inside, err)
        self.assertIn("`%s -m pip install ipykernel`" % py, err)
        self.assertNotIn("The kernel died", err)
        self.assertEqual(self.sessions_left(), [])

    def test_not_an_executable(self):
        rc, err = self.start_fails(self.secret)
        self.assertNotEqual(rc, 0)
        self.assertIn("--python %s: not an executable file" % self.secret, err)
        self.assertEqual(self.sessions_left(), [])

    def test_missing_interpreter(self):
        missing = os.path.join(self.home, "nowhere", "python3")
        rc, err = self.start_fails(missing)
        self.assertNotEqual(rc, 0)
        self.assertIn("--python", err)
        self.assertIn(os.path.join(self.home, "nowhere"), err)

    def test_relative_path(self):
        rc, err = self.start_fails("python3")
        self.assertNotEqual(rc, 0)
        self.assertIn("--python 'python3': must be an absolute path", err)

    def test_venv_whose_base_interpreter_is_gone(self):
        """A copied venv whose pyvenv.cfg names a base directory that does not exist."""
        moved = os.path.join(self.home, "moved")
        shutil.copytree(self.venv, moved, symlinks=True)
        self.addCleanup(shutil.rmtree, moved, True)
        gone = os.path.join(self.home, "gone", "bin")
        cfg = os.path.join(moved, "pyvenv.cfg")
        with open(cfg) as f:
            lines = [("home = %s\n" % gone) if l.startswith("home") else l for l in f]
        with open(cfg, "w") as f:
            f.writelines(lines)
        rc, err = self.start_fails(os.path.join(moved, "bin", "python"))
        self.assertNotEqual(rc, 0)
        self.assertIn("the venv %s was made from the Python in %s" % (os.path.realpath(moved), gone), err)
        self.assertIn("does not exist any more", err)
        self.assertEqual(self.sessions_left(), [])

    def test_venv_whose_interpreter_symlink_dangles(self):
        dangling = os.path.join(self.home, "dangling")
        shutil.copytree(self.venv, dangling, symlinks=True)
        self.addCleanup(shutil.rmtree, dangling, True)
        py = os.path.join(dangling, "bin", "python")
        target = os.path.join(self.home, "gone", "bin", "python3")
        os.unlink(py)
        os.symlink(target, py)
        rc, err = self.start_fails(py)
        self.assertNotEqual(rc, 0)
        self.assertIn("it is a symlink to %s, which does not exist" % target, err)

    def test_daemon_sessions_take_the_same_interpreters(self):
        """ipyboxd --user: createSession with --python refuses a bad one with the same words and
        runs a good one; the connection keeps working after a refusal."""
        d = Daemon(state=self.state)
        self.addCleanup(d.close)
        c = d.client()
        self.addCleanup(c.close)
        with self.assertRaises(McpError) as e:
            c.request("ipybox/createSession", {"args": ["--python", os.path.join(self.bare, "bin", "python")]})
        self.assertIn("cannot import ipykernel", str(e.exception))
        self.assertIn("-m pip install ipykernel", str(e.exception))
        with self.assertRaises(McpError) as e:
            c.request("ipybox/createSession", {"args": ["--python", self.secret]})
        self.assertIn("not an executable file", str(e.exception))
        c.request("ipybox/createSession", {"args": ["--python", os.path.join(self.venv, "bin", "python")]})
        text, r = c.execute("import sys, p3_planted; print(sys.prefix)")
        self.assertFalse(r.get("isError"), text)
        self.assertEqual(text.strip(), os.path.realpath(self.venv))

    def test_environment_in_a_place_of_the_sandbox_is_refused(self):
        """A venv under /tmp would be bound inside the sandbox's own /tmp."""
        tmp = tempfile.mkdtemp(prefix="ipybox-pyenv-")
        self.addCleanup(shutil.rmtree, tmp, True)
        venv = os.path.join(tmp, "venv")
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
        rc, err = self.start_fails(os.path.join(venv, "bin", "python"))
        self.assertNotEqual(rc, 0)
        self.assertIn("is inside the sandbox's own /tmp", err)
        self.assertEqual(self.sessions_left(), [])


if __name__ == "__main__":
    unittest.main()
