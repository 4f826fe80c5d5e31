"""Issue 20, package P5: the daemon found without XDG_RUNTIME_DIR (ipybox mcp, ipyboxd --user and
the Python SDK look under /run/user/$UID, only when that directory is the user's alone), a
failed ipybox/createSession leaving the connection with the session it had, -vv, --version,
the kernel-death note without start-up noise, and every option the parsers accept named in
--help, the README's options tables and the man pages' OPTIONS."""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX, ROOT, McpClient, McpError, require_sandbox, text_of  # noqa: E402
from daemon_fixture import IPYBOXD, Daemon  # noqa: E402

UID = os.geteuid()
RUNDIR = "/run/user/%d" % UID
SOCK = RUNDIR + "/ipybox/ipybox.sock"

# Run in a private mount namespace with a tmpfs over /run/user, so that nothing of the host's
# /run/user is seen or touched: makes /run/user/$UID (mode $MODE after the daemon is up),
# starts `ipyboxd --user` without XDG_RUNTIME_DIR (or with --socket when $SOCKET_OPT is set),
# runs "$@" without XDG_RUNTIME_DIR, then stops the daemon and prints its log to stderr.
NS_SCRIPT = r'''
set -u
# A bare root (no logind) has no /run/user: a tmpfs over /run, in this namespace only, gives one.
[ -d /run/user ] || { mount -t tmpfs -o mode=0755 ipybox-test-run /run && mkdir -m 0755 /run/user; } || exit 97
mount -t tmpfs -o mode=0755 ipybox-test /run/user || exit 97
mkdir -m 0700 "$RUNDIR"
if [ -n "${START_DAEMON:-}" ]; then
    env -u XDG_RUNTIME_DIR "$IPYBOXD" --user ${SOCKET_OPT:-} >"$LOG" 2>&1 &
    dpid=$!
    i=0
    while [ ! -S "$RUNDIR/ipybox/ipybox.sock" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
fi
chmod "$MODE" "$RUNDIR"
env -u XDG_RUNTIME_DIR "$@"
rc=$?
if [ -n "${START_DAEMON:-}" ]; then kill -TERM $dpid; wait $dpid; cat "$LOG" >&2; fi
exit $rc
'''


def in_private_run_user(mode="0700", daemon=True, socket_opt=""):
    """A wrap for McpClient (and a prefix for other commands) running them as NS_SCRIPT does."""
    def wrap(cmd):
        return ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", NS_SCRIPT, "sh", *cmd]
    env = dict(os.environ, RUNDIR=RUNDIR, IPYBOXD=IPYBOXD, MODE=mode, SOCKET_OPT=socket_opt,
               START_DAEMON="1" if daemon else "")
    env.pop("XDG_RUNTIME_DIR", None)
    return wrap, env


def finish(c):
    """Closes stdin, waits, and returns ipybox mcp's stderr (with the daemon's log after it)."""
    c.proc.stdin.close()
    c.proc.wait(60)
    err = c.proc.stderr.read().decode(errors="replace")
    c.close()
    return err


