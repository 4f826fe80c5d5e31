"""A kernel cannot reach its sandbox's zygote (architecture.md, "Zygote kernels", "What a
compromised kernel can reach"), attempted for real from a cell: signals to every pid and process
group, kill(-1), F_SETOWN with F_SETSIG(SIGKILL), pidfd_open and pidfd_send_signal on every /proc
directory, ptrace, /proc/*/mem. Then the zygote, found on the host under the shim, is alive and
unchanged, and the next reset is fast. And code the sandbox plants where a Python start would
run it runs only in kernels, never in a zygote."""
import json
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from ipybox_test import McpClient, require_sandbox, text_of, wait_for  # noqa: E402
from test_zygote import start_of, zygote_pids  # noqa: E402

ATTACK = r'''
import ctypes, errno, fcntl, json, os, signal, socket
me = os.getpid()
mine = {int(t) for t in os.listdir("/proc/self/task")} | {me}
try:
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
except OSError:
    pid_max = 1 << 22
out = {"pid_max": pid_max, "kill0": [], "killed": 0, "pg": 0, "setown": [], "pidfd": [], "proc_pidfd": [],
       "ptrace": [], "mem": []}
for p in range(1, pid_max + 1):
    if p in mine:
        continue
    try:
        os.kill(p, 0)
        out["kill0"].append(p)
    except OSError:
        pass
    try:
        os.kill(p, signal.SIGKILL)
        out["killed"] += 1
    except OSError:
        pass
    if p != os.getpgid(0):
        try:
            os.killpg(p, signal.SIGKILL)
            out["pg"] += 1
        except OSError:
            pass
    try:
        fd = os.pidfd_open(p)
    except OSError:
        continue
    out["pidfd"].append(p)
    try:
        signal.pidfd_send_signal(fd, signal.SIGKILL)
    except OSError:
        pass
    os.close(fd)
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
a, b = socket.socketpair()
fcntl.fcntl(a, 10, signal.SIGKILL)  # F_SETSIG
fcntl.fcntl(a, fcntl.F_SETFL, fcntl.fcntl(a, fcntl.F_GETFL) | os.O_ASYNC)
for p in list(range(2, 1 << 16)) + [-g for g in range(2, 1 << 16)]:
    if abs(p) in mine:
        continue
    try:
        fcntl.fcntl(a, fcntl.F_SETOWN, p)
    except OSError:
        continue
    out["setown"].append(p)
    b.send(b"x")
    a.recv(1)
fcntl.fcntl(a, fcntl.F_SETOWN, 0)
for n in os.listdir("/proc"):
    if not n.isdigit() or int(n) in mine:
        continue
    try:
        fd = os.open("/proc/" + n, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        continue
    try:
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        out["proc_pidfd"].append(int(n))
    except OSError:
        pass
    os.close(fd)
    try:
        with open("/proc/%s/mem" % n, "r+b", buffering=0) as m:
            out["mem"].append(int(n))
    except OSError:
        pass
libc = ctypes.CDLL(None, use_errno=True)
for p in range(1, 1 << 16):
    if p in mine:
        continue
    if libc.ptrace(16, p, 0, 0) == 0:  # PTRACE_ATTACH
        out["ptrace"].append(p)
print("ATTACK" + json.dumps(out))
'''


def status(pid):
    with open("/proc/%d/status" % pid) as f:
        return [l for l in f.read().splitlines() if not l.startswith(("voluntary_ctxt", "nonvoluntary_ctxt"))]


