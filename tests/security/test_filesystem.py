"""Attack catalog, family "Filesystem": each test tries the attack for real inside a real
sandbox (`ipybox run`) and asserts the outcome: the errno, the refusal, an unchanged host.

Probes are Python snippets run by the sandbox's /usr/bin/python3 (raw syscalls through
ctypes); each prints one JSON object as its last line, which the test parses. What the
supervisor does with paths that kernel code planted is in test_filesystem_paths.py."""
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import textwrap
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import ipybox_test  # noqa: E402
from ipybox_test import PROBE_PRELUDE, run_sandboxed, HELPERS, IPYBOX  # noqa: E402

# Prepended to every probe: raw syscalls with errno names, and a dict `out` to report.
PRELUDE = PROBE_PRELUDE + r'''
def read(p, n=4096):
    with open(p, "rb") as f:
        return f.read(n)
def write(p, data=b"x", mode="wb"):
    with open(p, mode) as f:
        f.write(data)
out = {}
'''

# Well-known host secrets; none of them may be reachable from inside.
HOST_SECRETS = ["/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/sudoers", "/etc/sudoers.d",
                "/etc/ssh", "/etc/machine-id", "/etc/security", "/root", "/root/.ssh",
                "/root/.ssh/id_rsa", "/root/.bash_history", "/root/.local/state/ipybox",
                "/var/lib", "/var/log", "/var/run/docker.sock", "/boot", "/srv", "/opt", "/mnt"]

# Walks the small trees a sandbox can see and lists every file whose content holds `canary`.
FIND_CANARY = '''
found = []
for top in ["/app", "/home", "/tmp", "/run", "/var", "/dev/shm", "/etc"]:
    for dp, dns, fns in os.walk(top):
        for n in fns:
            p = os.path.join(dp, n)
            if canary in p:
                found.append(p)
            try:
                if os.path.isfile(p) and canary.encode() in read(p, 1 << 20):
                    found.append(p)
            except OSError:
                pass
out["found"] = found
'''


class SandboxCase(ipybox_test.SandboxCase):
    PRELUDE = PRELUDE
    TMP_PREFIX = "ipybox-sec-fs-"


