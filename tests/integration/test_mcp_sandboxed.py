"""Sandboxed stdio MCP servers (docs/tools.md, "Sandboxed servers"): a server with a "sandbox"
object in its params, or any stdio server with --sandbox-mcp-servers, runs under `ipybox run`
with a private home; it cannot read the user's home, reaches only its allowed_domains, sees its
allowed_dirs at their own paths; npx-run server-everything works sandboxed; sandbox params that
make no sense are refused at registration with the reason.

The probe server is `/usr/bin/python3 -c SOURCE`, so that nothing of the test tree has to be
visible inside the sandbox (it sees /usr, /bin, /lib*, not /work)."""
import json
import os
import shutil
import sys
import tempfile
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
from ipybox_test import McpCase, McpClient, text_of, wait_for  # noqa: E402
import mcp_servers  # noqa: E402
from daemon_fixture import Daemon  # noqa: E402
import testhosts  # noqa: E402

# A stdio MCP server with one tool, probe(what, arg): read / write / ls / env / cwd / fetch.
PROBE_SERVER = r'''
import json, os, sys, urllib.request
TOOL = {"name": "probe", "description": "probe", "inputSchema": {"type": "object",
        "properties": {"what": {"type": "string"}, "arg": {"type": "string"}}, "required": ["what", "arg"]}}
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
def run(what, arg):
    if what == "read": return open(arg).read()
    if what == "write":
        with open(arg, "w") as f: f.write("from the server")
        return "written"
    if what == "ls": return json.dumps(sorted(os.listdir(arg)))
    if what == "env": return os.environ.get(arg, "<unset>")
    if what == "cwd": return os.getcwd()
    if what == "fetch":
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        return opener.open(arg, timeout=20).read().decode()
    return "unknown"
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m: continue
    p = m.get("params") or {}
    if m["method"] == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": p["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "probe", "version": "1"}}})
    elif m["method"] == "tools/list":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [TOOL]}})
    elif m["method"] == "tools/call":
        a = p["arguments"]
        try: out = run(a["what"], a["arg"])
        except Exception as e: out = "ERR %s: %s" % (type(e).__name__, e)
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": out}]}})
    else:
        send({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no such method"}})
'''


def probe_params(sandbox=None, **extra):
    p = {"command": "/usr/bin/python3", "args": ["-c", PROBE_SERVER], **extra}
    if sandbox is not None:
        p["sandbox"] = sandbox
    return p


class SandboxedCase(McpCase):
    def setUp(self):
        super().setUp()
        # A file planted in the home of the user running ipybox (the servers run as that user).
        self.home = os.path.expanduser("~")
        self.secret = os.path.join(self.home, "ipybox-h3-secret-" + uuid.uuid4().hex[:8])
        with open(self.secret, "w") as f:
            f.write("the user's secret")
        self.addCleanup(os.unlink, self.secret)

    def register(self, c, name, params):
        r = c.call("register_mcp_server", {"server_name": name, "server_params": params})
        self.assertFalse(r.get("isError"), text_of(r) + "\n" + c.stderr_text())
        return r

    def refused(self, c, name, params):
        r = c.call("register_mcp_server", {"server_name": name, "server_params": params})
        self.assertTrue(r.get("isError"), "registered: %s" % text_of(r))
        return text_of(r)

    def probe(self, c, server, what, arg):
        """probe(what, arg) of server, called by kernel code; returns its text."""
        text, r = c.execute("from mcptools.%s import probe\nprint(repr(probe.run(what=%r, arg=%r)))"
                            % (server, what, arg), timeout=120)
        self.assertFalse(r.get("isError"), text)
        return eval(text.strip().splitlines()[-1])


