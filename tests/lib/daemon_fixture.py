"""A private ipyboxd --user for a test: its own runtime and state directories, its log kept,
and McpClient over its socket."""
import os
import select
import signal
import socket
import subprocess
import tempfile
import unittest

from ipybox_test import IPYBOX, PROTOCOL, McpClient, alive, descendants, proc_cmdline, require_sandbox, wait_for

IPYBOXD = os.path.join(os.path.dirname(IPYBOX), "ipyboxd")


class Daemon:
    def __init__(self, *args, runtime=None, state=None):
        self.tmp = tempfile.TemporaryDirectory(prefix="ipybox-daemon-")
        self.runtime = runtime or os.path.join(self.tmp.name, "run")
        self.sock = os.path.join(self.runtime, "ipybox", "ipybox.sock")
        self.env = dict(os.environ, XDG_STATE_HOME=state or os.path.join(self.tmp.name, "state"),
                        XDG_RUNTIME_DIR=self.runtime)
        os.makedirs(self.runtime, exist_ok=True)
        self.log = open(os.path.join(self.tmp.name, "daemon.log"), "w+")
        self.proc = subprocess.Popen([IPYBOXD, "--user", *args], stdout=self.log, stderr=self.log, env=self.env)
        if not wait_for(lambda: self.connectable() or self.proc.poll() is not None, 20):
            raise AssertionError("ipyboxd did not listen: " + self.log_text())
        if self.proc.poll() is not None:
            raise AssertionError("ipyboxd exited: " + self.log_text())

    def connectable(self):
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(self.sock)
            return True
        except OSError:
            return False

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def client(self, **kw):
        return SocketClient(self.sock, **kw)

    def workers(self):
        """The daemon's running worker processes (`ipybox mcp --embedded`)."""
        out = []
        for p in descendants(self.proc.pid):
            argv = proc_cmdline(p).split(b"\0")
            if b"--embedded" in argv and b"mcp" in argv and alive(p):
                out.append(p)
        return out

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def close(self):
        self.stop()
        self.log.close()
        self.tmp.cleanup()


class DaemonCase(unittest.TestCase):
    """Tests of private daemons: skipped without user namespaces; each daemon that
    self.daemon() starts is stopped at the end of the test."""

    def setUp(self):
        require_sandbox(self)
        self.daemons = []

    def tearDown(self):
        for d in self.daemons:
            d.close()

    def daemon(self, *args, **kw):
        d = Daemon(*args, **kw)
        self.daemons.append(d)
        return d

    def assertNoProcessesLeft(self, pids, timeout=20):
        self.assertTrue(wait_for(lambda: not any(alive(p) for p in pids), timeout),
                        "left running: %s" % [p for p in pids if alive(p)])


class SocketClient(McpClient):
    """McpClient over the daemon's socket."""

    def __init__(self, path, initialize=True):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.tmp = None
        self._buf = bytearray()
        self._scanned = 0
        self._next = 1
        self.notifications = []
        if initialize:
            self.init_result = self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                                           "clientInfo": {"name": "ipybox-tests", "version": "1"}})
            self.notify("notifications/initialized")

    def send_raw(self, data):
        self.sock.sendall(data)

    def _recv(self, timeout):
        r, _, _ = select.select([self.sock], [], [], timeout)
        return self.sock.recv(1 << 20) if r else None

    def stderr_text(self):
        return "(a socket client has no stderr)"

    def close(self, timeout=30):
        self.sock.close()
        return 0
