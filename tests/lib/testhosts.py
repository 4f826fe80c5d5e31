"""Test hosts for the egress tests: a network namespace the test creates, joined to the host by
a veth pair, with documentation addresses (203.0.113.0/24, 2001:db8:77::/64) and servers:

  host A  203.0.113.2, [2001:db8:77::2]  HTTP :80, HTTPS :443 (answer "host-a"), the package
          index under /simple/, a TCP greeter on :7 that holds connections open, a UDP sink :9,
          a bulk source on :19 (send an 8-byte size, get that many bytes)
  host B  203.0.113.3                     HTTP :80, HTTPS :443 (answer "host-b"), greeter :7
  DNS     203.0.113.53:53 (UDP)           a counting resolver: logs every query it gets

The host side is 203.0.113.1 and 2001:db8:77::1. Every request, connection, datagram and DNS
query is logged to a file that the tests read. Standard library only; root is needed (ip
netns). Run as a script inside the namespace (`serve`), or use TestHosts from the tests.
"""
import http.server
import json
import os
import selectors
import shutil
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time

HOST_V4, A_V4, B_V4, DNS_V4 = "203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.53"
HOST_V6, A_V6 = "2001:db8:77::1", "2001:db8:77::2"
ZONE = {
    ("a.ipybox.test", 1): [A_V4], ("a.ipybox.test", 28): [A_V6],
    ("b.ipybox.test", 1): [B_V4],
    ("loop.ipybox.test", 1): ["127.0.0.1"],
    ("meta.ipybox.test", 1): ["169.254.169.254"],
    ("host.ipybox.test", 1): [HOST_V4],
}

_log_lock = threading.Lock()


def log(logfile, kind, **detail):
    with _log_lock, open(logfile, "a") as f:
        f.write(json.dumps({"kind": kind, **detail}) + "\n")


# ---------------------------------------------------------------- servers (in the namespace)

def http_server(addr, port, name, www, logpath, tls=None):
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=www, **kw)

        def do_GET(self):
            log(logpath, "http", server=name, tls=bool(tls), path=self.path, host=self.headers.get("Host"))
            if self.path == "/":
                body = name.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            if self.path.startswith("/bulk/"):
                n = int(self.path.split("/")[2])
                self.send_response(200)
                self.send_header("Content-Length", str(n))
                self.end_headers()
                chunk = b"x" * 65536
                while n > 0:
                    self.wfile.write(chunk[:min(n, len(chunk))])
                    n -= len(chunk)
                return
            super().do_GET()

        def log_message(self, *a):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        address_family = family
        daemon_threads = True
        allow_reuse_address = True
        request_queue_size = 1024

    srv = Server((addr, port), Handler)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*tls)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def greeter(addr, port, name, logpath):
    """Accepts, says its name, keeps the connection until the client closes it."""
    ls = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(4096)
    ls.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ)
    count = [0]

    def run():
        while True:
            for key, _ in sel.select():
                if key.fileobj is ls:
                    try:
                        c, _ = ls.accept()
                    except OSError:
                        continue
                    count[0] += 1
                    log(logpath, "tcp", server=name, n=count[0])
                    try:
                        c.send((name + "\n").encode())
                    except OSError:
                        pass
                    c.setblocking(False)
                    sel.register(c, selectors.EVENT_READ)
                else:
                    try:
                        data = key.fileobj.recv(4096)
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(key.fileobj)
                        key.fileobj.close()

    threading.Thread(target=run, daemon=True).start()


def bulk(addr, port):
    """Reads an 8-byte size, sends that many bytes, closes: a source for throughput runs."""
    ls = socket.socket(socket.AF_INET)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(64)
    chunk = b"x" * (1 << 20)

    def one(c):
        with c:
            want = b""
            while len(want) < 8:
                b = c.recv(8 - len(want))
                if not b:
                    return
                want += b
            n = int.from_bytes(want, "big")
            view = memoryview(chunk)
            try:
                while n > 0:
                    k = c.send(view[:min(n, len(chunk))])
                    n -= k
            except OSError:
                pass

    def run():
        while True:
            c, _ = ls.accept()
            threading.Thread(target=one, args=(c,), daemon=True).start()

    threading.Thread(target=run, daemon=True).start()


def udp_sink(addr, port, logpath):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))

    def run():
        while True:
            data, peer = s.recvfrom(65536)
            log(logpath, "udp", port=port, data=data.decode(errors="replace"))

    threading.Thread(target=run, daemon=True).start()


def dns_server(addr, logpath):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 53))

    def run():
        while True:
            q, peer = s.recvfrom(4096)
            if len(q) < 12:
                continue
            off, labels = 12, []
            while off < len(q) and q[off]:
                labels.append(q[off + 1:off + 1 + q[off]].decode(errors="replace"))
                off += 1 + q[off]
            off += 1
            if off + 4 > len(q):
                continue
            qtype = int.from_bytes(q[off:off + 2], "big")
            name = ".".join(labels).lower()
            log(logpath, "dns", name=name, qtype=qtype)
            question = q[12:off + 4]
            addrs = ZONE.get((name, qtype))
            known = any(n == name for n, _ in ZONE)
            rcode = 0 if known else 3
            ans = b""
            for a in addrs or []:
                rdata = socket.inet_pton(socket.AF_INET6 if qtype == 28 else socket.AF_INET, a)
                ans += b"\xc0\x0c" + qtype.to_bytes(2, "big") + b"\x00\x01" + (5).to_bytes(4, "big") \
                    + len(rdata).to_bytes(2, "big") + rdata
            flags = 0x8180 | rcode
            head = q[:2] + flags.to_bytes(2, "big") + b"\x00\x01" + len(addrs or []).to_bytes(2, "big") + b"\x00\x00\x00\x00"
            s.sendto(head + question + ans, peer)

    threading.Thread(target=run, daemon=True).start()


