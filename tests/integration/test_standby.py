"""The standby kernel (--standby; architecture.md, "The standby kernel"): a kernel forked from
the zygote beside the running one, prepared, and activated by `reset` instead of a fork. What
a reset keeps and drops is the same as with the zygote alone (ResetWithStandby runs those
cases); a standby that kernel code touched, or whose config files changed, is not used."""
import ast
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import CONTROL_KERNEL_INFO, IPYBOX, McpClient, require_sandbox, resets_until, text_of  # noqa: E402
import test_zygote  # noqa: E402
from daemon_fixture import Daemon  # noqa: E402
from test_zygote import ns_pid, start_of, tree  # noqa: E402


def kernel_ns_pid(c):
    text, r = c.execute("import os\nprint(os.getpid())")
    assert not r["isError"], text
    return int(text.split()[-1])


def standby_of(c, timeout=30):
    """The session's standby, as (host pid, pid in the sandbox), once it has been there a while
    (its preparation takes ~40 ms of CPU; 1 s is the margin); (None, None) if none came."""
    me = kernel_ns_pid(c)
    deadline = time.time() + timeout
    while time.time() < deadline:
        _, _, kernels, _ = tree(c)
        others = [p for p in kernels if ns_pid(p) != me]
        if len(others) == 1:
            time.sleep(1)
            _, _, kernels, _ = tree(c)
            if others[0] in kernels:
                return others[0], ns_pid(others[0])
        time.sleep(0.05)
    return None, None


def reset(test, c, expect):
    r = c.call("reset")
    test.assertFalse(r["isError"], text_of(r))
    test.assertEqual(start_of(r), expect, text_of(r))
    return r


class ResetWithStandby(test_zygote.ResetBothWays):
    """ResetBothWays' cases with a standby: the same results. A reset takes the standby when it
    is prepared and the zygote's fork otherwise (the first reset may come before the standby is
    made, and a config file written before it makes the standby decline)."""
    zygote = True
    options = ("--standby",)
    starts = ("standby", "zygote")

    def settle(self):
        standby_of(self.c)

    def test_a_prepared_standby_is_taken(self):
        standby_of(self.c)
        self.assertEqual(start_of(self.reset()), "standby")


