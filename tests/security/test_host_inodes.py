"""Attack catalog, family "Host objects": the sandbox's processes hold no descriptor of a host
file or device, and the sandbox's user owns no host file, whoever starts ipybox (the suite
runs as root: the case where the sandbox's user once was host root).

A descriptor the sandbox inherits (stdin, stdout, stderr, anything else open) is tried with
fchmod (the setuid bit), fchown, write and a re-open for writing through /proc/self/fd; the
same through PID 1's descriptors where they can be reached. Each must fail or reach only an
object of the sandbox's own (an anonymous pipe or socket, its tmpfs, its own workspace)."""
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX, PROBE_PRELUDE, McpClient, SandboxCase, descendants  # noqa: E402

# Every open descriptor of this process (and of PID 1, when its fd directory can be read):
# what it is, and what fchmod, fchown, write and a writable re-open do to it. A changed
# mode is put back at once (only on the test's own files can a change stick).
FD_PROBE = r'''
OWN_TREES = ("/tmp/", "/dev/shm/", "/app/", "/home/appuser/", "/run/ipybox/")
def fd_attempts(base):
    res = {}
    try:
        names = sorted(os.listdir(base), key=int)
    except OSError as e:
        return {"listdir": err(e)}
    for n in names:
        fd = int(n)
        p = base + "/" + n
        r = {}
        try:
            r["target"] = os.readlink(p)
        except OSError as e:
            r["target"] = "?" + err(e)
        own = base == "/proc/self/fd"
        if own:
            try:
                st = os.fstat(fd)
            except OSError as e:
                r["fstat"] = err(e)
                res[n] = r
                continue
            r["uid"] = st.st_uid
            # whether the name is the sandbox's own: it leads, inside, to this very object (a
            # host file outside the sandbox's root shows its host path, which does not)
            try:
                st2 = os.stat(r["target"])
                r["inside"] = (st2.st_dev, st2.st_ino) == (st.st_dev, st.st_ino)
            except (OSError, ValueError):
                r["inside"] = False
            # the same mode (a change a host object would keep) and then the setuid bit on
            # top: both refused for anything not the sandbox's
            r["fchmod"] = attempt(os.fchmod, fd, stat.S_IMODE(st.st_mode))
            if r["fchmod"] == "ok" and stat.S_ISREG(st.st_mode):
                # kept on anything not the sandbox's own: the test's host files show it
                r["fchmod_suid"] = attempt(os.fchmod, fd, 0o4777)
                if r["inside"] and r["target"].startswith(OWN_TREES):
                    attempt(os.fchmod, fd, stat.S_IMODE(st.st_mode))
            r["fchown"] = attempt(os.fchown, fd, os.getuid(), os.getgid())
            if fd == 0 or not stat.S_ISREG(st.st_mode):
                r["write"] = attempt(os.write, fd, b"") if fd != 0 else attempt(os.pwrite, fd, b"OWNED", 0)
        else:
            r["fchmod"] = "-"
        # a new, writable open of the very object
        try:
            w = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            r["reopen_w"] = err(e)
        else:
            r["reopen_w"] = "ok"
            try:
                st = os.fstat(w)
                r["reopen_fchmod"] = attempt(os.fchmod, w, stat.S_IMODE(st.st_mode))
                if stat.S_ISREG(st.st_mode):
                    r["reopen_write"] = attempt(os.pwrite, w, b"OWNED", 0)
            finally:
                os.close(w)
        res[n] = r
    return res
'''

ANON = ("pipe:", "socket:", "anon_inode:")
# Trees whose objects are the sandbox's own (its tmpfs, its workspace and home, its /proc).
OWN = ("/tmp/", "/dev/shm/", "/app/", "/home/appuser/", "/run/ipybox/", "/dev/pts/", "/proc/")


def host_stat(path):
    st = os.stat(path)
    return (st.st_mode, st.st_uid, st.st_gid)


