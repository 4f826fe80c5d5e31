"""ipyboxd as root, its users (tests/lib/system_fixture.py): each user has a socket only they
can use; users see only their own sessions and files, and their kernels run in pool uids;
`ipybox mcp` finds the service by itself, and a socket it cannot use, or a home it cannot use,
is named, never silently replaced; the modes the service gives are its own, not its umask."""
import fcntl
import glob
import os
import pwd
import shutil
import struct
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX, McpClient, McpError  # noqa: E402
import system_fixture as sf  # noqa: E402
from system_fixture import POOL_END, POOL_START, USERS, proc_uids, text  # noqa: E402


class SystemServiceUsers(sf.SystemServiceCase):
    def test_each_user_has_a_socket_only_they_can_use(self):
        a, b = (pwd.getpwnam(u) for u in USERS)
        for u, pw in ((USERS[0], a), (USERS[1], b)):
            st = os.stat(self.svc.sock(u))
            self.assertEqual((st.st_uid, st.st_mode & 0o777), (pw.pw_uid, 0o600))
        r = self.as_user(USERS[0], "import socket; s = socket.socket(socket.AF_UNIX); "
                         "s.connect(%r); print('connected')" % self.svc.sock(USERS[1]))
        self.assertIn("PermissionError", r.stderr)
        self.assertNotIn("connected", r.stdout)

    def test_users_see_only_their_own_sessions_and_files(self):
        a = self.client(USERS[0])
        b = self.client(USERS[1])
        a.request("ipybox/createSession", {"name": "work-a"})
        out, res = a.execute("import os\nopen('/app/made-by-a.txt', 'w').write('a')\n"
                             "open('/tmp/scratch', 'w').write('x')\nprint(os.getuid(), os.getpid())")
        self.assertFalse(res["isError"], out)
        self.assertEqual(out.split()[0], "1000")
        self.assertNotIn("work-a", [s["name"] for s in b.request("ipybox/listSessions")["sessions"]])
        for method in ("ipybox/attachSession", "ipybox/closeSession"):
            with self.assertRaises(McpError) as e:
                b.request(method, {"name": "work-a"})
            self.assertIn("work-a", str(e.exception))
        self.assertIn("work-a", [s["name"] for s in a.request("ipybox/listSessions")["sessions"]])
        # The kernel runs in a pool uid: neither root nor a real user; so are its files.
        kernel_uids = {u for _, u in proc_uids() if POOL_START <= u < POOL_END}
        self.assertTrue(kernel_uids)
        real = {p.pw_uid for p in pwd.getpwall()}
        self.assertFalse(kernel_uids & real)
        self.assertNotIn(0, kernel_uids)
        scratch = [p for p, u in proc_uids() if POOL_START <= u < POOL_END and
                   os.path.exists("/proc/%d/root/tmp/scratch" % p)]
        self.assertTrue(scratch)
        owner = os.stat("/proc/%d/root/tmp/scratch" % scratch[0]).st_uid
        self.assertTrue(POOL_START <= owner < POOL_END and owner not in real, owner)
        # Each sandbox's outermost user namespace belongs to root, not to its pool base uid:
        # no host process with a pool uid has rights over a sandbox.
        shims = [p for p, u in proc_uids() if POOL_START <= u < POOL_END and (u - POOL_START) % 65536 == 0]
        self.assertTrue(shims)
        for p in shims:
            fd = os.open("/proc/%d/ns/user" % p, os.O_RDONLY)
            try:
                owner = struct.unpack("I", fcntl.ioctl(fd, 0xb704, b"\0" * 4))[0]  # NS_GET_OWNER_UID
            finally:
                os.close(fd)
            self.assertEqual(owner, 0, "pid %d" % p)
        # The workspace is the user's own on disk (idmapped): usable by its owner, not by B.
        ua = pwd.getpwnam(USERS[0])
        made = glob.glob(os.path.join(ua.pw_dir, ".local/state/ipybox/workspaces/*/made-by-a.txt"))
        self.assertEqual(len(made), 1)
        self.assertEqual(os.stat(made[0]).st_uid, ua.pw_uid)
        # B cannot name A's files, even with A's home among B's allowed directories: file
        # operations run with B's own credentials.
        secret = os.path.join(ua.pw_dir, "secret.txt")
        with open(secret, "w") as f:
            f.write("a's secret")
        os.chown(secret, ua.pw_uid, ua.pw_gid)
        os.chmod(secret, 0o600)
        os.chmod(ua.pw_dir, 0o700)
        res = b.call("upload_file", {"relpath": "stolen.txt", "local_path": secret})
        self.assertTrue(res["isError"])
        self.assertRegex(text(res), "allowed|Permission denied")
        b2 = self.client(USERS[1], "--allowed-dir", ua.pw_dir)
        res = b2.call("upload_file", {"relpath": "stolen.txt", "local_path": secret})
        self.assertTrue(res["isError"], text(res))
        self.assertIn("ermission denied", text(res))
        b2.execute("open('/app/planted.txt', 'w').write('b')")
        res = b2.call("download_file", {"relpath": "planted.txt",
                                           "local_path": os.path.join(ua.pw_dir, "planted.txt")})
        self.assertTrue(res["isError"], text(res))
        self.assertFalse(os.path.exists(os.path.join(ua.pw_dir, "planted.txt")))
        a.request("ipybox/closeSession", {"name": "work-a"})

    def test_ipybox_mcp_finds_the_service_by_itself(self):
        c = McpClient(wrap=lambda cmd: ["runuser", "-u", USERS[0], "--", "env", "-C", "/tmp", *cmd])
        self.clients.append(c)
        self.assertEqual(c.execute("import os; print(os.getuid())")[0], "1000\n")
        c.proc.stdin.close()
        c.proc.wait(30)
        self.assertIn("using ipyboxd at /run/ipybox/%s/ipybox.sock" % USERS[0], c.proc.stderr.read().decode())

    def test_a_system_socket_that_cannot_be_used_is_never_silently_replaced(self):
        # The user's directory closed to them (as UMask=0077 once made it): ipybox mcp says so
        # and stops; the embedded supervisor (without the administrator's limits) runs only
        # when the user's configuration asks for it.
        d = os.path.dirname(self.svc.sock(USERS[0]))
        os.chmod(d, 0o700)
        try:
            def mcp(*env):
                return subprocess.run(["runuser", "-u", USERS[0], "--", "env", "-u", "XDG_RUNTIME_DIR", "-C", "/tmp",
                                       *env, IPYBOX, "mcp"], input=b"", capture_output=True, timeout=60)
            r = mcp()
            err = r.stderr.decode()
            self.assertEqual(r.returncode, 1, err)
            self.assertIn("the system service's socket %s is there but cannot be used (Permission denied)"
                          % self.svc.sock(USERS[0]), err)
            self.assertIn("Not running the embedded supervisor", err)
            self.assertNotIn("; running the embedded supervisor", err)
            r = mcp("IPYBOX_FALLBACK=embedded", "XDG_STATE_HOME=/tmp/ipbt-fallback-state")
            self.assertIn("running the embedded supervisor", r.stderr.decode())
        finally:
            os.chmod(d, 0o755)
            shutil.rmtree("/tmp/ipbt-fallback-state", ignore_errors=True)

    def test_a_user_whose_home_cannot_be_used_is_told_why(self):
        ub = pwd.getpwnam(USERS[1])
        mode = os.stat(ub.pw_dir).st_mode & 0o7777
        os.chmod(ub.pw_dir, 0)
        try:
            # With an option of its own: a warm session (started ahead, before the home was
            # closed) serves only sessions made with the service's options alone.
            r = subprocess.run(["runuser", "-u", USERS[1], "--", "env", "-u", "XDG_RUNTIME_DIR", "-C", "/tmp",
                                IPYBOX, "mcp", "--tmp-size", "16M"], input=b"", capture_output=True, timeout=60)
            err = r.stderr.decode()
            self.assertEqual(r.returncode, 1, err)
            self.assertIn(ub.pw_dir, err)
            self.assertIn("Permission denied", err)
        finally:
            os.chmod(ub.pw_dir, mode)

    def test_modes_are_the_services_own_not_the_umask(self):
        # The service runs with umask 077 here (as under the shipped unit).
        self.assertEqual(os.stat("/run/ipybox").st_mode & 0o7777, 0o755)
        for u in USERS:
            self.assertEqual(os.stat(os.path.dirname(self.svc.sock(u))).st_mode & 0o7777, 0o755)
        a = self.client(USERS[0])
        out, res = a.execute("import os\nopen('/app/m.txt', 'w').close()\n"
                             "print(oct(os.stat('/home').st_mode & 0o777), oct(os.stat('/app/m.txt').st_mode & 0o777))")
        self.assertFalse(res["isError"], out)
        self.assertEqual(out, "0o755 0o644\n")


if __name__ == "__main__":
    unittest.main()
