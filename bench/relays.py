"""How fast a reset lets go of the old kernel's connections (issue 22): the kernel opens --conns
connections to a tarpit that never closes them (tests/faults/test_relays.py; needs root for
the test hosts' network namespace), then `reset` is sent; measured is the time from sending it
until the supervisor's descriptors are back to their baseline (polled every millisecond), next
to the whole reset (until its answer, with the new kernel ready). Median of --runs.

Usage: bench/relays.py [--runs N] [--conns N] [--cap N]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "tests", "faults"))
import testhosts  # noqa: E402
import test_relays as tr  # noqa: E402
from ipybox_test import McpClient  # noqa: E402


def one(conns, cap):
    tmp = tempfile.mkdtemp(prefix="ipybox-bench-relays-")
    ws = os.path.join(tmp, "ws")
    os.mkdir(ws)
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(tmp, "state"))
    c = None
    try:
        c = McpClient("--workspace", ws, "--max-connections", str(cap), env=env,
                      wrap=lambda cmd: ["sh", "-c", 'exec "$@" 2>/dev/null', "sh"] + cmd)
        pid = c.proc.pid
        c.execute(tr.GRAB + "s = socket.create_connection(('%s', 7)); s.recv(16); s.close()" % tr.A_V4)
        time.sleep(0.5)
        base = tr.fd_count(pid)
        text, _ = c.execute("print(grab(%d))" % conns)
        held = min(conns, cap)
        if "(%d, %d)" % (held, conns - held) not in text:
            raise RuntimeError("the kernel did not get its connections: " + text)
        done = {}

        def watch():
            while "reset" not in done:
                time.sleep(0.0005)
            while tr.fd_count(pid) > base + tr.SLACK:
                time.sleep(0.001)
            done["released"] = time.monotonic()

        t = threading.Thread(target=watch)
        t.start()
        done["reset"] = t0 = time.monotonic()
        c.call("reset")
        t1 = time.monotonic()
        t.join(10)
        return (done["released"] - t0) * 1000, (t1 - t0) * 1000
    finally:
        if c:
            c.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--conns", type=int, default=300)
    ap.add_argument("--cap", type=int, default=256)
    a = ap.parse_args()
    why = testhosts.available()
    if why:
        sys.exit("bench/relays.py: " + why)
    hosts = testhosts.TestHosts(tempfile.mkdtemp(prefix="ipybox-bench-relays-"))
    hosts.start()
    tr.TARPIT = tr.Tarpit(hosts.ns)
    try:
        runs = [one(a.conns, a.cap) for _ in range(a.runs)]
    finally:
        tr.TARPIT.stop()
        hosts.stop()
        shutil.rmtree(hosts.workdir, ignore_errors=True)
    rel = [r[0] for r in runs]
    whole = [r[1] for r in runs]
    print("reset with %d connections held (cap %d), %d runs:" % (min(a.conns, a.cap), a.cap, a.runs))
    print("  old kernel's relays released: median %.1f ms (%.1f-%.1f)" % (statistics.median(rel), min(rel), max(rel)))
    print("  whole reset (new kernel ready): median %.1f ms (%.1f-%.1f)"
          % (statistics.median(whole), min(whole), max(whole)))


if __name__ == "__main__":
    main()
