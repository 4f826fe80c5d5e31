"""An attacker's review of the zygote (issue 21, package R): attacks from kernel code in a cell,
with the real binaries, each asserting that the zygote never ran what the sandbox wrote and that
a kernel cannot keep it, or S0, from doing its work. What stopped the attacks that failed is in
the report of issue 21's review; the ones here are those that worked before their fix, or that
guard a fix."""
import base64
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from ipybox_test import McpClient, descendants, require_sandbox, text_of, wait_for  # noqa: E402
from test_zygote import start_of, zygote_pids  # noqa: E402

# A shared object that logs who loaded it: a zygote has its channel, a SOCK_SEQPACKET socket,
# on fd 3 and PYTHONUSERBASE=/nonexistent; a kernel has neither.
EVIL_C = r'''
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
__attribute__((constructor)) static void zy_log(void) {
    int t = 0;
    socklen_t l = sizeof(t);
    int seq = getsockopt(3, SOL_SOCKET, SO_TYPE, &t, &l) == 0 && t == SOCK_SEQPACKET;
    const char *ub = getenv("PYTHONUSERBASE");
    FILE *f = fopen("/app/ran.log", "a");
    if (f) {
        fprintf(f, "loaded pid=%d fd3_seqpacket=%d userbase=%s\n", (int)getpid(), seq, ub ? ub : "-");
        fclose(f);
    }
}
'''

# An OpenSSL configuration that loads a provider module: dlopen runs its constructor.
OPENSSL_CNF = """openssl_conf = openssl_init
[openssl_init]
providers = provider_sect
[provider_sect]
default = default_sect
zyevil = zyevil_sect
[default_sect]
activate = 1
[zyevil_sect]
module = /app/zyevil.so
activate = 1
"""


def build_evil(tmp):
    src = os.path.join(tmp, "zyevil.c")
    out = os.path.join(tmp, "zyevil.so")
    with open(src, "w") as f:
        f.write(EVIL_C)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", out, src], check=True)
    with open(out, "rb") as f:
        return f.read()


class LoaderVariables(unittest.TestCase):
    """Options that make a process load code from a path the sandbox writes (LD_PRELOAD,
    OPENSSL_CONF, ...) are PYTHONPATH's kin: with them, a zygote booted after a kernel wrote
    that path would run the sandbox's code, and every later kernel would be forked from it."""

    def setUp(self):
        require_sandbox(self)
        if not shutil.which("cc"):
            self.skipTest("no C compiler")
        with tempfile.TemporaryDirectory() as tmp:
            self.so = build_evil(tmp)

    def attempt(self, var, value, extra_files=()):
        with McpClient("--container-env-var", "%s=%s" % (var, value)) as c:
            text, r = c.execute("1")
            had_zygote = bool(zygote_pids(c))
            note = text_of(r)
            # The kernel writes the code (and whatever points at it) where the option points.
            files = {"/app/zyevil.so": self.so}
            files.update(extra_files)
            cell = "import base64\n" + "".join(
                "open(%r, 'wb').write(base64.b64decode(%r))\n" % (p, base64.b64encode(d).decode())
                for p, d in files.items()) + "print('planted')\n"
            out, _ = c.execute(cell)
            self.assertIn("planted", out)
            # Its zygote is lost (the OOM killer or a bug could do this; the host does it here):
            # the next one boots with the code in place.
            for z in zygote_pids(c):
                os.kill(z, signal.SIGKILL)
            r = c.call("reset")
            self.assertFalse(r["isError"], text_of(r))
            if had_zygote:
                self.assertTrue(wait_for(lambda: len(zygote_pids(c)) == 1, 30), "no new zygote")
            for _ in range(2):
                r = c.call("reset")
                self.assertFalse(r["isError"], text_of(r))
            out, _ = c.execute("print(open('/app/ran.log').read())")
            lines = [l for l in out.splitlines() if l.startswith("loaded ")]
            # The planted code is live: kernels load it (so the test can fail).
            self.assertTrue(lines, "the planted library was never loaded: %s" % out)
            for l in lines:
                self.assertIn("fd3_seqpacket=0", l, "a zygote loaded code the kernel wrote: " + l)
                self.assertIn("userbase=-", l, "a zygote loaded code the kernel wrote: " + l)
            self.assertIn("No zygote in this session: its options set %s" % var, note)

    def test_ld_preload(self):
        self.attempt("LD_PRELOAD", "/app/zyevil.so")

    def test_openssl_conf(self):
        self.attempt("OPENSSL_CONF", "/app/zy.cnf", {"/app/zy.cnf": OPENSSL_CNF.encode()})


# How many tasks (processes and threads) the kernel's tree can hold at once: the kernel's own,
# plus children forked until the limit refuses one.
COUNT_TASKS = r'''
import os, time
kids = []
while True:
    try:
        p = os.fork()
    except OSError:
        break
    if p == 0:
        time.sleep(120)
        os._exit(0)
    kids.append(p)
own = len(os.listdir("/proc/self/task"))
for p in kids:
    os.kill(p, 9)
    os.waitpid(p, 0)
print("TASKS", own + len(kids))
'''


