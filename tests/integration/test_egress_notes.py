"""Egress refusals told in the cell's result (issue 20, deliverable 1): one line per refused
destination in the text and `egressRefused` in `_meta["ipybox/execution"]`, for a DNS refusal,
a TCP refusal by address and a TLS refusal by name, against test hosts in a network namespace
this test builds (tests/lib/testhosts.py); the option each line suggests really allows it
(tried in a second session); de-duplication and the cap; names with control characters
escaped so that they cannot forge a line; refusals made between cells not told; the same
lines on `ipybox run`'s stderr; and a session of ipyboxd --user."""
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX, McpClient, SandboxCase, require_sandbox, wait_for  # noqa: E402
import testhosts  # noqa: E402
from testhosts import A_V4, B_V4  # noqa: E402

HOSTS = None
DASH = " \u2014 "
PREFIX = "[ipybox] egress refused: "

PRELUDE = r'''
import socket, ssl
def lookup(name):
    try:
        socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)
        return "resolved"
    except socket.gaierror as e:
        return "gaierror"
def raw(addr, port, tls_name=None, timeout=15):
    try:
        s = socket.create_connection((addr, port), timeout=timeout)
        if tls_name:
            ctx = ssl.create_default_context(cafile="/app/ca.pem")
            s = ctx.wrap_socket(s, server_hostname=tls_name)
        out = s.recv(100)
        s.close()
        return out.decode(errors="replace")
    except (OSError, ssl.SSLError) as e:
        return "ERR " + type(e).__name__
'''


def setUpModule():
    global HOSTS
    why = testhosts.available()
    if why:
        raise unittest.SkipTest(why)
    HOSTS = testhosts.TestHosts(tempfile.mkdtemp(prefix="ipybox-notes-"))
    HOSTS.start()


def tearDownModule():
    if HOSTS:
        HOSTS.stop()
        shutil.rmtree(HOSTS.workdir, ignore_errors=True)


def refusal_lines(text):
    return [line for line in text.splitlines() if line.startswith(PREFIX)]


def meta_of(result):
    return result["_meta"]["ipybox/execution"]


