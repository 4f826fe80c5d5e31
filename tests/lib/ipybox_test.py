"""Helpers for the integration and security tests: an MCP client for `ipybox mcp` over
stdio, and `ipybox run`. Standard library only (Debian's /usr/bin/python3)."""
import json
import os
import select
import shutil
import subprocess
import tempfile
import textwrap
import time
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
IPYBOX = os.environ.get("IPYBOX", os.path.join(BUILD, "bin", "ipybox"))
HELPERS = os.path.join(BUILD, "tests", "helpers")
PROTOCOL = "2025-06-18"

# Where a host tree given to --python may live: not in a place the sandbox has of its own
# (/tmp, /var/tmp, /run, ...: refused for --python, policy/pyenv.c). The build directory when it
# is not in one (a checkout under /tmp has its build there too); else IPYBOX_TEST_SCRATCH,
# /var/lib/ipybox-tests for root, ~/.cache/ipybox-tests for others.
_SANDBOX_OWN = ("/tmp", "/var/tmp", "/run", "/dev", "/proc", "/sys", "/etc", "/app", "/opt/ipybox", "/home/appuser")


def _in_sandbox_own(path):
    return any(path == d or path.startswith(d + "/") for d in _SANDBOX_OWN)


def host_scratch(prefix):
    """A new directory (the caller removes it) for trees bound into sandboxes by --python."""
    base = os.environ.get("IPYBOX_TEST_SCRATCH")
    if not base:
        base = os.path.realpath(BUILD)
        if _in_sandbox_own(base):
            base = "/var/lib/ipybox-tests" if os.geteuid() == 0 else \
                os.path.join(os.path.expanduser("~"), ".cache", "ipybox-tests")
    os.makedirs(base, 0o755, exist_ok=True)
    return tempfile.mkdtemp(prefix=prefix, dir=os.path.realpath(base))


# Python run inside a sandbox by the security tests: raw syscalls reporting errno names.
PROBE_PRELUDE = r'''
import ctypes, errno, json, os, signal, socket, stat, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    conv = []
    for a in args:
        if a is None: conv.append(ctypes.c_void_p(0))
        elif isinstance(a, int): conv.append(ctypes.c_long(a))
        elif isinstance(a, str): conv.append(ctypes.c_char_p(a.encode()))
        elif isinstance(a, bytes): conv.append(ctypes.c_char_p(a))
        else: conv.append(a)
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *conv)
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
def err(e): return errno.errorcode.get(e.errno, str(e.errno))
def attempt(fn, *a, **kw):
    try:
        fn(*a, **kw)
        return "ok"
    except OSError as e:
        return err(e)
'''

_userns_ok = None


def userns_available():
    """Whether a sandbox can be built here (user namespaces enabled)."""
    global _userns_ok
    if _userns_ok is None:
        r = subprocess.run([IPYBOX, "run", "--", "/bin/true"], capture_output=True, text=True, timeout=60)
        _userns_ok = (r.returncode == 0, r.stderr.strip())
    return _userns_ok


def require_sandbox(test):
    ok, why = userns_available()
    if not ok:
        raise unittest.SkipTest("cannot build a sandbox here: " + why)


def run_sandboxed(cmd, options=(), timeout=120, input=None):
    """`ipybox run [options] -- cmd...`; returns CompletedProcess (text)."""
    return subprocess.run([IPYBOX, "run", *options, "--", *cmd], capture_output=True, text=True,
                          timeout=timeout, input=input)