@unittest.skipUnless(os.geteuid() == 0, "a private mount namespace over /run/user needs root")
class DaemonWithoutXdgRuntimeDir(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)

    def test_ipybox_mcp_finds_the_daemon_under_run_user(self):
        wrap, env = in_private_run_user()
        env["LOG"] = "/run/user/daemon.log"
        c = McpClient(wrap=wrap, env=env)
        text, r = c.execute("6 * 7")
        self.assertFalse(r["isError"], text)
        self.assertEqual(text.strip(), "42")
        err = finish(c)
        self.assertIn("using ipyboxd at %s" % SOCK, err)
        self.assertIn("ipyboxd: listening at %s" % SOCK, err)  # the daemon chose it by itself

    def test_a_directory_others_may_write_is_not_trusted(self):
        # The daemon listens there (named with --socket), then the directory becomes
        # world-writable: ipybox mcp must not connect to a socket anyone could have put there.
        wrap, env = in_private_run_user(mode="0777", socket_opt="--socket " + SOCK)
        env["LOG"] = "/run/user/daemon.log"
        c = McpClient(wrap=wrap, env=env)
        text, r = c.execute("1 + 1")
        self.assertEqual(text.strip(), "2")
        err = finish(c)
        self.assertNotIn("using ipyboxd", err)
        self.assertIn("running the embedded supervisor", err)
        self.assertIn("%s is missing or not yours alone" % RUNDIR, err)

    def test_ipyboxd_without_it_and_without_run_user_says_what_to_do(self):
        wrap, env = in_private_run_user(daemon=False)
        r = subprocess.run(wrap(["/bin/sh", "-c", 'rmdir "$RUNDIR" && "$IPYBOXD" --user']), env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("XDG_RUNTIME_DIR is not set and %s is missing" % RUNDIR, r.stderr)
        self.assertIn("--socket PATH", r.stderr)

    def test_the_sdk_looks_there_too(self):
        code = ("import json, sys; sys.path.insert(0, %r); from ipybox_native.locate import daemon_sockets; "
                "print(json.dumps(daemon_sockets()))" % os.path.join(ROOT, "sdk", "python"))
        for mode, expect in (("0700", True), ("0770", False)):
            with self.subTest(mode=mode):
                wrap, env = in_private_run_user(mode=mode, daemon=False)
                r = subprocess.run(wrap([sys.executable, "-c", code]), env=env, capture_output=True, text=True,
                                   timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(SOCK in json.loads(r.stdout), expect, r.stdout)


class FailedCreateSession(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.d = Daemon()
        self.addCleanup(self.d.close)

    def test_the_connection_keeps_the_session_it_had(self):
        c = self.d.client()
        self.addCleanup(c.close)
        self.assertEqual(c.request("ipybox/createSession", {"name": "kept"})["name"], "kept")
        text, r = c.execute("x = 41")
        self.assertFalse(r["isError"], text)
        # A session whose sandbox cannot be built: its worker fails after the request was taken.
        with self.assertRaises(McpError) as cm:
            c.request("ipybox/createSession", {"name": "doomed", "args": ["--rootfs", "/nonexistent-ipybox-root"]})
        self.assertIn("could not start", str(cm.exception))
        text, r = c.execute("x + 1")
        self.assertFalse(r["isError"], text)
        self.assertEqual(text.strip(), "42")
        sessions = c.request("ipybox/listSessions")["sessions"]
        self.assertEqual([s["name"] for s in sessions if s["attached"]], ["kept"])
        # A createSession that works does move the connection.
        self.assertEqual(c.request("ipybox/createSession", {"name": "next"})["name"], "next")
        text, r = c.execute("'x' in dir()")
        self.assertEqual(text.strip(), "False")


class VerboseAndVersion(unittest.TestCase):
    def test_version_on_both_binaries_matches_the_sdk(self):
        with open(os.path.join(ROOT, "sdk", "python", "ipybox_native", "__init__.py")) as f:
            sdk = re.search(r'__version__ = "([^"]+)"', f.read()).group(1)
        for exe, name in ((IPYBOX, "ipybox"), (IPYBOXD, "ipyboxd")):
            for flag in ("--version", "-V"):
                with self.subTest(exe=name, flag=flag):
                    r = subprocess.run([exe, flag], capture_output=True, text=True, timeout=30)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertEqual(r.stdout, "%s %s\n" % (name, sdk))

    def test_vv_is_accepted_and_logs_debug(self):
        require_sandbox(self)
        r = subprocess.run([IPYBOX, "run", "-vv", "--", "/bin/true"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([IPYBOX, "run", "-vx", "--", "/bin/true"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown option '-vx'", r.stderr)
        # ipybox mcp -vv: debug lines (the kernel's own stderr among them) reach stderr.
        c = McpClient("--embedded", "-vv")
        text, _ = c.execute("1 + 1")
        self.assertEqual(text.strip(), "2")
        err = finish(c)
        self.assertIn("debug", err.lower())
        d = Daemon("-vv")
        try:
            self.assertIsNone(d.proc.poll())
        finally:
            d.close()


class KernelDeathNote(unittest.TestCase):
    def test_only_lines_that_may_explain_the_death(self):
        require_sandbox(self)
        with McpClient() as c:
            text, r = c.execute("import os; os._exit(3)")
            self.assertTrue(r["isError"])
            self.assertIn("exited with status 3", text)
            self.assertNotIn("debugpy_stream", text)  # ipykernel's start-up warning
            self.assertNotIn("Its last output on stderr", text)
            # sys.stderr.fileno(): the kernel's real stderr (ipykernel relays fd 2 through a
            # thread, which the kill could outrun).
            text, r = c.execute("import os, sys; os.write(sys.stderr.fileno(), b'Traceback (most recent call last):"
                                "\\nMemoryError: boom\\n'); os.kill(os.getpid(), 9)")
            self.assertIn("Its last output on stderr:\nTraceback (most recent call last):\nMemoryError: boom\n", text)
            self.assertNotIn("debugpy_stream", text)


# -- every option the parsers accept, in --help, the README's tables and the man pages' OPTIONS

def parser_options():
    """(sandbox options, run-only options, mcp-only options, daemon options) as the C sources
    define them."""
    with open(os.path.join(ROOT, "policy", "options.c")) as f:
        src = f.read()
    table = src[src.index("option_table[] = {"):]
    table = table[:table.index("};")]
    names = re.findall(r'\{"(-[-\w]+)", (OPT_\w+)', table)
    run_only = {"OPT_HOME", "OPT_CWD", "OPT_HOST_DIR", "OPT_ENV_FROM"}
    sandbox = {n for n, i in names if i not in run_only}
    run = {n for n, i in names if i in run_only}
    with open(os.path.join(ROOT, "client", "mcp_cmd.c")) as f:
        mcp = set(re.findall(r'strn?cmp\(argv\[i\], "(--[\w-]+)=?"', f.read()))
    with open(os.path.join(ROOT, "daemon", "main.c")) as f:
        daemon = set(re.findall(r'strcmp\(a, "(-[-\w]+)"\)', f.read()))
    with open(os.path.join(ROOT, "monitor", "monitor.c")) as f:
        daemon |= set(re.findall(r'strcmp\(argv\[i\], "(-[-\w]+)"\)', f.read()))
    return sandbox, run, mcp, daemon


def help_text(*cmd):
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)
    return r.stdout + r.stderr


def man_options(page):
    """The text of a man page's OPTIONS section, roff escapes of '-' undone."""
    with open(os.path.join(ROOT, "man", page)) as f:
        src = f.read()
    sec = src[src.index("\n.SH OPTIONS"):]
    sec = sec[:sec.index("\n.SH ", 1)]
    return sec.replace("\\-", "-")


def readme_table_rows():
    with open(os.path.join(ROOT, "README.md")) as f:
        return "\n".join(ln for ln in f.read().splitlines() if ln.startswith("| `-"))


def named(option, text):
    return re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(option), text) is not None


class OptionsEverywhere(unittest.TestCase):
    def test_parsers_found(self):
        sandbox, run, mcp, daemon = parser_options()
        # The parse of the sources itself: a change of their shape must not make this test empty.
        for must, got in ((("--allowed-dir", "--memory", "--max-processes", "--cpu-weight", "-v"), sandbox),
                          (("--home", "--container-env-from"), run), (("--connect", "--embedded"), mcp),
                          (("--user", "--socket", "--max-clients", "--version", "--config"), daemon)):
            for o in must:
                self.assertIn(o, got)

    def test_every_option_in_help_readme_and_man(self):
        sandbox, run, mcp, daemon = parser_options()
        mcp_help = help_text(IPYBOX, "mcp", "--help")
        run_help = help_text(IPYBOX, "run", "--help")
        daemon_help = help_text(IPYBOXD, "--user", "--help")
        readme = readme_table_rows()
        man1, man8 = man_options("ipybox.1"), man_options("ipyboxd.8")
        internal = {"--frontend"}  # the system service's own; in the man page, not in --help
        missing = []
        for o in sorted(sandbox | mcp):
            for where, text in (("ipybox mcp --help", mcp_help), ("README options table", readme),
                                ("ipybox(1) OPTIONS", man1)):
                if not named(o, text):
                    missing.append("%s: not in %s" % (o, where))
        for o in sorted(sandbox):
            if not named(o, run_help) and o not in ("--approve-shell", "--require-shell-escape"):
                missing.append("%s: not in ipybox run --help" % o)
        for o in sorted(run):
            for where, text in (("ipybox run --help", run_help), ("README options table", readme),
                                ("ipybox(1) OPTIONS", man1)):
                if not named(o, text):
                    missing.append("%s: not in %s" % (o, where))
        for o in sorted(daemon):
            texts = [("ipyboxd(8) OPTIONS", man8)]
            if o not in internal:
                texts += [("ipyboxd --help", daemon_help + help_text(IPYBOXD, "--help")),
                          ("README options tables", readme)]
            for where, text in texts:
                if not named(o, text):
                    missing.append("%s: not in %s" % (o, where))
        self.assertEqual(missing, [])

    def test_help_names_every_tool(self):
        require_sandbox(self)
        with McpClient("--embedded") as c:
            tools = [t["name"] for t in c.request("tools/list")["tools"]]
        self.assertIn("register_mcp_server", tools)
        mcp_help = help_text(IPYBOX, "mcp", "--help")
        top_help = help_text(IPYBOX, "--help")
        with open(os.path.join(ROOT, "man", "ipybox.1")) as f:
            man1 = f.read()
        for t in tools:
            for where, text in (("ipybox mcp --help", mcp_help), ("ipybox --help", top_help), ("ipybox(1)", man1)):
                self.assertTrue(named(t, text), "%s not in %s" % (t, where))

    def test_man_pages_have_every_section(self):
        for page, sections in (("ipybox.1", ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "OPTIONS", "EXIT STATUS",
                                             "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"]),
                               ("ipyboxd.8", ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS",
                                              "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"])):
            with open(os.path.join(ROOT, "man", page)) as f:
                have = re.findall(r"^\.SH (.+)$", f.read(), re.M)
            with self.subTest(page=page):
                self.assertEqual([s for s in have if s in sections], sections)


if __name__ == "__main__":
    unittest.main()