class TestFilesystem(SandboxedCase):
    def test_the_users_home_is_invisible_and_the_private_home_persists(self):
        c = self.client("--approve-tools", "*")
        self.register(c, "plain", probe_params())
        self.register(c, "boxed", probe_params(sandbox={}))
        # The control: the same server unsandboxed reads the planted file.
        self.assertEqual(self.probe(c, "plain", "read", self.secret), "the user's secret")
        got = self.probe(c, "boxed", "read", self.secret)
        self.assertTrue(got.startswith("ERR FileNotFoundError"), got)
        self.assertIn("ERR", self.probe(c, "boxed", "ls", self.home))
        self.assertEqual(self.probe(c, "boxed", "env", "HOME"), "/home/appuser")
        self.assertEqual(self.probe(c, "boxed", "cwd", "x"), "/app")
        self.assertEqual(self.probe(c, "boxed", "write", "/home/appuser/kept"), "written")
        home = os.path.join(c.state_dir, "mcp-homes", "boxed")
        self.assertEqual(os.stat(home).st_mode & 0o777, 0o700)
        with open(os.path.join(home, "kept")) as f:
            self.assertEqual(f.read(), "from the server")
        # The kernel sees neither the server's home nor the server.
        text, r = c.execute("import os\nprint(os.path.exists(%r), os.path.exists(%r))" % (home, self.secret))
        self.assertEqual(text.strip(), "False False")
        # Registered again (a new process, a new sandbox): the home is the same.
        self.register(c, "boxed", probe_params(sandbox={}))
        self.assertEqual(self.probe(c, "boxed", "read", "/home/appuser/kept"), "from the server")

    def test_allowed_dirs_at_their_own_path_read_write_and_env(self):
        shared = tempfile.mkdtemp(prefix="ipybox-h3-allowed-", dir=self.home)
        self.addCleanup(shutil.rmtree, shared, ignore_errors=True)
        with open(os.path.join(shared, "in"), "w") as f:
            f.write("given")
        c = self.client("--approve-tools", "*", env={**os.environ, "H3_TOKEN": "tok-123"})
        self.register(c, "boxed", probe_params(
            sandbox={"allowed_dirs": [shared], "env": {"B": "sandbox env", "TOKEN": "${H3_TOKEN}"}},
            env={"A": "top env", "B": "top"}, cwd=shared))
        self.assertEqual(self.probe(c, "boxed", "read", os.path.join(shared, "in")), "given")
        self.assertEqual(self.probe(c, "boxed", "write", os.path.join(shared, "out")), "written")
        with open(os.path.join(shared, "out")) as f:
            self.assertEqual(f.read(), "from the server")
        self.assertEqual(self.probe(c, "boxed", "cwd", "x"), shared)
        self.assertEqual(self.probe(c, "boxed", "env", "A"), "top env")
        self.assertEqual(self.probe(c, "boxed", "env", "B"), "sandbox env")
        self.assertEqual(self.probe(c, "boxed", "env", "TOKEN"), "tok-123")
        # Only the allowed dir of the home: its sibling, the planted file, is not there.
        self.assertTrue(self.probe(c, "boxed", "read", self.secret).startswith("ERR FileNotFoundError"))

    def test_sandbox_mcp_servers_makes_it_the_default(self):
        config = os.path.join(tempfile.mkdtemp(prefix="ipybox-h3-"), "mcp.json")
        self.addCleanup(shutil.rmtree, os.path.dirname(config), ignore_errors=True)
        with open(config, "w") as f:
            json.dump({"mcpServers": {"cfg": probe_params()}}, f)
        c = self.client("--approve-tools", "*", "--sandbox-mcp-servers", "--mcp-config", config)
        self.assertTrue(self.probe(c, "cfg", "read", self.secret).startswith("ERR FileNotFoundError"))
        self.register(c, "reg", probe_params())
        self.assertEqual(self.probe(c, "reg", "env", "HOME"), "/home/appuser")
        self.assertTrue(self.probe(c, "reg", "read", self.secret).startswith("ERR FileNotFoundError"))
        why = self.refused(c, "out", probe_params(sandbox=False))
        self.assertIn("--sandbox-mcp-servers", why)


def running(marker):
    """Host processes whose command line holds marker (the server, wherever its sandbox is)."""
    out = []
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                if marker.encode() in f.read():
                    out.append(int(p))
        except (OSError, ValueError):
            pass
    return out


class TestLife(SandboxedCase):
    def test_reset_and_the_end_of_the_session_stop_the_sandboxed_server(self):
        marker = "probe-" + uuid.uuid4().hex
        params = {"command": "/usr/bin/python3", "args": ["-c", "#" + marker + PROBE_SERVER], "sandbox": {}}
        c = McpClient("--approve-tools", "*")
        try:
            self.register(c, "boxed", params)
            self.assertTrue(running(marker))
            c.call("reset")
            self.assertTrue(wait_for(lambda: not running(marker), timeout=30), running(marker))
            self.assertEqual(self.probe(c, "boxed", "env", "HOME"), "/home/appuser")  # started again
            self.assertTrue(running(marker))
        finally:
            c.close()
        self.assertTrue(wait_for(lambda: not running(marker), timeout=30), running(marker))