class SandboxCase(unittest.TestCase):
    """A test that tries attacks inside real sandboxes (`ipybox run`), with a workspace of its
    own. Probes are PRELUDE + body + EPILOGUE run by the sandbox's /usr/bin/python3; probes
    and static helpers (bound at /app/bin) print one JSON object as their last line."""

    PRELUDE = PROBE_PRELUDE + "out = {}\n"
    EPILOGUE = "\nprint(json.dumps(out), flush=True)\n"
    TMP_PREFIX = "ipybox-sec-"

    def setUp(self):
        require_sandbox(self)
        self.tmp = tempfile.mkdtemp(prefix=self.TMP_PREFIX)
        self.ws = os.path.join(self.tmp, "ws")
        os.mkdir(self.ws)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def opts(self, *extra, helpers=False):
        o = ["--workspace", self.ws]
        if helpers:
            o += ["--container-bind", HELPERS + ":bin"]
        return o + list(extra)

    def state_env(self):
        """An environment whose ipybox state directory is this test's own."""
        env = dict(os.environ)
        env["XDG_STATE_HOME"] = os.path.join(self.tmp, "state")
        return env

    def code(self, body, epilogue=True):
        return self.PRELUDE + textwrap.dedent(body) + (self.EPILOGUE if epilogue else "")

    def parse(self, r, expect_rc=0):
        self.assertEqual(r.returncode, expect_rc, "exit %s\nstdout: %s\nstderr: %s"
                         % (r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
        lines = r.stdout.strip().splitlines()
        self.assertTrue(lines, "nothing printed; stderr: " + r.stderr[-2000:])
        return json.loads(lines[-1])

    def probe(self, body, options=None, expect_rc=0, env=None, timeout=120):
        opts = self.opts() if options is None else options
        r = subprocess.run([IPYBOX, "run", *opts, "--", "/usr/bin/python3", "-c", self.code(body)],
                           capture_output=True, text=True, timeout=timeout, env=env)
        return self.parse(r, expect_rc)

    def helper(self, name, *args, expect_rc=0, **popen):
        if not os.path.exists(os.path.join(HELPERS, name)):
            self.fail("helper %s not built (make build/tests/helpers/%s)" % (name, name))
        cmd = [IPYBOX, "run", *self.opts(helpers=True), "--", "/app/bin/" + name, *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **popen)
        return self.parse(r, expect_rc)


def descendants(pid):
    """All processes below pid (not pid itself), from /proc's parent links."""
    children = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(p))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def alive(pid):
    """Whether pid runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def proc_cmdline(pid):
    """/proc/<pid>/cmdline as it is (each argument ended by a NUL); b"" once pid is gone."""
    try:
        with open("/proc/%d/cmdline" % int(pid), "rb") as f:
            return f.read()
    except OSError:
        return b""


def is_private_monitor(pid):
    """Root's private monitor (`ipyboxd --private-monitor`, the program ipybox-monitor, or
    ipybox itself where that is missing): by its arguments, which are the same either way."""
    return b"--private-monitor" in proc_cmdline(pid).split(b"\0")


def proc_comm(pid):
    """/proc/<pid>/comm without its newline; "" once pid is gone."""
    try:
        with open("/proc/%d/comm" % int(pid)) as f:
            return f.read().strip()
    except OSError:
        return ""


def wait_for(pred, timeout=20, step=0.05):
    """Polls pred until it is true or timeout seconds pass; returns its last value."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


class McpError(Exception):
    def __init__(self, error):
        super().__init__(error.get("message"))
        self.code = error.get("code")
        self.error = error


