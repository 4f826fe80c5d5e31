"""What ipybox's programs load, on the path of every session's start:

- Root's private monitor (`ipyboxd --private-monitor`, architecture.md "The system service") is
  the program libexec/ipybox/ipybox-monitor, linked with libc alone (so that it starts in about
  a millisecond; root's sandbox waits for it), and, where that program is missing, ipybox
  itself, which has the same code.
- ipybox loads libcurl (and the ~30 libraries it brings) only for an MCP server over HTTP
  (mcpclient/curl_load.c); the error when it cannot is in test_mcpclient."""
import os
import shutil
import signal
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from ipybox_test import BUILD, IPYBOX, McpClient, descendants, is_private_monitor, proc_cmdline, wait_for  # noqa: E402,E501

def monitors(pid):
    return [p for p in descendants(pid) if is_private_monitor(p)]


def libraries(pid):
    """The basenames of the shared objects pid maps."""
    with open("/proc/%d/maps" % pid) as f:
        return {os.path.basename(line.split()[-1]) for line in f if ".so" in line.split()[-1]}


@unittest.skipUnless(os.geteuid() == 0, "only root's ipybox starts a private monitor")
class PrivateMonitorProgram(unittest.TestCase):
    def the_monitor(self, c):
        """The session's one private monitor, once the session answered; its program."""
        text, _ = c.execute("1+1")
        self.assertEqual(text.strip(), "2")
        mons = monitors(c.proc.pid)
        self.assertEqual(len(mons), 1, mons)
        # The same arguments whichever program runs it (tests and tools find it by them).
        self.assertEqual(proc_cmdline(mons[0]).split(b"\0")[:3], [b"ipyboxd", b"--private-monitor", b"worker"])
        return mons[0], os.readlink("/proc/%d/exe" % mons[0])

    def test_root_session_runs_the_lean_monitor(self):
        with McpClient("--embedded") as c:
            mon, exe = self.the_monitor(c)
            self.assertTrue(os.path.samefile(exe, os.path.join(BUILD, "libexec", "ipybox", "ipybox-monitor")), exe)
            # None of the libraries ipybox links (glibc may load its NSS modules at run time).
            heavy = ("libcurl", "libzmq", "libnftables", "libssl", "libcrypto", "libjansson", "libseccomp")
            self.assertFalse([n for n in libraries(mon) if n.startswith(heavy)])
            self.assertTrue([n for n in libraries(c.proc.pid) if n.startswith(heavy)])

    def copied_tree(self, tmp, monitor=True):
        """bin/ipybox and libexec/ipybox/ (the shim, and the monitor unless not asked) in tmp."""
        os.makedirs(os.path.join(tmp, "bin"))
        os.makedirs(os.path.join(tmp, "libexec", "ipybox"))
        ipybox = os.path.join(tmp, "bin", "ipybox")
        shutil.copy2(IPYBOX, ipybox)
        for name in ("ipybox-shim", "ipybox-monitor") if monitor else ("ipybox-shim",):
            shutil.copy2(os.path.join(BUILD, "libexec", "ipybox", name), os.path.join(tmp, "libexec", "ipybox", name))
        os.chmod(tmp, 0o755)
        return ipybox

    def test_a_replaced_ipybox_starts_its_own_code_as_the_next_monitor(self):
        """An upgrade under a running ipybox: the monitor it starts again (the first was killed)
        is its own code, not the new build's ipybox-monitor beside the new file."""
        with tempfile.TemporaryDirectory(prefix="ipybox-upgrade-") as tmp:
            ipybox = self.copied_tree(tmp)
            with McpClient("--embedded", wrap=lambda cmd: [ipybox] + cmd[1:]) as c:
                first, exe = self.the_monitor(c)
                self.assertTrue(exe.endswith("/libexec/ipybox/ipybox-monitor"), exe)
                os.unlink(ipybox)
                shutil.copy2(IPYBOX, ipybox)  # the "new build", a file of its own
                os.kill(first, signal.SIGKILL)
                self.assertTrue(wait_for(lambda: not monitors(c.proc.pid) or monitors(c.proc.pid) != [first], 20))
                # The first call says the sandbox ended: it answers in a fresh one, or, when it
                # found the sandbox still dying, it says so and the next call answers.
                text, r = c.execute("1+1")
                if text.splitlines()[0] != "2":
                    self.assertIn("The sandbox ended", text)
                    text, r = c.execute("1+1")
                self.assertEqual(text.splitlines()[0], "2", text)
                mon, exe = self.the_monitor(c)
                self.assertNotEqual(mon, first)
                self.assertEqual(exe, ipybox + " (deleted)")

    def test_without_the_program_ipybox_runs_itself_as_the_monitor(self):
        """Not the installed ipybox-monitor either (another build's): ipybox itself."""
        with tempfile.TemporaryDirectory(prefix="ipybox-nomon-") as tmp:
            ipybox = self.copied_tree(tmp, monitor=False)
            with McpClient("--embedded", wrap=lambda cmd: [ipybox] + cmd[1:]) as c:
                self.assertTrue(os.path.samefile(self.the_monitor(c)[1], ipybox))


class LibcurlWhenNeeded(unittest.TestCase):
    def test_a_session_without_http_servers_maps_no_libcurl(self):
        with McpClient("--embedded") as c:
            text, _ = c.execute("1+1")
            self.assertEqual(text.strip(), "2")
            libs = libraries(c.proc.pid)
            self.assertFalse([n for n in libs if n.startswith("libcurl")], libs)
            # What it links is there (the check sees libraries at all).
            self.assertTrue([n for n in libs if n.startswith("libzmq")], libs)


if __name__ == "__main__":
    unittest.main()