class PidsLimit(unittest.TestCase):
    """The limit is raised for S0, the zygote and the fork between them: a kernel must not get
    more of it than with --no-zygote."""

    def tasks(self, *opts):
        with McpClient("--max-processes", "24", *opts) as c:
            c.execute("1")
            # The zygote boots once the first kernel answered (it held its place before).
            if "--no-zygote" not in opts:
                wait_for(lambda: zygote_pids(c), 30)
            zygotes = zygote_pids(c)
            out, _ = c.execute(COUNT_TASKS, timeout=120)
            self.assertIn("TASKS", out)
            if zygotes:
                # And the limit still leaves the fork its slots: the next kernel is a zygote's.
                r = c.call("reset")
                self.assertEqual(start_of(r), "zygote", text_of(r))
                self.assertEqual(c.execute("print(6 * 7)")[0].strip(), "42")
            return int(out.split("TASKS", 1)[1].split()[0]), zygotes

    def test_kernel_gets_what_was_asked(self):
        require_sandbox(self)
        with_zygote, zygotes = self.tasks()
        self.assertTrue(zygotes, "the session had no zygote")
        without, _ = self.tasks("--no-zygote")
        self.assertEqual(with_zygote, without, "a kernel with a zygote holds more of the pids limit")


# What a kernel reads of its own ids: a slow start has them all equal.
IDS = r'''
import os, threading
print("IDS", os.getpid(), threading.get_native_id(), threading.main_thread().native_id)
'''


class PidState(unittest.TestCase):
    """A forked kernel keeps no id of the zygote's: CPython's at-fork hook leaves the main
    thread's native_id at the parent's thread id, which for a kernel is the zygote's pid in P0,
    a number that in P1 may be another process."""

    def test_main_thread_native_id(self):
        require_sandbox(self)
        with McpClient() as c:
            c.execute("1")
            self.assertTrue(wait_for(lambda: zygote_pids(c), 30), "the session had no zygote")
            for _ in range(2):
                r = c.call("reset")
                self.assertEqual(start_of(r), "zygote", text_of(r))
                out, _ = c.execute(IDS)
                ids = out.split("IDS", 1)[1].split()
                self.assertEqual(len(set(ids)), 1, out)


def start_time(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def session_processes(c):
    """Every process under the session's ipybox, as (pid, start time): the same pid with another
    start time is another process."""
    procs = {(p, start_time(p)) for p in descendants(c.proc.pid)}
    return {(p, t) for p, t in procs if t is not None}


def left(procs):
    """Those of procs still there, running or as zombies."""
    return sorted(p for p, t in procs if start_time(p) == t)


# Processes a kernel leaves behind: a double-forked daemon in its own session, a stopped child,
# and a child that ignores SIGTERM and SIGHUP.
LEAVE = r'''
import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)
    os._exit(0)
p = os.fork()
if p == 0:
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    time.sleep(600)
    os._exit(0)
time.sleep(0.5)
print("left")
'''


class NothingLeft(unittest.TestCase):
    """S0, the zygote (booted, or booting), the kernels and what they made are all gone once
    the session ends, by EOF or by the supervisor's death."""

    def setUp(self):
        require_sandbox(self)

    def check_gone(self, procs, how):
        self.assertTrue(wait_for(lambda: not left(procs), 30),
                        "%s left processes: %s" % (how, [(p, open("/proc/%d/comm" % p).read().strip())
                                                          for p in left(procs) if start_time(p)]))

    def test_eof_with_a_ready_zygote(self):
        with McpClient() as c:
            c.execute("1")
            # READY: this one is forked, as the first was.
            self.assertEqual(start_of(c.call("reset")), "zygote")
            zs = zygote_pids(c)
            self.assertTrue(zs, "the session had no zygote")
            self.assertIn("left", c.execute(LEAVE)[0])
            procs = session_processes(c)
            self.assertIn(zs[0], {p for p, _ in procs})
            self.assertGreaterEqual(len(procs), 6, procs)  # S0, S1, the zygote, the kernel, what it left
        self.check_gone(procs, "the end of a session")

    def test_eof_while_the_zygote_boots(self):
        with McpClient() as c:
            c.execute("1")
            for z in zygote_pids(c):
                os.kill(z, signal.SIGKILL)
            r = c.call("reset")
            self.assertEqual(start_of(r), "exec", text_of(r))
            self.assertIn("left", c.execute(LEAVE)[0])
            procs = session_processes(c)
        self.check_gone(procs, "the end of a session while its zygote booted")

    def test_supervisor_killed(self):
        c = McpClient()
        try:
            c.execute("1")
            self.assertTrue(wait_for(lambda: zygote_pids(c), 30), "the session had no zygote")
            self.assertIn("left", c.execute(LEAVE)[0])
            procs = session_processes(c)
            os.kill(c.proc.pid, signal.SIGKILL)
            c.proc.wait()
            c.proc.stdin.close()
        finally:
            c.close()
        self.check_gone(procs, "the supervisor's death")


if __name__ == "__main__":
    unittest.main()
