"""ipybox doctor: on this host it passes (user namespaces, nftables, the interpreter, 1+1 in a
real sandbox) and leaves nothing behind; an interpreter without ipykernel, a program that is
not Python and user namespaces blocked by user.max_user_namespaces = 0 each fail it with a
line that names the fix; a daemon is found and asked for an answer."""
import os
import shutil
import socket
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from daemon_fixture import Daemon  # noqa: E402
from ipybox_test import IPYBOX, host_scratch, require_sandbox  # noqa: E402


def line_of(out, check):
    """The line of one check ("ok    nftables: ..."), or None."""
    for line in out.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].startswith(check + ":"):
            return line
    return None


class DoctorCase(unittest.TestCase):
    def setUp(self):
        # Not under /tmp: an interpreter there is refused (the sandbox's own /tmp), as by ipybox mcp.
        self.tmp = host_scratch("ipybox-doctor-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        # A state directory of the test's own, and no daemon unless a test starts one.
        self.runtime = os.path.join(self.tmp, "run")
        os.mkdir(self.runtime, 0o700)
        self.env = dict(os.environ, XDG_STATE_HOME=os.path.join(self.tmp, "state"), XDG_RUNTIME_DIR=self.runtime)
        self.env.pop("IPYBOX_FALLBACK", None)

    def doctor(self, *args, env=None, wrap=(), timeout=180):
        r = subprocess.run([*wrap, IPYBOX, "doctor", *args], capture_output=True, text=True, timeout=timeout,
                           env=env or self.env)
        return r

    def assertLine(self, out, level, check, *words):
        line = line_of(out, check)
        self.assertIsNotNone(line, "no line for %s in:\n%s" % (check, out))
        self.assertEqual(line.split()[0], level, line)
        for w in words:
            self.assertIn(w, line)
        return line

    def test_passes_here_and_leaves_nothing(self):
        require_sandbox(self)
        r = self.doctor()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertLine(r.stdout, "ok", "user namespaces", "can create one")
        self.assertLine(r.stdout, "ok", "nftables", "egress ruleset loads")
        self.assertLine(r.stdout, "ok", "python", "/usr/bin/python3", "imports ipykernel")
        self.assertLine(r.stdout, "ok", "daemon", "none running", self.runtime)
        self.assertLine(r.stdout, "ok", "sandbox", "answered 1+1 = 2")
        for check in ("cgroups", "matplotlib", "pip"):
            self.assertIn(line_of(r.stdout, check).split()[0], ("ok", "warn"), r.stdout)
        self.assertTrue(r.stdout.rstrip().endswith("ipybox mcp would start")
                        or "ipybox mcp would start;" in r.stdout, r.stdout)
        state = os.path.join(self.tmp, "state", "ipybox")
        for sub in ("sessions", "workspaces"):
            d = os.path.join(state, sub)
            self.assertEqual(os.listdir(d) if os.path.isdir(d) else [], [], "left in " + d)

    def test_quick_starts_no_sandbox(self):
        r = self.doctor("--quick")
        self.assertLine(r.stdout, "skip", "sandbox", "--quick")
        self.assertIn("the sandbox itself was not tried", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "state", "ipybox", "sessions")),
                         "--quick made a session directory")

    def test_venv_without_ipykernel_fails_naming_the_fix(self):
        venv = os.path.join(self.tmp, "venv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", venv], check=True, timeout=120)
        py = os.path.join(venv, "bin", "python")
        r = self.doctor("--python", py)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertLine(r.stdout, "FAIL", "python", py, "cannot import ipykernel",
                        py + " -m pip install ipykernel", "--system-site-packages")
        self.assertLine(r.stdout, "warn", "pip", py + " -m ensurepip")
        self.assertLine(r.stdout, "skip", "sandbox", "a needed check above failed")
        self.assertIn("ipybox mcp would not start", r.stdout)

    def test_program_that_is_not_python_fails(self):
        # In a tree of its own: one that held the state directory would be refused for that.
        os.makedirs(os.path.join(self.tmp, "fake", "bin"))
        fake = os.path.join(self.tmp, "fake", "bin", "python3")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho 'not a python'\n")
        os.chmod(fake, 0o755)
        r = self.doctor("--quick", "--python", fake)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertLine(r.stdout, "FAIL", "python", "is not a Python interpreter", "not a python",
                        "apt-get install python3 python3-ipykernel")
        r = self.doctor("--quick", "--python", self.tmp)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertLine(r.stdout, "FAIL", "python", "not a regular file")

    def test_user_namespaces_blocked_names_the_sysctl(self):
        # In a user namespace of its own, the test may set the limit of namespaces below it to
        # 0: as user.max_user_namespaces = 0 does for the whole host.
        probe = subprocess.run(["unshare", "-Ur", "true"], capture_output=True, timeout=30)
        if probe.returncode != 0:
            self.skipTest("unshare -Ur is not possible here: %s" % probe.stderr.decode().strip())
        r = self.doctor("--quick", wrap=["unshare", "-Ur", "sh", "-c",
                                         'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"'])
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertLine(r.stdout, "FAIL", "user namespaces", "cannot create one", "user.max_user_namespaces = 0",
                        "sysctl -w user.max_user_namespaces=")
        self.assertIn("ipybox mcp would not start: 1 check failed", r.stdout)

    def test_daemon_found_and_answering(self):
        require_sandbox(self)
        d = Daemon(runtime=self.runtime)
        self.addCleanup(d.close)
        r = self.doctor("--quick", env=dict(self.env, XDG_STATE_HOME=d.env["XDG_STATE_HOME"]))
        self.assertLine(r.stdout, "ok", "daemon", "ipyboxd answers at " + d.sock, "ipybox mcp will use it")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_silent_daemon_socket_warns(self):
        # A socket that takes connections and never answers: the user's own daemon hung.
        os.mkdir(os.path.join(self.runtime, "ipybox"))
        path = os.path.join(self.runtime, "ipybox", "ipybox.sock")
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(path)
        srv.listen(4)
        held = []
        stop = threading.Event()

        def accept():
            srv.settimeout(0.2)
            while not stop.is_set():
                try:
                    held.append(srv.accept()[0])
                except socket.timeout:
                    pass
        t = threading.Thread(target=accept)
        t.start()
        try:
            r = self.doctor("--quick")
        finally:
            stop.set()
            t.join()
            for c in held:
                c.close()
            srv.close()
        self.assertEqual(len(held), 1, "doctor did not connect once")
        self.assertLine(r.stdout, "warn", "daemon", path, "does not answer")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to run as another user")
    def test_unprivileged_user_cgroups_line(self):
        # As a user other than root, the limits are chosen as ipybox mcp chooses them
        # (ulimits.c), for the values given.
        home = os.path.join(self.tmp, "home")
        os.mkdir(home)
        os.chmod(self.tmp, 0o755)
        os.chown(home, 65534, 65534)
        env = dict(self.env, HOME=home, XDG_STATE_HOME=os.path.join(home, "state"))
        env.pop("XDG_RUNTIME_DIR")
        r = self.doctor("--quick", "--memory", "3G", env=env,
                        wrap=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
        line = line_of(r.stdout, "cgroups")
        self.assertIsNotNone(line, r.stdout + r.stderr)
        if line.split()[0] == "warn":
            self.assertIn("--memory 3G", line)
        else:
            self.assertEqual(line.split()[0], "ok", line)
        self.assertLine(r.stdout, "ok", "user namespaces")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_usage(self):
        r = self.doctor("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--quick", r.stdout)
        self.assertIn("Exit status", r.stdout)
        r = self.doctor("stray")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unexpected argument 'stray'", r.stderr)
        r = subprocess.run([IPYBOX, "--help"], capture_output=True, text=True, timeout=30)
        self.assertIn("doctor", r.stdout)


if __name__ == "__main__":
    unittest.main()