class Standby(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.ws = tempfile.mkdtemp(prefix="ipybox-sb-")
        self.c = McpClient("--workspace", self.ws, "--standby")
        self.addCleanup(self.c.close)

    def test_reset_activates_the_standby_and_makes_the_next(self):
        self.c.execute("x = 1")
        host, sb = standby_of(self.c)
        self.assertIsNotNone(sb, "no standby was made")
        reset(self, self.c, "standby")
        self.assertEqual(kernel_ns_pid(self.c), sb, "the kernel after the reset is not the standby")
        text, r = self.c.execute("print('x' in dir(), 1 + 1)")
        self.assertEqual(text.split(), ["False", "2"], text)
        host2, sb2 = standby_of(self.c)
        self.assertIsNotNone(sb2, "no standby after the reset")
        self.assertNotEqual(sb2, sb)
        reset(self, self.c, "standby")
        self.assertEqual(kernel_ns_pid(self.c), sb2)

    def test_activated_kernels_differ_and_sign_with_the_connection_key(self):
        # A standby makes its message Session while it prepares (kernel_standby.py), with a
        # random key that the activation replaces by the connection file's.
        code = ("import json, os, random\n"
                "k = get_ipython().kernel\n"
                "key = json.load(open('/run/ipybox/connection.json'))['key']\n"
                "print('STATE' + json.dumps([random.random(), os.urandom(8).hex(), key, k.session.session, "
                "os.getpid(), k.session.key.decode() == key, k.session.signature_scheme]))")
        seen = []
        for _ in range(3):
            standby_of(self.c)
            reset(self, self.c, "standby")
            text, r = self.c.execute(code)
            seen.append(json.loads(text.split("STATE", 1)[1]))
        for field, name in enumerate(("random", "urandom", "key", "session", "pid")):
            values = [s[field] for s in seen]
            self.assertEqual(len(set(values)), 3, "%s repeats across kernels: %s" % (name, values))
        self.assertEqual([s[5:] for s in seen], [[True, "hmac-sha256"]] * 3)

    def test_the_control_thread_made_while_preparing_is_the_kernels(self):
        # The standby makes the control thread's object while it prepares (kernel_standby.py);
        # init_sockets takes it at activation and starts it: it runs, on its own loop, and
        # answers on the control socket while a cell runs.
        standby_of(self.c)
        reset(self, self.c, "standby")
        text, r = self.c.execute("import asyncio\nk = get_ipython().kernel\nt = k.control_thread\n"
                                 "print(t.is_alive(), t.name, t.daemon, t is k.parent.control_thread,\n"
                                 "      t.io_loop.asyncio_loop is not asyncio.get_event_loop())")
        self.assertEqual(text, "True Control True True True\n")
        text, r = self.c.execute(CONTROL_KERNEL_INFO, timeout=60)
        self.assertEqual(text, "kernel_info_reply\n")

    def test_no_standby_without_the_option_or_the_zygote(self):
        with McpClient("--workspace", self.ws) as c:
            self.assertEqual(standby_of(c, timeout=3), (None, None))
            reset(self, c, "zygote")
        # --standby after --no-zygote is refused; a later --no-zygote turns the standby off.
        r = subprocess.run([IPYBOX, "mcp", "--no-zygote", "--standby"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--standby needs the zygote", r.stderr)
        with McpClient("--workspace", self.ws, "--standby", "--no-zygote") as c:
            self.assertEqual(c.execute("print(1 + 1)")[0].strip(), "2")
            time.sleep(1)
            reset(self, c, "exec")

    def test_json_config_means_no_standby(self):
        # A JSON config file is code too (traitlets imports and calls what it names:
        # test_standby_attacks), so the standby reads none. One written after the standby
        # prepared makes it decline and the reset forks; while it exists no standby is prepared
        # and every reset forks, with the config applied; once it is gone, standbys come back.
        standby_of(self.c)
        profile = "/home/appuser/.ipython/profile_default"
        conf = profile + "/ipython_kernel_config.json"
        text, r = self.c.execute(
            "import os, json\nos.makedirs(%r, exist_ok=True)\n"
            "json.dump({'IPKernelApp': {'exec_lines': ['from_config = 42']}}, open(%r, 'w'))"
            % (profile, conf))
        self.assertFalse(r["isError"], text)
        try:
            for _ in range(2):
                reset(self, self.c, "zygote")
                text, r = self.c.execute("print(from_config)")
                self.assertEqual(text.strip(), "42", text)
                time.sleep(2)  # a standby would have been made and prepared by now
        finally:
            self.c.execute("import os\nos.unlink(%r)" % conf)
        reset(self, self.c, "zygote")
        standby_of(self.c)
        reset(self, self.c, "standby")
        text, r = self.c.execute("print('from_config' in dir())")
        self.assertEqual(text.strip(), "False", text)

    def test_python_config_means_no_standby_and_never_runs_early(self):
        # A Python config file is code the sandbox wrote: it runs in the kernel after the reset,
        # never in a standby beside the old kernel. While one exists, no standby is prepared
        # (one is forked and exits at once) and resets fork from the zygote.
        profile = "/home/appuser/.ipython/profile_default"
        conf = profile + "/ipython_kernel_config.py"
        text, r = self.c.execute(
            "import os\nos.makedirs(%r, exist_ok=True)\n"
            "open(%r, 'w').write('import os\\nopen(\"/tmp/ran-%%d\" %% os.getpid(), \"w\").close()\\n')"
            % (profile, conf))
        self.assertFalse(r["isError"], text)
        try:
            for _ in range(2):
                reset(self, self.c, "zygote")
                time.sleep(2)  # a standby would have been made and prepared by now
            text, r = self.c.execute("import os\nprint(sorted(f for f in os.listdir('/tmp') if f.startswith('ran-')), "
                                     "repr('ran-%d' % os.getpid()))")
            ran, me = text.strip().rsplit(" ", 1)
            ran, me = ast.literal_eval(ran), ast.literal_eval(me)
            self.assertIn(me, ran, text)
            # The two kernels of the two resets, and no standby.
            self.assertEqual(len(ran), 2, "the config ran elsewhere than in the two kernels: " + text)
        finally:
            self.c.execute("import os\nos.unlink(%r)" % conf)

    def test_startup_files_run_at_activation(self):
        standby_of(self.c)
        startup = "/home/appuser/.ipython/profile_default/startup"
        self.c.execute("import os\nos.makedirs(%r, exist_ok=True)\nopen(%r, 'w').write('from_startup = 7\\n')"
                       % (startup, startup + "/50-sb.py"))
        try:
            reset(self, self.c, "standby")
            text, r = self.c.execute("print(from_startup)")
            self.assertEqual(text.strip(), "7", text)
        finally:
            self.c.execute("import os\nos.unlink(%r)" % (startup + "/50-sb.py"))

    def test_startup_config_reaches_the_formatters(self):
        # The standby makes the display formatters before the reset (a kernel makes them at its
        # first result); what startup code configures must still reach them, both ways.
        startup = "/home/appuser/.ipython/profile_default/startup"
        self.c.execute("import os\nos.makedirs(%r, exist_ok=True)\nopen(%r, 'w').write("
                       "\"get_ipython().config.IPythonDisplayFormatter.enabled = False\\n"
                       "get_ipython().config.MimeBundleFormatter.enabled = False\\n"
                       "get_ipython().run_line_magic('config', 'PlainTextFormatter.max_seq_length = 3')\\n"
                       "get_ipython().config.PlainTextFormatter.max_width = 7\\n\")"
                       % (startup, startup + "/50-fmt.py"))
        try:
            for expect in ("zygote", "standby"):
                host, sb = standby_of(self.c)
                if expect == "zygote":
                    # A kernel forked from the zygote makes its formatters at its first result:
                    # what the standby must match. The standby is killed to get one.
                    os.kill(host, signal.SIGKILL)
                reset(self, self.c, expect)
                text, r = self.c.execute("list(range(10))")
                self.assertEqual(text.split(), ["[0,", "1,", "2,", "...]"], expect + ": " + text)
                # The two formatters a kernel makes at its first result besides these (the
                # standby makes them early too), turned off: the plain repr is shown.
                text, r = self.c.execute(
                    "class D:\n"
                    "    def _ipython_display_(self): print('custom display')\n"
                    "    def _repr_mimebundle_(self, include=None, exclude=None): return {'text/plain': 'bundle'}\n"
                    "    def __repr__(self): return 'plain repr'\n"
                    "D()")
                self.assertEqual(text.strip(), "plain repr", expect + ": " + text)
        finally:
            self.c.execute("import os\nos.unlink(%r)" % (startup + "/50-fmt.py"))

    def test_a_user_site_removed_before_the_reset_is_there_after_it(self):
        # A forked kernel makes the user site at its start; the standby made it while it
        # prepared, and kernel code may remove it before the reset (a third review): a
        # missing one is cached as missing at the first import, and a module put there later
        # (`pip install --user`) did not import.
        standby_of(self.c)
        text, r = self.c.execute("import shutil, site\nshutil.rmtree(site.getuserbase())")
        self.assertFalse(r["isError"], text)
        reset(self, self.c, "standby")
        text, r = self.c.execute(
            "import os, site, sys\nus = site.getusersitepackages()\n"
            "there, fresh = os.path.isdir(us), 'graphlib' not in sys.modules\n"
            "import graphlib\nos.makedirs(us, exist_ok=True)\n"
            "open(us + '/sb_after.py', 'w').write('v = 5\\n')\n"
            "import sb_after\nprint(there, fresh, sb_after.v)")
        self.assertEqual(text.split(), ["True", "True", "5"], text)

    def test_a_history_database_that_refuses_the_session_leaves_no_saving_thread(self):
        # A database kernel code altered in place (a column more: the session's row does not
        # fit) makes a kernel keep its history in memory, with no saving thread; the standby
        # had made one while it prepared, left unstarted, with an exit handler that joins it.
        standby_of(self.c)
        text, r = self.c.execute(
            "import sqlite3\ndb = sqlite3.connect(get_ipython().history_manager.hist_file)\n"
            "db.execute('ALTER TABLE sessions ADD COLUMN extra')\ndb.commit()\ndb.close()")
        self.assertFalse(r["isError"], text)
        reset(self, self.c, "standby")
        text, r = self.c.execute("h = get_ipython().history_manager\nprint(h.hist_file, h.save_thread)")
        self.assertEqual(text.split(), [":memory:", "None"], text)

    def test_killed_kernel_replaced_by_the_standby(self):
        standby_of(self.c)
        self.c.execute("w = 1")
        told, r = self.c.execute("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
        time.sleep(0.5)
        text, r = self.c.execute("print('w' in dir())")
        self.assertEqual(text.strip(), "False", text)
        self.assertIn("died", told + text)


class DaemonSessions(unittest.TestCase):
    """ipyboxd --user --standby (as the service with standby = true): its sessions get the
    standby; a session's own --no-zygote or --no-standby, after the daemon's, turns it off."""

    def test_options_of_daemon_sessions(self):
        require_sandbox(self)
        d = Daemon("--standby")
        self.addCleanup(d.close)
        cases = (((), "standby"), (("--no-zygote",), "exec"), (("--no-standby",), "zygote"))
        for i, (session_args, want) in enumerate(cases):
            c = d.client()
            c.request("ipybox/createSession", {"name": "s%d" % i, "args": list(session_args)})
            self.assertEqual(c.execute("print(1 + 1)")[0].strip(), "2")
            # Reset until the standby is taken; the other two never take one.
            starts = resets_until(c, want)
            self.assertEqual(starts[-1], want, (session_args, starts))
            self.assertTrue(all(s == want for s in starts) or want == "standby", (session_args, starts))
            c.close()


if __name__ == "__main__":
    unittest.main()