class McpClient:
    """A minimal MCP client for `ipybox mcp` over stdio."""

    def __init__(self, *options, env=None, initialize=True, home=None, wrap=None, capabilities=None):
        self.tmp = tempfile.TemporaryDirectory(prefix="ipybox-test-")
        e = dict(os.environ if env is None else env)
        # Keep each test's state (sessions, default workspaces) out of the user's own.
        e.setdefault("XDG_STATE_HOME", os.path.join(self.tmp.name, "state"))
        self.state_dir = os.path.join(e["XDG_STATE_HOME"], "ipybox")
        cmd = [IPYBOX, "mcp", *options]
        # wrap: a function that turns the command into another (e.g. one run in a private
        # mount namespace).
        self.proc = subprocess.Popen(wrap(cmd) if wrap else cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=e)
        self._buf = bytearray()
        self._scanned = 0
        self._next = 1
        self.notifications = []
        if initialize:
            self.init_result = self.request("initialize", {
                "protocolVersion": PROTOCOL, "capabilities": capabilities or {},
                "clientInfo": {"name": "ipybox-tests", "version": "1"}})
            self.notify("notifications/initialized")

    # -- transport
    def send_raw(self, data: bytes):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def _recv(self, timeout):
        """What arrived within timeout (None: nothing yet; b"": the end)."""
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return os.read(self.proc.stdout.fileno(), 1 << 20) if r else None

    def send(self, msg):
        self.send_raw((json.dumps(msg) + "\n").encode())

    def read_message(self, timeout=180):
        deadline = time.time() + timeout
        while True:
            # Scan only what arrived since the last look: messages can be megabytes long.
            nl = self._buf.find(b"\n", self._scanned)
            if nl >= 0:
                break
            self._scanned = len(self._buf)
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no message from ipybox mcp within %s s" % timeout)
            chunk = self._recv(left)
            if chunk == b"":
                # Closed stdout comes just before the exit: wait for it, so stderr is whole.
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    pass
                raise EOFError("ipybox mcp closed stdout; stderr: " + self.stderr_text())
            if chunk:
                self._buf += chunk
        # One pass from the buffer to text (a slice and bytes() would copy twice more).
        with memoryview(self._buf) as mv, mv[:nl] as part:
            line = str(part, "utf-8")
        del self._buf[:nl + 1]
        self._scanned = 0
        return json.loads(line)

    def wait_response(self, rid, timeout=180):
        while True:
            msg = self.read_message(timeout)
            if msg.get("id") == rid and ("result" in msg or "error" in msg):
                return msg
            self.notifications.append(msg)

    # -- JSON-RPC
    def request(self, method, params=None, timeout=180, meta=None):
        rid = self.send_request(method, params, meta=meta)
        msg = self.wait_response(rid, timeout)
        if "error" in msg:
            raise McpError(msg["error"])
        return msg["result"]

    def send_request(self, method, params=None, meta=None):
        rid = self._next
        self._next += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None or meta is not None:
            params = dict(params or {})
            if meta:
                params["_meta"] = meta
            msg["params"] = params
        self.send(msg)
        return rid

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    # -- tools
    def call(self, name, arguments=None, timeout=180, progress_token=None):
        meta = {"progressToken": progress_token} if progress_token is not None else None
        return self.request("tools/call", {"name": name, "arguments": arguments or {}}, timeout, meta=meta)

    def call_answering(self, name, arguments, answer, timeout=180):
        """A tools/call during which elicitation/create requests are answered: answer(params) returns
        the result to send ({"action": "accept"}, say), or None to leave the request unanswered.
        Returns (result, [params of every request asked])."""
        rid = self.send_request("tools/call", {"name": name, "arguments": arguments})
        asked = []
        while True:
            msg = self.read_message(timeout)
            if msg.get("id") == rid and ("result" in msg or "error" in msg):
                if "error" in msg:
                    raise McpError(msg["error"])
                return msg["result"], asked
            if msg.get("method") == "elicitation/create" and "id" in msg:
                asked.append(msg["params"])
                reply = answer(msg["params"])
                if reply is not None:
                    self.send({"jsonrpc": "2.0", "id": msg["id"], "result": reply})
            else:
                self.notifications.append(msg)

    def execute(self, code, **kw):
        """Returns (text, result)."""
        args = {"code": code}
        for k in ("timeout", "max_output_chars"):
            if k in kw:
                args[k] = kw.pop(k)
        r = self.call("execute_ipython_cell", args, **kw)
        text = "".join(c.get("text", "") for c in r["content"] if c["type"] == "text")
        return text, r

    # -- life
    def stderr_text(self):
        try:
            if self.proc.poll() is None:
                return "(still running)"
            return self.proc.stderr.read().decode(errors="replace")
        except Exception:
            return ""

    def close(self, timeout=30):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except Exception:
                pass
        rc = self.proc.returncode
        self.tmp.cleanup()
        return rc

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# Answers to an approval question (elicitation/create) and the client capability that gets them.
class McpCase(unittest.TestCase):
    """A test of `ipybox mcp` sessions: skipped without user namespaces; each client it starts
    is closed at the end of the test."""

    def setUp(self):
        require_sandbox(self)

    def client(self, *options, **kw):
        c = McpClient(*options, **kw)
        self.addCleanup(c.close)
        return c


# A cell that sends a kernel_info_request on its kernel's own control socket, signed with the
# kernel's session, and prints the type of the answer (or "no answer" after 10 s): the control
# thread answers it while the cell keeps the shell busy.
CONTROL_KERNEL_INFO = (
    "import zmq\n"
    "k = get_ipython().kernel\n"
    "app = k.parent\n"
    "s = zmq.Context.instance().socket(zmq.DEALER)\n"
    "s.linger = 0\n"
    "s.connect('%s://%s-%s' % (app.transport, app.ip, app.control_port))\n"
    "k.session.send(s, 'kernel_info_request', {})\n"
    "if s.poll(10000):\n"
    "    idents, msg = k.session.feed_identities(s.recv_multipart())\n"
    "    print(k.session.deserialize(msg)['header']['msg_type'])\n"
    "else:\n"
    "    print('no answer')\n"
    "s.close()")

ACCEPT = {"action": "accept", "content": {}}
DECLINE = {"action": "decline"}
ELICIT = {"elicitation": {}}


def text_of(result):
    """The text blocks of an MCP tool result, joined by newlines."""
    return "\n".join(c.get("text", "") for c in result["content"] if c["type"] == "text")


def resets_until(client, want, pause=None):
    """Resets client (anything with call()) until a reset starts its kernel as `want` says
    (_meta["ipybox/kernel"]["start"]), and returns the starts in order. A standby is prepared
    ~300 ms after the kernel answered, so for "standby" it resets up to 10 times, 1 s apart, and
    stops at the first that takes one; for another start, twice, 2 s apart (each must be `want`:
    the caller asserts it). Raises AssertionError when a reset fails."""
    starts = []
    for _ in range(10 if want == "standby" else 2):
        time.sleep(pause if pause is not None else 1 if want == "standby" else 2)
        r = client.call("reset")
        if r.get("isError"):
            raise AssertionError("reset failed: " + text_of(r))
        starts.append(r["_meta"]["ipybox/kernel"]["start"])
        if want == "standby" and starts[-1] == "standby":
            break
    return starts