class HostSecrets(SandboxCase):
    def test_host_secret_paths_absent(self):
        present_on_host = [p for p in HOST_SECRETS if os.path.lexists(p)]
        self.assertIn("/etc/shadow", present_on_host, "the host has no /etc/shadow: test means nothing")
        res = self.probe("""
            for p in %r:
                try:
                    if os.path.isdir(p): out[p] = ["listed", os.listdir(p)]
                    else: out[p] = ["read", len(read(p))]
                except OSError as e:
                    out[p] = [err(e)]
            out["/home"] = sorted(os.listdir("/home"))
        """ % (HOST_SECRETS,))
        for p in HOST_SECRETS:
            with self.subTest(path=p):
                self.assertEqual(res[p], ["ENOENT"], "%s is reachable inside the sandbox: %s" % (p, res[p]))
        self.assertEqual(res["/home"], ["appuser"])

    def test_other_users_homes_absent(self):
        homes = sorted(os.listdir("/home")) if os.path.isdir("/home") else []
        res = self.probe("""
            for h in %r + ["root", "nobody", "debian", "ubuntu"]:
                out[h] = attempt(os.stat, "/home/" + h)
            out["appuser_parent"] = sorted(os.listdir("/home/appuser/.."))
        """ % (homes,))
        self.assertEqual(res.pop("appuser_parent"), ["appuser"])
        for h, v in res.items():
            with self.subTest(home=h):
                self.assertEqual(v, "ok" if h == "appuser" else "ENOENT", "/home/%s: %s" % (h, v))

    def test_supervisor_state_dir_unreachable(self):
        env = self.state_env()
        state = os.path.join(env["XDG_STATE_HOME"], "ipybox")
        os.makedirs(state)
        canary = "ipybox-state-canary-" + uuid.uuid4().hex
        with open(os.path.join(state, "secret.txt"), "w") as f:
            f.write(canary)
        res = self.probe("canary = %r\n" % canary + FIND_CANARY + textwrap.dedent("""
            out["state_paths"] = {p: attempt(os.stat, p) for p in [%r, %r, "/root/.local/state/ipybox"]}
            out["pid1_root"] = attempt(os.listdir, "/proc/1/root/")
            out["pid1_cwd"] = attempt(os.listdir, "/proc/1/cwd/")
            out["home_dotdot"] = sorted(os.listdir("/home/appuser/../.."))
        """ % (state, os.path.join(state, "secret.txt"))), env=env)
        self.assertEqual(res["found"], [], "the supervisor's state dir leaks into the sandbox")
        for p, v in res["state_paths"].items():
            self.assertEqual(v, "ENOENT", "%s reachable inside" % p)
        self.assertEqual(res["pid1_root"], "EACCES")
        self.assertEqual(res["pid1_cwd"], "EACCES")
        self.assertNotIn("sessions", res["home_dotdot"])

    def test_other_sandbox_not_visible(self):
        env = self.state_env()
        canary = "ipybox-neighbour-canary-" + uuid.uuid4().hex
        other_ws = os.path.join(self.tmp, "other-ws")
        os.mkdir(other_ws)
        with open(os.path.join(other_ws, "ws-secret.txt"), "w") as f:
            f.write(canary)
        neighbour_code = textwrap.dedent("""
            import sys
            for p in ["/home/appuser/secret.txt", "/tmp/secret.txt", "/dev/shm/secret.txt"]:
                open(p, "w").write(%r)
            print("ready", flush=True)
            sys.stdin.read()
            print("alive", flush=True)
        """ % canary)
        nb = subprocess.Popen([IPYBOX, "run", "--workspace", other_ws, "--", "/usr/bin/python3", "-c",
                               neighbour_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
        try:
            self.assertEqual(nb.stdout.readline().strip(), "ready")
            res = self.probe("canary = %r\n" % canary + FIND_CANARY + textwrap.dedent("""
                out["other_ws"] = attempt(os.stat, %r)
            """ % other_ws), env=env)
            self.assertEqual(res["found"], [], "another sandbox's files are visible")
            self.assertEqual(res["other_ws"], "ENOENT")
        finally:
            out, errs = nb.communicate("done\n", timeout=60)
        self.assertEqual(nb.returncode, 0, errs)
        self.assertIn("alive", out)

    def test_root_only_host_files_unreadable(self):
        # Files the host keeps from 'others' (no o+r) must not become readable because the
        # sandbox user maps to their owner on the host (e.g. root's /etc/ssl/private when
        # ipybox runs as root).
        res = self.probe("""
            leaks = []
            for top in ["/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32"]:
                if not os.path.isdir(top) or os.path.islink(top):
                    continue
                for dp, dns, fns in os.walk(top):
                    for n in dns + fns:
                        p = os.path.join(dp, n)
                        try:
                            st = os.lstat(p)
                        except OSError:
                            continue
                        if stat.S_ISLNK(st.st_mode) or st.st_mode & stat.S_IROTH:
                            continue
                        try:
                            if stat.S_ISDIR(st.st_mode):
                                leaks.append([p, oct(st.st_mode), "listed", os.listdir(p)[:5]])
                            elif stat.S_ISREG(st.st_mode):
                                read(p, 16)
                                leaks.append([p, oct(st.st_mode), "read", []])
                        except OSError:
                            pass
            out["leaks"] = leaks
        """)
        self.assertEqual(res["leaks"], [], "host files without o+r permission are readable inside the "
                         "sandbox (the sandbox user maps to their host owner): %s" % res["leaks"])


class Writes(SandboxCase):
    def test_write_outside_allowed_dirs_refused(self):
        targets = ["/x", "/usr/x", "/usr/bin/x", "/etc/x", "/etc/passwd", "/etc/hosts", "/etc/ssl/x",
                   "/bin/x", "/lib/x", "/home/x", "/var/x", "/proc/sys/kernel/hostname",
                   "/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches"]
        res = self.probe("""
            for p in %r:
                out["write " + p] = attempt(write, p, b"pwned\\n", "ab")
            for d in ["/newdir", "/usr/newdir", "/etc/newdir", "/home/newdir"]:
                out["mkdir " + d] = attempt(os.mkdir, d)
            out["unlink /etc/passwd"] = attempt(os.unlink, "/etc/passwd")
            out["rename /etc/hosts"] = attempt(os.rename, "/etc/hosts", "/etc/hosts2")
            out["chmod /usr/bin/python3"] = attempt(os.chmod, os.path.realpath("/usr/bin/python3"), 0o777)
            out["chmod u+s /usr/bin/python3"] = attempt(os.chmod, os.path.realpath("/usr/bin/python3"), 0o4777)
            out["symlink /etc/evil"] = attempt(os.symlink, "/app", "/etc/evil")
        """ % (targets,))
        for k, v in res.items():
            with self.subTest(op=k):
                # set-id bits are refused by the seccomp filter before the mount is looked at
                self.assertIn(v, ("EROFS", "EACCES") + (("EPERM",) if "u+s" in k else ()), "%s: %s" % (k, v))
        for k in ("write /usr/x", "write /x", "chmod /usr/bin/python3"):
            self.assertEqual(res[k], "EROFS", k)
        # Existing files: the sandbox's user owns none of them (not even when root started
        # ipybox), so their permissions refuse before the read-only mount does.
        for k in ("write /etc/passwd", "write /proc/sys/kernel/core_pattern"):
            self.assertIn(res[k], ("EROFS", "EACCES"), k)
        with open("/proc/sys/kernel/core_pattern") as f:
            self.assertNotIn("pwned", f.read())

    def test_sandbox_private_tmpfs_dirs_read_only(self):
        # /dev and /run are the shim's own tmpfs mounts: writes there are writes outside
        # /app, /tmp, /dev/shm and $HOME (rootfs.c: "the sandbox writes only to /app, /tmp,
        # /dev/shm, $HOME"). /run/ipybox (the kernel's run dir) is a separate bind.
        res = self.probe("""
            for p in ["/dev/tty", "/dev/evil", "/run/evil"]:
                out["create " + p] = attempt(write, p, b"x", "xb")
            out["mkdir /dev/net"] = attempt(os.mkdir, "/dev/net")
            out["symlink /dev/kmsg"] = attempt(os.symlink, "/app/fake", "/dev/kmsg")
        """)
        for k, v in res.items():
            with self.subTest(op=k):
                self.assertIn(v, ("EROFS", "EACCES"), "%s succeeded inside the sandbox: %s" % (k, v))

    def test_allowed_writes_work(self):
        token = uuid.uuid4().hex
        res = self.probe("""
            for p in ["/app/f", "/tmp/f", "/dev/shm/f", "/home/appuser/f", "/var/tmp/g"]:
                out[p] = attempt(write, p, %r.encode())
            out["/tmp/g"] = read("/tmp/g").decode() if os.path.exists("/tmp/g") else None
        """ % token)
        for p in ["/app/f", "/tmp/f", "/dev/shm/f", "/home/appuser/f", "/var/tmp/g"]:
            self.assertEqual(res[p], "ok", p)
        self.assertEqual(res["/tmp/g"], token, "/var/tmp is not /tmp")
        with open(os.path.join(self.ws, "f")) as f:
            self.assertEqual(f.read(), token, "a write to /app did not reach the workspace")

    def test_fill_tmp_and_shm_enospc(self):
        token = "fill-" + uuid.uuid4().hex
        res = self.probe("""
            chunk = b"\\0" * (1 << 20)
            for d in ["/tmp", "/dev/shm"]:
                n, e = 0, None
                try:
                    with open(d + "/%s", "wb") as f:
                        for _ in range(64):
                            f.write(chunk)
                            f.flush()
                            os.fsync(f.fileno())
                            n += len(chunk)
                except OSError as ex:
                    e = err(ex)
                out[d] = [n, e]
                out[d + " size"] = os.statvfs(d).f_blocks * os.statvfs(d).f_frsize
                os.unlink(d + "/%s")
                out[d + " after"] = attempt(write, d + "/small", b"ok")
        """ % (token, token), options=self.opts("--tmp-size", "8M", "--shm-size", "8M"))
        for d in ("/tmp", "/dev/shm"):
            n, e = res[d]
            self.assertEqual(e, "ENOSPC", "%s: no ENOSPC after %d bytes" % (d, n))
            self.assertLessEqual(n, 8 << 20, d)
            self.assertGreaterEqual(n, 6 << 20, "%s refused far below its limit" % d)
            self.assertEqual(res[d + " size"], 8 << 20, d)
            self.assertEqual(res[d + " after"], "ok", "%s unusable after the fill" % d)
            self.assertFalse(os.path.exists(os.path.join(d, token)), "the fill reached the host's %s" % d)
        # the host is fine: a new sandbox starts and writes to its own /tmp
        r = run_sandboxed(["/bin/sh", "-c", "echo ok > /tmp/x && cat /tmp/x"], options=self.opts())
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "ok"), r.stderr)


