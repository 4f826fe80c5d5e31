"""The command line: ipybox run, --help, option errors, start-up failures, shutdown and
cleanup of ipybox mcp."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import IPYBOX, McpClient, descendants, require_sandbox, run_sandboxed  # noqa: E402


def alive(pids):
    return [p for p in pids if os.path.exists("/proc/%d" % p) and
            "Z" not in open("/proc/%d/stat" % p).read().rsplit(")", 1)[1].split()[0]]


class RunTest(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)

    def test_exit_status_and_output(self):
        r = run_sandboxed(["/bin/sh", "-c", "echo out; echo err >&2; exit 7"])
        self.assertEqual(r.returncode, 7)
        self.assertEqual(r.stdout, "out\n")
        self.assertIn("err", r.stderr)

    def test_command_exit_codes_125_to_127_are_its_own(self):
        for code in (125, 126, 127):
            with self.subTest(code=code):
                r = run_sandboxed(["/bin/sh", "-c", "exit %d" % code])
                self.assertEqual(r.returncode, code, r.stderr)
                self.assertEqual(r.stderr, "")

    def test_stdin_passes_through(self):
        r = run_sandboxed(["/bin/cat"], input="hello sandbox")
        self.assertEqual(r.stdout, "hello sandbox")

    def test_killed_by_signal(self):
        r = run_sandboxed(["/bin/sh", "-c", "kill -9 $$"])
        self.assertEqual(r.returncode, 137)

    def test_missing_command(self):
        r = run_sandboxed(["/nonexistent/cmd"])
        self.assertEqual(r.returncode, 127)
        self.assertIn("cannot run '/nonexistent/cmd'", r.stderr)

    def test_env_is_clean_and_options_pass(self):
        env = dict(os.environ, IPYBOX_TEST_CANARY="leak")
        with tempfile.TemporaryDirectory() as d:
            envfile = os.path.join(d, "env")
            with open(envfile, "w") as f:
                f.write("# comment\nexport FROM_FILE='file value'\n")
            r = subprocess.run([IPYBOX, "run", "--container-env-var", "A=1", "--container-env-file", envfile,
                                "--", "/usr/bin/env"], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertIn("A=1", lines)
        self.assertIn("FROM_FILE=file value", lines)
        self.assertNotIn("IPYBOX_TEST_CANARY=leak", lines)
        self.assertIn("HOME=/home/appuser", lines)

    def test_signal_is_forwarded(self):
        p = subprocess.Popen([IPYBOX, "run", "--", "/bin/sh", "-c", "trap 'exit 42' TERM; sleep 100 & wait"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1.0)
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(30), 42)

    def test_workspace_is_app(self):
        with tempfile.TemporaryDirectory() as d:
            r = run_sandboxed(["/bin/sh", "-c", "pwd; echo hi > f.txt"], options=["--workspace", d])
            self.assertEqual(r.stdout.strip(), "/app")
            with open(os.path.join(d, "f.txt")) as f:
                self.assertEqual(f.read(), "hi\n")

    def test_bad_rootfs_fails_with_a_sentence(self):
        with tempfile.TemporaryDirectory() as d:
            # An empty root every sandbox may read (root's sandboxes, too, run as a uid of the
            # pool, which a 0700 directory of root's would refuse with a sentence of its own).
            os.chmod(d, 0o755)
            r = run_sandboxed(["/bin/true"], options=["--rootfs", d])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot run '/bin/true'", r.stderr)


class HelpAndOptionsTest(unittest.TestCase):
    def run_ipybox(self, *args):
        return subprocess.run([IPYBOX, *args], capture_output=True, text=True, timeout=30)

    def test_help_texts(self):
        r = self.run_ipybox("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("mcp", r.stdout)
        self.assertIn("run", r.stdout)
        r = self.run_ipybox("mcp", "--help")
        self.assertEqual(r.returncode, 0)
        for opt in ["--allowed-dir", "--allowed-domain", "--container-env-var", "--container-env-file",
                    "--container-bind", "--rootfs", "--workspace", "--python", "--container-tag"]:
            self.assertIn(opt, r.stdout)
        r = self.run_ipybox("run", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("COMMAND", r.stdout)

    def test_option_errors(self):
        for args, words in [(["mcp", "--bogus"], "unknown option '--bogus'"),
                            (["mcp", "--allowed-dir"], "needs a value"),
                            (["mcp", "--allowed-dir", "rel"], "absolute"),
                            (["mcp", "--container-env-var", "1X=2"], "not a valid variable name"),
                            (["mcp", "--container-bind", "/tmp:../x"], ".."),
                            (["mcp", "--container-env-file", "/nonexistent"], "cannot read"),
                            (["mcp", "--tmp-size", "lots"], "size"),
                            (["run"], "no command"),
                            (["frobnicate"], "unknown command")]:
            with self.subTest(args=args):
                r = self.run_ipybox(*args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(words, r.stderr)
                self.assertEqual(r.stdout, "")


class McpLifecycleTest(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)

    def test_banner_and_clean_stdout(self):
        c = McpClient(initialize=False)
        c.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        self.assertEqual(c.read_message(60), {"jsonrpc": "2.0", "id": 1, "result": {}})
        c.proc.stdin.close()
        self.assertEqual(c.proc.wait(30), 0)
        err = c.proc.stderr.read().decode()
        self.assertIn("ready", err)
        self.assertIn("namespaces", err)
        self.assertEqual(c.proc.stdout.read(), b"")
        c.close()

    def test_eof_and_sigterm_leave_nothing_behind(self):
        for how in ("eof", "sigterm"):
            with self.subTest(how=how):
                c = McpClient()
                c.execute("import subprocess; subprocess.Popen(['sleep', '1000'])")
                tree = descendants(c.proc.pid)
                self.assertGreaterEqual(len(tree), 3, tree)  # shim, PID 1, kernel, sleep
                sessions = os.path.join(c.state_dir, "sessions")
                self.assertEqual(len(os.listdir(sessions)), 1)
                if how == "eof":
                    c.proc.stdin.close()
                else:
                    c.proc.send_signal(signal.SIGTERM)
                self.assertEqual(c.proc.wait(30), 0)
                time.sleep(0.2)
                self.assertEqual(alive(tree), [])
                self.assertEqual(os.listdir(sessions), [])
                c.close()

    def test_sigkill_leaves_no_process_and_next_start_cleans_up(self):
        with tempfile.TemporaryDirectory() as state:
            env = dict(os.environ, XDG_STATE_HOME=state)
            c = McpClient(env=env)
            c.execute("import subprocess; subprocess.Popen(['sleep', '1000'])")
            tree = descendants(c.proc.pid)
            c.proc.kill()
            c.proc.wait()
            deadline = time.time() + 10
            while alive(tree) and time.time() < deadline:
                time.sleep(0.1)
            self.assertEqual(alive(tree), [], "sandbox processes must die with the supervisor")
            sessions = os.path.join(state, "ipybox", "sessions")
            self.assertEqual(len(os.listdir(sessions)), 1, "the killed session's directory is left")
            c.close()
            c2 = McpClient(env=env)
            self.assertEqual(len(os.listdir(sessions)), 1, "only the new session remains")
            c2.close()

    def test_eof_after_requests_still_answers_them(self):
        reqs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "execute_ipython_cell", "arguments": {"code": "import time; time.sleep(1); print(6*7)"}}},
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                 "params": {"name": "execute_ipython_cell", "arguments": {"code": "print(7*7)"}}}]
        data = "".join(json.dumps(r) + "\n" for r in reqs).encode()
        r = subprocess.run([IPYBOX, "mcp"], input=data, capture_output=True, timeout=120,
                           env=dict(os.environ, XDG_STATE_HOME=tempfile.mkdtemp()))
        self.assertEqual(r.returncode, 0)
        out = [json.loads(line) for line in r.stdout.splitlines()]
        self.assertEqual([m["id"] for m in out], [1, 2, 3])
        self.assertEqual(out[1]["result"]["content"][0]["text"], "42\n")
        self.assertEqual(out[2]["result"]["content"][0]["text"], "49\n")

    def test_client_gone_during_a_cell(self):
        c = McpClient()
        c.send_request("tools/call", {"name": "execute_ipython_cell",
                                   "arguments": {"code": "import time; time.sleep(100)"}})
        time.sleep(0.5)
        tree = descendants(c.proc.pid)
        t = time.time()
        c.proc.stdout.close()  # nobody reads any more
        c.proc.stdin.close()
        self.assertEqual(c.proc.wait(30), 0)
        self.assertLess(time.time() - t, 15)
        time.sleep(0.2)
        self.assertEqual(alive(tree), [])
        c.close()

    def test_kernel_that_cannot_start_is_a_clear_error(self):
        r = subprocess.run([IPYBOX, "mcp", "--python", "/usr/bin/nonexistent-python"], input=b"", capture_output=True,
                           timeout=60, env=dict(os.environ, XDG_STATE_HOME=tempfile.mkdtemp()))
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"cannot start", r.stderr)
        self.assertIn(b"nonexistent-python", r.stderr)
        self.assertEqual(r.stdout, b"")

    def test_sandbox_killed_from_outside_is_rebuilt(self):
        c = McpClient()
        c.execute("v = 1")
        shim = [p for p in descendants(c.proc.pid)
                if open("/proc/%d/comm" % p).read().strip() == "ipybox-shim"][0]
        os.kill(shim, signal.SIGKILL)
        time.sleep(0.5)
        text, r = c.execute("print('alive again')")
        self.assertIn("alive again", text)
        c.close()


if __name__ == "__main__":
    unittest.main()
