"""ipyboxd as root for the tests/integration/test_system_*.py modules: two real users created
here (in a group of their own), the service started with a test configuration as its own
child (UMask 077, as under the shipped unit), and what the tests read of /proc about the
processes it runs. A class's service is stopped with SIGTERM at its end, which must leave no
sandbox process, no sandbox cgroup and no /run/ipybox behind."""
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import unittest

from ipybox_test import IPYBOX, McpClient, proc_cmdline, require_sandbox, wait_for

IPYBOXD = os.path.join(os.path.dirname(IPYBOX), "ipyboxd")
GROUP = "ipyboxtest"
USERS = ("ipbt-a", "ipbt-b")
POOL_START = 0x70000000
POOL_END = POOL_START + 256 * 65536
CONF = ("users = group %s\nmemory_max = 256M\nmemory_max_bound = 512M\npids_max = 64\n"
        "tmp_size = 32M\nidle_timeout = 600\nwarm_sessions = 1\nuser_memory_max = 700M\n"
        "user_pids_max = 300\n" % GROUP)


def proc_uids():
    """(pid, real uid) of every process that has not exited (zombies are left to their reaper)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/status" % d) as f:
                    st = dict(line.split(":", 1) for line in f if ":" in line)
            except OSError:
                continue
            if not st.get("State", "").strip().startswith(("Z", "X")):
                out.append((int(d), int(st["Uid"].split()[0])))
    return out


def cmdline(pid):
    """pid's arguments as a list (its last item the empty string after the last NUL); [] once
    pid is gone (or for a process with none, as a kernel thread)."""
    raw = proc_cmdline(pid)
    return raw.decode(errors="replace").split("\0") if raw else []


def ppid_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def read(path):
    with open(path) as f:
        return f.read().strip()


def pool_pids():
    return [p for p, u in proc_uids() if POOL_START <= u < POOL_END]


def describe(pids):
    """pid, parent, uid, program and cgroup of each of pids, for a failure's message: whose
    sandboxes they are (another root service on the host has its own in the same uid pool)."""
    out = []
    for p in pids:
        try:
            with open("/proc/%d/cgroup" % p) as f:
                cg = sorted({line.rstrip("\n").split(":", 2)[2] for line in f})
            out.append("%d (parent %d, uid %d): %s in %s" % (p, ppid_of(p), os.stat("/proc/%d" % p).st_uid,
                                                             " ".join(cmdline(p))[:60], ", ".join(cg)))
        except OSError:
            out.append("%d (gone)" % p)
    return "; ".join(out)


def sandbox_cgroup_globs(pid):
    """Where the service with this pid (its monitor) makes its sandboxes' cgroups, from its own
    cgroups (monitor/cgroup.c): <own>/ipyboxd/sb-N per v1 controller; on v2, sb-N beside the
    leaf it moved into (<own>/monitor). Only there: sb-N elsewhere on the host are others'
    (a host runs several services, and a killed one's cgroups stay where it ran)."""
    with open("/proc/%d/cgroup" % pid) as f:
        lines = f.read().splitlines()
    v2 = "/sys/fs/cgroup" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "/sys/fs/cgroup/unified"
    out = []
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        path = path.rstrip("/")
        mnts = [v2] if not ctrls else ["/sys/fs/cgroup/" + c for c in ctrls.split(",") if c in ("memory", "pids", "cpu")]
        for mnt in mnts:
            out.append(mnt + path + "/ipyboxd/sb-[0-9]*")
            if path.endswith("/monitor"):
                out.append(mnt + os.path.dirname(path) + "/sb-[0-9]*")
    return out


def text(result):
    """The text blocks of an MCP tool result, joined with nothing between them."""
    return "".join(c.get("text", "") for c in result["content"] if c["type"] == "text")


class Service:
    def __init__(self, conf):
        self.tmp = tempfile.TemporaryDirectory(prefix="ipybox-system-")
        self.conf = os.path.join(self.tmp.name, "ipyboxd.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.log = open(os.path.join(self.tmp.name, "service.log"), "w+")
        self.log_from = 0
        self.start()

    def start(self):
        self.log_from = len(self.log_text())
        # UMask=0077 as in the shipped unit: every mode the service gives must be its own.
        self.proc = subprocess.Popen([IPYBOXD, "--config", self.conf], stdout=self.log, stderr=self.log,
                                     preexec_fn=lambda: os.umask(0o077))
        ok = wait_for(lambda: all(os.path.exists(self.sock(u)) for u in USERS) and
                      self.frontends() >= len(USERS) or self.proc.poll() is not None)
        if not ok or self.proc.poll() is not None:
            raise AssertionError("the service did not start: " + self.log_text())
        self.cgroup_globs = sandbox_cgroup_globs(self.proc.pid)

    def sandbox_cgroups(self):
        """This service's sandbox cgroups (those it made; kept from its last start)."""
        return sorted({d for g in self.cgroup_globs for d in glob.glob(g) if os.path.isdir(d)})

    def frontends(self):
        return self.log_text()[self.log_from:].count("ipyboxd-frontend: serving uid")

    @staticmethod
    def sock(user):
        return "/run/ipybox/%s/ipybox.sock" % user

    def log_text(self):
        if not hasattr(self, "log"):
            return ""
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def client(self, user, *options):
        sock = self.sock(user)
        return McpClient("--connect", sock, *options,
                         wrap=lambda cmd: ["runuser", "-u", user, "--", "env", "-C", "/tmp", *cmd])

    def stop(self, sig=signal.SIGTERM, timeout=40):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def add_users():
    subprocess.run(["groupadd", "-f", GROUP], check=True)
    for u in USERS:
        try:
            pwd.getpwnam(u)
        except KeyError:
            subprocess.run(["useradd", "-m", "-G", GROUP, "-s", "/bin/sh", u], check=True)


def remove_users():
    for u in USERS:
        subprocess.run(["pkill", "-KILL", "-u", u])
        subprocess.run(["userdel", "-r", u], capture_output=True)
    subprocess.run(["groupdel", GROUP], capture_output=True)


needs_users = unittest.skipUnless(os.geteuid() == 0 and shutil.which("useradd") and shutil.which("runuser"),
                                  "needs root, useradd and runuser")


@needs_users
class UsersCase(unittest.TestCase):
    """The two users (USERS, in GROUP) for the class, removed at its end."""
    @classmethod
    def setUpClass(cls):
        add_users()

    @classmethod
    def tearDownClass(cls):
        remove_users()


@needs_users
class SystemServiceCase(unittest.TestCase):
    """The users and a service (self.svc, configured with the class's conf: CONF unless a
    subclass says otherwise) for the class. At its end the service is stopped with SIGTERM: it
    must exit 0 and leave no sandbox process, no sandbox cgroup and no /run/ipybox."""
    conf = CONF

    @classmethod
    def setUpClass(cls):
        add_users()
        cls.svc = Service(cls.conf)

    @classmethod
    def tearDownClass(cls):
        rc = cls.svc.stop()
        cgroups = cls.svc.sandbox_cgroups()
        log = cls.svc.log_text()
        cls.svc.log.close()
        cls.svc.tmp.cleanup()
        left = pool_pids()
        why = describe(left)
        remove_users()
        assert rc == 0, "the service exited %s: %s" % (rc, log)
        assert not left, "sandbox processes left after SIGTERM: %s" % why
        assert not cgroups, "sandbox cgroups left after SIGTERM: %s" % cgroups
        assert not os.path.exists("/run/ipybox"), "/run/ipybox left behind"

    def setUp(self):
        require_sandbox(self)
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()

    def client(self, user, *options):
        c = self.svc.client(user, *options)
        self.clients.append(c)
        return c

    def as_user(self, user, code):
        return subprocess.run(["runuser", "-u", user, "--", "/usr/bin/python3", "-c", code], capture_output=True,
                              text=True, timeout=60, cwd="/tmp")

    def frontend_pid_or_none(self, user):
        uid = pwd.getpwnam(user).pw_uid
        for pid, u in proc_uids():
            if u == uid and "--frontend" in cmdline(pid):
                return pid
        return None

    def frontend_pid(self, user):
        pid = self.frontend_pid_or_none(user)
        if pid is None:
            self.fail("no frontend for %s" % user)
        return pid