class MountsAndProc(SandboxCase):
    def test_mount_family_refused(self):
        res = self.probe("""
            MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC = 1, 32, 4096, 16384
            before = read("/proc/self/mountinfo", 1 << 20)
            os.mkdir("/tmp/mnt")
            out["remount / rw"] = sc(165, None, "/", None, MS_REMOUNT | MS_BIND, None)
            out["remount /usr rw"] = sc(165, None, "/usr", None, MS_REMOUNT | MS_BIND, None)
            out["remount /proc/sys rw"] = sc(165, None, "/proc/sys", None, MS_REMOUNT | MS_BIND, None)
            out["mount tmpfs"] = sc(165, "tmpfs", "/tmp/mnt", "tmpfs", 0, None)
            out["mount proc"] = sc(165, "proc", "/tmp/mnt", "proc", 0, None)
            out["bind /"] = sc(165, "/", "/tmp/mnt", None, MS_BIND | MS_REC, None)
            out["umount /proc/keys"] = sc(166, "/proc/keys", 2)
            out["umount /usr"] = sc(166, "/usr", 2)
            out["umount /proc/sys"] = sc(166, "/proc/sys", 0)
            out["pivot_root"] = sc(155, "/tmp", "/tmp/mnt")
            out["chroot"] = sc(161, "/tmp")
            fh = ctypes.create_string_buffer(128)
            ctypes.memmove(fh, (ctypes.c_uint * 2)(8, 1), 8)
            mid = ctypes.c_int(0)
            out["name_to_handle_at"] = sc(303, -100, "/etc/hosts", fh, ctypes.byref(mid), 0)
            out["open_by_handle_at"] = sc(304, -100, fh, os.O_RDONLY)
            out["fsopen"] = sc(430, "tmpfs", 0)
            out["open_tree"] = sc(428, -100, "/usr", 1)
            out["move_mount"] = sc(429, -100, "/usr", -100, "/tmp/mnt", 0)
            out["fspick"] = sc(433, -100, "/", 0)
            out["mount_setattr"] = sc(442, -100, "/", 0, None, 0)
            os.system("/usr/bin/mount -o remount,rw / 2>/dev/null; /usr/bin/umount /usr 2>/dev/null; "
                      "/usr/bin/mount -t tmpfs none /tmp/mnt 2>/dev/null")
            out["setuid mount tools wrote"] = attempt(write, "/x")
            out["mountinfo unchanged"] = read("/proc/self/mountinfo", 1 << 20) == before
            out["tmp/mnt empty"] = os.listdir("/tmp/mnt") == []
        """)
        for k in ("remount / rw", "remount /usr rw", "remount /proc/sys rw", "mount tmpfs", "mount proc",
                  "bind /", "umount /proc/keys", "umount /usr", "umount /proc/sys", "pivot_root", "chroot",
                  "name_to_handle_at", "open_by_handle_at", "fsopen", "open_tree", "move_mount", "fspick",
                  "mount_setattr"):
            with self.subTest(call=k):
                self.assertEqual(res[k], "EPERM", "%s: %s" % (k, res[k]))
        self.assertEqual(res["setuid mount tools wrote"], "EROFS")
        self.assertTrue(res["mountinfo unchanged"], "the mount table changed")
        self.assertTrue(res["tmp/mnt empty"])

    def test_proc_sensitive_entries_masked(self):
        masked = ["kcore", "keys", "key-users", "sysrq-trigger", "timer_list", "kallsyms", "kmsg",
                  "sched_debug", "vmallocinfo", "slabinfo", "kpagecount", "kpageflags", "kpagecgroup",
                  "config.gz", "latency_stats", "mtrr"]
        res = self.probe("""
            for n in %r:
                p = "/proc/" + n
                try:
                    st = os.stat(p)
                except OSError as e:
                    out[n] = [err(e)]
                    continue
                rd = os.major(st.st_rdev), os.minor(st.st_rdev)
                try:
                    data = len(read(p, 4096))
                except OSError as e:
                    data = err(e)
                out[n] = ["present", stat.S_ISCHR(st.st_mode) and rd == (1, 3), data]
            out["acpi"] = attempt(os.listdir, "/proc/acpi")
            out["sysrq write"] = attempt(write, "/proc/sysrq-trigger", b"c")
        """ % (masked,))
        for n in masked:
            with self.subTest(entry=n):
                v = res[n]
                if v[0] != "present":
                    self.assertEqual(v, ["ENOENT"], n)
                else:
                    self.assertTrue(v[1], "/proc/%s is not masked (%s)" % (n, v))
                    self.assertEqual(v[2], 0, "/proc/%s gives data" % n)
        self.assertIn(res["sysrq write"], ("ENOENT", "ok"))
        if res["sysrq write"] == "ok":
            self.assertTrue(res["sysrq-trigger"][1], "a write reached the real sysrq-trigger")

    def test_proc_sys_and_friends_read_only(self):
        res = self.probe("""
            for p in ["/proc/sys/kernel/hostname", "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
                      "/proc/sys/vm/overcommit_memory", "/proc/sys/net/ipv4/ip_forward",
                      "/proc/sys/fs/binfmt_misc/register", "/proc/sys/kernel/unprivileged_userns_clone",
                      "/proc/sys/user/max_user_namespaces"]:
                if os.path.exists(p):
                    out[p] = attempt(write, p, b"1", "ab")
            # A pressure trigger (what unprivileged users may write on the host) holds kernel
            # resources and watches host-wide stalls.
            if os.path.exists("/proc/pressure/memory"):
                out["/proc/pressure/memory"] = attempt(write, "/proc/pressure/memory", b"some 150000 2000000\\0", "wb")
            flags = {}
            for line in read("/proc/self/mountinfo", 1 << 20).decode().splitlines():
                f = line.split()
                flags[f[4]] = f[5].split(",")
            for m in ["/proc/sys", "/proc/bus", "/proc/fs", "/proc/irq", "/", "/usr"]:
                out["ro " + m] = "ro" in flags.get(m, [])
            if os.path.exists("/proc/pressure"):
                out["ro /proc/pressure"] = "ro" in flags.get("/proc/pressure", [])
        """)
        self.assertIn("/proc/sys/kernel/core_pattern", res)
        if os.path.exists("/proc/pressure/memory"):
            self.assertIn("ro /proc/pressure", res)
        for k, v in res.items():
            with self.subTest(key=k):
                if k.startswith("ro "):
                    self.assertTrue(v, "%s not mounted read-only" % k[3:])
                else:
                    self.assertIn(v, ("EROFS", "EACCES"), "%s writable: %s" % (k, v))
        with open("/proc/sys/kernel/core_pattern") as f:
            self.assertNotEqual(f.read().strip(), "1")

    def test_sys_and_cgroupfs_absent(self):
        self.assertTrue(os.path.isdir("/sys/fs/cgroup"), "host has no /sys/fs/cgroup: test means nothing")
        res = self.probe("""
            for p in ["/sys", "/sys/fs/cgroup", "/sys/kernel", "/sys/fs/cgroup/cgroup.procs"]:
                out[p] = attempt(os.stat, p)
            out["cgroup"] = read("/proc/self/cgroup").decode()
            out["mount cgroup2"] = sc(165, "cgroup2", "/tmp", "cgroup2", 0, None)
        """)
        for p in ["/sys", "/sys/fs/cgroup", "/sys/kernel", "/sys/fs/cgroup/cgroup.procs"]:
            self.assertEqual(res[p], "ENOENT", p)
        self.assertEqual(res["mount cgroup2"], "EPERM")
        for line in res["cgroup"].splitlines():
            self.assertTrue(line.endswith(":/"), "host cgroup path visible: %r" % line)