class TestDaemon(SandboxedCase):
    def test_a_session_of_ipyboxd_runs_its_servers_sandboxed(self):
        # The worker is the ipyboxd binary: the sandbox is made by `ipybox`, the same file.
        d = Daemon("--approve-tools", "*")
        self.addCleanup(d.close)
        c = d.client()
        self.addCleanup(c.close)
        self.register(c, "boxed", probe_params(sandbox={}))
        self.assertEqual(self.probe(c, "boxed", "env", "HOME"), "/home/appuser")
        got = self.probe(c, "boxed", "read", self.secret)
        self.assertTrue(got.startswith("ERR FileNotFoundError"), got)


class TestBadParams(SandboxedCase):
    def test_refused_with_the_reason(self):
        c = self.client()
        cases = [
            ({"allowed_dirs": ["relative/dir"]}, "not an absolute path"),
            ({"allowed_dirs": [self.home + "/../etc"]}, "'..'"),
            ({"allowed_dirs": ["/usr/share"]}, "inside the sandbox's own /usr"),
            ({"allowed_dirs": ["/home"]}, "would cover the sandbox's own /home/appuser"),
            ({"allowed_domains": ["exa mple.com"]}, "allowed_domains'[0]"),
            ({"allowed_domains": ["*"]}, "allowed_domains'[0]"),
            ({"allowed_domains": []}, "is empty"),
            ({"allowed_domains": ["${HOST}"]}, "not filled here"),
            ({"env": {"1BAD": "x"}}, "not a variable name"),
            ({"network": True}, "unknown key 'network'"),
            ("yes", "must be true, false or an object"),
        ]
        for sandbox, reason in cases:
            with self.subTest(sandbox=sandbox):
                self.assertIn(reason, self.refused(c, "bad", probe_params(sandbox=sandbox)))
        self.assertIn("for stdio servers", self.refused(c, "bad", {"url": "http://127.0.0.1:9/mcp", "sandbox": {}}))
        self.assertIn("inside one of its", self.refused(c, "bad", probe_params(sandbox={}, cwd=self.home)))
        # Nothing was started for any of them: no home made.
        self.assertFalse(os.path.exists(os.path.join(c.state_dir, "mcp-homes", "bad")))


HOSTS = None


class TestEgress(SandboxedCase):
    @classmethod
    def setUpClass(cls):
        global HOSTS
        why = testhosts.available()
        if why:
            raise unittest.SkipTest(why)
        HOSTS = testhosts.TestHosts(tempfile.mkdtemp(prefix="ipybox-h3-hosts-"))
        HOSTS.start()

    @classmethod
    def tearDownClass(cls):
        if HOSTS:
            HOSTS.stop()
            shutil.rmtree(HOSTS.workdir, ignore_errors=True)

    def test_only_the_allowed_domains(self):
        c = self.client("--approve-tools", "*", wrap=HOSTS.wrap)
        self.register(c, "net", probe_params(sandbox={"allowed_domains": ["a.ipybox.test"]}))
        self.assertEqual(self.probe(c, "net", "fetch", "http://a.ipybox.test/"), "host-a")
        got = self.probe(c, "net", "fetch", "http://b.ipybox.test/")
        self.assertTrue(got.startswith("ERR"), got)
        # The control: the unsandboxed server reaches host B from the host.
        self.register(c, "plain", probe_params())
        self.assertEqual(self.probe(c, "plain", "fetch", "http://b.ipybox.test/"), "host-b")


class TestNpx(SandboxedCase):
    def test_server_everything_from_the_npm_registry(self):
        c = self.client("--approve-tools", "*")
        # Debian 12's Node 18 needs the webcrypto preload; the test tree is not visible inside,
        # so it goes into the server's private home (/home/appuser inside), made beforehand.
        home = os.path.join(c.state_dir, "mcp-homes", "everything")
        os.makedirs(home, mode=0o700)
        shutil.copy(os.path.join(mcp_servers.TS, "webcrypto.cjs"), home)
        params = {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"],
                  "env": {"NODE_OPTIONS": "--require /home/appuser/webcrypto.cjs"},
                  "sandbox": {"allowed_domains": ["registry.npmjs.org"]}}
        r = c.call("register_mcp_server", {"server_name": "everything", "server_params": params}, timeout=300)
        self.assertFalse(r.get("isError"), text_of(r) + "\n" + c.stderr_text())
        self.assertIn("echo", json.loads(r["content"][0]["text"]))
        text, r = c.execute("from mcptools.everything import echo\nprint(echo.run(message='boxed'))", timeout=120)
        self.assertIn("Echo: boxed", text)
        # npm's cache is in the private home.
        self.assertTrue(os.path.isdir(os.path.join(home, ".npm")))


if __name__ == "__main__":
    unittest.main()
