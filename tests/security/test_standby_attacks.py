"""Attacks on the standby kernel (--standby; architecture.md, "The standby kernel"). It lives
beside the running kernel with the same uid, so kernel code can name it: it must not be able to
read it, leave it a signal, or leave the next kernel slowed, bounded or moved; a standby that
was touched is not used (the reset forks from the zygote), and one that was killed only costs
the speed of the next reset."""
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from ipybox_test import McpClient, require_sandbox, text_of  # noqa: E402
from test_standby import reset, standby_of  # noqa: E402
from test_zygote import start_of, tree, zygote_pids  # noqa: E402

# Finds the standby from inside: the one process of the sandbox, other than PID 1 and the
# kernel, whose /proc files are not the sandbox user's (it is not dumpable; /proc/<pid> itself
# always shows the process's uid).
FIND = r'''
import os
def standby_pid():
    for p in os.listdir('/proc'):
        if p.isdigit() and int(p) not in (1, os.getpid()):
            try:
                if os.stat('/proc/%s/environ' % p).st_uid != os.getuid():
                    return int(p)
            except OSError:
                pass
sb = standby_pid()
print('STANDBY', sb)
'''

# What the kernel after a reset has of what kernel code could have changed in it.
STATE = r'''
import os, resource, signal
print('STATE', os.getpriority(os.PRIO_PROCESS, 0), resource.getrlimit(resource.RLIMIT_NOFILE),
      sorted(os.sched_getaffinity(0)), os.sched_getscheduler(0), sorted(signal.sigpending()),
      open('/proc/self/status').read().split('State:')[1].split()[0])
'''