class ZygoteReach(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)

    def test_kernel_cannot_signal_trace_or_open_the_zygote(self):
        with McpClient() as c:
            c.execute("1")
            # This one is forked, as the first was: the zygote is READY,
            # its status no longer changes by itself.
            self.assertEqual(start_of(c.call("reset")), "zygote")
            zs = zygote_pids(c)
            self.assertEqual(len(zs), 1, "no zygote found under the session")
            z = zs[0]
            before = status(z)
            text, r = c.execute(ATTACK, timeout=600)
            self.assertIn("ATTACK", text, text[-2000:])
            out = json.loads(text.split("ATTACK", 1)[1].split("\n", 1)[0])
            # Only PID 1 (the kernels' own, which ignores these; in the system service another
            # uid, so not even that) is there to be named.
            self.assertLessEqual(set(out["kill0"]), {1}, out)
            self.assertLessEqual(set(out["pidfd"]), {1}, out)
            self.assertLessEqual(set(out["setown"]), {1, -1}, out)
            self.assertLessEqual(set(out["proc_pidfd"]), {1}, out)
            self.assertEqual(out["ptrace"], [], out)
            self.assertEqual(out["mem"], [], out)
            self.assertGreaterEqual(out["pid_max"], 32768)
            self.assertTrue(alive_and_same(z, before), "the zygote was reached: %s -> %s" % (before, status(z)))
            self.assertEqual(zygote_pids(c), [z])
            r = c.call("reset")
            self.assertEqual(start_of(r), "zygote", text_of(r))
            self.assertNotIn("zygote", text_of(r))
            self.assertEqual(c.execute("print(6 * 7)")[0].strip(), "42")


def alive_and_same(pid, before):
    try:
        return status(pid) == before
    except OSError:
        return False


# Code the sandbox leaves where an interpreter's start runs it: each logs who ran it.
LOGGER = ("import os, socket, stat, sys\n"
          "def _zy_log(what):\n"
          "    try:\n"
          "        fd3 = stat.S_ISSOCK(os.fstat(3).st_mode)\n"
          "    except OSError:\n"
          "        fd3 = False\n"
          "    with open('/app/ran.log', 'a') as f:\n"
          "        f.write('%s %r fd3_socket=%s userbase=%s\\n' % (what, sys.argv, fd3, os.environ.get('PYTHONUSERBASE')))\n")

PLANT = r'''
import os, site
us = site.getusersitepackages()
os.makedirs(us, exist_ok=True)
logger = %r
open(os.path.join(us, "zylog.py"), "w").write(logger)
open(os.path.join(us, "zy.pth"), "w").write("import zylog; zylog._zy_log('pth')\n")
open(os.path.join(us, "usercustomize.py"), "w").write("import zylog; zylog._zy_log('usercustomize')\n")
# A tornado.py that logs, then hands over the real one (the kernel needs it).
open(os.path.join(us, "tornado.py"), "w").write(
    "import sys, os\nimport zylog\nzylog._zy_log('tornado')\n"
    "_here = os.path.dirname(os.path.abspath(__file__))\n"
    "_saved = sys.path[:]\n"
    "sys.path[:] = [p for p in sys.path if os.path.abspath(p or '.') != _here]\n"
    "del sys.modules['tornado']\nimport tornado as _real\nsys.path[:] = _saved\nsys.modules['tornado'] = _real\n")
for d in ("/app", os.environ["HOME"], "/tmp"):
    open(os.path.join(d, "sitecustomize.py"), "w").write(logger + "_zy_log('sitecustomize ' + %%r)\n" %% d)
print("planted")
''' % LOGGER


class PlantedCode(unittest.TestCase):
    def test_only_kernels_run_planted_code(self):
        require_sandbox(self)
        with McpClient() as c:
            c.execute("1")
            text, r = c.execute(PLANT)
            self.assertIn("planted", text)
            zs = zygote_pids(c)
            self.assertEqual(len(zs), 1)
            os.kill(zs[0], signal.SIGKILL)
            for _ in range(2):
                r = c.call("reset")
                self.assertFalse(r["isError"], text_of(r))
                self.assertTrue(wait_for(lambda: len(zygote_pids(c)) == 1, 30), "no new zygote")
            # The new zygote booted with the code in place; a kernel after it, too.
            r = c.call("reset")
            text, r = c.execute("print(open('/app/ran.log').read())")
            lines = [l for l in text.splitlines() if l.strip()]
            self.assertTrue(any(l.startswith("pth ") for l in lines), text)
            self.assertTrue(any(l.startswith("tornado ") for l in lines), text)
            for l in lines:
                self.assertIn("fd3_socket=False", l, "a zygote ran planted code: " + l)
                self.assertNotIn("userbase=/nonexistent", l, "a zygote ran planted code: " + l)
                self.assertIn("['-c', '-f', '/run/ipybox/connection.json']", l, l)


if __name__ == "__main__":
    unittest.main()
