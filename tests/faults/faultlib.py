"""Fault injection for ipybox sessions: find the processes of a session, take a baseline of what
must come back, inject a fault at a chosen stage, and assert what is left behind.

    class TestX(FaultCase):
        def test_y(self):
            s = self.session()                       # `ipybox mcp` (embedded), own workspace/state
            base = s.baseline()                      # processes, mounts, fds, files, cgroups, slot
            flight = s.start_stage("cell")           # idle, cell, stream, upload, tool
            self.inject(s.pid("kernel"), signal.SIGKILL)
            outcome = flight.finish()                # ("result", r) / ("error", e) / ("eof", e)
            self.assert_settled(s, base)             # survivor: same fd count, nothing leaked
            self.assert_next_call_works(s)
            self.close_and_assert_clean(s, base)     # everything of the session is gone

A daemon session: `self.daemon()` (a private `ipyboxd --user`, tests/lib/daemon_fixture.py),
then `self.session(daemon=d)`. Roles of a session's processes (Session.roles()):
  supervisor  the embedded `ipybox mcp`, or the daemon's worker (`ipybox mcp --embedded`)
  monitor     `ipyboxd --private-monitor` (root's sandboxes go through one)
  shim        the outer ipybox-shim;  pid1: PID 1 of the sandbox (the inner ipybox-shim; with a
              zygote, S1, PID 1 of the kernels' pid namespace)
  s0          with a zygote: the ipybox-shim between them, PID 1 of the zygote's pid namespace
  zygote      the kernel's zygote (child of s0; architecture.md, "Zygote kernels")
  kernel      the IPython kernel (child of PID 1);  tool_server: a stdio MCP server of the session
  daemon      `ipyboxd --user` (daemon sessions only)
Every check is scoped to this test's own paths, pids and sandbox slot: other tests may run
sandboxes on the same host at the same time.
"""
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from ipybox_test import PROTOCOL, McpClient, McpError, require_sandbox, wait_for  # noqa: E402
import daemon_fixture  # noqa: E402
import mcp_servers  # noqa: E402

# Generous: a call that has not ended by then hangs.
CALL_DEADLINE = 90
# How long a SIGSTOPped process is held before SIGCONT.
STOP_SECONDS = 2.0
SLOT_SIZE = 65536
SLOTS_DIR = "/run/ipybox-slots"
STAGES = ("idle", "cell", "stream", "upload", "tool")
# Statuses a call may end with (the `_meta` of execute_ipython_cell).
STATUSES = {"ok", "error", "timeout", "timeout_restarted", "cancelled", "kernel_died"}
MARK = ".faults-started"
GO = ".faults-go"
TOOL_TIMEOUT = 4


# ------------------------------------------------------------------------------------------
# Processes

def _stat(pid):
    """(ppid, state, starttime) of pid, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[1]), rest[0], int(rest[19])
    except (OSError, ValueError, IndexError):
        return None


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _ns_pid(pid):
    """pid's number in its own (innermost) pid namespace, or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _uid(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Proc:
    """A process as seen once: pid plus start time, so that a reused pid is never mistaken for it."""

    def __init__(self, pid, ppid, start, role, argv):
        self.pid, self.ppid, self.start, self.role, self.argv = pid, ppid, start, role, argv

    def alive(self):
        st = _stat(self.pid)
        return st is not None and st[2] == self.start and st[1] != "Z"

    def zombie(self):
        st = _stat(self.pid)
        return st is not None and st[2] == self.start and st[1] == "Z"

    def __repr__(self):
        return "%s(%d: %s)" % (self.role, self.pid, " ".join(self.argv)[:80])