class InheritedDescriptors(SandboxCase):
    PRELUDE = PROBE_PRELUDE + FD_PROBE + "out = {}\n"
    TMP_PREFIX = "ipybox-sec-inode-"

    def check_fds(self, fds, where):
        """Nothing but the sandbox's own objects let itself be changed."""
        for n, r in fds.items():
            if n == "listdir":
                continue
            t = r["target"]
            ours = t.startswith(ANON) or (t.startswith(OWN) and r.get("inside", False))
            for k in ("fchmod", "fchmod_suid", "fchown", "write", "reopen_w", "reopen_fchmod", "reopen_write"):
                if k in r and r[k] == "ok" and not ours:
                    # a writable open of a device is only harmful with a chmod or a write to a
                    # file behind it
                    if k in ("reopen_w", "write") and not t.startswith("/"):
                        continue
                    if k in ("reopen_w", "write") and t in ("/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                                            "/dev/urandom"):
                        continue
                    self.fail("%s fd %s (%s): %s succeeded: %s" % (where, n, t, k, r))

    def test_run_stdio_files_are_not_reachable(self):
        """A host file given to `ipybox run` as stdin and stdout: its mode (the setuid bit), owner
        and content stay as they were, whatever the command does to its descriptors."""
        stdin_path = os.path.join(self.tmp, "stdin.txt")
        stdout_path = os.path.join(self.tmp, "stdout.txt")
        with open(stdin_path, "w") as f:
            f.write("the input\n")
        os.chmod(stdin_path, 0o644)
        open(stdout_path, "w").close()
        os.chmod(stdout_path, 0o600)
        before = (host_stat(stdin_path), host_stat(stdout_path), host_stat("/dev/null"))
        body = """
            out["self"] = fd_attempts("/proc/self/fd")
            out["pid1"] = fd_attempts("/proc/1/fd")
            out["stdin"] = sys.stdin.read()
        """
        with open(stdin_path, "rb") as fin, open(stdout_path, "wb") as fout:
            r = subprocess.run([IPYBOX, "run", *self.opts(), "--", "/usr/bin/python3", "-c", self.code(body)],
                               stdin=fin, stdout=fout, stderr=subprocess.PIPE, text=True, timeout=120)
        with open(stdout_path) as f:
            text = f.read()
        self.assertEqual(r.returncode, 0, "stdout: %s\nstderr: %s" % (text[-2000:], r.stderr[-2000:]))
        res = json.loads(text.strip().splitlines()[-1])
        after = (host_stat(stdin_path), host_stat(stdout_path), host_stat("/dev/null"))
        self.assertEqual(after, before, "a host file given as stdio changed: %s" % json.dumps(res["self"]))
        with open(stdin_path) as f:
            self.assertEqual(f.read(), "the input\n", "the stdin file was written to")
        self.assertEqual(res["stdin"], "the input\n")
        for fd in ("0", "1", "2"):
            t = res["self"][fd]["target"]
            self.assertTrue(t.startswith(ANON) or t == "/dev/null", "fd %s is %s" % (fd, t))
        self.check_fds(res["self"], "the command's")
        self.check_fds(res["pid1"], "PID 1's")

    def test_kernel_fds_and_dev_null(self):
        """The kernel (`ipybox mcp`, embedded): none of its descriptors, nor PID 1's, lets it
        change the host's /dev/null or any other host object."""
        before = host_stat("/dev/null")
        c = McpClient("--workspace", self.ws, env=self.state_env())
        try:
            text, _ = c.execute(self.code("""
                out["self"] = fd_attempts("/proc/self/fd")
                out["pid1"] = fd_attempts("/proc/1/fd")
                out["dev_null"] = attempt(os.chmod, "/dev/null", 0o666)
            """, epilogue=False) + "\nprint(json.dumps(out))\n")
        finally:
            c.close()
        self.assertEqual(host_stat("/dev/null"), before, "the host's /dev/null changed")
        # Output the kernel wrote to its own descriptors (fd 1 is captured too) may follow the
        # report on its line: take the report alone.
        line = [ln for ln in text.splitlines() if ln.startswith('{"self"')][-1]
        res, _ = json.JSONDecoder().raw_decode(line)
        self.assertNotEqual(res["dev_null"], "ok", "chmod of /dev/null succeeded in the sandbox")
        for fd in ("0", "1", "2"):
            t = res["self"][fd]["target"]
            self.assertTrue(t.startswith(ANON) or t == "/dev/null", "fd %s is %s" % (fd, t))
            if t == "/dev/null":
                self.assertNotEqual(res["self"][fd]["fchmod"], "ok", "fd %s: fchmod of /dev/null succeeded" % fd)
        self.check_fds(res["self"], "the kernel's")
        self.check_fds(res["pid1"], "PID 1's")


# Inside: the sandbox's uid, its map, a file made in /app, and every object under the trees the
# host lends (system directories, /etc, /dev) that shows as the sandbox's own user. Only what
# is the sandbox's by design may: its workspace and home (idmapped to the invoking user), its
# tmpfs, its /proc.
OWNED_PROBE = r'''
out["uid"] = os.getuid()
out["uid_map"] = open("/proc/self/uid_map").read().split()
with open("/app/made-inside", "w") as f:
    f.write("x")
owned, seen = [], 0
SKIP = ("/app", "/home", "/tmp", "/dev/shm", "/dev/pts", "/proc", "/run/ipybox", "/opt/ipybox", "/sys")
for top in ("/", "/usr", "/etc", "/dev", "/run", "/var", "/usr/bin", "/usr/lib", "/usr/share"):
    for root, dirs, files in os.walk(top):
        if root.startswith(SKIP) and root != "/":
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not os.path.join(root, d).startswith(SKIP)][:40]
        for n in (dirs + files)[:200]:
            p = os.path.join(root, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            seen += 1
            if st.st_uid == os.getuid() or st.st_gid == os.getgid():
                owned.append(p)
        if seen > 20000:
            break
out["owned"] = owned[:50]
out["seen"] = seen
'''


def host_uids(pid):
    """Host uids (real, effective, saved, fs) of pid's descendants that run in another user
    namespace than ours: the sandbox's processes."""
    mine = os.readlink("/proc/self/ns/user")
    found = {}
    for d in descendants(pid):
        try:
            if os.readlink("/proc/%d/ns/user" % d) == mine:
                continue
            with open("/proc/%d/status" % d) as f:
                uids = [line.split()[1:] for line in f if line.startswith("Uid:")][0]
            with open("/proc/%d/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:80]
        except (OSError, IndexError):
            continue
        found[d] = (cmd, [int(u) for u in uids])
    return found


class RootIsNeverTheSandboxUser(SandboxCase):
    """Started by root (this suite runs as root), `ipybox run`, `ipybox mcp` (embedded) and
    `ipyboxd --user` run the sandbox as a uid of the pool: no host file is the sandbox's own,
    and what it makes in /app belongs on the host to root, the invoking user."""
    PRELUDE = PROBE_PRELUDE + "out = {}\n"
    TMP_PREFIX = "ipybox-sec-rootuser-"

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("the case is ipybox started by root; this suite runs as uid %d" % os.geteuid())
        super().setUp()

    def check(self, res, uids):
        self.assertGreater(res["seen"], 100, "the walk saw almost nothing: %s" % res)
        self.assertEqual(res["owned"], [], "host objects owned by the sandbox's user %d" % res["uid"])
        self.assertTrue(uids, "no sandbox process found on the host")
        for pid, (cmd, ids) in uids.items():
            self.assertNotIn(0, ids, "sandbox process %d (%s) runs as host uid 0: %s" % (pid, cmd, ids))
        made = os.stat(os.path.join(self.ws, "made-inside"))
        self.assertEqual((made.st_uid, made.st_gid), (0, 0), "a file the sandbox made in /app is not root's")

    def test_ipybox_run(self):
        body = OWNED_PROBE + "\nprint(json.dumps(out), flush=True)\nsys.stdin.read()\n"
        p = subprocess.Popen([IPYBOX, "run", *self.opts(), "--", "/usr/bin/python3", "-c", self.code(body, False)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = p.stdout.readline()
            uids = host_uids(p.pid)
            rest, errs = p.communicate("", timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 0, "stdout: %s%s\nstderr: %s" % (line, rest, errs[-2000:]))
        self.check(json.loads(line), uids)

    def test_a_stale_monitor_channel_in_the_environment_changes_nothing(self):
        # IPYBOX_MONITOR_FD naming no channel (stale, or set by hand) must not make root start
        # the sandbox itself, mapped to host uid 0.
        env = dict(self.state_env(), IPYBOX_MONITOR_FD="99")
        r = subprocess.run([IPYBOX, "run", *self.opts(), "--", "/bin/cat", "/proc/self/uid_map"],
                           capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        inside, outside, _count = r.stdout.split()
        self.assertNotEqual(outside, "0", "the sandbox's user is host uid 0: %s" % r.stdout)

    def test_ipybox_mcp_embedded(self):
        c = McpClient("--workspace", self.ws, env=self.state_env())
        try:
            text, _ = c.execute(self.code(OWNED_PROBE, epilogue=False) + "\nprint(json.dumps(out))\n")
            uids = host_uids(c.proc.pid)
        finally:
            c.close()
        self.check(json.loads(text.strip().splitlines()[-1]), uids)

    def test_ipyboxd_user(self):
        from daemon_fixture import Daemon
        d = Daemon("--workspace", self.ws)
        try:
            c = d.client()
            try:
                text, _ = c.execute(self.code(OWNED_PROBE, epilogue=False) + "\nprint(json.dumps(out))\n")
                uids = host_uids(d.proc.pid)
            finally:
                c.close()
        finally:
            d.close()
        self.check(json.loads(text.strip().splitlines()[-1]), uids)


class NoSetIdFilesInTheWorkspace(SandboxCase):
    """What the sandbox writes in /app is a host file of the invoking user (root's, when root
    started ipybox): kernel code must not leave a set-user-ID or set-group-ID program there for
    other users of the host to run."""
    PRELUDE = PROBE_PRELUDE + "out = {}\n"
    TMP_PREFIX = "ipybox-sec-setid-"

    def test_set_id_bits_refused_in_every_form(self):
        c = McpClient("--workspace", self.ws, env=self.state_env())
        try:
            text, _ = c.execute(self.code("""
                import shutil, stat
                shutil.copy("/usr/bin/true", "/app/prog")
                out["chmod 4755"] = attempt(os.chmod, "/app/prog", 0o4755)
                out["chmod 2755"] = attempt(os.chmod, "/app/prog", 0o2755)
                fd = os.open("/app/prog", os.O_RDONLY)
                out["fchmod 4755"] = attempt(os.fchmod, fd, 0o4755)
                os.close(fd)
                out["open O_CREAT 4755"] = attempt(lambda: os.close(os.open("/app/made", os.O_WRONLY | os.O_CREAT, 0o4755)))
                out["mknod S_IFREG 6755"] = attempt(os.mknod, "/app/node", stat.S_IFREG | 0o6755)
                out["chmod 0755"] = attempt(os.chmod, "/app/prog", 0o755)
            """, epilogue=False) + "\nprint(json.dumps(out))\n")
        finally:
            c.close()
        res = json.loads(text.strip().splitlines()[-1])
        for k, v in res.items():
            with self.subTest(call=k):
                self.assertEqual(v, "ok" if k == "chmod 0755" else "EPERM", "%s: %s" % (k, v))
        for root, dirs, files in os.walk(self.ws):
            for n in dirs + files:
                m = os.lstat(os.path.join(root, n)).st_mode
                self.assertFalse(m & 0o6000, "%s is set-id on the host: %o" % (os.path.join(root, n), m))


if __name__ == "__main__":
    unittest.main()