class Devices(SandboxCase):
    def test_mknod_refused(self):
        res = self.probe("""
            S_IFCHR, S_IFBLK = 0o020000, 0o060000
            out["mknod chr mem"] = sc(133, "/tmp/mem", S_IFCHR | 0o666, os.makedev(1, 1))
            out["mknod blk vda"] = sc(133, "/tmp/vda", S_IFBLK | 0o666, os.makedev(254, 0))
            out["mknodat chr kmsg"] = sc(259, -100, "/tmp/kmsg", S_IFCHR | 0o666, os.makedev(1, 11))
            out["mknodat whiteout"] = sc(259, -100, "/tmp/wh", S_IFCHR, 0)
            out["mknod chr in /dev"] = sc(133, "/dev/mem", S_IFCHR | 0o666, os.makedev(1, 1))
            out["mknod chr hibits"] = sc(133, "/tmp/mem2", (1 << 40) | S_IFCHR | 0o666, os.makedev(1, 1))
            out["mkfifo"] = attempt(os.mkfifo, "/tmp/fifo")
            out["left"] = sorted(n for n in os.listdir("/tmp") if n != "fifo")
        """)
        for k in ("mknod chr mem", "mknod blk vda", "mknodat chr kmsg", "mknodat whiteout", "mknod chr in /dev",
                  "mknod chr hibits"):
            with self.subTest(call=k):
                self.assertEqual(res[k], "EPERM", "%s: %s" % (k, res[k]))
        self.assertEqual(res["mkfifo"], "ok", "control: FIFOs should stay allowed")
        self.assertEqual(res["left"], [])

    def test_dangerous_devices_absent(self):
        devs = ["mem", "kmem", "port", "kmsg", "fuse", "tty", "console", "tty0", "tty1", "ttyS0",
                "vda", "sda", "nvme0n1", "loop0", "loop-control", "kvm", "net/tun", "userfaultfd",
                "autofs", "cpu", "hwrng", "snapshot", "mapper", "vsock", "vhost-vsock", "uinput", "dri"]
        # A pty of the host's own: it must not show up in the sandbox's private devpts.
        master, slave = os.openpty()
        try:
            host_pty = os.ttyname(slave)
            res = self.probe("""
                for d in %r:
                    out[d] = attempt(os.open, "/dev/" + d, os.O_RDONLY)
                out["listing"] = sorted(os.listdir("/dev"))
                out["host pty"] = attempt(os.open, %r, os.O_RDWR | os.O_NOCTTY)
                out["pts before"] = sorted(os.listdir("/dev/pts"))
                m, s = os.openpty()
                out["own pty"] = os.ttyname(s)
                fs = {}
                for line in read("/proc/self/mountinfo", 1 << 20).decode().splitlines():
                    f = line.split(" - ")
                    fs[f[0].split()[4]] = f[1].split()[0]
                out["pts fstype"] = fs.get("/dev/pts")
            """ % (devs, host_pty))
        finally:
            os.close(master)
            os.close(slave)
        for d in devs:
            with self.subTest(dev=d):
                self.assertEqual(res[d], "ENOENT", "/dev/%s: %s" % (d, res[d]))
        self.assertEqual(res["listing"], sorted(["null", "zero", "full", "random", "urandom", "fd", "stdin",
                                                 "stdout", "stderr", "shm", "pts", "ptmx"]))
        self.assertEqual(res["host pty"], "ENOENT", "the host's pty %s is reachable inside" % host_pty)
        self.assertEqual(res["pts before"], ["ptmx"], "the sandbox's devpts is not a fresh instance")
        self.assertEqual(res["pts fstype"], "devpts")
        self.assertTrue(res["own pty"].startswith("/dev/pts/"), res["own pty"])

    def test_host_device_inodes_unchangeable(self):
        # The device nodes in /dev (and the /dev/null binds masking /proc entries) are the
        # host's own inodes: changing their mode changes the host's /dev/null. The probe only
        # re-applies the current mode and times, so a hole changes nothing but the host's ctime.
        before = {p: os.stat(p) for p in ("/dev/null", "/dev/zero", "/dev/full", "/dev/urandom")}
        res = self.probe("""
            for p in ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/proc/keys"]:
                if not os.path.exists(p):
                    continue
                st = os.stat(p)
                out["chmod " + p] = attempt(os.chmod, p, stat.S_IMODE(st.st_mode))
                out["utime " + p] = attempt(os.utime, p, ns=(st.st_atime_ns, st.st_mtime_ns))
            out["write null"] = attempt(write, "/dev/null", b"x", "ab")
        """)
        self.assertEqual(res.pop("write null"), "ok", "control: /dev/null must stay writable")
        for k, v in res.items():
            with self.subTest(op=k):
                self.assertIn(v, ("EPERM", "EROFS", "EACCES"), "%s on a host device inode from inside: %s" % (k, v))
        for p, st in before.items():
            now = os.stat(p)
            self.assertEqual(now.st_mode, st.st_mode, p)
            self.assertEqual(now.st_ctime_ns, st.st_ctime_ns, "the sandbox changed the host's %s" % p)


