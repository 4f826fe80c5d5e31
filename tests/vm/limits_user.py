"""Driven by limits_user.sh inside the VM, as an unprivileged user with a systemd user manager:
ipybox mcp with --memory and --max-processes in user mode. Prints one line per check and exits
1 when any failed. Usage: limits_user.py PATH/TO/ipybox"""
import glob
import os
import signal
import sys
import time

os.environ["IPYBOX"] = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from ipybox_test import McpClient, descendants, wait_for  # noqa: E402

CG = "/sys/fs/cgroup"
failed = []


def check(name, ok, detail=""):
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, (": " + detail) if detail else ""), flush=True)
    if not ok:
        failed.append(name)


def scope_of(c):
    """The v2 cgroup of the sandbox under this client's supervisor (its first descendant)."""
    for p in descendants(c.proc.pid):
        try:
            with open("/proc/%d/cgroup" % p) as f:
                line = [x for x in f.read().splitlines() if x.startswith("0::")][0]
        except (OSError, IndexError):
            continue
        if line.endswith(".scope") and "/ipybox-" in line:
            return CG + line[3:]
    return None


def read(path):
    with open(path) as f:
        return f.read().strip()


def scopes(pid):
    return glob.glob(CG + "/user.slice/**/ipybox-%d-*.scope" % pid, recursive=True)


def cpu_weight_check(when):
    """--cpu-weight: the scope's cpu.weight, or one line saying it is not in effect."""
    c = McpClient("--embedded", "--cpu-weight", "50")
    c.execute("print(1)")
    d = scope_of(c)
    weight = read(d + "/cpu.weight") if d and os.path.exists(d + "/cpu.weight") else None
    c.proc.stdin.close()
    c.proc.wait(30)
    err = c.proc.stderr.read().decode(errors="replace")
    c.close()
    told = [l for l in err.splitlines() if l.startswith("ipybox: --cpu-weight 50 ")]
    check("--cpu-weight (%s) is the scope's cpu.weight, or said not to be in effect in one line" % when,
          (weight == "50" and not told) or (weight is None and len(told) == 1),
          "scope=%s cpu.weight=%s notice=%s" % (d, weight, told))


print("running as uid %d, XDG_RUNTIME_DIR=%s, in %s" % (os.getuid(), os.environ.get("XDG_RUNTIME_DIR"),
                                                        read("/proc/self/cgroup")), flush=True)
cpu_weight_check("first sandbox of the session's user manager")
c = McpClient("--embedded", "--memory", "256M", "--max-processes", "40")
text, r = c.execute("marker = 1\nprint('up')")
check("kernel starts", "up" in text, text[-300:])
d = scope_of(c)
check("the sandbox runs in a transient scope of the user's manager", d is not None, str(d))
if d:
    check("memory.max is 256M", read(d + "/memory.max") == str(256 << 20), read(d + "/memory.max"))
    check("memory.swap.max is 0", read(d + "/memory.swap.max") == "0", read(d + "/memory.swap.max"))
    # 40 for the kernel's processes, + 2 for S0 and the zygote (architecture.md, "Zygote kernels").
    check("pids.max is 40 + 2 (S0 and the zygote)", read(d + "/pids.max") == "42", read(d + "/pids.max"))
    check("the scope sits under user@%d.service" % os.getuid(), "/user@%d.service/" % os.getuid() in d, d)

text, r = c.execute("x = bytearray(600 << 20)\nprint('allocated')")
meta = r.get("_meta", {}).get("ipybox/execution", {})
check("a 600 MB allocation is OOM-killed and reported",
      "ran out of memory (its limit is 256 MiB" in text and meta.get("status") == "kernel_died",
      "status=%s text=%s" % (meta.get("status"), text[-400:].replace("\n", " | ")))
if d:
    ev = dict(line.split() for line in read(d + "/memory.events").splitlines())
    check("memory.events counts the OOM kill", int(ev.get("oom_kill", 0)) >= 1, str(ev))
text, r = c.execute("print('marker' in globals(), 2 + 2)")
check("the next call runs in a fresh kernel", "False 4" in text, text[-300:])

