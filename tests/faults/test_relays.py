"""Relays end with their kernel (issue 22): the connections a kernel made to a remote that
never closes them are closed, both sides, when that kernel ends (reset, SIGKILL between calls,
death during a cell, a timeout restart), whatever the remote does; the supervisor's
descriptors come back to what they were, and the next kernel has the whole connection cap at
once. DNS queries waiting for the host's resolver end with it too. The remote is a tarpit in
the test hosts' network namespace (tests/lib/testhosts.py): it greets, never sends again and
never closes, and reports each connection and each EOF; it is also the supervisor's resolver,
one that never answers."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import McpClient, descendants, require_sandbox, wait_for  # noqa: E402
import testhosts  # noqa: E402
from testhosts import A_V4  # noqa: E402

CAP = 16            # --max-connections: small, so the kernel goes over it quickly
TARPIT_PORT = 7070
SLACK = 4           # descriptors the supervisor may hold beyond its baseline (zmq's own)

HOSTS = None
TARPIT = None

TARPIT_SERVER = r'''
import json, selectors, socket, sys, time
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((sys.argv[1], int(sys.argv[2])))
ls.listen(4096)
sel = selectors.DefaultSelector()
sel.register(ls, selectors.EVENT_READ)
kept = []  # sockets whose peer ended: this side is never closed
dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # a resolver that never answers
dns.bind((sys.argv[1], 53))
sel.register(dns, selectors.EVENT_READ)
print(json.dumps({"ev": "ready"}), flush=True)
while True:
    for key, _ in sel.select():
        if key.fileobj is dns:
            dns.recv(4096)
            print(json.dumps({"ev": "dns", "t": time.monotonic()}), flush=True)
            continue
        if key.fileobj is ls:
            c, _ = ls.accept()
            c.send(b"tarpit\n")
            sel.register(c, selectors.EVENT_READ)
            print(json.dumps({"ev": "accept", "t": time.monotonic()}), flush=True)
            continue
        try:
            data = key.fileobj.recv(4096)
        except OSError:
            data = b""
        if not data:
            sel.unregister(key.fileobj)
            kept.append(key.fileobj)
            print(json.dumps({"ev": "eof", "t": time.monotonic()}), flush=True)
'''

# Run in the kernel: connect n times to the tarpit, keep what it greets. A connection over the
# cap is accepted by the proxy and closed at once: EOF instead of the greeting.
GRAB = r'''
import socket, struct
try:
    held
except NameError:
    held = []
def grab(n):
    got = refused = 0
    for _ in range(n):
        s = socket.create_connection(("%s", %d), timeout=10)
        s.settimeout(10)
        try:
            b = s.recv(16)
        except OSError:
            b = b""
        if b == b"tarpit\n":
            held.append(s)
            got += 1
        else:
            s.close()
            refused += 1
    return got, refused
def ask(sock, i):
    """A DNS query (A, for a name of the test hosts' zone) to the stub, without waiting."""
    name = b"".join(bytes([len(l)]) + l for l in (b"q%%d" %% i, b"slow", b"ipybox", b"test")) + b"\0"
    sock.sendto(struct.pack(">HHHHHH", i, 0x0100, 1, 0, 0, 0) + name + struct.pack(">HH", 1, 1), ("127.0.0.1", 53))
def servfail(sock, timeout):
    """Whether the stub answers SERVFAIL within timeout (None: no answer)."""
    sock.settimeout(timeout)
    try:
        return sock.recv(512)[3] & 15 == 2
    except socket.timeout:
        return None
''' % (A_V4, TARPIT_PORT)


class Tarpit:
    """The tarpit server, run in the test hosts' namespace; counts what it saw."""

    def __init__(self, ns):
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", TARPIT_SERVER, A_V4,
                                      str(TARPIT_PORT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lock = threading.Lock()
        self.events = []
        line = self.proc.stdout.readline()
        if json.loads(line or "{}").get("ev") != "ready":
            raise RuntimeError("the tarpit did not start: " + self.proc.stderr.read())
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.events.append(json.loads(line))

    def count(self, ev):
        with self.lock:
            return sum(1 for e in self.events if e["ev"] == ev)

    def times(self, ev):
        with self.lock:
            return [e["t"] for e in self.events if e["ev"] == ev]

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


def setUpModule():
    global HOSTS, TARPIT
    why = testhosts.available()
    if why:
        raise unittest.SkipTest(why)
    HOSTS = testhosts.TestHosts(tempfile.mkdtemp(prefix="ipybox-relays-"))
    HOSTS.start()
    TARPIT = Tarpit(HOSTS.ns)


def tearDownModule():
    if TARPIT:
        TARPIT.stop()
    if HOSTS:
        HOSTS.stop()
        shutil.rmtree(HOSTS.workdir, ignore_errors=True)


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def kernel_pids(supervisor):
    """The kernel's processes: the sandbox's Python started with the connection file."""
    out = []
    for p in descendants(supervisor):
        try:
            with open("/proc/%d/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"/connection.json") for a in argv) and b"-c" in argv:
            out.append(p)
    return out


class Session:
    """`ipybox mcp` with a small cap, its stderr in a file, and a kernel that has made CAP
    connections to the tarpit (and been refused CAP more)."""

    def __init__(self, case):
        self.case = case
        self.tmp = tempfile.mkdtemp(prefix="ipybox-relays-")
        self.log = os.path.join(self.tmp, "stderr")
        ws = os.path.join(self.tmp, "ws")
        os.mkdir(ws)
        # The host's resolver, for the supervisor: the tarpit's, which never answers.
        resolv = os.path.join(self.tmp, "resolv.conf")
        with open(resolv, "w") as f:
            f.write("nameserver %s\noptions timeout:30 attempts:1\n" % A_V4)
        env = dict(os.environ, XDG_STATE_HOME=os.path.join(self.tmp, "state"))
        self.c = McpClient("--workspace", ws, "--max-connections", str(CAP), "--verbose", env=env,
                           wrap=lambda cmd: ["unshare", "-m", "--", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf '
                                             '&& log=$1 && shift && exec "$@" 2>"$log"', resolv, self.log] + cmd)
        self.pid = self.c.proc.pid

    def stderr(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def run(self, code, **kw):
        text, r = self.c.execute(code, **kw)
        return text, r

    def baseline(self):
        """The supervisor's descriptors with a kernel that made a connection and closed it (to
        host A's greeter, which closes when its client does)."""
        text, _ = self.run(GRAB + "s = socket.create_connection(('%s', 7)); print(s.recv(16)); s.close()" % A_V4)
        self.case.assertIn("host-a", text)
        time.sleep(0.5)
        return fd_count(self.pid)

    def fill(self, base):
        """The kernel takes the whole cap; the supervisor holds its relays."""
        accepts = TARPIT.count("accept")
        text, _ = self.run("print(grab(%d))" % (2 * CAP))
        self.case.assertIn("(%d, %d)" % (CAP, CAP), text)
        self.case.assertTrue(wait_for(lambda: TARPIT.count("accept") == accepts + CAP, 10))
        # Each relay holds two sockets and two pipes: the check below can fail.
        self.case.assertGreaterEqual(fd_count(self.pid), base + 4 * CAP)

    def assert_released(self, base, eofs_before, what):
        """The old kernel's relays are gone, both sides, and the cap is whole again."""
        ok = wait_for(lambda: fd_count(self.pid) <= base + SLACK, 20)
        self.case.assertTrue(ok, "after %s the supervisor holds %d descriptors (baseline %d)\n%s"
                             % (what, fd_count(self.pid), base, self.stderr()[-3000:]))
        self.case.assertTrue(wait_for(lambda: TARPIT.count("eof") >= eofs_before + CAP, 10),
                             "the remote saw %d of %d connections end" % (TARPIT.count("eof") - eofs_before, CAP))
        self.case.assertIn("ended %d connections of the old kernel" % CAP, self.stderr())

    def assert_whole_cap(self):
        """The next kernel gets the whole cap at once."""
        mark = len(self.stderr())
        text, _ = self.run(GRAB + "print(grab(%d))" % CAP)
        self.case.assertIn("(%d, 0)" % CAP, text)
        self.case.assertNotIn("connections are open", self.stderr()[mark:])

    def close(self):
        self.c.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class RelaysEndWithTheKernel(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.s = Session(self)
        self.base = self.s.baseline()

    def tearDown(self):
        self.s.close()

    def test_reset(self):
        self.s.fill(self.base)
        eofs = TARPIT.count("eof")
        self.s.c.call("reset")
        self.s.assert_released(self.base, eofs, "reset")
        self.s.assert_whole_cap()

    def test_kernel_killed_between_calls(self):
        self.s.fill(self.base)
        eofs = TARPIT.count("eof")
        pids = kernel_pids(self.s.pid)
        self.assertTrue(pids, "the kernel is not among the supervisor's descendants")
        for p in pids:
            os.kill(p, signal.SIGKILL)
        # No call comes: the supervisor notices the death by itself.
        self.s.assert_released(self.base, eofs, "the kernel's SIGKILL")
        self.s.assert_whole_cap()

    def test_kernel_died_during_a_cell(self):
        self.s.fill(self.base)
        eofs = TARPIT.count("eof")
        text, _ = self.s.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
        self.assertIn("died", text)
        self.s.assert_released(self.base, eofs, "the kernel's death in a cell")
        self.s.assert_whole_cap()

    def test_timeout_restart(self):
        self.s.fill(self.base)
        eofs = TARPIT.count("eof")
        text, _ = self.s.run("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(600)",
                             timeout=1)
        self.assertIn("restarted", text)
        self.s.assert_released(self.base, eofs, "a timeout restart")
        self.s.assert_whole_cap()

    def test_dns_queries_waiting_for_the_resolver(self):
        """The kernel fills the stub's 64 pending lookups (the host's resolver never answers);
        after reset they no longer count, and the next kernel's query waits instead of being
        refused at once."""
        text, _ = self.s.run("q = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                             "for i in range(64): ask(q, i)\n"
                             "import time; time.sleep(0.5)\nask(q, 64)\nprint('full', servfail(q, 10))")
        self.assertIn("full True", text)
        self.assertTrue(wait_for(lambda: TARPIT.count("dns") >= 4, 10), "the host's lookups did not start")
        self.s.c.call("reset")
        mark = len(self.s.stderr())
        text, _ = self.s.run(GRAB + "q = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                             "ask(q, 1)\nprint('next', servfail(q, 3))")
        self.assertIn("next None", text)
        self.assertNotIn("queries are waiting already", self.s.stderr()[mark:])
        self.assertIn("ended 0 connections and 64 DNS queries of the old kernel", self.s.stderr())


if __name__ == "__main__":
    unittest.main()