def serve(workdir):
    logpath = os.path.join(workdir, "log.jsonl")
    tls = (os.path.join(workdir, "cert.pem"), os.path.join(workdir, "key.pem"))
    www_a = os.path.join(workdir, "www-a")
    www_b = os.path.join(workdir, "www-b")
    for addr in (A_V4, A_V6):
        http_server(addr, 80, "host-a", www_a, logpath)
    http_server(A_V4, 443, "host-a", www_a, logpath, tls)
    http_server(B_V4, 80, "host-b", www_b, logpath)
    http_server(B_V4, 443, "host-b", www_b, logpath, tls)
    greeter(A_V4, 7, "host-a", logpath)
    greeter(B_V4, 7, "host-b", logpath)
    udp_sink(A_V4, 9, logpath)
    bulk(A_V4, 19)
    dns_server(DNS_V4, logpath)
    print("ready", flush=True)
    while True:
        time.sleep(3600)


# ---------------------------------------------------------------- the test side (host)

def _run(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


def make_wheel(dist, version, module_source, outdir):
    """A minimal pure-Python wheel (PEP 427) built by hand: one module plus metadata."""
    import base64
    import hashlib
    import zipfile
    name = "%s-%s-py3-none-any.whl" % (dist, version)
    distinfo = "%s-%s.dist-info" % (dist, version)
    files = {
        dist + ".py": module_source.encode(),
        distinfo + "/METADATA": ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (dist, version)).encode(),
        distinfo + "/WHEEL": b"Wheel-Version: 1.0\nGenerator: ipybox-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += "%s,sha256=%s,%d\n" % (path, digest, len(data))
    record += distinfo + "/RECORD,,\n"
    files[distinfo + "/RECORD"] = record.encode()
    path = os.path.join(outdir, name)
    with zipfile.ZipFile(path, "w") as z:
        for p, data in files.items():
            z.writestr(p, data)
    return name


class TestHosts:
    """Creates the namespace, the veth pair and the servers; stop() removes everything."""

    def __init__(self, workdir):
        self.workdir = workdir
        tag = "%d" % (os.getpid() % 100000)
        self.ns = "ipbt" + tag
        self.veth = "ipbh" + tag
        self.proc = None
        self.log = os.path.join(workdir, "log.jsonl")
        self.cert = os.path.join(workdir, "cert.pem")
        self.resolv = os.path.join(workdir, "resolv.conf")

    def start(self):
        w = self.workdir
        for d in ("www-a/simple/ipyboxdemo", "www-b"):
            os.makedirs(os.path.join(w, d), exist_ok=True)
        wheel = make_wheel("ipyboxdemo", "1.0", "ANSWER = 'installed from the test index'\n",
                           os.path.join(w, "www-a/simple/ipyboxdemo"))
        with open(os.path.join(w, "www-a/simple/ipyboxdemo/index.html"), "w") as f:
            f.write('<html><body><a href="%s">%s</a></body></html>\n' % (wheel, wheel))
        with open(os.path.join(w, "www-a/simple/index.html"), "w") as f:
            f.write('<html><body><a href="ipyboxdemo/">ipyboxdemo</a></body></html>\n')
        _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-subj", "/CN=a.ipybox.test", "-addext",
             "subjectAltName=DNS:a.ipybox.test,DNS:b.ipybox.test,IP:203.0.113.2,IP:203.0.113.3",
             "-keyout", os.path.join(w, "key.pem"), "-out", self.cert)
        with open(self.resolv, "w") as f:
            f.write("nameserver %s\noptions timeout:2 attempts:1\n" % DNS_V4)
        open(self.log, "w").close()
        self.stop()
        _run("ip", "netns", "add", self.ns)
        _run("ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", self.ns)
        _run("ip", "addr", "add", HOST_V4 + "/24", "dev", self.veth)
        _run("ip", "-6", "addr", "add", HOST_V6 + "/64", "dev", self.veth, "nodad")
        _run("ip", "link", "set", self.veth, "up")
        for a in (A_V4, B_V4, DNS_V4):
            _run("ip", "-n", self.ns, "addr", "add", a + "/24", "dev", "eth0")
        _run("ip", "-n", self.ns, "-6", "addr", "add", A_V6 + "/64", "dev", "eth0", "nodad")
        _run("ip", "-n", self.ns, "link", "set", "eth0", "up")
        _run("ip", "-n", self.ns, "link", "set", "lo", "up")
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, sys.executable, os.path.abspath(__file__),
                                      "serve", w], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError("test hosts did not start: " + self.proc.stderr.read().decode(errors="replace"))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        subprocess.run(["ip", "link", "del", self.veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)

    def entries(self, kind=None):
        with open(self.log) as f:
            out = [json.loads(line) for line in f if line.strip()]
        return [e for e in out if kind is None or e["kind"] == kind]

    def wrap(self, cmd):
        """cmd run with this resolver as the host's: a private mount namespace with
        /etc/resolv.conf bound over."""
        return ["unshare", "-m", "--", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"',
                self.resolv] + list(cmd)


def available():
    """Why the test hosts cannot be built here, or None."""
    if os.geteuid() != 0:
        return "the egress tests build network namespaces and need root"
    for tool in ("ip", "unshare", "openssl"):
        if not shutil.which(tool):
            return "%s is missing" % tool
    return None


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "serve":
    serve(sys.argv[2])