bomb = ("import os, time\npids = []\ntry:\n    for i in range(300):\n        p = os.fork()\n"
        "        if p == 0:\n            time.sleep(5)\n            os._exit(0)\n        pids.append(p)\n"
        "finally:\n    print('forked', len(pids))\n    [os.waitpid(p, 0) for p in pids]\n")
text, r = c.execute(bomb)
forked = [int(w.split()[1]) for w in text.splitlines() if w.startswith("forked ")]
check("a fork bomb is bounded by pids.max", forked and forked[0] < 40, text[-300:].replace("\n", " | "))
check("the process limit is reported", "limit of 40 processes" in text, text[-400:].replace("\n", " | "))
text, r = c.execute("print(3 + 3)")
check("the session recovers", "6" in text, text[-200:])
pid = c.proc.pid
c.close()
check("the scope is gone after close", wait_for(lambda: not scopes(pid), timeout=20), str(scopes(pid)))

c = McpClient("--embedded", "--memory", "256M", "--max-processes", "40")
c.execute("print(1)")
pid = c.proc.pid
before = scopes(pid)
os.kill(pid, signal.SIGKILL)
c.proc.wait()
check("after SIGKILL of the supervisor the scope is removed by systemd",
      bool(before) and wait_for(lambda: not scopes(pid), timeout=30), "before=%s after=%s" % (before, scopes(pid)))
try:
    c.close()
except Exception:
    pass

# The one line on stderr names nothing unenforced here (cpu weight aside, not asked for).
c = McpClient("--embedded", "--memory", "256M")
c.execute("print(1)")
c.proc.stdin.close()
c.proc.wait(30)
err = c.proc.stderr.read().decode(errors="replace")
c.close()
check("no 'cannot be enforced' notice with a user manager", "cannot be enforced" not in err, err[-300:])
# ipyboxd --user with the limits among its options: each session's worker gets a scope.
import subprocess  # noqa: E402
import tempfile  # noqa: E402
from daemon_fixture import SocketClient  # noqa: E402
tmp = tempfile.mkdtemp(prefix="ipyboxd-vm-")
sock = os.path.join(tmp, "ipybox.sock")
log = open(os.path.join(tmp, "log"), "w+")
d = subprocess.Popen([os.path.join(os.path.dirname(sys.argv[1]), "ipyboxd"), "--user", "--socket", sock,
                      "--memory", "256M", "--max-processes", "40"], stdout=log, stderr=log,
                     env=dict(os.environ, XDG_STATE_HOME=os.path.join(tmp, "state")))
wait_for(lambda: os.path.exists(sock), timeout=30)
c = SocketClient(sock)
c.request("ipybox/createSession", {"name": "lim"})
text, r = c.execute("marker = 1\nx = bytearray(600 << 20)")
check("ipyboxd --user: the hog is OOM-killed and reported", "ran out of memory (its limit is 256 MiB" in text,
      text[-300:].replace("\n", " | "))
dscopes = glob.glob(CG + "/user.slice/**/ipybox-*.scope", recursive=True)
check("ipyboxd --user: the session's sandbox has a scope with memory.max 256M",
      len(dscopes) == 1 and read(dscopes[0] + "/memory.max") == str(256 << 20), str(dscopes))
text, r = c.execute("print('marker' in globals(), 2 + 2)")
check("ipyboxd --user: the next call runs in a fresh kernel", "False 4" in text, text[-200:])
c.request("ipybox/closeSession", {"name": "lim"})
c.close()
d.terminate()
d.wait(30)
check("ipyboxd --user: no scope left after the daemon stops",
      wait_for(lambda: not glob.glob(CG + "/user.slice/**/ipybox-*.scope", recursive=True), timeout=20))
log.seek(0)
check("ipyboxd --user: no 'cannot be enforced' notice", "cannot be enforced" not in log.read())
cpu_weight_check("after other scopes")
print("== %d failed" % len(failed), flush=True)
sys.exit(1 if failed else 0)