class Privileges(SandboxCase):
    def test_setuid_binaries_give_nothing(self):
        suid = [p for p in ("/usr/bin/su", "/usr/bin/passwd", "/usr/bin/chfn", "/usr/bin/newgrp",
                            "/usr/bin/mount", "/usr/bin/gpasswd", "/usr/bin/sudo")
                if os.path.exists(p) and os.stat(p).st_mode & stat.S_ISUID]
        if not suid:
            self.skipTest("no setuid-root binary on this host")
        res = self.probe("""
            import subprocess, time
            out["nosuid /usr"] = bool(os.statvfs("/usr").f_flag & os.ST_NOSUID)
            out["nnp"] = [l.split()[1] for l in read("/proc/self/status", 65536).decode().splitlines()
                          if l.startswith("NoNewPrivs")][0]
            for b in %r:
                # Watch the binary's own /proc status after exec (su waits for a password;
                # the others show their final credentials as zombies).
                p = subprocess.Popen([b], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                seen = None
                for _ in range(50):
                    time.sleep(0.05)
                    try:
                        st = read("/proc/%%d/status" %% p.pid, 65536).decode().splitlines()
                    except OSError:
                        break
                    d = {l.split(":")[0]: l.split(":", 1)[1].split() for l in st if ":" in l}
                    if d["Name"][0] != "python3":
                        seen = {"setuid": os.stat(b).st_mode & stat.S_ISUID != 0, "Uid": d["Uid"],
                                "Gid": d["Gid"], "CapEff": d["CapEff"][0], "CapPrm": d["CapPrm"][0],
                                "State": d["State"][0]}
                        if d["State"][0] in "SZ":
                            break
                p.kill()
                p.wait()
                out[b] = seen
        """ % (suid,))
        self.assertTrue(res["nosuid /usr"])
        self.assertEqual(res["nnp"], "1")
        for b in suid:
            with self.subTest(binary=b):
                v = res[b]
                self.assertIsNotNone(v, "%s never ran" % b)
                self.assertTrue(v["setuid"])
                self.assertEqual(v["Uid"], ["1000"] * 4, "%s ran with uids %s" % (b, v["Uid"]))
                self.assertEqual(v["Gid"], ["1000"] * 4, "%s ran with gids %s" % (b, v["Gid"]))
                self.assertEqual(v["CapEff"], "0" * 16)
                self.assertEqual(v["CapPrm"], "0" * 16)

    def test_file_capabilities_and_setuid_copies_give_nothing(self):
        # A copy of the `ids` helper in /app with file capabilities (v2, rootid = host root,
        # which owns the sandbox's user namespaces) and a setuid+setgid copy.
        ids = os.path.join(HELPERS, "ids")
        if not os.path.exists(ids):
            self.fail("helper %s not built (make build/tests/helpers/ids)" % ids)
        capcopy = os.path.join(self.ws, "capids")
        shutil.copy(ids, capcopy)
        # VFS_CAP_REVISION_2 | EFFECTIVE; permitted: DAC_OVERRIDE, DAC_READ_SEARCH, SETUID, SYS_ADMIN
        perm = (1 << 1) | (1 << 2) | (1 << 7) | (1 << 21)
        try:
            os.setxattr(capcopy, "security.capability", struct.pack("<IIIII", 0x02000001, perm, 0, 0, 0))
        except OSError as e:
            self.skipTest("cannot set file capabilities here: %s" % e)
        suidcopy = os.path.join(self.ws, "suidids")
        shutil.copy(ids, suidcopy)
        os.chmod(suidcopy, 0o6755)
        for name in ("capids", "suidids"):
            with self.subTest(binary=name):
                r = run_sandboxed(["/app/" + name], options=self.opts())
                self.assertEqual(r.returncode, 0, r.stderr)
                v = json.loads(r.stdout.strip().splitlines()[-1])
                for k in ("ruid", "euid", "suid", "rgid", "egid", "sgid"):
                    self.assertEqual(v[k], 1000, "%s: %s=%s" % (name, k, v[k]))
                for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
                    self.assertEqual(v[k], "0" * 16, "%s gained %s=%s" % (name, k, v[k]))
                self.assertEqual(v["NoNewPrivs"], "1")
                self.assertEqual(v["Seccomp"], "2")