class StandbyAttacks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_sandbox(cls)
        cls.ws = tempfile.mkdtemp(prefix="ipybox-sba-")
        cls.c = McpClient("--workspace", cls.ws, "--standby")
        text, r = cls.c.execute(STATE)
        cls.fresh = text.split("STATE", 1)[1].strip()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def find(self):
        host, ns = standby_of(self.c)
        self.assertIsNotNone(ns, "no standby was made")
        text, r = self.c.execute(FIND)
        self.assertEqual(text.split("STANDBY", 1)[1].strip(), str(ns), text)
        return ns

    def attack(self, code, expect):
        """Runs code (with sb, the standby's pid) in the kernel, resets, and checks how the next
        kernel started and that it has a fresh kernel's state."""
        sb = self.find()
        text, r = self.c.execute(FIND + code)
        self.assertFalse(r["isError"], text)
        reset(self, self.c, expect)
        text, r = self.c.execute(STATE)
        self.assertFalse(r["isError"], text)
        self.assertEqual(text.split("STATE", 1)[1].strip(), self.fresh, text)
        text, r = self.c.execute("import os\nprint(os.getpid())")
        if expect == "standby":
            self.assertEqual(text.strip(), str(sb), "the standby was not the kernel after the reset")
        else:
            self.assertNotEqual(text.strip(), str(sb), "a touched standby became the kernel")

    def test_signals_left_pending_are_dropped(self):
        # Each would end or stop the kernel it reached; none must reach the kernel it becomes.
        self.attack("import signal\n"
                    "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP, signal.SIGALRM,\n"
                    "          signal.SIGRTMIN + 3, signal.SIGTSTP, signal.SIGSTOP):\n"
                    "    os.kill(sb, s)\n", "standby")
        text, r = self.c.execute("print(1 + 1)")
        self.assertEqual(text.strip(), "2", text)

    def test_stopped_standby_is_continued(self):
        self.attack("import signal\nos.kill(sb, signal.SIGSTOP)", "standby")

    def test_niced_standby_is_not_used(self):
        self.attack("os.setpriority(os.PRIO_PROCESS, sb, 10)", "zygote")

    def test_limited_standby_is_not_used(self):
        self.attack("import resource\nresource.prlimit(sb, resource.RLIMIT_NOFILE, (64, 64))", "zygote")

    def test_idle_scheduled_standby_is_not_used(self):
        self.attack("os.sched_setscheduler(sb, os.SCHED_IDLE, os.sched_param(0))", "zygote")

    def test_pinned_standby_is_not_used(self):
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("one CPU: no affinity to take away")
        self.attack("os.sched_setaffinity(sb, {min(os.sched_getaffinity(0))})", "zygote")

    @unittest.skipUnless(os.uname().machine == "x86_64", "ioprio_set's number is x86_64's")
    def test_idle_io_standby_is_not_used(self):
        self.attack("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                    "assert libc.syscall(251, 1, sb, 3 << 13) == 0, ctypes.get_errno()", "zygote")

    def test_killed_standby_costs_only_the_fork(self):
        self.attack("import signal\nos.kill(sb, signal.SIGKILL)", "zygote")

    def test_stopped_fork_helper_costs_only_the_standby(self):
        # The zygote's child that forks a standby (A) is in the sandbox beside the running
        # kernel for a moment (its parent, the zygote, is outside: PPid 0). Stopped there, it
        # must not stall the zygote or get it killed for missing PID 1's bound: the zygote kills
        # A after 1 s and answers, and the next reset forks from the same zygote, saying nothing
        # of a lost one.
        zygotes = zygote_pids(self.c)
        self.assertEqual(len(zygotes), 1)
        reset(self, self.c, "standby") if standby_of(self.c)[0] else None
        text, r = self.c.execute(
            "import os, signal, time\n"
            "end, hit = time.time() + 10, None\n"
            "while hit is None and time.time() < end:\n"
            "    for p in os.listdir('/proc'):\n"
            "        if p.isdigit() and p != '1':\n"
            "            try:\n"
            "                st = open('/proc/%s/stat' % p).read().rsplit(')', 1)[1].split()\n"
            "            except OSError:\n"
            "                continue\n"
            "            if st[1] == '0':\n"
            "                os.kill(int(p), signal.SIGSTOP)\n"
            "                hit = int(p)\n"
            "                break\n"
            "print('STOPPED', hit)")
        self.assertNotIn("None", text, "the fork helper was never seen: " + text)
        time.sleep(2)
        r = self.c.call("reset")
        self.assertFalse(r["isError"], text_of(r))
        self.assertNotIn("zygote ended", text_of(r))
        self.assertEqual(zygote_pids(self.c), zygotes, "the zygote was replaced")
        text, r = self.c.execute("print(1 + 1)")
        self.assertEqual(text.strip(), "2", text)

    def test_standby_cannot_be_read_or_written(self):
        self.find()
        text, r = self.c.execute(FIND + r'''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
out = []
for f in ('mem', 'environ', 'maps', 'auxv', 'stack', 'syscall'):
    try:
        with open('/proc/%d/%s' % (sb, f), 'rb') as fh:
            fh.read(1)
        out.append(f + ' READ')
    except OSError:
        pass
# Writable files of another process (nice-like state the standby could not undo).
for f, value in (('oom_score_adj', b'1000'), ('comm', b'x'), ('timerslack_ns', b'1000000000'),
                 ('attr/current', b'x'), ('autogroup', b'19'), ('sched', b'0')):
    try:
        fd = os.open('/proc/%d/%s' % (sb, f), os.O_WRONLY)
    except OSError:
        continue
    try:
        os.write(fd, value)
        out.append(f + ' WRITTEN')
    except OSError:
        pass
    finally:
        os.close(fd)
for d in ('fd', 'cwd', 'root', 'map_files'):
    try:
        os.listdir('/proc/%d/%s' % (sb, d))
        out.append(d + ' LISTED')
    except OSError:
        pass
if os.uname().machine == 'x86_64':
    buf = ctypes.create_string_buffer(64)
    local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 64)
    if libc.syscall(310, sb, local, 1, local, 1, 0) >= 0:  # process_vm_readv
        out.append('process_vm_readv READ')
    if libc.syscall(101, 16, sb, 0, 0) == 0:  # PTRACE_ATTACH
        out.append('PTRACE_ATTACH')
print('REACHED', out)
''')
        self.assertEqual(text.split("REACHED", 1)[1].strip(), "[]", text)


PROFILE = "/home/appuser/.ipython/profile_default"


class ConfigCodeRunsBeforeTheReset(unittest.TestCase):
    """A Python config file is code the sandbox wrote: a standby that ran it would run it before
    the reset, beside the old kernel, where a kernel forked at the reset runs it after. What
    that code reads, makes or keeps must come out as it would in a forked kernel (the standby
    reads no config file: with one there is no standby)."""

    def setUp(self):
        require_sandbox(self)
        self.ws = tempfile.mkdtemp(prefix="ipybox-sbc-")
        self.c = McpClient("--workspace", self.ws, "--standby")
        self.addCleanup(self.c.close)
        self.addCleanup(self.c.execute, "import os\nos.unlink(%r)" % (PROFILE + "/ipython_kernel_config.py"))

    def config(self, text):
        out, r = self.c.execute("import os\nos.makedirs(%r, exist_ok=True)\nopen(%r, 'w').write(%r)"
                                % (PROFILE, PROFILE + "/ipython_kernel_config.py", text))
        self.assertFalse(r["isError"], out)
        # The config appeared: this reset forks (the standby declines); with it there, no
        # standby is prepared (a standby that ran it would fail these tests).
        reset(self, self.c, "zygote")
        standby_of(self.c, timeout=5)

    def test_a_file_the_config_reads_is_read_after_the_reset(self):
        self.c.execute("open('/app/sb-lines.txt', 'w').write('from_file = 1')")
        self.config("c.InteractiveShellApp.exec_lines = [open('/app/sb-lines.txt').read()]\n")
        text, r = self.c.execute("print(from_file)\n_ = open('/app/sb-lines.txt', 'w').write('from_file = 2')")
        self.assertEqual(text.strip(), "1", text)
        r = self.c.call("reset")
        self.assertFalse(r["isError"], text_of(r))
        text, _ = self.c.execute("print(from_file)")
        # A kernel forked at the reset reads 2; the standby read the file before it was changed.
        self.assertEqual(text.strip(), "2", "the standby ran the config before the reset (start %s)" % start_of(r))

    def test_a_child_made_by_the_config_does_not_hold_the_reset(self):
        # The config forks a child that exits: in the standby it is a zombie whose parent is the
        # spared standby, which the walk of KILL_ALL finds again on every pass.
        self.config("import os\nif os.fork() == 0:\n    os._exit(0)\n")
        t0 = time.monotonic()
        r = self.c.call("reset")
        took = time.monotonic() - t0
        self.assertFalse(r["isError"], text_of(r))
        self.assertLess(took, 2.0, "reset took %.1f s (start %s)" % (took, start_of(r)))

    def test_a_thread_made_by_the_config_is_seen(self):
        # threading.active_count() counts only threading's threads; one from _thread (or C)
        # leaves the standby with two threads, and it is taken.
        self.config("import _thread, time\n_thread.start_new_thread(time.sleep, (3600,))\n")
        host, sb = standby_of(self.c, timeout=5)
        threads = 1
        if host is not None:
            with open("/proc/%d/status" % host) as f:
                threads = int(f.read().split("Threads:")[1].split()[0])
        r = self.c.call("reset")
        self.assertFalse(r["isError"], text_of(r))
        if start_of(r) == "standby":
            self.assertEqual(threads, 1, "a standby with %d threads was taken" % threads)


class NothingTheSandboxWroteRunsInTheStandby(unittest.TestCase):
    """The standby outlives the old kernel's KILL_ALL: code the sandbox wrote that ran in it
    before the reset would survive the reset (as the next kernel, or as a process it left).
    Found by an attacker's review: a JSON config file, which the standby used to read as data,
    names what traitlets imports and calls. Each case here ran the sandbox's code in the
    standby before the fix; each must run it only in the kernel after a reset."""

    def setUp(self):
        require_sandbox(self)

    def session(self):
        self.ws = tempfile.mkdtemp(prefix="ipybox-sbw-")
        c = McpClient("--workspace", self.ws, "--standby")
        self.addCleanup(c.close)
        return c

    def only_after_the_reset(self, c, setup, marker):
        """setup (a cell) makes the sandbox's code run at a kernel's start, leaving marker (a
        file in /app); a kernel started after it runs it; once it is removed, no standby made
        meanwhile may run it again before the next reset, which runs it."""
        out, r = c.execute(setup)
        self.assertFalse(r["isError"], out)
        r = c.call("reset")
        self.assertFalse(r["isError"], text_of(r))
        self.assertNotEqual(start_of(r), "standby", "a standby prepared before the setup was taken")
        host = os.path.join(self.ws, marker)
        self.assertTrue(os.path.exists(host), "the kernel after the reset did not run it (%s)" % start_of(r))
        os.unlink(host)
        # A standby is made ~300 ms after the kernel answered, and prepares in ~40 ms of CPU.
        time.sleep(3)
        self.assertFalse(os.path.exists(host), "the sandbox's code ran before the reset (in a standby)")
        r = c.call("reset")
        self.assertFalse(r["isError"], text_of(r))
        self.assertNotEqual(start_of(r), "standby")
        self.assertTrue(os.path.exists(host), "the kernel after the second reset did not run it")

    def test_a_module_a_json_config_names_is_imported_only_after_the_reset(self):
        # InteractiveShell.loop_runner: traitlets imports the name (a module in the user site).
        c = self.session()
        self.only_after_the_reset(c, (
            "import json, os, site\n"
            "us = site.getusersitepackages(); os.makedirs(us, exist_ok=True)\n"
            "open(us + '/sbevil.py', 'w').write(\"open('/app/sbevil.mark', 'a').write('x')\\n"
            "from IPython.core.interactiveshell import _asyncio_runner as runner\\n\")\n"
            "os.makedirs(%r, exist_ok=True)\n"
            "json.dump({'InteractiveShell': {'loop_runner': 'sbevil.runner'}}, open(%r, 'w'))"
            % (PROFILE, PROFILE + "/ipython_kernel_config.json")), "sbevil.mark")

    def test_a_factory_a_json_config_names_is_called_only_after_the_reset(self):
        # IPKernelApp.logging_config: dictConfig calls the "()" factory, here one that is loaded
        # already (no import): a FileHandler, which creates its file.
        c = self.session()
        self.only_after_the_reset(c, (
            "import json, os\n"
            "os.makedirs(%r, exist_ok=True)\n"
            "json.dump({'IPKernelApp': {'logging_config': {'handlers': {'sbevil': {"
            "'()': 'logging.FileHandler', 'filename': '/app/sbevil-handler.log'}}}}}, open(%r, 'w'))"
            % (PROFILE, PROFILE + "/ipython_kernel_config.json")), "sbevil-handler.log")


# Background processes of every kind a reset must take while it spares the standby.
SURVIVORS = r"""
import os, time, signal, ctypes
libc = ctypes.CDLL(None, use_errno=True)
def spawn(fn):
    if os.fork() == 0:
        try:
            fn()
        finally:
            os._exit(0)
def subreaper():
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER, with a setsid daemon below it
    spawn(lambda: (os.setsid(), time.sleep(3600)))
    time.sleep(3600)
def stopped_lookalike():
    libc.prctl(15, b'python3', 0, 0, 0)  # PR_SET_NAME: the standby's comm
    os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(3600)
def storm():
    while True:
        try:
            if os.fork() == 0:
                time.sleep(0.01)
                os._exit(0)
        except OSError:
            time.sleep(0.001)
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            pass
def zombie_parent():
    if os.fork() == 0:
        os._exit(0)
    time.sleep(3600)
spawn(subreaper)
spawn(stopped_lookalike)
spawn(zombie_parent)
for i in range(4):
    spawn(storm)
time.sleep(0.5)
"""


class KillAllSparesOnlyTheStandby(unittest.TestCase):
    def test_background_processes_of_every_kind_go(self):
        require_sandbox(self)
        ws = tempfile.mkdtemp(prefix="ipybox-sbk-")
        c = McpClient("--workspace", ws, "--standby")
        self.addCleanup(c.close)
        host, sb = standby_of(c)
        self.assertIsNotNone(sb, "no standby was made")
        text, r = c.execute(SURVIVORS)
        self.assertFalse(r["isError"], text)
        t0 = time.monotonic()
        reset(self, c, "standby")
        self.assertLess(time.monotonic() - t0, 2.0)
        # Every process but PID 1 and the kernel (the standby taken) is gone; a new standby (not
        # the sandbox user's /proc files) may be there already.
        text, r = c.execute(FIND + "print('LEFT', sorted(int(p) for p in os.listdir('/proc')"
                            " if p.isdigit() and int(p) not in (1, os.getpid(), sb)))")
        self.assertEqual(text.split("LEFT", 1)[1].strip(), "[]", text)
        text, r = c.execute("import os\nprint(os.getpid())")
        self.assertEqual(text.strip(), str(sb))


class HistoryDatabase(unittest.TestCase):
    def test_a_database_corrupted_in_place_is_recovered_both_ways(self):
        # The standby opened the history database while it prepared; kernel code then overwrites
        # its header in place (same inode: the identity check passes). A forked kernel finds it
        # corrupt at its start, moves it aside and writes history to a new one; so must the
        # standby. It fails about one run in two now: the standby's connection, opened before,
        # meets the corruption in its saving thread, which stops ("History will not be written
        # to the database") for the whole life of that kernel. (Zeroing the first 16 KiB instead makes a forked kernel exit at its start,
        # "database disk image is malformed", standby or not: not a standby matter.)
        require_sandbox(self)
        ws = tempfile.mkdtemp(prefix="ipybox-sbh-")
        c = McpClient("--workspace", ws, "--standby")
        self.addCleanup(c.close)
        for expect in ("zygote", "standby"):
            host, sb = standby_of(c)
            self.assertIsNotNone(sb, "no standby was made")
            if expect == "zygote":
                os.kill(host, 9)
            text, r = c.execute("import os\nfd = os.open(str(get_ipython().history_manager.hist_file), os.O_WRONLY)\n"
                                "_ = os.write(fd, b'garbage!' * 16)\nos.close(fd)")
            self.assertFalse(r["isError"], text)
            reset(self, c, expect)
            first, r = c.execute("x = 1")
            time.sleep(0.5)
            text, r = c.execute(
                "import sqlite3\nhm = get_ipython().history_manager\n"
                "con = sqlite3.connect(str(hm.hist_file))\n"
                "print('ROWS', con.execute('select count(*) from history where session = ?',"
                " (hm.session_number,)).fetchone()[0])")
            self.assertNotIn("History will not be written", first, expect)
            self.assertNotEqual(text.split("ROWS", 1)[-1].strip(), "0", expect + ": " + first + text)


class IpythonDirMode(unittest.TestCase):
    def test_an_unwritable_ipython_dir_is_seen_both_ways(self):
        # IPython takes a temporary directory when ~/.ipython is not writable; the standby
        # checked only that directory's identity (device, inode), not its mode, so a chmod
        # after it prepared left it on ~/.ipython (its config, its history) where a forked
        # kernel is not.
        require_sandbox(self)
        ws = tempfile.mkdtemp(prefix="ipybox-sbm-")
        c = McpClient("--workspace", ws, "--standby")
        self.addCleanup(c.close)
        self.addCleanup(c.execute, "import os\nos.chmod('/home/appuser/.ipython', 0o755)")
        seen = {}
        for expect in ("zygote", "standby"):
            host, sb = standby_of(c)
            self.assertIsNotNone(sb, "no standby was made")
            if expect == "zygote":
                os.kill(host, 9)
            text, r = c.execute("import os\nos.chmod('/home/appuser/.ipython', 0o555)")
            self.assertFalse(r["isError"], text)
            r = c.call("reset")
            self.assertFalse(r["isError"], text_of(r))
            text, _ = c.execute("print('DIR', get_ipython().ipython_dir.startswith('/home/'))\n"
                                "import os\nos.chmod('/home/appuser/.ipython', 0o755)")
            seen[expect] = (start_of(r), text.split("DIR", 1)[-1].strip())
        self.assertEqual(seen["zygote"][1], seen["standby"][1], seen)

    def test_a_standby_made_while_it_was_unwritable_is_not_taken_once_mended(self):
        # The other way (a second review): a standby prepared while ~/.ipython was not writable
        # took a temporary IPython directory, and its checks watched only that one; mended
        # after, with a startup file and a config file put there, the standby was taken and
        # ran neither, where a forked kernel runs both.
        require_sandbox(self)
        ws = tempfile.mkdtemp(prefix="ipybox-sbm-")
        c = McpClient("--workspace", ws, "--standby")
        self.addCleanup(c.close)
        startup = PROFILE + "/startup/00-sbmark.py"
        conf = PROFILE + "/ipython_kernel_config.json"
        self.addCleanup(c.execute, "import os\nos.chmod('/home/appuser/.ipython', 0o755)\n"
                        "for f in (%r, %r):\n    if os.path.exists(f): os.unlink(f)" % (startup, conf))
        text, r = c.execute("import os\nos.chmod('/home/appuser/.ipython', 0o555)")
        self.assertFalse(r["isError"], text)
        reset(self, c, "zygote")
        time.sleep(2)  # its standby would have been made and prepared by now, against /tmp
        text, r = c.execute(
            "import json, os\nos.chmod('/home/appuser/.ipython', 0o755)\n"
            "os.makedirs(os.path.dirname(%r), exist_ok=True)\n"
            "open(%r, 'w').write(\"open('/app/sbmark', 'w').close()\\n\")\n"
            "json.dump({'InteractiveShell': {'ast_node_interactivity': 'none'}}, open(%r, 'w'))"
            % (startup, startup, conf))
        self.assertFalse(r["isError"], text)
        r = c.call("reset")
        self.assertFalse(r["isError"], text_of(r))
        text, _ = c.execute("import os\nprint(get_ipython().ipython_dir, get_ipython().ast_node_interactivity, "
                            "os.path.exists('/app/sbmark'))")
        self.assertEqual(text.split(), ["/home/appuser/.ipython", "none", "True"],
                         "start %s: %s" % (start_of(r), text))


# Arms the sandbox's stderr pipe (ipykernel keeps the original fd 2 as
# _original_stdstream_copy): SIGTERM to pid SB at every read of it by the supervisor, and
# non-blocking writes. The open file description is shared by every process of the sandbox.
ARM_STDERR = r"""
import fcntl, os, signal, sys
fd = sys.stderr._original_stdstream_copy
fcntl.fcntl(fd, fcntl.F_SETOWN, SB)
fcntl.fcntl(fd, 10, signal.SIGTERM)  # F_SETSIG
fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC | os.O_NONBLOCK)
print('ARMED', fcntl.fcntl(fd, fcntl.F_GETOWN))
"""


class StdioLeftArmed(unittest.TestCase):
    def test_the_stderr_pipe_armed_for_the_standby_does_not_signal_the_next_kernel(self):
        # A third review: the owner of the shared stderr pipe can be set to the standby's pid
        # (a forked kernel's pid does not exist yet: F_SETOWN fails), so the kernel after a
        # reset, which is that standby, got SIGTERM at the supervisor's next read of its stderr.
        require_sandbox(self)
        ws = tempfile.mkdtemp(prefix="ipybox-sbio-")
        c = McpClient("--workspace", ws, "--standby")
        self.addCleanup(c.close)
        host, sb = standby_of(c)
        self.assertIsNotNone(sb, "no standby was made")
        text, r = c.execute(ARM_STDERR.replace("SB", str(sb)))
        self.assertEqual(text.split(), ["ARMED", str(sb)], text)
        reset(self, c, "standby")
        text, r = c.execute("import fcntl, os, sys\nfd = sys.stderr._original_stdstream_copy\n"
                            "print(os.getpid(), fcntl.fcntl(fd, fcntl.F_GETOWN), "
                            "bool(fcntl.fcntl(fd, fcntl.F_GETFL) & (os.O_ASYNC | os.O_NONBLOCK)))\n"
                            "for _ in range(20):\n    os.write(fd, b'to stderr\\n')")
        self.assertEqual(text.split(), [str(sb), "0", "False"], text)
        time.sleep(1)  # the supervisor reads the lines meanwhile
        text, r = c.execute("import os\nprint(os.getpid())")
        self.assertFalse(r["isError"], text)
        self.assertEqual(text.strip(), str(sb), "the kernel after the reset was replaced: " + text)


# Stops or kills the zygote's fork helper A (PPid 0 in the sandbox) for 3 s, alternately.
HIT_A = r"""
import os, signal, time
end = time.time() + 3
while time.time() < end:
    for p in os.listdir('/proc'):
        if p.isdigit() and p != '1':
            try:
                st = open('/proc/%s/stat' % p).read().rsplit(')', 1)[1].split()
            except OSError:
                continue
            if st[1] == '0':
                os.kill(int(p), signal.SIGSTOP if int(time.time() * 10) % 2 else signal.SIGKILL)
"""


class NoLeakInPid1OrTheZygote(unittest.TestCase):
    def test_fds_stay_through_resets_with_a_killed_stopped_or_missing_standby(self):
        require_sandbox(self)
        ws = tempfile.mkdtemp(prefix="ipybox-sbf-")
        c = McpClient("--workspace", ws, "--standby")
        self.addCleanup(c.close)

        def fds(pid):
            return len(os.listdir("/proc/%d/fd" % pid))

        host, sb = standby_of(c)
        self.assertIsNotNone(sb, "no standby was made")
        s0, s1, kernels, zygotes = tree(c)
        base = (fds(s1), [fds(z) for z in zygotes])
        for i in range(8):
            way = i % 4
            host, sb = standby_of(c, timeout=3)
            if host and way == 0:
                os.kill(host, 9)
            if host and way == 1:
                os.kill(host, 19)  # SIGSTOP from the host: continued at activation
            r = c.call("reset")
            self.assertFalse(r["isError"], text_of(r))
            if way == 2:
                c.execute(HIT_A)
            host, sb = standby_of(c, timeout=3)
            s0, s1, kernels, zygotes = tree(c)
            self.assertEqual(len(kernels), 2 if host else 1)
            # S1 holds one more fd while a standby waits (its channel).
            self.assertEqual((fds(s1) + (0 if host else 1), [fds(z) for z in zygotes]), base, "round %d" % i)



class PidsLimitFull(unittest.TestCase):
    def test_a_full_pids_limit_costs_only_the_standby(self):
        # Kernel code takes every slot of --max-processes before the standby is due: its fork
        # fails, the reset forks from the same zygote, and the next kernel gets a standby.
        require_sandbox(self)
        ws = tempfile.mkdtemp(prefix="ipybox-sbp-")
        c = McpClient("--workspace", ws, "--standby", "--max-processes", "24")
        self.addCleanup(c.close)
        host, sb = standby_of(c)
        self.assertIsNotNone(sb, "no standby was made")
        zygotes = zygote_pids(c)
        reset(self, c, "standby")
        text, r = c.execute("import os, time\nn = 0\nwhile True:\n    try:\n        p = os.fork()\n"
                            "    except OSError:\n        break\n    if p == 0:\n        time.sleep(3600)\n"
                            "        os._exit(0)\n    n += 1\nprint('HELD', n)")
        self.assertIn("HELD", text)
        self.assertEqual(standby_of(c, timeout=3), (None, None))
        reset(self, c, "zygote")
        self.assertEqual(zygote_pids(c), zygotes, "the zygote was replaced")
        self.assertIsNotNone(standby_of(c)[1], "no standby after the reset")
        reset(self, c, "standby")