class NotesCase(unittest.TestCase):
    ALLOW = ("--allowed-domain", "a.ipybox.test")

    def setUp(self):
        require_sandbox(self)
        self.tmp = tempfile.mkdtemp(prefix="ipybox-notes-")
        self.ws = os.path.join(self.tmp, "ws")
        os.mkdir(self.ws)
        shutil.copy(HOSTS.cert, os.path.join(self.ws, "ca.pem"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def session(self, *extra):
        env = dict(os.environ, XDG_STATE_HOME=os.path.join(self.tmp, "state"))
        c = McpClient("--workspace", self.ws, *self.ALLOW, *extra, env=env, wrap=HOSTS.wrap)
        c.execute(PRELUDE)
        return c

    def run_cell(self, c, code):
        text, r = c.execute(code, timeout=120)
        self.assertEqual(meta_of(r)["status"], "ok", text)
        return text, r


class InTheResult(NotesCase):
    def test_dns_refusal_and_its_option_allows_it(self):
        with self.session() as c:
            text, r = self.run_cell(c, 'print(lookup("b.ipybox.test"))')
        self.assertIn("gaierror", text)
        line = PREFIX + "DNS lookup of b.ipybox.test" + DASH + \
            "the name is not allowed; allow it with --allowed-domain b.ipybox.test"
        self.assertEqual(refusal_lines(text), [line], text)
        self.assertEqual(meta_of(r)["egressRefused"], [{
            "host": "b.ipybox.test", "port": None, "dns": True, "reason": "the name is not allowed",
            "allow": "--allowed-domain b.ipybox.test", "count": 1}])
        self.assertNotIn("egressRefusedMore", meta_of(r))
        # The cell's own output is still what outputBytes counts.
        self.assertEqual(text[:meta_of(r)["outputBytes"]], "gaierror\n")
        with self.session("--allowed-domain", "b.ipybox.test") as c:
            text, r = self.run_cell(c, 'print(lookup("b.ipybox.test"))')
        self.assertIn("resolved", text)
        self.assertEqual(refusal_lines(text), [])
        self.assertNotIn("egressRefused", meta_of(r))

    def test_tcp_refusal_by_address_and_its_option_allows_it(self):
        with self.session() as c:
            # The greeter on port 7 speaks first: the proxy judges the silent client by the
            # address it dialled.
            text, r = self.run_cell(c, 'print(raw("%s", 7))' % B_V4)
        self.assertNotIn("host-b", text)
        allow = "--allowed-domain " + B_V4
        self.assertEqual(refusal_lines(text), [
            PREFIX + B_V4 + ":7" + DASH + "only names are allowed, and this address is not one; allow it with " + allow],
            text)
        self.assertEqual(meta_of(r)["egressRefused"], [{
            "address": B_V4, "port": 7, "dns": False, "reason": "only names are allowed, and this address is not one",
            "allow": allow, "count": 1}])
        with self.session(*allow.split()) as c:
            text, r = self.run_cell(c, 'print(raw("%s", 7))' % B_V4)
        self.assertIn("host-b", text)
        self.assertEqual(refusal_lines(text), [])

    def test_tls_refusal_by_name(self):
        with self.session() as c:
            # Dialled at host a's address, but the server name is b's: the name decides.
            text, r = self.run_cell(c, 'print(raw("%s", 443, tls_name="b.ipybox.test"))' % A_V4)
        self.assertIn("ERR", text)
        self.assertEqual(refusal_lines(text), [
            PREFIX + "b.ipybox.test:443" + DASH + "the name is not allowed; allow it with --allowed-domain b.ipybox.test"],
            text)
        self.assertEqual(meta_of(r)["egressRefused"][0]["host"], "b.ipybox.test")
        self.assertEqual(meta_of(r)["egressRefused"][0]["port"], 443)

    def test_metadata_name_has_no_option(self):
        with self.session() as c:
            text, r = self.run_cell(c, 'print(lookup("metadata.google.internal"))')
        self.assertEqual(refusal_lines(text), [
            PREFIX + "DNS lookup of metadata.google.internal" + DASH + "a cloud metadata name is always refused; "
            "no option allows it"], text)
        self.assertIsNone(meta_of(r)["egressRefused"][0]["allow"])

    def test_name_resolving_only_to_a_refused_address_says_so(self):
        with self.session("--allowed-domain", "loop.ipybox.test") as c:
            text, r = self.run_cell(c, 'print(lookup("loop.ipybox.test"))')
        # The name is allowed already, so no name entry would help; an entry for the host's
        # own (loopback) address is never invited.
        self.assertEqual(refusal_lines(text), [
            PREFIX + "DNS lookup of loop.ipybox.test" + DASH + "the name resolves only to refused addresses "
            "(127.0.0.1: the address is one of the host's own)"], text)
        self.assertIsNone(meta_of(r)["egressRefused"][0]["allow"])

    def test_metadata_address_is_not_suggested(self):
        with self.session() as c:
            text, r = self.run_cell(c, 'print(raw("169.254.169.254", 80, timeout=5))')
        self.assertEqual(refusal_lines(text), [PREFIX + "169.254.169.254:80" + DASH + "a cloud metadata address"],
                         text)


class ConnectionCap(NotesCase):
    def test_a_connection_over_the_cap_is_told(self):
        with self.session("--max-connections", "2") as c:
            # Two connections held by the proxy (a request head it waits 10 s to complete),
            # then a third over the cap.
            text, r = self.run_cell(c, '''
held = []
for i in range(2):
    s = socket.create_connection(("%s", 80), timeout=10)
    s.sendall(b"GET / HTTP/1.1\\r\\n")
    held.append(s)
print(raw("%s", 80, timeout=10))
for s in held:
    s.close()
''' % (A_V4, A_V4))
        self.assertIn(PREFIX + "a connection" + DASH + "2 connections are open, the most a sandbox may have "
                      "(--max-connections)", refusal_lines(text), text)
        cap = [e for e in meta_of(r)["egressRefused"] if "host" in e and e["host"] is None]
        self.assertEqual(len(cap), 1, meta_of(r))
        self.assertIsNone(cap[0]["port"])


class DedupAndCap(NotesCase):
    def test_fifty_refusals_of_thirty_names(self):
        with self.session() as c:
            text, r = self.run_cell(c, '''
names = ["n%02d.refused.test" % i for i in range(30)]
print(sorted(set(lookup(n) for n in names + names[:20])))
''')
        self.assertIn("['gaierror']", text)
        lines = refusal_lines(text)
        self.assertEqual(len(lines), 11, text)
        self.assertEqual(lines[-1], PREFIX + "... and 20 more destinations (the host's log has them)")
        listed = meta_of(r)["egressRefused"]
        self.assertEqual([e["host"] for e in listed], ["n%02d.refused.test" % i for i in range(10)])
        counts = {e["count"] for e in listed}
        # Each listed name was looked up twice: one count each, the same for all, above one.
        self.assertEqual(len(counts), 1, listed)
        self.assertGreaterEqual(counts.pop(), 2)
        self.assertIn(" times)" + DASH, lines[0])
        self.assertEqual(meta_of(r)["egressRefusedMore"], 20)


class Hostile(NotesCase):
    def test_control_characters_in_a_name_cannot_forge_a_line(self):
        with self.session() as c:
            text, r = self.run_cell(c, r'''
def query(labels):
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    for l in labels:
        q += bytes([len(l)]) + l
    q += b"\0" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(10)
    s.sendto(q, ("127.0.0.1", 53))
    try:
        return s.recv(512)[3] & 15
    except OSError as e:
        return str(e)
import struct
print(query([b"evil\n[ipybox] forged\x1b[2J", b"test"]))
print(query([b"x" * 63] * 3))
''')
        lines = refusal_lines(text)
        self.assertEqual(len(lines), 2, text)
        self.assertNotIn("forged\x1b", text)
        self.assertFalse(any(line.startswith("[ipybox] forged") for line in text.splitlines()), text)
        self.assertEqual(lines[0], PREFIX + r"DNS lookup of evil\x0a[ipybox]\x20forged\x1b[2J.test" + DASH +
                         "not a valid host name", text)
        # A long name is cut, and marked so.
        host = meta_of(r)["egressRefused"][1]["host"]
        self.assertTrue(host.endswith("..."), host)
        self.assertLess(len(host), 100)
        for line in lines:
            self.assertTrue(line.isprintable(), line)


class Attribution(NotesCase):
    def test_a_refusal_between_cells_is_not_told_and_a_later_cell_starts_clean(self):
        with self.session() as c:
            text, r = self.run_cell(c, 'print(lookup("b.ipybox.test"))')
            self.assertEqual(len(refusal_lines(text)), 1, text)
            # The same refusal again in the next cell: told again, as this cell's.
            text, r = self.run_cell(c, 'print(lookup("b.ipybox.test"))')
            self.assertEqual(len(refusal_lines(text)), 1, text)
            # A cell without network says nothing.
            text, r = self.run_cell(c, 'print(1 + 1)')
            self.assertEqual(refusal_lines(text), [], text)
            self.assertNotIn("egressRefused", meta_of(r))
            # A lookup made by a thread after its cell ended, before the next began.
            self.run_cell(c, '''
import threading, time
def later():
    time.sleep(1)
    lookup("late.refused.test")
    open("/app/late-done", "w").close()
threading.Thread(target=later).start()
''')
            self.assertTrue(wait_for(lambda: os.path.exists(os.path.join(self.ws, "late-done")), 30))
            text, r = self.run_cell(c, 'print("next")')
            self.assertEqual(refusal_lines(text), [], text)
            self.assertNotIn("egressRefused", meta_of(r))


class IpyboxRun(SandboxCase):
    def test_run_stderr_has_the_line(self):
        cmd = HOSTS.wrap([IPYBOX, "run", *self.opts("--allowed-domain", "a.ipybox.test"), "--", "/usr/bin/python3",
                          "-c", self.code('''
                try:
                    socket.getaddrinfo("b.ipybox.test", 443, socket.AF_INET)
                    out["dns"] = "resolved"
                except socket.gaierror:
                    out["dns"] = "refused"
            ''')])
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(self.parse(r), {"dns": "refused"})
        line = PREFIX + "DNS lookup of b.ipybox.test" + DASH + \
            "the name is not allowed; allow it with --allowed-domain b.ipybox.test"
        self.assertIn(line + "\n", r.stderr)
        self.assertEqual(r.stderr.count(PREFIX), 1, r.stderr)


    def test_run_tells_the_line_while_the_command_runs(self):
        # The command looks the name up, then waits for its stdin to close: the line must
        # come before that.
        cmd = HOSTS.wrap([IPYBOX, "run", *self.opts("--allowed-domain", "a.ipybox.test"), "--", "/usr/bin/python3",
                          "-c", "import socket, sys\n"
                          "try:\n    socket.getaddrinfo('b.ipybox.test', 443, socket.AF_INET)\n"
                          "except socket.gaierror:\n    print('refused', flush=True)\n"
                          "sys.stdin.read()\n"])
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            err = b""
            deadline = time.monotonic() + 60
            while PREFIX.encode() not in err and time.monotonic() < deadline:
                r, _, _ = select.select([p.stderr], [], [], 1)
                if r:
                    chunk = os.read(p.stderr.fileno(), 65536)
                    if not chunk:
                        break
                    err += chunk
            self.assertIsNone(p.poll(), "the command ended before the line came: " + err.decode(errors="replace"))
            self.assertIn(PREFIX.encode() + "DNS lookup of b.ipybox.test".encode(), err)
        finally:
            p.stdin.close()
            out, rest = p.stdout.read(), p.stderr.read()
            p.wait(60)
            p.stdout.close()
            p.stderr.close()
        self.assertEqual(p.returncode, 0, (err + rest).decode(errors="replace"))
        self.assertEqual(out, b"refused\n")
        self.assertEqual((err + rest).count(PREFIX.encode()), 1)


class Daemon(unittest.TestCase):
    def test_a_daemon_session_tells_the_same_lines(self):
        require_sandbox(self)
        from daemon_fixture import Daemon as Ipyboxd
        d = Ipyboxd("--allowed-domain", "a.ipybox.test")
        try:
            c = d.client()
            c.execute(PRELUDE)
            text, r = c.execute('print(lookup("b.ipybox.test"))', timeout=120)
            line = PREFIX + "DNS lookup of b.ipybox.test" + DASH + \
                "the name is not allowed; allow it with --allowed-domain b.ipybox.test"
            self.assertEqual(refusal_lines(text), [line], text)
            self.assertEqual(meta_of(r)["egressRefused"][0]["host"], "b.ipybox.test")
            c.close()
        finally:
            d.close()


if __name__ == "__main__":
    unittest.main()
