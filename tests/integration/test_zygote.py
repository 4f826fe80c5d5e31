"""Kernels forked from the sandbox's zygote (architecture.md, "Zygote kernels"): what `reset`
keeps and drops, deaths, fresh state in each kernel, a forked kernel seen from inside as a slow
one is, and the fallback when the zygote is gone or refused. The reset cases run with the
zygote on and off (--no-zygote) and must give the same results."""
import json
import os
import re
import signal
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import (PROTOCOL, McpClient, descendants, require_sandbox, text_of, wait_for,  # noqa: E402
                         proc_comm as comm)
from daemon_fixture import Daemon  # noqa: E402
from test_mcp_kernel import make_wheel  # noqa: E402
import test_user_limits  # noqa: E402


def start_of(r):
    """How the kernel of a reset result started: "zygote" or "exec"."""
    return r["_meta"]["ipybox/kernel"]["start"]


def ppid_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0



def stop_new(find, old=(), timeout=60):
    """SIGSTOPs the first process that find() lists and old does not, as soon as it is there;
    returns its pid, or None when none came within timeout seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        new = [p for p in find() if p not in old]
        if new:
            os.kill(new[0], signal.SIGSTOP)
            return new[0]
        time.sleep(0.005)
    return None


def zygote_pids(c):
    """The session's zygotes, found on the host: python processes whose parent is S0, the
    ipybox-shim that has another ipybox-shim (S1, the kernels' PID 1) as its child."""
    procs = descendants(c.proc.pid)
    parent = {p: ppid_of(p) for p in procs}
    shims = {p for p in procs if comm(p) == "ipybox-shim"}
    s0 = {parent[p] for p in shims if parent[p] in shims}
    return sorted(p for p in procs if parent[p] in s0 and comm(p).startswith("python"))


# What a kernel sees of itself, as one cell: compared between a forked kernel and a slow one.
PROBE = r'''
import ctypes, json, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
sig = ctypes.c_int()
libc.prctl(2, ctypes.byref(sig), 0, 0, 0)  # PR_GET_PDEATHSIG
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
one = dict(l.split(":", 1) for l in open("/proc/1/status").read().splitlines() if ":" in l)
disp = {}
for s in sorted(signal.valid_signals()):
    if s in (signal.SIGKILL, signal.SIGSTOP):
        continue
    h = signal.getsignal(s)
    disp[int(s)] = h if isinstance(h, int) else getattr(h, "__name__", repr(h))
blocked = sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))
procs = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("PROBE" + json.dumps({
    "argv": sys.argv, "flags": list(sys.flags), "environ": dict(os.environ),
    "cmdline": open("/proc/self/cmdline", "rb").read().decode().split("\0"),
    "cwd": os.getcwd(), "dumpable": libc.prctl(3, 0, 0, 0, 0), "pdeathsig": sig.value,
    "ppid": os.getppid(), "procs_other_than_me": [p for p in procs if p != os.getpid()],
    "pid1": [open("/proc/1/comm").read().strip(), one["PPid"].strip()],
    "fds": sorted(int(f) for f in os.listdir("/proc/self/fd"))[:3],
    "fd_kinds": sorted({__import__("re").sub(r"\[\d+\]", "", os.readlink("/proc/self/fd/" + f))
                        for f in os.listdir("/proc/self/fd") if os.path.exists("/proc/self/fd/" + f)}),
    "caps": [status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")],
    "nnp": status["NoNewPrivs"].strip(), "seccomp": status["Seccomp"].strip(),
    "uid": [os.getuid(), os.geteuid(), os.getgid()], "groups": os.getgroups(),
    "signals": disp, "blocked": blocked, "path": sys.path, "pgid_is_pid": os.getpgid(0) == os.getpid(),
    "sid_is_pid": os.getsid(0) == os.getpid(), "umask": os.umask(0o22),
    "user_site": __import__("site").getusersitepackages(), "gc": __import__("gc").isenabled(),
    "frozen": __import__("gc").get_freeze_count() > 0, "hash_seed_env": os.environ.get("PYTHONHASHSEED"),
}))
'''


# The plain globals (bool, int, str, tuples of them) of every loaded module, and the names
# that each class a module defines has (a module that looks at its process at import may
# define methods or not: psutil's Process has io_counters only where /proc/<its pid>/io was).
GLOBALS = r'''
import sys, json
out = {}
for name, m in list(sys.modules.items()):
    d = getattr(m, "__dict__", None)
    if not isinstance(d, dict):
        continue
    for k, v in list(d.items()):
        if isinstance(v, type) and getattr(v, "__module__", None) == name and not k.startswith("__"):
            out[name + "." + k + ".__dict__"] = repr(sorted(n for n in vars(v) if isinstance(n, str)))
            continue
        if k.startswith("__") or type(v) not in (bool, int, str, tuple):
            continue
        if type(v) is tuple and not all(type(x) in (bool, int, str) for x in v):
            continue
        out[name + "." + k] = repr(v)
print("GLOBALS" + json.dumps(out))
'''
# Differences any two interpreters have: addresses (ASLR) and the order of sets of str (the
# hash secret), which tokenize joins into its patterns.
DIFFER_ANYWAY = re.compile(r"^(_?ctypes\.\w+_addr|tokenize\.\w+)$")


# The kernel's IPKernelApp: every trait, its config and command-line config, its log handlers,
# the excepthook and the shell's config. Compared between a forked kernel and a slow one.
APP = r'''
import json, logging, re, sys
from ipykernel.kernelapp import IPKernelApp
app = IPKernelApp.instance()
def plain(v):
    return re.sub(r" at 0x[0-9a-f]+", "", repr(v))
out = {n: plain(getattr(app, n)) for n in sorted(app.trait_names())}
out["config"] = plain(app.config)
out["cli_config"] = plain(app.cli_config)
out["handlers"] = plain([(h, h.level, h.formatter._fmt if h.formatter else None)
                         for h in logging.getLogger("IPKernelApp").handlers])
out["excepthook"] = plain(sys.excepthook)
out["shell_config"] = plain(get_ipython().config)
print("APP" + json.dumps(out))
'''
# What differs between any two kernels: thread ids; the fd that ipykernel dups from stderr for
# its log handler (44 or 45 in slow starts too: zmq's I/O thread opens its own fds meanwhile);
# and the Session key of `--secure`, a flag whose config jupyter_client makes at import (a
# random key, unused: our argv has no --secure).
APP_DIFFER_ANYWAY = re.compile(r"(started daemon \d+|<StreamHandler \d+ |'key': b'[0-9a-f-]+')")


# The patterns in re's cache, as a kernel's first cell sees them (the cell's own transform
# has compiled tokenize's): tokenize's are named, not spelled, as their text depends on the
# order of sets of str (DIFFER_ANYWAY).
RE_CACHE = r'''
import re, json, tokenize
names = {}
for k, v in vars(tokenize).items():
    if isinstance(v, str):
        names.setdefault(v, "tokenize." + k)
for v in getattr(tokenize, "endpats", {}).values():
    names.setdefault(v, "tokenize.endpats")
print("RE" + json.dumps(sorted(repr((t.__name__, names.get(p, p), f)) for t, p, f in list(re._cache))))
'''


def probe(c):
    # Its output holds the launcher's source (the kernel's argv), ~50 KB: past the default cap.
    text, r = c.execute(PROBE, max_output_chars=10 ** 7)
    assert not r["isError"], text
    return json.loads(text.split("PROBE", 1)[1])


class ResetSession(unittest.TestCase):
    """One session for the class, reset by its cases: with the zygote (zygote), or without, and
    with options (--standby). No case of its own."""
    zygote = True
    options = ()
    # How a reset's kernel may start (None: "zygote" or "exec", as zygote says).
    starts = None

    @classmethod
    def setUpClass(cls):
        require_sandbox(cls)
        cls.ws = tempfile.mkdtemp(prefix="ipybox-zy-")
        cls.c = McpClient("--workspace", cls.ws, *(() if cls.zygote else ("--no-zygote",)), *cls.options)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def settle(self):
        """Waits until what a reset starts beside the kernel is there (nothing here)."""

    def expected_starts(self):
        return self.starts or ("zygote" if self.zygote else "exec",)

    def reset(self):
        r = self.c.call("reset")
        self.assertFalse(r["isError"], text_of(r))
        self.assertIn(start_of(r), self.expected_starts(), text_of(r))
        return r


class ResetBothWays(ResetSession):
    """Each case runs with the zygote on and off; both must give the same results."""

    def test_variables_gone_files_and_user_packages_kept(self):
        whl = make_wheel(self.ws, name="zyprobe")
        text, r = self.c.execute("!pip install --no-index /app/%s" % os.path.basename(whl), timeout=300)
        self.assertFalse(r["isError"], text)
        text, r = self.c.execute("import zyprobe\nopen('/app/kept.txt', 'w').write('k')\nx_before = 1\n"
                                 "print(zyprobe.VALUE)")
        self.assertIn("from the wheel", text)
        self.reset()
        text, r = self.c.execute("print(open('/app/kept.txt').read())\nimport zyprobe\nprint(zyprobe.VALUE)\n"
                                 "print('x_before' in dir())")
        self.assertEqual(text.split(), ["k", "from", "the", "wheel", "False"], text)

    def test_background_processes_killed(self):
        text, r = self.c.execute(
            "import os, subprocess, time\n"
            "subprocess.Popen(['sleep', '1000'])\n"
            "subprocess.Popen(['setsid', 'sh', '-c', 'sleep 1001 & sleep 1002'])\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(1003)\n"
            "    os._exit(0)\n"
            "time.sleep(0.5)\n"
            "print(len([p for p in os.listdir('/proc') if p.isdigit()]))")
        self.assertGreaterEqual(int(text.split()[-1]), 6, text)
        # With --standby: its KILL_ALL, which spares the standby, is the one tried.
        self.settle()
        r = self.reset()
        if self.starts:
            self.assertEqual(start_of(r), self.starts[0], text_of(r))
        self.settle()
        # With --standby, a new standby (not dumpable: its /proc files are not the sandbox user's)
        # may be there already.
        skip = " and (p == '1' or os.stat('/proc/%s/environ' % p).st_uid == os.getuid())" if "--standby" in self.options else ""
        text, r = self.c.execute("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit() "
                                 "and int(p) != os.getpid()%s))" % skip)
        self.assertEqual(text.strip(), "[1]", "processes of the old kernel are left: " + text)

    def test_profile_written_before_a_reset_takes_effect_after_it(self):
        # The kernel's config file and a startup file of the profile in $HOME, written by the
        # sandbox: read by the next kernel (never by the zygote, which parses only the argv).
        profile = "/home/appuser/.ipython/profile_default"
        text, r = self.c.execute(
            "import os\n"
            "os.makedirs(%r, exist_ok=True)\n"
            "open(%r, 'w').write('c.IPKernelApp.exec_lines = [\"from_config = 40\"]\\n')\n"
            "open(%r, 'w').write('from_startup = 2\\n')\n"
            "print('from_config' in dir())" % (profile + "/startup", profile + "/ipython_kernel_config.py",
                                              profile + "/startup/50-zy.py"))
        self.assertEqual(text.strip(), "False", text)
        try:
            self.reset()
            text, r = self.c.execute("print(from_config + from_startup)")
            self.assertEqual(text.strip(), "42", text)
        finally:
            self.c.execute("import os\nos.unlink(%r)\nos.unlink(%r)" % (
                profile + "/ipython_kernel_config.py", profile + "/startup/50-zy.py"))
        self.reset()
        text, r = self.c.execute("print('from_config' in dir(), 'from_startup' in dir())")
        self.assertEqual(text.split(), ["False", "False"], text)

    def test_app_state_changed_by_a_kernel_is_not_the_next_ones(self):
        # The kernel's IPKernelApp is parsed in the zygote: what one kernel changes in it (its
        # argv, its config) is its own.
        app = "from ipykernel.kernelapp import IPKernelApp\napp = IPKernelApp.instance()\n"
        fresh, r = self.c.execute(app + "print(app.argv, app.extra_args, app.config.IPKernelApp, app.cli_config)")
        self.assertIn("connection.json", fresh)
        self.c.execute(app + "app.argv.append('--changed')\napp.extra_args.append('x')\n"
                       "app.config.IPKernelApp.exec_lines = ['changed = 1']\n"
                       "app.cli_config.IPKernelApp.connection_file = '/tmp/changed.json'")
        self.reset()
        text, r = self.c.execute(app + "print(app.argv, app.extra_args, app.config.IPKernelApp, app.cli_config)")
        self.assertEqual(text, fresh)
        self.assertNotIn("changed", text)

    def test_connection_file_is_the_supervisors(self):
        # The kernel does not write it again (kernel_launch.py): what the supervisor wrote
        # (kernel.c: indented by one, kernel_name python3) is what a cell finds.
        code = "print(repr(open('/run/ipybox/connection.json').read()))"
        for _ in range(2):
            text, r = self.c.execute(code)
            self.assertIn('\\n "kernel_name": "python3"', text)
            self.reset()

    def test_two_resets_in_a_row(self):
        self.c.execute("y = 5")
        self.reset()
        self.reset()
        text, r = self.c.execute("print('y' in dir(), 2 + 2)")
        self.assertEqual(text.split(), ["False", "4"])

    def test_reset_while_a_cell_runs(self):
        cell = self.c.send_request("tools/call", {"name": "execute_ipython_cell",
                                                  "arguments": {"code": "import time\nz = 1\ntime.sleep(600)"}})
        time.sleep(1)
        rid = self.c.send_request("tools/call", {"name": "reset", "arguments": {}})
        self.c.notify("notifications/cancelled", {"requestId": cell, "reason": "test"})
        msg = self.c.wait_response(rid, timeout=120)
        self.assertIn("result", msg, msg)
        self.assertIn(start_of(msg["result"]), self.expected_starts())
        text, r = self.c.execute("print('z' in dir())")
        self.assertEqual(text.strip(), "False")

    def test_killed_kernel_replaced_and_told(self):
        for how in ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
                    "import os, threading\nthreading.Thread(target=os._exit, args=(3,)).start()\n"
                    "import time\ntime.sleep(5)"):
            self.c.execute("w = 1")
            told, r = self.c.execute(how)
            time.sleep(0.5)
            text, r = self.c.execute("print('w' in dir())\n"
                                     "print('PYTHONUSERBASE=/nonexistent' in open('/proc/self/environ').read())")
            lines = text.strip().splitlines()
            self.assertIn("False", lines, text)
            # From the zygote: its environment at exec (PYTHONUSERBASE pointed away) is the one
            # /proc shows; os.environ is the options' own.
            self.assertEqual(lines[-1], str(self.zygote), text)
            self.assertIn("died", told + text)