def process_tree(top):
    """[Proc] of top and everything below it, each with its role (see the module's doc)."""
    children, info = {}, {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        st = _stat(int(p))
        if st:
            info[int(p)] = st
            children.setdefault(st[0], []).append(int(p))
    if top not in info:
        return []
    out, roles = [], {}
    todo = [top]
    while todo:
        pid = todo.pop(0)
        ppid, _, start = info[pid]
        argv = _cmdline(pid)
        name = os.path.basename(argv[0]) if argv else ""
        parent = roles.get(ppid)
        if name == "ipyboxd" and "--private-monitor" in argv:
            role = "monitor"
        elif name == "ipyboxd":
            role = "daemon"
        elif name == "ipybox" and "mcp" in argv:
            role = "supervisor"
        elif name == "ipybox-shim" and parent == "shim":
            below = [_cmdline(c) for c in children.get(pid, [])]
            role = "s0" if any(a and os.path.basename(a[0]) == "ipybox-shim" for a in below) else "pid1"
        elif name == "ipybox-shim" and parent == "s0":
            # S1 is PID 1 of the kernels' namespace; another shim under S0 is a zygote held
            # before its exec (until the first kernel answered).
            role = "pid1" if _ns_pid(pid) == 1 else "zygote"
        elif name == "ipybox-shim":
            role = "shim"
        elif parent == "s0":
            role = "zygote"
        elif parent == "zygote":
            role = "sandbox"
        elif parent == "pid1":
            role = "kernel" if any("kernelapp" in a for a in argv) else "sandbox"
        elif parent in ("kernel", "sandbox"):
            role = "sandbox"
        elif any(a.endswith("mcp_servers.py") for a in argv):
            role = "tool_server"
        else:
            role = "other"
        roles[pid] = role
        out.append(Proc(pid, ppid, start, role, argv))
        todo.extend(sorted(children.get(pid, [])))
    return out


def fd_table(pid):
    """{fd: target} of pid, targets normalized: socket:[123] -> socket, pipe:[4] -> pipe,
    anon_inode:[eventfd] -> anon_inode:[eventfd]; paths kept."""
    out = {}
    try:
        names = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return None
    for n in names:
        try:
            t = os.readlink("/proc/%d/fd/%s" % (pid, n))
        except OSError:
            continue
        out[int(n)] = re.sub(r"^(socket|pipe):\[\d+\]$", r"\1", t)
    return out


def fd_kinds(table):
    """A multiset of the targets with numbers in paths folded (kernel-3 -> kernel-N)."""
    kinds = {}
    for t in (table or {}).values():
        k = re.sub(r"\d+", "N", t)
        kinds[k] = kinds.get(k, 0) + 1
    return kinds


def slot_processes(slot_uid):
    """[Proc] of every process running in the sandbox uid range starting at slot_uid."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            uid = _uid(int(p))
            st = _stat(int(p))
            if uid is not None and st and slot_uid <= uid < slot_uid + SLOT_SIZE:
                out.append(Proc(int(p), st[0], st[2], "slot", _cmdline(int(p))))
    return out


def slot_lock_holders(slot_uid):
    """Pids holding a lock on the slot's lock file (from /proc/locks)."""
    try:
        st = os.stat(os.path.join(SLOTS_DIR, str(slot_uid)))
    except OSError:
        return []
    dev = "%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    holders = []
    with open("/proc/locks") as f:
        for line in f:
            parts = line.split()
            # "1: FLOCK  ADVISORY  WRITE 1234 fd:00:5678 0 EOF" (blocked waiters have "->")
            if "->" in parts:
                continue
            if len(parts) >= 6 and parts[5] == dev:
                holders.append(int(parts[4]))
    return holders


def sandbox_cgroups(pid):
    """The cgroup directories (sb-<slot>) that pid is in, for every hierarchy (v1 and v2)."""
    out = []
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        hid, ctrls, path = line.split(":", 2)
        if "sb-" not in path:
            continue
        if hid == "0":
            base = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") else "/sys/fs/cgroup"
        else:
            base = "/sys/fs/cgroup/" + ctrls.replace("name=", "")
        out.append(base + path)
    return out


def cgroup_pids(path):
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return {int(x) for x in f.read().split()}
    except OSError:
        return set()


def mounts_under(roots):
    """Mount points (host mount namespace) at or below any of roots."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].replace("\\040", " ")
            if any(mp == r or mp.startswith(r.rstrip("/") + "/") for r in roots):
                out.append(mp)
    return sorted(out)


def files_under(root, skip=()):
    """Relative paths of everything below root (not following symlinks), skipping the subtrees
    in skip (absolute paths)."""
    out = set()
    for d, dirs, files in os.walk(root):
        keep = []
        for n in dirs:
            full = os.path.join(d, n)
            if full in skip:
                continue
            keep.append(n)
        dirs[:] = keep
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


# ------------------------------------------------------------------------------------------
# Sessions

class Session:
    """One MCP session with a workspace and state directory of its own under tmp: `ipybox mcp
    --embedded` (McpClient) or a connection to a Daemon (daemon_fixture)."""

    def __init__(self, tmp, options=(), daemon=None, wrap=None, env=None, workspace=None, state=None):
        self.tmp = tmp
        self.daemon = daemon
        self.workspace = workspace or os.path.join(tmp, "ws")
        os.makedirs(self.workspace, exist_ok=True)
        self.options = ["--workspace", self.workspace, *options]
        self.dead = False
        if daemon is None:
            e = dict(os.environ if env is None else env)
            e["XDG_STATE_HOME"] = state or os.path.join(tmp, "state")
            self.state_dir = os.path.join(e["XDG_STATE_HOME"], "ipybox")
            self.client = _started(McpClient("--embedded", *self.options, env=e, wrap=wrap, initialize=False))
            self.top = self.client.proc.pid
        else:
            # The real bridge (`ipybox mcp --connect`), which sends our options to the daemon.
            self.state_dir = os.path.join(daemon.env["XDG_STATE_HOME"], "ipybox")
            self.client = _started(McpClient("--connect", daemon.sock, *self.options, env=daemon.env, wrap=wrap,
                                             initialize=False))
            self.top = daemon.proc.pid
        self.seen = {}

    # -- processes
    def tree(self):
        procs = process_tree(self.top)
        for p in procs:
            self.seen[(p.pid, p.start)] = p
        return procs

    def roles(self):
        """{role: [Proc]} now."""
        out = {}
        for p in self.tree():
            out.setdefault(p.role, []).append(p)
        return out

    def proc(self, role):
        """The one process of role, waiting for it to exist (a sandbox may be restarting)."""
        found = []

        def look():
            found[:] = self.roles().get(role, [])
            return found
        if not wait_for(look, 30):
            raise AssertionError("no %s process in the session; tree: %s" % (role, self.tree()))
        return found[0]

    def supervisor(self):
        return self.proc("supervisor")

    # -- calls
    def call(self, name, args=None, timeout=CALL_DEADLINE):
        return self.client.call(name, args or {}, timeout=timeout)

    def execute(self, code, timeout=CALL_DEADLINE):
        return self.client.execute(code, timeout=timeout)

    def close(self):
        self.client.close()


def _started(c):
    """c initialized, or closed (its process ended and reaped) and the error raised."""
    try:
        c.init_result = c.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                                 "clientInfo": {"name": "ipybox-faults", "version": "1"}})
        c.notify("notifications/initialized")
        return c
    except BaseException:
        with contextlib.suppress(OSError):
            c.proc.stdin.close()
        c.close()
        raise


class Baseline:
    """What must come back after a fault: taken when the session is idle and well."""

    def __init__(self, s):
        roles = s.roles()
        self.procs = [p for ps in roles.values() for p in ps]
        shim = roles.get("shim", [None])[0]
        self.slot = _uid(shim.pid) if shim else None
        self.cgroups = sandbox_cgroups(shim.pid) if shim else []
        self.mounts = mounts_under([s.tmp])
        sup = roles["supervisor"][0]
        self.fds = {"supervisor": fd_table(sup.pid)}
        if "daemon" in roles:
            self.fds["daemon"] = fd_table(roles["daemon"][0].pid)
        self.workspace = files_under(s.workspace)
        self.live_session_dirs = {os.path.join(s.state_dir, "sessions", n)
                                  for n in _listdir(os.path.join(s.state_dir, "sessions"))}
        self.state = files_under(s.state_dir, skip=self.live_session_dirs)


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


class Flight:
    """A call in flight, started at a stage; finish() releases it and waits for its end."""

    def __init__(self, s, stage, rid=None, upload_dst=None, size=0):
        self.s, self.stage, self.rid = s, stage, rid
        self.upload_dst, self.size = upload_dst, size
        self.early = None  # a response read while waiting for the stage

    def finish(self, deadline=CALL_DEADLINE):
        """("none", None) at idle; ("result", r), ("error", McpError) or ("eof", EOFError)."""
        if self.rid is None:
            return "none", None
        try:
            with open(os.path.join(self.s.workspace, GO), "w"):
                pass
        except OSError:
            pass
        try:
            msg = self.early or self.s.client.wait_response(self.rid, deadline)
        except EOFError as e:
            return "eof", e
        except TimeoutError as e:
            raise AssertionError("the %s call did not end within %s s (hang): %s" % (self.stage, deadline, e))
        if "error" in msg:
            return "error", McpError(msg["error"])
        return "result", msg["result"]


CELL = ("import os, time\n"
        "open('/app/%s', 'w').close()\n"
        "while not os.path.exists('/app/%s'):\n"
        "    time.sleep(0.02)\n"
        "print('cell done')\n") % (MARK, GO)
STREAM = ("import os, time\n"
          "open('/app/%s', 'w').close()\n"
          "i = 0\n"
          "while not os.path.exists('/app/%s'):\n"
          "    print('line', i, flush=True)\n"
          "    i += 1\n"
          "    time.sleep(0.01)\n"
          "print('cell done')\n") % (MARK, GO)
TOOL = ("import mcptools\n"
        "from mcptools.fake import hang\n"
        "open('/app/%s', 'w').close()\n"
        "try:\n"
        "    hang.run()\n"
        "except mcptools.ToolTimeout:\n"
        "    print('cell done')\n") % MARK


def start_stage(s, stage, upload_src=None):
    """Puts session s at stage and returns its Flight. The stages: idle (nothing in flight),
    cell (a cell waiting for a file), stream (a cell printing, with a progress token, until a file
    appears; returns once progress has arrived), upload (upload_file of upload_src, returns while
    the supervisor holds it open), tool (a cell in a call to the fake server's `hang` tool, which
    the supervisor ends after TOOL_TIMEOUT s; needs the session from tool_options())."""
    for n in (MARK, GO):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(s.workspace, n))
    c = s.client
    if stage == "idle":
        return Flight(s, stage)
    if stage in ("cell", "stream", "tool"):
        code = {"cell": CELL, "stream": STREAM, "tool": TOOL}[stage]
        meta = {"progressToken": "faults"} if stage == "stream" else None
        rid = c.send_request("tools/call", {"name": "execute_ipython_cell",
                                            "arguments": {"code": code, "timeout": CALL_DEADLINE}}, meta=meta)
        f = Flight(s, stage, rid)
        if not wait_for(lambda: os.path.exists(os.path.join(s.workspace, MARK)), 60):
            raise AssertionError("the %s cell did not start within 60 s" % stage)
        if stage == "stream":
            deadline = time.time() + 30
            while True:
                msg = c.read_message(max(0.1, deadline - time.time()))
                if msg.get("id") == rid:
                    raise AssertionError("the streaming cell ended early: %s" % json.dumps(msg)[:2000])
                if msg.get("method") == "notifications/progress":
                    break
        elif stage == "tool":
            time.sleep(0.3)  # from the mark to the call on the tool socket
        return f
    if stage == "upload":
        dst = "faults-upload.bin"
        rid = c.send_request("tools/call", {"name": "upload_file", "arguments": {
            "relpath": dst, "local_path": upload_src}})
        sup = s.supervisor().pid

        def reading():
            t = fd_table(sup)
            return t is not None and upload_src in t.values()
        if not wait_for(reading, 30, step=0.0005):
            raise AssertionError("the supervisor never held %s open: the upload ended before the fault "
                                 "could reach it (make the file bigger)" % upload_src)
        return Flight(s, stage, rid, upload_dst=dst, size=os.path.getsize(upload_src))
    raise ValueError("unknown stage %r" % stage)


def tool_options(tmp):
    """Options giving a session the fake MCP server `fake` (its `hang` and `fail` tools approved,
    calls ended after TOOL_TIMEOUT s), for the tool stage and TOOL_TOUCH."""
    cfg = os.path.join(tmp, "mcp.json")
    with mcp_servers.fake_server_params("errors") as params:
        with open(cfg, "w") as f:
            json.dump({"mcpServers": {"fake": params}}, f)
    return ["--mcp-config", cfg, "--approve-tools", "fake/hang", "--approve-tools", "fake/fail",
            "--mcp-timeout", str(TOOL_TIMEOUT)]


# A cell that uses the fake server (so that a server that died is started again).
TOOL_TOUCH = ("import mcptools\n"
              "from mcptools.fake import fail\n"
              "try:\n"
              "    fail.run()\n"
              "except mcptools.ToolError:\n"
              "    print('tool ok')\n")


def make_upload_source(tmp, size=256 << 20):
    """A sparse file of size bytes (reads fast, writes real blocks) to upload."""
    path = os.path.join(tmp, "upload-src.bin")
    with open(path, "wb") as f:
        f.truncate(size)
    return path


# ------------------------------------------------------------------------------------------
# The test case

class FaultCase(unittest.TestCase):
    """Sessions, faults and the assertions on what they leave behind."""

    def setUp(self):
        require_sandbox(self)
        self.tmp = tempfile.mkdtemp(prefix="ipybox-faults-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self._sessions = []
        self._stopped = []
        self.addCleanup(self._cleanup)

    def _cleanup(self):
        for p in self._stopped:
            with contextlib.suppress(OSError):
                os.kill(p.pid, signal.SIGCONT)
        for s in self._sessions:
            with contextlib.suppress(Exception):
                s.close()

    def close_sessions(self):
        """Ends every session this test started (they may be in any state)."""
        for s in self._sessions:
            with contextlib.suppress(Exception):
                s.close()

    def session(self, *options, **kw):
        s = Session(self.tmp, options, **kw)
        self._sessions.append(s)
        return s

    def daemon(self, *args):
        d = daemon_fixture.Daemon(*args, state=os.path.join(self.tmp, "dstate"))
        self.addCleanup(d.close)
        return d

    # -- faults
    def inject(self, proc, sig, hold=STOP_SECONDS):
        """Sends sig to proc (a Proc: never a reused pid). SIGSTOP is held `hold` seconds, then
        SIGCONT; SIGKILL waits until the process is gone."""
        self.assertTrue(proc.alive(), "%r is not running before the fault" % proc)
        os.kill(proc.pid, sig)
        if sig == signal.SIGSTOP:
            self._stopped.append(proc)
            time.sleep(hold)
            os.kill(proc.pid, signal.SIGCONT)
            self._stopped.remove(proc)
        elif sig == signal.SIGKILL:
            self.assertTrue(wait_for(lambda: not proc.alive(), 20), "%r outlived SIGKILL" % proc)

    # -- outcomes
    def assert_clear_outcome(self, kind, value, stage, survived):
        """The in-flight call ended with a result, a clear error or (supervisor gone) EOF."""
        if kind == "none":
            return
        if kind == "eof":
            self.assertFalse(survived, "the connection ended though the supervisor runs: %s" % value)
            return
        if kind == "error":
            self.assertTrue(str(value).strip(), "an error without a message: %r" % value.error)
            return
        text = "".join(c.get("text", "") for c in value.get("content", []) if c.get("type") == "text")
        if value.get("isError"):
            self.assertTrue(text.strip(), "an error result without text: %s" % json.dumps(value)[:2000])
        meta = value.get("_meta", {}).get("ipybox/execution")
        if meta:
            self.assertIn(meta.get("status"), STATUSES, json.dumps(value)[:2000])

    def assert_call_succeeded(self, kind, value, stage):
        """A fault that killed nothing (SIGSTOP): the call ends as if nothing happened."""
        if kind == "none":
            return
        self.assertEqual(kind, "result", "%s: %s" % (kind, value))
        text = "".join(c.get("text", "") for c in value.get("content", []) if c.get("type") == "text")
        self.assertFalse(value.get("isError"), text[-2000:])
        if stage != "upload":
            self.assertIn("cell done", text)

    def assert_upload_not_half_written(self, s, flight):
        """After an upload: /app/<dst> is whole or absent."""
        if flight.upload_dst is None:
            return
        path = os.path.join(s.workspace, flight.upload_dst)
        if os.path.exists(path):
            self.assertEqual(os.path.getsize(path), flight.size, "a half-written upload is visible: " + path)

    def assert_next_call_works(self, s, state=None, may_report_death=False):
        """print(1+1) gives 2; with state=(name, value) the variable is still there. With
        may_report_death (something of the sandbox died), the first call may instead report the
        death (an error naming the fresh kernel, status kernel_died): then the one after works."""
        text, r = s.execute("print(1+1)")
        if may_report_death and r.get("isError") and death_report(text, r):
            text, r = s.execute("print(1+1)")
        self.assertFalse(r.get("isError"), text)
        self.assertIn("2", text)
        if state:
            text, r = s.execute("print(%s)" % state[0])
            self.assertFalse(r.get("isError"), "the kernel's state was lost: " + text)
            self.assertEqual(text.strip(), str(state[1]))

    def assert_settled(self, s, base, survivors=("supervisor",)):
        """The session survived: processes that died are reaped and not replaced twice, nothing
        is a zombie, the supervisor's fds are back to the baseline, nothing new in the workspace
        or the state directory outside the live session directory."""
        now = s.roles()
        for role in survivors:
            self.assertIn(role, now, "the %s is gone" % role)
        for r in ("kernel", "pid1", "shim", "s0", "zygote"):
            self.assertLessEqual(len(now.get(r, [])), 1, "several %s processes: %s" % (r, now.get(r)))
        zombies = []

        def reaped():
            zombies[:] = [p for p in s.tree() if p.zombie()]
            return not zombies
        self.assertTrue(wait_for(reaped, 10), "zombies in the session: %s" % zombies)
        for who, before in base.fds.items():
            pid = now[who][0].pid

            def same():
                return len(fd_table(pid) or {}) <= len(before)
            if not wait_for(same, 20):
                after = fd_table(pid)
                self.fail("%s holds %d fds, %d at the baseline; more now: %s" % (
                    who, len(after), len(before), _kinds_diff(fd_kinds(after), fd_kinds(before))))
        self.assertEqual(mounts_under([s.tmp]), base.mounts, "mounts under the test's directory changed")
        self.assertEqual(self._workspace_now(s) - base.workspace, set(), "new files in the workspace")
        self.assertEqual(self._state_now(s, base) - base.state, set(), "new files in the state directory")

    def _workspace_now(self, s):
        return files_under(s.workspace) - {MARK, GO, "faults-upload.bin"}

    def _state_now(self, s, base):
        live = {os.path.join(s.state_dir, "sessions", n) for n in _listdir(os.path.join(s.state_dir, "sessions"))}
        return files_under(s.state_dir, skip=live | base.live_session_dirs)

    def assert_gone(self, s, base, extra=()):
        """Nothing of the session runs: every process seen (in the baseline, in the session's
        tree since, and extra), nothing in its sandbox slot, its cgroups empty or removed, its
        slot lock not held by any of them."""
        seen = list(base.procs) + list(s.seen.values()) + list(extra)
        everyone = {p.pid for p in seen}
        if s.daemon is not None:
            # The daemon and its monitor serve every session: they stay.
            seen = [p for p in seen if p.role not in ("daemon", "monitor")]

        def gone():
            return not [p for p in seen if p.alive()]
        if not wait_for(gone, 30):
            self.fail("left running: %s" % [p for p in seen if p.alive()])
        # An orphan is reaped by init, at its own pace; the session's own children must be too.
        zombies = []

        def reaped():
            zombies[:] = [p for p in seen if p.zombie()]
            return not zombies
        self.assertTrue(wait_for(reaped, 20), "left as zombies: %s" % zombies)
        if base.slot is not None:
            ours = {(p.pid, p.start) for p in seen}
            left = [p for p in slot_processes(base.slot) if (p.pid, p.start) in ours]
            self.assertEqual(left, [], "processes left in the sandbox's uid range")
            pids = {p.pid for p in seen}
            self.assertTrue(wait_for(lambda: not set(slot_lock_holders(base.slot)) & everyone, 20),
                            "the slot lock of the ended sandbox is still held: %s" % slot_lock_holders(base.slot))
            for cg in base.cgroups:
                self.assertFalse(cgroup_pids(cg) & pids, "cgroup %s still holds the session's processes" % cg)
        self.assertEqual(mounts_under([s.tmp]), base.mounts, "mounts under the test's directory changed")

    def close_and_assert_clean(self, s, base, extra=()):
        """Ends the session (if it still runs) and asserts that nothing of it is left: processes,
        slot, cgroups, mounts, files in the workspace and the state directory (its session
        directory removed)."""
        s.tree()
        s.close()
        self.assert_gone(s, base, extra)
        self.assert_files_clean(s, base)

    def assert_files_clean(self, s, base):
        self.assertEqual(self._workspace_now(s) - base.workspace, set(), "files left in the workspace")
        if s.daemon is None:
            # A session directory is removed at the end, or by the next start after a crash.
            self.assertEqual(_listdir(os.path.join(s.state_dir, "sessions")), [], "session directories left")
            self.assertEqual(files_under(s.state_dir) - base.state, set(), "files left in the state directory")


def death_report(text, result):
    """Whether a result tells that the kernel or sandbox died (and a fresh kernel runs)."""
    meta = result.get("_meta", {}).get("ipybox/execution", {})
    return meta.get("status") == "kernel_died" or "fresh kernel" in text


def _kinds_diff(after, before):
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before) if after.get(k, 0) != before.get(k, 0)}
