"""Egress benchmark: the proxy against a direct connection, in one run, to the same test host
(tests/lib/testhosts.py; needs root for the network namespace).

  bulk throughput   one TCP stream of --bulk-mb MiB from host A's bulk source (:19), median of
                    --streams runs; from the host directly, and from inside a sandbox through
                    the proxy (destination allowed by address: relayed with splice)
  connect latency   connect() until the server's first byte (host A's greeter, :7), median of
                    --connects; directly, through the proxy by address, and through the proxy by
                    name (an HTTP request whose Host the proxy reads, pinned with --resolve so
                    that no DNS lookup is timed)

Usage: bench/egress.py [--out FILE] [--streams N] [--bulk-mb N] [--connects N]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
import testhosts  # noqa: E402

IPYBOX = os.path.join(ROOT, os.environ.get("BUILD", "build"), "bin", "ipybox")

CLIENT = r'''
import json, socket, statistics, sys, time
A, STREAMS, MB, CONNECTS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def bulk():
    n = MB << 20
    buf = bytearray(1 << 20)
    t0 = time.perf_counter()
    s = socket.create_connection((A, 19))
    s.sendall(n.to_bytes(8, "big"))
    got = 0
    while True:
        k = s.recv_into(buf)
        if not k:
            break
        got += k
    dt = time.perf_counter() - t0
    s.close()
    assert got == n, got
    return n / dt / 1e6
def first_byte(data=b""):
    t0 = time.perf_counter()
    s = socket.create_connection((A, 7))
    if data:
        s.sendall(data)
    s.recv(16)
    dt = time.perf_counter() - t0
    s.close()
    return dt * 1000
out = {"bulk": [bulk() for _ in range(STREAMS)]}
first_byte()
out["connect"] = [first_byte() for _ in range(CONNECTS)]
out["connect_name"] = [first_byte(b"GET / HTTP/1.1\r\nHost: a.ipybox.test\r\n\r\n") for _ in range(CONNECTS)]
print(json.dumps(out))
'''


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def spread(v, m):
    return "%.0f MB/s (%.0f–%.0f)" % (m, min(v), max(v))


def host_setting(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--streams", type=int, default=7)
    ap.add_argument("--bulk-mb", type=int, default=512)
    ap.add_argument("--connects", type=int, default=200)
    a = ap.parse_args()
    why = testhosts.available()
    if why:
        print("bench/egress.py: skipped: " + why, file=sys.stderr)
        return 0
    work = tempfile.mkdtemp(prefix="ipybox-bench-egress-")
    hosts = testhosts.TestHosts(work)
    hosts.start()
    try:
        args = [testhosts.A_V4, str(a.streams), str(a.bulk_mb), str(a.connects)]
        direct = json.loads(subprocess.run([sys.executable, "-c", CLIENT, *args], check=True, capture_output=True,
                                           text=True).stdout)
        # Host B's address as the dialled one would also work for the by-name case; host A's
        # keeps the two latency runs comparable. A is allowed by name only (pinned), so plain
        # connections to its address are judged by the DNS-free pin, and HTTP by the Host.
        r = subprocess.run(hosts.wrap([IPYBOX, "run", "--resolve", "a.ipybox.test:" + testhosts.A_V4,
                                       "--allowed-domain", "a.ipybox.test", "--", "/usr/bin/python3", "-c", CLIENT,
                                       *args]), capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return 1
        proxied = json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        hosts.stop()
        shutil.rmtree(work, ignore_errors=True)
    db, pb = median(direct["bulk"]), median(proxied["bulk"])
    dc = median(direct["connect"])
    pc, pn = median(proxied["connect"]), median(proxied["connect_name"])
    dn = median(direct["connect_name"])
    rows = [
        ("bulk throughput (%d MiB, median of %d; range)" % (a.bulk_mb, a.streams), spread(direct["bulk"], db),
         spread(proxied["bulk"], pb),
         "%.0f%% of direct" % (100 * pb / db), "at least 80%"),
        ("connect to first byte, by address (median of %d)" % a.connects, "%.3f ms" % dc, "%.3f ms" % pc,
         "%+.3f ms" % (pc - dc), "at most +1 ms"),
        ("connect to first byte, by name (HTTP Host, median of %d)" % a.connects, "%.3f ms" % dn, "%.3f ms" % pn,
         "%+.3f ms" % (pn - dn), "at most +1 ms"),
    ]
    table = "| measure | direct | through the proxy | difference | target |\n|---|---|---|---|---|\n"
    table += "".join("| %s |\n" % " | ".join(r) for r in rows)
    print(table)
    if a.out:
        with open(a.out, "w") as f:
            f.write("# Egress benchmark\n\n`make bench-egress` (bench/egress.py), one run: the same test host "
                    "(tests/lib/testhosts.py) reached directly from the host and from inside a sandbox "
                    "through the proxy. Host: %d CPUs, TCP congestion control %s (the sandbox's side of "
                    "a relayed connection uses reno; see netfilter/netns.c).\n\n" % (
                        os.cpu_count(), host_setting("/proc/sys/net/ipv4/tcp_congestion_control")) + table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
