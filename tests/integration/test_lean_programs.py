"""What ipybox's programs load, on the path of every session's start:

- Root's private monitor (`ipyboxd --private-monitor`, architecture.md "The system service") is
  the program libexec/ipybox/ipybox-monitor, linked with libc alone (so that it starts in about
  a millisecond; root's sandbox waits for it), and, where that program is missing, ipybox
  itself, which has the same code.
- ipybox loads libcurl (and the ~30 libraries it brings) only for an MCP server over HTTP
  (mcpclient/curl_load.c); the error when it cannot is in test_mcpclient."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from ipybox_test import BUILD, IPYBOX, McpClient, descendants, is_private_monitor, proc_cmdline  # noqa: E402

INSTALLED_MONITOR = "/usr/local/libexec/ipybox/ipybox-monitor"


def monitors(pid):
    return [p for p in descendants(pid) if is_private_monitor(p)]


def libraries(pid):
    """The basenames of the shared objects pid maps."""
    with open("/proc/%d/maps" % pid) as f:
        return {os.path.basename(line.split()[-1]) for line in f if ".so" in line.split()[-1]}


@unittest.skipUnless(os.geteuid() == 0, "only root's ipybox starts a private monitor")
class PrivateMonitorProgram(unittest.TestCase):
    def test_root_session_runs_the_lean_monitor(self):
        with McpClient("--embedded") as c:
            text, _ = c.execute("1+1")
            self.assertEqual(text.strip(), "2")
            mons = monitors(c.proc.pid)
            self.assertEqual(len(mons), 1, mons)
            exe = os.readlink("/proc/%d/exe" % mons[0])
            self.assertEqual(exe, os.path.join(BUILD, "libexec", "ipybox", "ipybox-monitor"))
            self.assertEqual(proc_cmdline(mons[0]).split(b"\0")[:3], [b"ipyboxd", b"--private-monitor", b"worker"])
            # None of the libraries ipybox links (glibc may load its NSS modules at run time).
            heavy = ("libcurl", "libzmq", "libnftables", "libssl", "libcrypto", "libjansson", "libseccomp")
            self.assertFalse([n for n in libraries(mons[0]) if n.startswith(heavy)])
            self.assertTrue([n for n in libraries(c.proc.pid) if n.startswith(heavy)])

    @unittest.skipIf(os.path.exists(INSTALLED_MONITOR), "an installed ipybox-monitor would be found instead")
    def test_without_the_program_ipybox_runs_itself_as_the_monitor(self):
        with tempfile.TemporaryDirectory(prefix="ipybox-nomon-") as tmp:
            os.makedirs(os.path.join(tmp, "bin"))
            os.makedirs(os.path.join(tmp, "libexec", "ipybox"))
            ipybox = os.path.join(tmp, "bin", "ipybox")
            shutil.copy2(IPYBOX, ipybox)
            shutil.copy2(os.path.join(BUILD, "libexec", "ipybox", "ipybox-shim"),
                         os.path.join(tmp, "libexec", "ipybox", "ipybox-shim"))
            os.chmod(tmp, 0o755)
            with McpClient("--embedded", wrap=lambda cmd: [ipybox] + cmd[1:]) as c:
                text, _ = c.execute("1+1")
                self.assertEqual(text.strip(), "2")
                mons = monitors(c.proc.pid)
                self.assertEqual(len(mons), 1, mons)
                self.assertEqual(os.readlink("/proc/%d/exe" % mons[0]), ipybox)
                self.assertEqual(proc_cmdline(mons[0]).split(b"\0")[:3],
                                 [b"ipyboxd", b"--private-monitor", b"worker"])


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
