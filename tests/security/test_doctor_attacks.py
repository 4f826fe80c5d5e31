"""Attacks on `ipybox doctor`. Its python check runs the interpreter on
the host, outside any sandbox, and an interpreter runs its environment's code as it starts
(a .pth file in site-packages; -s -E do not stop that). A venv that kernel code made in a
workspace must therefore never be run there; one of the user's own still is. A daemon socket
whose listener never accepts must not hang the doctor, and a ^C while its sandbox runs leaves
nothing behind."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX, host_scratch, descendants, require_sandbox, wait_for  # noqa: E402


def line_of(out, check):
    for line in out.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].startswith(check + ":"):
            return line
    return None


class DoctorAttackCase(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        # Not under /tmp or /var/tmp: those are the sandbox's own places, refused for --python.
        self.tmp = host_scratch("ipybox-doctor-attack-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.home = os.path.join(self.tmp, "home")
        os.mkdir(self.home)
        self.runtime = os.path.join(self.tmp, "run")
        os.mkdir(self.runtime, 0o700)
        self.env = dict(os.environ, HOME=self.home, XDG_STATE_HOME=os.path.join(self.home, "state"),
                        XDG_RUNTIME_DIR=self.runtime)
        self.env.pop("IPYBOX_FALLBACK", None)
        # Where the planted code would leave its mark on the host.
        self.mark = os.path.join(self.tmp, "ran-on-the-host")

    def ipybox(self, *args, timeout=180):
        return subprocess.run([IPYBOX, *args], capture_output=True, text=True, timeout=timeout, env=self.env)

    def plant_venv(self, options, app_venv_args):
        """Kernel code makes a venv in /app with a .pth that would mark the host."""
        pth = "import os; open(%r, 'w').write('pwned')" % self.mark
        script = ("python3 -m venv --without-pip --system-site-packages %s /app/venv && "
                  "echo \"$PTH\" > /app/venv/lib/python3.$(python3 -c 'import sys; print(sys.version_info[1])')"
                  "/site-packages/evil.pth" % app_venv_args)
        r = self.ipybox("run", *options, "--container-env-var", "PTH=" + pth, "--", "/bin/sh", "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)


class PythonFromASandbox(DoctorAttackCase):
    def test_a_venv_made_in_a_named_workspace_is_not_run_on_the_host(self):
        self.plant_venv(["--workspace", "proj"], "")
        python = os.path.join(self.home, "state", "ipybox", "workspaces", "proj", "venv", "bin", "python")
        self.assertTrue(os.path.lexists(python))
        r = self.ipybox("doctor", "--quick", "--python", python)
        self.assertFalse(os.path.exists(self.mark), "doctor ran a sandbox's code on the host:\n" + r.stdout)
        line = line_of(r.stdout, "python")
        self.assertTrue(line and line.startswith("FAIL"), r.stdout)
        self.assertIn("ipybox mcp refuses it too", line)
        self.assertEqual(r.returncode, 1, r.stdout)

    def test_a_venv_made_in_a_host_workspace_is_not_run_on_the_host(self):
        ws = os.path.join(self.tmp, "hostws")
        os.mkdir(ws)
        self.plant_venv(["--workspace", ws], "--copies")
        python = os.path.join(ws, "venv", "bin", "python")
        self.assertFalse(os.path.islink(python))
        r = self.ipybox("doctor", "--quick", "--python", python)
        self.assertFalse(os.path.exists(self.mark), "doctor ran a sandbox's code on the host:\n" + r.stdout)
        line = line_of(r.stdout, "python")
        self.assertTrue(line and line.startswith("warn"), r.stdout)
        self.assertIn("not run on the host", line)
        self.assertIn(ws, line)

    def test_the_users_own_venv_is_still_probed(self):
        """The same venv made by the user outside every sandbox tree: probed on the host (and
        its .pth runs: what the two tests above keep from happening)."""
        venv = os.path.join(self.tmp, "myvenv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", "--system-site-packages", venv],
                       check=True)
        sp = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                             "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            capture_output=True, text=True, check=True).stdout.strip()
        with open(os.path.join(sp, "mark.pth"), "w") as f:
            f.write("import os; open(%r, 'w').write('probed')\n" % self.mark)
        r = self.ipybox("doctor", "--quick", "--python", os.path.join(venv, "bin", "python"))
        line = line_of(r.stdout, "python")
        self.assertTrue(line and line.startswith("ok") and "imports ipykernel" in line, r.stdout)
        self.assertTrue(os.path.exists(self.mark))


class StuckDaemon(DoctorAttackCase):
    def test_a_socket_that_never_accepts_does_not_hang_the_doctor(self):
        """A daemon that is stuck: its listen queue full, nothing accepted. connect() on a full
        unix socket queue blocks until there is room; the doctor must say so and go on."""
        d = os.path.join(self.runtime, "ipybox")
        os.mkdir(d, 0o700)
        path = os.path.join(d, "ipybox.sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        srv.listen(0)
        self.addCleanup(srv.close)
        fillers = []
        for _ in range(8):  # fill the queue (its length is backlog + 1)
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.setblocking(False)
            try:
                c.connect(path)
            except BlockingIOError:
                c.close()
                break
            fillers.append(c)
        self.addCleanup(lambda: [c.close() for c in fillers])
        t0 = time.monotonic()
        try:
            r = self.ipybox("doctor", "--quick", timeout=60)
        except subprocess.TimeoutExpired:
            self.fail("ipybox doctor hung on a daemon socket that never accepts")
        self.assertLess(time.monotonic() - t0, 60)
        line = line_of(r.stdout, "daemon")
        self.assertTrue(line and line.startswith("warn"), r.stdout)
        self.assertIn(path, line)


class Interrupted(DoctorAttackCase):
    def test_sigint_while_the_sandbox_runs_leaves_nothing_behind(self):
        p = subprocess.Popen([IPYBOX, "doctor"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=self.env)
        seen = set()

        def sandbox_up():
            for pid in descendants(p.pid):
                seen.add(pid)
                try:
                    with open("/proc/%d/cmdline" % pid, "rb") as f:
                        if f.read().startswith(b"ipybox-shim"):
                            return True
                except OSError:
                    pass
            return p.poll() is not None
        self.assertTrue(wait_for(sandbox_up, 120, step=0.005))
        self.assertIsNone(p.poll(), "the doctor ended before its sandbox was seen")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
        self.assertIn(p.returncode, (0, 130), out + err)
        self.assertTrue(wait_for(lambda: not [q for q in seen if os.path.exists("/proc/%d" % q)], 30),
                        "processes of the doctor's sandbox outlived it")
        state = os.path.join(self.home, "state", "ipybox")
        for sub in ("sessions", "workspaces"):
            left = os.listdir(os.path.join(state, sub)) if os.path.isdir(os.path.join(state, sub)) else []
            self.assertEqual(left, [], "left in %s after a ^C: %s" % (sub, left))


if __name__ == "__main__":
    unittest.main()