class ResetWithoutZygote(ResetBothWays):
    zygote = False


class FreshState(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_sandbox(cls)
        cls.c = McpClient()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def test_three_kernels_differ(self):
        code = ("import json, os, random\n"
                "k = get_ipython().kernel\n"
                "key = json.load(open('/run/ipybox/connection.json'))['key']\n"
                "print('STATE' + json.dumps([random.random(), os.urandom(8).hex(), key, k.session.session, "
                "os.getpid(), hash('abc'), random.getrandbits(64)]))")
        # Three kernels forked by resets (the first one was forked too).
        self.assertEqual(start_of(self.c.call("reset")), "zygote")
        seen = []
        for i in range(3):
            text, r = self.c.execute(code)
            seen.append(json.loads(text.split("STATE", 1)[1]))
            r = self.c.call("reset")
            self.assertEqual(start_of(r), "zygote")
        for field, name in enumerate(("random", "urandom", "key", "session", "pid")):
            values = [s[field] for s in seen]
            self.assertEqual(len(set(values)), 3, "%s repeats across kernels: %s" % (name, values))
        self.assertEqual(len({s[6] for s in seen}), 3)
        # Documented: the kernels of one zygote are one invocation of Python, one hash secret.
        self.assertEqual(len({s[5] for s in seen}), 1)


class SeenFromInside(unittest.TestCase):
    """A forked kernel sees what a slow one sees (test_processes' probes, as cells)."""

    def test_same_as_a_slow_start(self):
        require_sandbox(self)
        with McpClient("--no-zygote") as slow, McpClient() as fast:
            self.assertEqual(start_of(slow.call("reset")), "exec")
            a = probe(slow)
            r = fast.call("reset")
            self.assertEqual(start_of(r), "zygote")
            b = probe(fast)
            ga = json.loads(slow.execute(GLOBALS, max_output_chars=10 ** 7)[0].split("GLOBALS", 1)[1])
            gb = json.loads(fast.execute(GLOBALS, max_output_chars=10 ** 7)[0].split("GLOBALS", 1)[1])
            appa = json.loads(slow.execute(APP, max_output_chars=10 ** 7)[0].split("APP", 1)[1])
            appb = json.loads(fast.execute(APP, max_output_chars=10 ** 7)[0].split("APP", 1)[1])
        self.assertGreater(len(appa), 50)
        self.assertIn("connection.json", appa["cli_config"])
        for k in sorted(appa):
            self.assertEqual(APP_DIFFER_ANYWAY.sub("", appa[k]), APP_DIFFER_ANYWAY.sub("", appb.get(k, "")),
                             "the kernel's app differs from a slow start's in %s" % k)
        self.assertGreater(len(ga), 1000)
        self.assertEqual(sorted(set(ga) ^ set(gb)), [], "modules or names that only one kernel has")
        differ = sorted(k for k in ga if ga[k] != gb[k] and not DIFFER_ANYWAY.match(k))
        self.assertEqual(differ, [], "module globals differ from a slow start's: %s" % [(k, ga[k], gb[k]) for k in differ])
        # What a forked kernel holds open is of the kinds a slow one holds (the history
        # database's files come and go with its thread's work).
        history = {"/home/appuser/.ipython/profile_default", "/home/appuser/.ipython/profile_default/history.sqlite",
                   "/home/appuser/.ipython/profile_default/history.sqlite-journal"}
        self.assertLessEqual(set(b["fd_kinds"]) - history, set(a["fd_kinds"]) | {"socket:"}, (a["fd_kinds"], b["fd_kinds"]))
        self.assertNotIn("/run/ipybox/connection.json", b["fd_kinds"])
        for k in ("argv", "flags", "environ", "cmdline", "cwd", "dumpable", "pdeathsig", "ppid", "pid1", "fds",
                  "caps", "nnp", "seccomp", "uid", "groups", "signals", "blocked", "path", "pgid_is_pid",
                  "sid_is_pid", "umask", "user_site", "gc", "hash_seed_env"):
            self.assertEqual(a[k], b[k], "%s differs: slow %r, forked %r" % (k, a[k], b[k]))
        self.assertEqual(b["ppid"], 1)
        self.assertEqual(b["pid1"], ["ipybox-shim", "0"])
        self.assertEqual(b["fds"], [0, 1, 2])
        self.assertEqual(b["procs_other_than_me"], [1], "the forked kernel sees other processes")
        # The differences that must be: the zygote's objects stay frozen in its kernels (so
        # that the collector never writes to the pages they share with it).
        self.assertFalse(a["frozen"])
        self.assertTrue(b["frozen"])
        self.assertEqual(b["dumpable"], 1)
        self.assertEqual(b["pdeathsig"], signal.SIGKILL)


    def test_warmed_patterns_are_a_slow_starts(self):
        """The zygote compiles patterns for its kernels (_warm_caches): only ones that a slow
        kernel has compiled too by its first cell."""
        require_sandbox(self)
        with McpClient("--no-zygote") as slow, McpClient() as fast:
            self.assertEqual(start_of(slow.call("reset")), "exec")
            self.assertEqual(start_of(fast.call("reset")), "zygote")
            a = json.loads(slow.execute(RE_CACHE)[0].split("RE", 1)[1])
            b = json.loads(fast.execute(RE_CACHE)[0].split("RE", 1)[1])
        self.assertGreater(len(a), 50)
        self.assertIn(repr(("str", "(?s:.*\\.ipy)\\Z", 0)), a)
        self.assertEqual(sorted(set(b) - set(a)), [], "patterns a forked kernel has and a slow one has not")
        self.assertEqual(sorted(set(a) - set(b)), [], "patterns a slow kernel has and a forked one has not")


class ZygoteLoss(unittest.TestCase):
    """The zygote killed from the host, or refused: the next kernel starts the slow way and
    says so once; the one after is forked again."""

    def setUp(self):
        require_sandbox(self)

    def lose(self, how, told):
        with McpClient() as c:
            c.execute("1")
            # This one is forked, as the first was (the zygote is READY).
            self.assertEqual(start_of(c.call("reset")), "zygote")
            zs = zygote_pids(c)
            self.assertEqual(len(zs), 1, "no zygote found under the session")
            how(zs[0])
            r = c.call("reset")
            self.assertFalse(r["isError"], text_of(r))
            self.assertEqual(start_of(r), "exec")
            note = text_of(r)
            self.assertIn("The zygote ended (it %s" % told, note)
            self.assertTrue(wait_for(lambda: zygote_pids(c) and zygote_pids(c) != zs, 30), "no new zygote")
            text, r2 = c.execute("print(1 + 1)")
            self.assertEqual(text.strip(), "2", "the note was told twice: " + text)
            r = c.call("reset")
            self.assertEqual(start_of(r), "zygote", text_of(r))
            self.assertNotIn("zygote", text_of(r))

    def test_sigkill_from_the_host(self):
        self.lose(lambda pid: os.kill(pid, signal.SIGKILL), "was killed by signal 9")

    def test_sigstop_past_the_bound(self):
        # It cannot answer FORK within 2 s: killed, the kernel started the slow way, and the
        # note says why (not the SIGKILL of S0's, which would read as a possible OOM).
        self.lose(lambda pid: os.kill(pid, signal.SIGSTOP), "did not answer in time and was killed)")

    def test_loss_told_with_a_reset_whose_start_failed(self):
        # The kernel that replaces a lost zygote dies while it starts (a startup file the last
        # kernel left, which removes itself): the reset's result says the zygote ended, with
        # the rescue start that followed (before the rescue, with the failed reset). Before,
        # that note waited for the next successful call, whose kernel was forked from the new
        # zygote, and told it "this kernel started the slow way".
        with McpClient() as c:
            out, _ = c.execute(
                "import os\n"
                "p = os.path.join(get_ipython().profile_dir.startup_dir, '00-die.py')\n"
                "os.makedirs(os.path.dirname(p), exist_ok=True)\n"
                "open(p, 'w').write('import os\\nos.remove(%r)\\nos._exit(3)\\n' % p)\n"
                "print('PLANTED')")
            self.assertIn("PLANTED", out)
            zs = zygote_pids(c)
            self.assertEqual(len(zs), 1, "no zygote found under the session")
            os.kill(zs[0], signal.SIGKILL)
            r = c.call("reset")
            self.assertFalse(r["isError"], text_of(r))
            self.assertEqual(start_of(r), "rescue", text_of(r))
            self.assertIn("could not start as usual: the kernel exited while starting", text_of(r))
            self.assertIn("The zygote ended (it was killed by signal 9", text_of(r))
            text, r = c.execute("print(1 + 1)")
            self.assertEqual(text.splitlines()[0], "2", text)
            self.assertNotIn("zygote", json.dumps(r), "a stale note came with a later kernel")
            self.assertEqual(start_of(c.call("reset")), "zygote")

    def test_two_zygotes_lost_before_ready_none_again(self):
        for attempt in range(3):
            if self.two_lost_before_ready():
                return
        self.skipTest("a new zygote was never caught before READY (3 sessions)")

    def two_lost_before_ready(self):
        with McpClient() as c:
            c.execute("1")
            self.assertEqual(start_of(c.call("reset")), "zygote")
            first = zygote_pids(c)
            self.assertEqual(len(first), 1)
            os.kill(first[0], signal.SIGKILL)  # it was READY (it forked a kernel): not a failed boot
            r = c.call("reset")
            self.assertEqual(start_of(r), "exec")
            self.assertIn("a new zygote is being made", text_of(r))
            for n in (1, 2):
                # The new one, caught before READY (held before its exec, or before its imports).
                z = stop_new(lambda: tree(c)[3], first, timeout=30)
                self.assertIsNotNone(z, "no new zygote")
                if comm(z) != "ipybox-shim" and has_imported_zmq(z):
                    os.kill(z, signal.SIGCONT)
                    return False
                os.kill(z, signal.SIGKILL)
                r = c.call("reset")
                self.assertEqual(start_of(r), "exec", text_of(r))
                if n == 1:
                    self.assertIn("a new zygote is being made", text_of(r))
                else:
                    self.assertIn("ended twice before it was ready", text_of(r))
                    self.assertIn("slow way from now on", text_of(r))
                first = [z]
            time.sleep(1)
            # What S0 holds now only keeps the zygote's place in the pids limit: one Zpre, held
            # before its exec, that is never let boot (test_zygote_attacks2.py).
            held = tree(c)[3]
            self.assertEqual(len(held), 1, "not one held Zpre after two failed zygotes: %s" % held)
            self.assertEqual(comm(held[0]), "ipybox-shim", "a zygote was made after two failed ones")
            r = c.call("reset")
            self.assertEqual(start_of(r), "exec")
            self.assertNotIn("zygote", text_of(r), "said twice")
            self.assertEqual(c.execute("print(3 * 3)")[0].strip(), "9")
            time.sleep(1)
            self.assertEqual([comm(p) for p in tree(c)[3]], ["ipybox-shim"], "the held Zpre booted")
            return True

    def test_memory_kill_replaced_from_the_zygote(self):
        with McpClient("--memory", "300M") as c:
            self.assertEqual(start_of(c.call("reset")), "zygote")
            c.execute("v = 1")
            zs = zygote_pids(c)
            self.assertEqual(len(zs), 1)
            told, r = c.execute("x = bytearray(1 << 30)")
            if "MemoryError" in told and "address space" in told:
                # No cgroup for this user here: --memory is RLIMIT_AS per process, the cell gets
                # MemoryError and no kernel dies (test_user_limits checks that case).
                self.skipTest("--memory is a per-process address-space limit on this host: no kernel death")
            text, r = c.execute("print('v' in dir())\n"
                                "print('PYTHONUSERBASE=/nonexistent' in open('/proc/self/environ').read())")
            self.assertIn("died", told + text)
            self.assertEqual(text.strip().splitlines()[-2:], ["False", "True"] if zygote_pids(c) == zs else
                             ["False", "False"], "the zygote %s" % ("kept" if zygote_pids(c) == zs else "lost"))
            # The out-of-memory killer takes the larger private part: the kernel, not the zygote.
            self.assertEqual(zygote_pids(c), zs)

    def test_pythonpath_means_no_zygote_said_once(self):
        for var in ("PYTHONHOME=/usr", "PYTHONPYCACHEPREFIX=/tmp/pyc"):
            with McpClient("--container-env-var", var) as c:
                text, r = c.execute("print(1)")
                self.assertIn("No zygote in this session: its options set %s," % var.split("=")[0], text)
                self.assertEqual(zygote_pids(c), [])
        with McpClient("--container-env-var", "PYTHONPATH=/app/lib") as c:
            text, r = c.execute("print(1)")
            self.assertIn("No zygote in this session", text)
            self.assertIn("PYTHONPATH", text)
            self.assertEqual(zygote_pids(c), [])
            r = c.call("reset")
            self.assertEqual(start_of(r), "exec")
            self.assertNotIn("zygote", text_of(r))
            text, r = c.execute("print(2)")
            self.assertEqual(text.strip(), "2")


PROTOCOL_INIT = {"capabilities": {}, "clientInfo": {"name": "ipybox-tests", "version": "1"}}
FORKED = "print('PYTHONUSERBASE=/nonexistent' in open('/proc/self/environ').read())"


def tree(c):
    """(S0, S1, kernels, zygotes) of a session, from the host: S1 is the ipybox-shim that is
    PID 1 of its namespace under S0 (PID 1 of the one above); kernels are S1's python children,
    zygotes S0's other children (an ipybox-shim held before its exec, then python)."""
    procs = descendants(c.proc.pid)
    parent = {p: ppid_of(p) for p in procs}
    shims = {p for p in procs if comm(p) == "ipybox-shim"}
    s1 = [p for p in shims if parent[p] in shims and ns_pid(p) == 1 and ns_pid(parent[p]) == 1]
    if len(s1) != 1:
        return None, None, [], []
    s1 = s1[0]
    s0 = parent[s1]
    kids = lambda of: sorted(p for p in procs if parent[p] == of and p != s1)  # noqa: E731
    return (s0, s1, [p for p in kids(s1) if comm(p).startswith("python")],
            [p for p in kids(s0) if comm(p).startswith("python") or comm(p) == "ipybox-shim"])


def ns_pid(pid):
    """pid's number in its own pid namespace (the last of NSpid), or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None


def has_imported_zmq(pid):
    """Whether pid maps pyzmq or libzmq: a kernel answers, and a zygote is READY, only after."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            return "zmq" in f.read()
    except OSError:
        return True


class FirstKernel(unittest.TestCase):
    """The first zygote of a sandbox boots at once and the first kernel is forked from it (their
    pages shared), its START waiting for READY as for a slow start; a zygote made after a lost
    one is held until the kernel started the slow way meanwhile answered, and a reset while it
    boots waits for it (architecture.md, "Zygote kernels")."""

    def setUp(self):
        require_sandbox(self)

    def test_first_kernel_forked_and_the_next(self):
        with McpClient() as c:
            self.assertEqual(c.execute(FORKED)[0].strip(), "True", "the first kernel was not forked")
            r = c.call("reset")
            self.assertFalse(r["isError"], text_of(r))
            self.assertEqual(start_of(r), "zygote", text_of(r))
            self.assertNotIn("zygote", text_of(r))
            self.assertEqual(c.execute(FORKED)[0].strip(), "True")

    def test_first_kernel_waits_for_the_zygotes_boot(self):
        for attempt in range(3):
            c = McpClient(initialize=False)
            try:
                rid = c.send_request("initialize", dict(PROTOCOL_INIT, protocolVersion=PROTOCOL))
                # Hold the first zygote before its imports are done (before READY).
                zygote = stop_new(lambda: zygote_pids(c))
                self.assertIsNotNone(zygote, "no zygote at the start")
                if has_imported_zmq(zygote):
                    os.kill(zygote, signal.SIGCONT)
                    continue  # caught too late to tell; a new session
                time.sleep(2)
                # No kernel is started the slow way beside it, and no second zygote is made.
                s0, s1, ks, zs = tree(c)
                self.assertEqual(ks, [], "a kernel runs while the first zygote boots")
                self.assertEqual(zs, [zygote])
                self.assertRaises(TimeoutError, c.wait_response, rid, 0.5)
                os.kill(zygote, signal.SIGCONT)
                c.wait_response(rid, timeout=120)
                c.notify("notifications/initialized")
                self.assertEqual(c.execute(FORKED)[0].strip(), "True")
                self.assertEqual(zygote_pids(c), [zygote])
                return
            finally:
                c.close()
        self.skipTest("the first zygote was never caught before its imports (3 sessions)")

    def test_reset_while_the_zygote_boots_waits_for_it(self):
        for attempt in range(3):
            with McpClient() as c:
                self.assertEqual(c.execute("print(1 + 1)")[0].strip(), "2")
                # A lost zygote: the reset starts its kernel the slow way, and the new zygote
                # boots once that kernel answered: hold it before its imports are done.
                old = zygote_pids(c)
                os.kill(old[0], signal.SIGKILL)
                self.assertEqual(start_of(c.call("reset")), "exec")
                zygote = stop_new(lambda: zygote_pids(c), old, timeout=30)
                self.assertIsNotNone(zygote, "no new zygote after the slow kernel answered")
                if has_imported_zmq(zygote):
                    os.kill(zygote, signal.SIGCONT)
                    continue  # it may be READY already; a new session
                rid = c.send_request("tools/call", {"name": "reset", "arguments": {}})
                time.sleep(2)
                # The reset waits for READY: the old kernel is gone, no kernel is started the
                # slow way beside the booting zygote, and no second zygote is made.
                s0, s1, ks, zs = tree(c)
                self.assertEqual(ks, [], "a kernel runs while the zygote boots")
                self.assertEqual(zs, [zygote])
                self.assertRaises(TimeoutError, c.wait_response, rid, 0.5)
                os.kill(zygote, signal.SIGCONT)
                msg = c.wait_response(rid, timeout=60)
                r = msg["result"]
                self.assertFalse(r["isError"], text_of(r))
                self.assertEqual(start_of(r), "zygote", text_of(r))
                self.assertGreaterEqual(r["_meta"]["ipybox/kernel"]["ms"], 2000)
                self.assertNotIn("zygote", text_of(r))
                self.assertEqual(zygote_pids(c), [zygote])
                self.assertEqual(c.execute(FORKED)[0].strip(), "True")
                return
        self.skipTest("the zygote was never caught before its imports (3 sessions)")

    def test_start_before_the_boot_was_asked_boots_it(self):
        # After a lost zygote the next kernel starts the slow way and a new zygote is held
        # until that kernel answers. That kernel dies before it answers: the rescue start that
        # follows takes the slow way too (never a zygote), the held zygote boots once it
        # answered, and the next reset forks from it: no third Python beside it.
        for attempt in range(3):
            with McpClient() as c:
                self.assertEqual(start_of(c.call("reset")), "zygote")
                old = zygote_pids(c)
                old_kernels = tree(c)[2]
                os.kill(old[0], signal.SIGKILL)
                rid = c.send_request("tools/call", {"name": "reset", "arguments": {}})
                kernel = stop_new(lambda: tree(c)[2], old_kernels)
                self.assertIsNotNone(kernel, "no kernel after the reset")
                caught = not has_imported_zmq(kernel)
                held = [z for z in tree(c)[3] if z not in old]
                os.kill(kernel, signal.SIGKILL)
                r = c.wait_response(rid, timeout=120)["result"]
                if not caught:
                    continue  # it may have answered: a new session
                self.assertFalse(r["isError"], text_of(r))
                self.assertEqual(start_of(r), "rescue", text_of(r))
                self.assertIn("exited while starting", text_of(r))
                self.assertEqual([comm(z) for z in held], ["ipybox-shim"], "the new zygote was not held")
                self.assertEqual(start_of(c.call("reset")), "zygote")
                text, r = c.execute(FORKED)
                self.assertEqual(text.strip().splitlines()[0], "True", text)
                self.assertEqual(zygote_pids(c), held)
                return
        self.skipTest("the slow kernel was never caught before its imports (3 sessions)")


class DaemonSessions(unittest.TestCase):
    """--no-zygote travels with a daemon session's options, as the other sandbox options do;
    given to the daemon, it holds for its sessions, and a session's own --zygote overrides it."""

    def test_options_of_daemon_sessions(self):
        require_sandbox(self)
        for daemon_args, session_args, want in (((), (), "zygote"), ((), ("--no-zygote",), "exec"),
                                                (("--no-zygote",), (), "exec"),
                                                (("--no-zygote",), ("--zygote",), "zygote")):
            d = Daemon(*daemon_args)
            try:
                c = d.client()
                c.request("ipybox/createSession", {"name": "z", "args": list(session_args)})
                self.assertEqual(c.execute("print(1 + 1)")[0].strip(), "2")
                r = c.call("reset")
                self.assertEqual(start_of(r), want, (daemon_args, session_args, text_of(r)))
                c.close()
            finally:
                d.close()


@unittest.skipUnless(test_user_limits.ROOT_USERS, "needs root, useradd and runuser")
class PlainUser(test_user_limits.PlainUserCase):
    """User mode proper (a plain user, no monitor): S0 and user namespace Z made without
    privileges, the process limit (RLIMIT_NPROC here) raised by 2 for S0 and the zygote."""
    USER = "ipbt-zygote"

    def test_reset_forks_and_the_process_limit_is_the_users(self):
        c = McpClient("--max-processes", "40", env=self.env, wrap=self.wrap)
        self.clients.append(c)
        text, r = c.execute("import os, resource\nprint(resource.getrlimit(resource.RLIMIT_NPROC)[0], os.getuid())")
        self.assertEqual(text.split(), ["42", "1000"], text)
        r = c.call("reset")
        self.assertEqual(start_of(r), "zygote", text_of(r))
        text, r = c.execute("import os\nprint(os.getppid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()"
                            " and int(p) != os.getpid()))")
        self.assertEqual(text.strip(), "1 [1]", text)


class UserSiteCode(unittest.TestCase):
    """Code in the user site runs at a fresh start: after it appears, kernels start the slow
    way (in place), and the new code is what they import."""

    def test_pth_and_shadowing_module_take_the_slow_way(self):
        require_sandbox(self)
        with McpClient() as c:
            forked = "print('PYTHONUSERBASE=/nonexistent' in open('/proc/self/environ').read())"
            # Forked: the first kernel, and the next one.
            self.assertEqual(c.execute(forked)[0].strip(), "True")
            c.call("reset")
            self.assertEqual(c.execute(forked)[0].strip(), "True")
            # A preloaded pure-Python module of one file outside the standard library.
            text, r = c.execute(
                "import sys, os, site, shutil\n"
                "cands = sorted(n for n, m in list(sys.modules.items()) if '.' not in n and "
                "getattr(m, '__file__', '') and '-packages/' in m.__file__ and m.__file__.endswith(n + '.py'))\n"
                "name = cands[0]\n"
                "us = site.getusersitepackages()\n"
                "os.makedirs(us, exist_ok=True)\n"
                "src = open(sys.modules[name].__file__).read()\n"
                "open(os.path.join(us, name + '.py'), 'w').write(src + '\\nSHADOWED_BY_TEST = True\\n')\n"
                "print('NAME', name)")
            name = text.split("NAME", 1)[1].split()[0]
            r = c.call("reset")
            self.assertEqual(start_of(r), "zygote")
            text, r = c.execute(forked + "\nimport %s\nprint(getattr(%s, 'SHADOWED_BY_TEST', False))" % (name, name))
            self.assertEqual(text.split(), ["False", "True"], text)
            # Remove it: forked again. Then a .pth: the slow way, and it ran.
            c.execute("import os, site\nos.remove(os.path.join(site.getusersitepackages(), '%s.py'))" % name)
            c.call("reset")
            self.assertEqual(c.execute(forked)[0].strip(), "True")
            c.execute("import os, site\nopen(os.path.join(site.getusersitepackages(), 'zy.pth'), 'w')"
                      ".write('import os; os.environ[\"ZY_PTH_RAN\"] = \"1\"\\n')")
            c.call("reset")
            text, r = c.execute(forked + "\nimport os\nprint(os.environ.get('ZY_PTH_RAN'))")
            self.assertEqual(text.split(), ["False", "1"], text)


if __name__ == "__main__":
    unittest.main()
