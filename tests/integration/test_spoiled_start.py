"""Starts after kernel code spoiled what a start reads or writes (architecture.md, "A kernel
always starts in a workspace its code spoiled"): /app, $HOME, the user site, IPython's directory
and profile, the history database, /run/ipybox. Each made every later start fail; now the reset
gives a kernel and says why. Each case runs with the zygote, without it, and with a standby."""
import os
import re
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import McpClient, require_sandbox, text_of  # noqa: E402
import test_zygote  # noqa: E402
from test_zygote import start_of  # noqa: E402
from test_standby import standby_of  # noqa: E402


class SpoiledStart(test_zygote.ResetSession):
    def test_a_history_database_that_refuses_the_session_or_never_ends(self):
        # A trigger that kernel code puts in the history database: one that raises
        # (IntegrityError, which IPython 8.5 does not catch) or one that never ends made every
        # later start fail, or wait for the start's 60 s. The kernel keeps its history in
        # memory instead, as IPython does for a database that cannot record the session.
        db = "import sqlite3\ndb = sqlite3.connect(get_ipython().history_manager.hist_file)\n"
        triggers = ("SELECT RAISE(ABORT, 'refused')",
                    "SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                    "SELECT x FROM c)")
        for body in triggers:
            with self.subTest(trigger=body):
                self.settle()
                text, r = self.c.execute(db + "db.execute(%r)\ndb.commit()\ndb.close()" % (
                    "CREATE TRIGGER spoil BEFORE INSERT ON sessions BEGIN %s; END" % body))
                self.assertFalse(r["isError"], text)
                try:
                    started = time.monotonic()
                    self.reset()
                    self.assertLess(time.monotonic() - started, 30)
                    text, r = self.c.execute("print(get_ipython().history_manager.hist_file, 1 + 1)")
                    self.assertEqual(text.split()[-2:], [":memory:", "2"], text)
                finally:
                    text, r = self.c.execute(
                        "import sqlite3, os\n"
                        "db = sqlite3.connect(os.path.expanduser('~/.ipython/profile_default/history.sqlite'))\n"
                        "db.execute('DROP TRIGGER IF EXISTS spoil')\ndb.commit()\ndb.close()")
                self.assertFalse(r["isError"], text)
                self.reset()
                text, r = self.c.execute("print(get_ipython().history_manager.hist_file)")
                self.assertTrue(text.strip().endswith("/profile_default/history.sqlite"), text)

    def test_run_dir_mode_changed_by_kernel_code_is_given_back(self):
        # /run/ipybox (the connection file, the sockets) is the sandbox user's: kernel code can
        # chmod it. 0o500 made the next kernel's bind fail, and 0 kept PID 1 from emptying it:
        # every later start failed. KILL_ALL gives it back its mode.
        for mode in (0o500, 0, 0o777):
            with self.subTest(mode=oct(mode)):
                self.settle()
                text, r = self.c.execute("import os\nos.chmod('/run/ipybox', %d)" % mode)
                self.assertFalse(r["isError"], text)
                self.reset()
                text, r = self.c.execute("import os\nprint(oct(os.stat('/run/ipybox').st_mode & 0o7777), 1 + 1)")
                self.assertEqual(text.split(), ["0o700", "2"], text)

    def test_a_workspace_kernel_code_made_unusable_still_gives_kernels(self):
        # Kernel code can chmod /app or $HOME, put a file where the user site goes, or spoil
        # IPython's directory or profile. Every later start failed then, and the session had no kernel left in
        # which to mend it: the start now goes on (in /, without the user site, with a fresh
        # IPython directory in /tmp), the reset's result says why, and a reset after the mend is
        # back to the usual.
        state = ("import os, site, sys\nus = site.getusersitepackages()\n"
                 "print(os.getcwd(), os.path.isdir(us), us in sys.path, get_ipython().profile_dir.location)")
        usual = ["/app", "True", "True", "/home/appuser/.ipython/profile_default"]
        profile = "os.path.expanduser('~/.ipython/profile_default')"
        # (the path whose mode is kept and put back, what spoils, what mends, what the reset says,
        # what the kernel then sees)
        cases = (
            ("'/app'", "os.chmod(P, 0)", "os.chmod(P, MODE)", "/app could not be entered (Permission denied)",
             ["/home/appuser"] + usual[1:]),
            # /tmp full too: a cell's temporary names (ipykernel's compiler) need a writable cwd
            ("'/app'", "os.chmod(P, 0)\nf = open('/tmp/fill', 'wb')\ntry:\n    while True:\n"
             "        f.write(b'x' * (1 << 20))\nexcept OSError:\n    pass\nf.close()",
             "os.chmod(P, MODE)\nos.unlink('/tmp/fill')", "so this kernel runs in /home/appuser",
             ["/home/appuser"] + usual[1:]),
            ("site.getuserbase()", "os.rename(P, P + '.kept')\nopen(P, 'w').close()",
             "os.unlink(P)\nos.rename(P + '.kept', P)", "/.local/lib/python3", ["/app", "False"] + usual[2:]),
            ("os.path.expanduser('~')", "os.chmod(P, 0)", "os.chmod(P, MODE)",
             "could not be made (Permission denied)", ["/app", "False", "True", "/tmp/tmp"]),
            (profile, "os.rename(P, P + '.kept')\nopen(P, 'w').close()", "os.unlink(P)\nos.rename(P + '.kept', P)",
             "exists but is not a directory), so this kernel has a fresh one, /tmp/ipython-",
             usual[:3] + ["/tmp/ipython-"]),
            (profile + " + '/startup'", "os.chmod(P, 0)", "os.chmod(P, MODE)",
             "profile_default could not be used (Permission denied)", usual[:3] + ["/tmp/ipython-"]),
            ("os.path.expanduser('~/.ipython')", "os.rename(P, P + '.kept')\nos.symlink(P + '.gone', P)",
             "os.unlink(P)\nos.rename(P + '.kept', P)", "/.ipython could not be used (File exists)",
             usual[:3] + ["/tmp/ipython-"]),
            (profile, "import shutil\nshutil.move(P + '/db', P + '.db')\nos.chmod(P, 0o500)",
             "os.chmod(P, MODE)\nshutil.move(P + '.db', P + '/db')", "(not a writable directory)",
             usual[:3] + ["/tmp/ipython-"]),
        )
        for path, spoil, mend, told, seen in cases:
            with self.subTest(spoil=spoil, path=path):
                self.settle()
                # (one write: the history thread may write to stderr meanwhile once $HOME is shut)
                text, r = self.c.execute("import os, site\nP = %s\nMODE = os.stat(P).st_mode & 0o7777\n"
                                         "%s\nprint('MODE=%%d' %% MODE)" % (path, spoil))
                self.assertFalse(r["isError"], text)
                mode = int(re.search(r"MODE=(\d+)", text).group(1))
                try:
                    r = self.reset()
                    self.assertIn(told, text_of(r))
                    self.assertIn("a reset", text_of(r))
                    text, r = self.c.execute(state)
                    got = text.split()
                    if seen[-1].startswith("/tmp/"):  # a temporary directory's name
                        got[-1] = got[-1][:len(seen[-1])]
                    self.assertEqual(got, seen, text)
                finally:
                    # Mended even when an assertion failed: the session is the class's.
                    text, r = self.c.execute("import os, shutil, site\nP = %s\nMODE = %d\n%s" % (path, mode, mend))
                self.assertFalse(r["isError"], text)
                # (no settle: a standby is not prepared while $HOME is spoiled, nor again for
                # that kernel)
                r = self.reset()
                self.assertNotIn("could not", text_of(r))
                text, r = self.c.execute(state)
                self.assertEqual(text.split(), usual, text)


    def test_code_every_start_runs_that_ends_it_gives_a_rescue_start(self):
        # Code the sandbox wrote that a start runs by design: when it ended the start, every
        # later start failed too. The start is tried once more without any of it (kernel.c
        # start_or_rescue, kernel_launch.py _rescue_asked), and the result says why.
        state = ("import os, site, sys\n"
                 "print(os.getcwd(), site.getusersitepackages() in sys.path, '' in sys.path, "
                 "get_ipython().profile_dir.location)")
        usual = ["/app", "True", "True", "/home/appuser/.ipython/profile_default"]
        write = "os.makedirs(os.path.dirname(P), exist_ok=True)\nopen(P, 'w').write(%r)"
        site_dir = "os.path.join(site.getusersitepackages(), %r)"
        died = "could not start as usual: the kernel exited while starting. The kernel died (it exited with status %d)."
        # (where, what it runs at every start, what the note says). Nothing the failed start says
        # is trusted to skip the rescue: an exit status of 127 (the shim's for an interpreter it
        # could not run) and the launcher's line for a missing ipykernel are rescued too, and so
        # is a start whose socket path kernel code took.
        cases = (
            (site_dir % "spoil.pth", "import os; os._exit(3)\n", died % 3),
            (site_dir % "usercustomize.py", "import os; os._exit(4)\n", died % 4),
            ("os.path.expanduser('~/.ipython/profile_default/startup/00-spoil.py')", "import os; os._exit(5)\n",
             died % 5),
            ("os.path.expanduser('~/.ipython/profile_default/ipython_kernel_config.py')", "import os; os._exit(6)\n",
             died % 6),
            ("'/app/storemagic.py'", "import os; os._exit(7)\n", died % 7),
            (site_dir % "spoil.pth", "import os; os._exit(127)\n", died % 127),
            (site_dir % "spoil.pth", "import os; os.write(2, b'ipybox: no ipykernel: forged\\n'); os._exit(3)\n",
             died % 3),
            (site_dir % "spoil.pth", "import os, time; os.symlink('/', '/run/ipybox/kernel-1'); time.sleep(5)\n",
             "could not start as usual: the kernel's shell endpoint is not a socket"),
        )
        for path, content, told in cases:
            with self.subTest(path=path, content=content):
                self.settle()
                text, r = self.c.execute(("import os, site\nP = %s\n" % path) + write % content)
                self.assertFalse(r["isError"], text)
                try:
                    r = self.c.call("reset")
                    self.assertFalse(r["isError"], text_of(r))
                    self.assertEqual(start_of(r), "rescue", text_of(r))
                    self.assertIn(told, text_of(r))
                    self.assertIn("Mend what stopped the start, then reset.", text_of(r))
                    text, r = self.c.execute(state)
                    got = text.split()
                    self.assertEqual(got[:3], ["/app", "False", "True"], text)
                    self.assertTrue(got[3].startswith("/tmp/ipython-"), text)
                    self.assertEqual(self.c.execute("1 + 1")[0].strip(), "2")
                finally:
                    text, r = self.c.execute("import os, site\nos.unlink(%s)" % path)
                self.assertFalse(r["isError"], text)
                r = self.reset()
                self.assertNotIn("could not", text_of(r))
                text, r = self.c.execute(state)
                self.assertEqual(text.split(), usual, text)


class SpoiledFirstStart(unittest.TestCase):
    def test_a_session_whose_first_start_fails_gets_a_rescue_start(self):
        require_sandbox(self)
        ws = tempfile.mkdtemp(prefix="ipybox-spoiled-")
        self.addCleanup(shutil.rmtree, ws, True)
        with open(os.path.join(ws, "storemagic.py"), "w") as f:
            f.write("import os; os._exit(7)\n")
        with McpClient("--workspace", ws) as c:
            text, r = c.execute("1 + 1")
            self.assertFalse(r["isError"], text)
            self.assertEqual(text.split("\n")[0].strip(), "2", text)
            self.assertIn("could not start as usual", text)
            self.assertIn("(it exited with status 7)", text)


class SpoiledStartWithoutZygote(SpoiledStart):
    zygote = False


class SpoiledStartWithStandby(SpoiledStart):
    options = ("--standby",)
    starts = ("standby", "zygote")

    def settle(self):
        standby_of(self.c)
