"""The MCP client library (mcpclient/) through tests/tools/mcpc_cli, against the reference server
(@modelcontextprotocol/server-everything) over stdio, legacy SSE and Streamable HTTP, and against a
fake server (tests/lib/mcp_servers.py) that hangs, sends too much, sends garbage, dies, asks
questions, forgets sessions and lists hostile tools. Every server is started here and reached on
127.0.0.1 only. node and npm are required (the test fails without them, it does not skip).

mcpc_cli's exit status says what failed: 3 connect, 4 request, 5 ETIMEDOUT, 6 EMSGSIZE,
7 a JSON-RPC error answer, 8 the server or connection gone."""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import mcp_servers  # noqa: E402
from ipybox_test import alive, wait_for  # noqa: E402

MCPC_CLI = os.path.join(mcp_servers.BUILD, "tests", "tools", "mcpc_cli")
EXIT_CONNECT, EXIT_REQUEST, EXIT_TIMEOUT, EXIT_TOO_BIG, EXIT_RPC_ERROR, EXIT_GONE = 3, 4, 5, 6, 7, 8


class Run:
    def __init__(self, r, elapsed):
        self.returncode, self.stdout, self.stderr, self.elapsed = r.returncode, r.stdout, r.stderr, elapsed

    def field(self, name):
        """A "mcpc_cli: NAME: value" line of stderr."""
        for line in self.stderr.splitlines():
            if line.startswith("mcpc_cli: %s: " % name):
                return line.split(": ", 2)[2]
        return None

    def __str__(self):
        return "exit %d after %.2f s\nstdout: %s\nstderr: %s" % (self.returncode, self.elapsed, self.stdout[-3000:],
                                                                  self.stderr[-3000:])


def cli(params, *command, options=(), env=None, timeout=120):
    t0 = time.monotonic()
    r = subprocess.run([MCPC_CLI, *options, json.dumps(params), *command], capture_output=True, text=True,
                       timeout=timeout, env=env)
    return Run(r, time.monotonic() - t0)


class McpClientCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(MCPC_CLI, os.X_OK):
            raise AssertionError("no %s: build it with `make BUILD=%s %s`"
                                 % (MCPC_CLI, os.path.basename(mcp_servers.BUILD), os.path.relpath(MCPC_CLI,
                                                                                                  mcp_servers.ROOT)))

    def ok(self, r):
        self.assertEqual(r.returncode, 0, str(r))
        return json.loads(r.stdout)

    def failed(self, r, code, errno_name, *words):
        self.assertEqual(r.returncode, code, str(r))
        self.assertEqual(r.field("errno"), errno_name, str(r))
        err = r.field("error") or ""
        for w in words:
            self.assertIn(w, err, str(r))
        return err


def text_of(result):
    return "".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")


def loadable(name):
    try:
        ctypes.CDLL(name)
        return True
    except OSError:
        return False


class LibraryPath(McpClientCase):
    """libcurl is loaded after the sandbox ran (at the first server over HTTP): not while
    LD_LIBRARY_PATH has an empty or relative entry, which the loader would look up in the
    working directory (a workspace the sandbox writes, when ipybox is run from it)."""

    def test_not_loaded_from_the_working_directory(self):
        with tempfile.TemporaryDirectory(prefix="mcpc-cwd-") as cwd:
            # What kernel code could have written there: a real library (zlib's), which the loader
            # would take (and run its constructors), then find no curl function in it.
            planted = os.path.join(cwd, "libcurl.so.4")
            with open("/proc/self/maps") as f:
                zlib = next((line.split()[-1] for line in f if "/libz.so" in line), None)
            if zlib is None:
                ctypes.CDLL("libz.so.1")
                with open("/proc/self/maps") as f:
                    zlib = next(line.split()[-1] for line in f if "/libz.so" in line)
            shutil.copy(zlib, planted)
            for lp in (":/nonexistent", "/nonexistent:.", "lib"):
                t0 = time.monotonic()
                r = subprocess.run([MCPC_CLI, json.dumps({"url": "http://127.0.0.1:9/mcp"}), "list"], cwd=cwd,
                                   capture_output=True, text=True, timeout=60, env=dict(os.environ, LD_LIBRARY_PATH=lp))
                err = self.failed(Run(r, time.monotonic() - t0), EXIT_CONNECT, "ELIBACC", "LD_LIBRARY_PATH", lp)
                self.assertNotIn("has no curl_", err)

    def test_absolute_entries_are_searched(self):
        r = cli({"url": "http://127.0.0.1:9/mcp"}, "list", env=dict(os.environ, LD_LIBRARY_PATH="/nonexistent"))
        self.failed(r, EXIT_GONE, "ECONNREFUSED")


@unittest.skipUnless(os.geteuid() == 0, "hiding libcurl takes a mount namespace (root)")
class WithoutLibcurl(McpClientCase):
    """libcurl is loaded at the first server over HTTP (mcpclient/curl_load.c), not linked:
    where it cannot be loaded, that server fails with a sentence naming it; stdio servers work."""

    def hidden(self, params, *command, names=("libcurl.so.4", "libcurl-gnutls.so.4")):
        """mcpc_cli with each libcurl of names it could load (OpenSSL's, GnuTLS's) covered by
        /dev/null."""
        for name in names:
            try:
                ctypes.CDLL(name)
            except OSError:
                pass
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f
                            if any("/" + n.split(".so")[0] + ".so" in line for n in names)})
        self.assertTrue(paths)
        script = 'for p in "$@"; do [ "$p" = -- ] && break; mount --bind /dev/null "$p" || exit 99; shift; done; ' \
                 'shift; exec "$@"'
        t0 = time.monotonic()
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *paths, "--",
                            MCPC_CLI, json.dumps(params), *command], capture_output=True, text=True, timeout=120)
        return Run(r, time.monotonic() - t0)

    def test_an_http_server_fails_with_a_sentence(self):
        for url in ("http://127.0.0.1:9/mcp", "http://127.0.0.1:9/sse"):
            r = self.hidden({"url": url}, "list")
            self.failed(r, EXIT_CONNECT, "ELIBACC", "cannot load libcurl", "libcurl4")

    @unittest.skipUnless(loadable("libcurl-gnutls.so.4"), "no libcurl3-gnutls")
    def test_gnutls_libcurl_when_openssl_one_is_missing(self):
        mcp_servers.install_node_packages()
        with mcp_servers.everything_http("streamableHttp") as srv:
            r = self.hidden({"url": srv.url}, "call", "echo", json.dumps({"message": "x"}), names=("libcurl.so.4",))
            self.assertEqual(text_of(self.ok(r)), "Echo: x")

    def test_a_stdio_server_does_not_need_it(self):
        mcp_servers.install_node_packages()
        r = self.hidden(mcp_servers.everything_stdio_params(), "list")
        self.assertEqual(r.returncode, 0, str(r))
        self.assertIn("echo", [t["name"] for t in json.loads(r.stdout)])


class TestEverything(McpClientCase):
    """server-everything, the MCP reference server, over each transport."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        mcp_servers.install_node_packages()

    def check_server(self, params):
        listing = self.ok(cli(params, "list", options=["--meta"]))
        self.assertEqual(listing["server"], "mcp-servers/everything")
        self.assertEqual(listing["protocolVersion"], "2025-06-18")
        self.assertEqual(listing["malformed"], 0)
        names = [t["name"] for t in listing["result"]]
        for want in ("echo", "get-sum", "get-structured-content", "get-env"):
            self.assertIn(want, names)
        for t in listing["result"]:
            self.assertIsInstance(t.get("inputSchema"), dict, t)

        r = self.ok(cli(params, "call", "echo", json.dumps({"message": "hello \u2713 \"quoted\"\n"})))
        self.assertEqual(text_of(r), "Echo: hello \u2713 \"quoted\"\n")
        self.assertNotIn("isError", r)

        r = self.ok(cli(params, "call", "get-sum", json.dumps({"a": 2, "b": 3.5})))
        self.assertEqual(text_of(r), "The sum of 2 and 3.5 is 5.5.")

        r = self.ok(cli(params, "call", "get-structured-content", json.dumps({"location": "Chicago"})))
        sc = r["structuredContent"]
        self.assertEqual(set(sc), {"temperature", "conditions", "humidity"})
        self.assertEqual(json.loads(text_of(r)), sc)

        # A tool's failure is a result with isError, not an error of the client.
        r = self.ok(cli(params, "call", "get-sum", json.dumps({"a": 1, "b": "x"})))
        self.assertIs(r.get("isError"), True, r)
        self.assertIn("get-sum", text_of(r))
        r = self.ok(cli(params, "call", "no-such-tool"))
        self.assertIs(r.get("isError"), True, r)

        # Progress notifications arrive before the answer and are ignored.
        r = self.ok(cli(params, "call", "trigger-long-running-operation", json.dumps({"duration": 0.3, "steps": 3})))
        self.assertIn("completed", text_of(r))

    def test_stdio(self):
        self.check_server(mcp_servers.everything_stdio_params())

    def test_sse(self):
        with mcp_servers.everything_http("sse") as srv:
            self.check_server({"url": srv.url})

    def test_streamable_http(self):
        with mcp_servers.everything_http("streamableHttp") as srv:
            self.check_server({"url": srv.url})
            # close ends the session with DELETE
            self.assertTrue(wait_for(lambda: "session termination request" in srv.log(), 5), srv.log())

    def test_streamable_http_type_and_headers(self):
        """An explicit type, and configured headers (placeholders filled) on every request."""
        with mcp_servers.everything_http("streamableHttp") as srv:
            env = dict(os.environ, MCPC_IT_SECRET="s3cr3t")
            params = {"type": "streamable_http", "url": srv.url, "headers": {"Authorization": "Bearer ${MCPC_IT_SECRET}"}}
            r = self.ok(cli(params, "call", "echo", json.dumps({"message": "x"}), env=env))
            self.assertEqual(text_of(r), "Echo: x")

    def test_stdio_environment(self):
        """The server's environment: a few host variables, then "env" with ${VAR} filled from the host."""
        env = dict(os.environ, MCPC_IT_SECRET="s3cr3t", MCPC_IT_HOST_ONLY="not for the server")
        params = mcp_servers.everything_stdio_params(
            env={"MCPC_IT_TOKEN": "Bearer ${MCPC_IT_SECRET}", "MCPC_IT_PLAIN": "a $b ${MCPC_IT_SECRET}${MCPC_IT_SECRET}"})
        r = self.ok(cli(params, "call", "get-env", env=env))
        server_env = json.loads(text_of(r))
        self.assertEqual(server_env.get("MCPC_IT_TOKEN"), "Bearer s3cr3t")
        self.assertEqual(server_env.get("MCPC_IT_PLAIN"), "a $b s3cr3ts3cr3t")
        self.assertNotIn("MCPC_IT_HOST_ONLY", server_env)
        self.assertNotIn("MCPC_IT_SECRET", server_env)
        self.assertEqual(server_env.get("PATH"), os.environ.get("PATH"))

    def test_unset_variable(self):
        env = dict(os.environ)
        env.pop("MCPC_IT_UNSET", None)
        r = cli(mcp_servers.everything_stdio_params(env={"TOKEN": "${MCPC_IT_UNSET}"}), "list", env=env)
        self.failed(r, EXIT_CONNECT, "ENOENT", "MCPC_IT_UNSET is not set", "'env' TOKEN")


class FakeCase(McpClientCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ipybox-mcpc-test-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.tmp]))
        self.pidfile = os.path.join(self.tmp, "server.pid")

    def stdio(self, *options):
        return mcp_servers.fake_stdio_params("--pid-file", self.pidfile, *options)

    def server_pid(self):
        with open(self.pidfile) as f:
            return int(f.read())

    def assert_gone(self, pid):
        self.assertTrue(wait_for(lambda: not alive(pid), 5), "process %d is still running" % pid)


class TestFakeStdio(FakeCase):
    def test_pages_and_server_requests(self):
        r = self.ok(cli(self.stdio(), "list"))
        self.assertEqual([t["name"] for t in r], ["echo", "tool_0_1", "tool_1_0", "tool_1_1", "tool_2_0", "tool_2_1"])
        r = self.ok(cli(self.stdio(), "call", "ask"))
        ping, other = r["structuredContent"]["answers"]
        self.assertEqual(ping, {"jsonrpc": "2.0", "id": "p1", "result": {}})
        self.assertEqual(other["id"], 77)
        self.assertEqual(other["error"]["code"], -32601)
        self.assert_gone(self.server_pid())

    def test_hang(self):
        r = cli(self.stdio(), "call", "hang", options=["--call-ms", "1500"])
        self.failed(r, EXIT_TIMEOUT, "ETIMEDOUT", "tools/call hang", "no answer within 1500 ms")
        self.assertEqual(r.field("alive"), "false")
        took = float(r.field("elapsed").split()[0])
        self.assertGreaterEqual(took, 1490)
        self.assertLess(took, 2000, str(r))
        # closing: stdin closed, 2 s, SIGTERM
        self.assertLess(r.elapsed, 1.5 + 2 + 2.5, str(r))
        self.assert_gone(self.server_pid())

    def test_huge(self):
        r = cli(self.stdio(), "call", "huge", options=["--max-message", "1000000"])
        self.failed(r, EXIT_TOO_BIG, "EMSGSIZE", "longer than the limit of 1000000 bytes")
        self.assertLess(r.elapsed, 5, str(r))  # killed, not closed gently
        self.assert_gone(self.server_pid())

    def test_malformed(self):
        r = cli(self.stdio(), "call", "malformed", options=["--meta"])
        self.failed(r, EXIT_REQUEST, "EPROTO", "tools/call malformed", "the result is not an object")
        r = cli(self.stdio(), "call", "garbage")
        self.failed(r, EXIT_REQUEST, "EPROTO", "malformed messages and no response")
        self.assertLess(r.elapsed, 10, str(r))

    def test_dies(self):
        r = cli(self.stdio(), "call", "exit")
        self.failed(r, EXIT_GONE, "EPIPE", "tools/call exit", "exited with status 3")
        self.assert_gone(self.server_pid())

    def test_nothing_left_behind(self):
        """A child the server started (in its process group) goes with it."""
        self.ok(cli(self.stdio(), "call", "spawn"))
        with open(self.pidfile + ".child") as f:
            child = int(f.read())
        self.assert_gone(self.server_pid())
        self.assert_gone(child)

    def test_crafted_tools(self):
        r = self.ok(cli(self.stdio("--tools", "crafted"), "list"))
        self.assertEqual(r, mcp_servers.CRAFTED_TOOLS)  # passed on as they are: toolgen judges them
        r = cli(self.stdio("--tools", "notarray"), "list")
        self.failed(r, EXIT_REQUEST, "EPROTO", "no array 'tools'")

    def test_unknown_version(self):
        r = cli(self.stdio("--version", "2030-01-01"), "list")
        self.failed(r, EXIT_CONNECT, "EPROTONOSUPPORT", "2030-01-01")
        self.assert_gone(self.server_pid())

    def test_missing_command(self):
        r = cli({"command": "no-such-mcp-server-command"}, "list")
        self.failed(r, EXIT_CONNECT, "ENOENT", "'no-such-mcp-server-command' was not found on PATH")


class TestFakeKinds(McpClientCase):
    """The fake servers other suites use (mcp_servers.fake_server_params) behave as they say."""

    def test_errors(self):
        with mcp_servers.fake_server_params("errors") as p:
            self.assertEqual([t["name"] for t in self.ok(cli(p, "list"))], ["fail", "hang", "ok"])
            r = self.ok(cli(p, "call", "fail"))
            self.assertIs(r.get("isError"), True)
            self.assertEqual(text_of(self.ok(cli(p, "call", "ok"))), "ok")
            self.failed(cli(p, "call", "hang", options=["--call-ms", "500"]), EXIT_TIMEOUT, "ETIMEDOUT")

    def test_misbehave(self):
        with mcp_servers.fake_server_params("misbehave") as p:
            self.assertEqual([t["name"] for t in self.ok(cli(p, "list"))], ["huge", "malformed", "hang", "ok"])
            self.failed(cli(p, "call", "huge"), EXIT_TOO_BIG, "EMSGSIZE", "16777216")  # the default limit
            self.failed(cli(p, "call", "malformed"), EXIT_REQUEST, "EPROTO")
            self.assertEqual(text_of(self.ok(cli(p, "call", "ok"))), "ok")

    def test_hostile(self):
        with tempfile.TemporaryDirectory() as tmp:
            canary = os.path.join(tmp, "canary")
            with mcp_servers.fake_server_params("hostile", canary=canary) as p:
                tools = self.ok(cli(p, "list"))
                self.assertIn("innocent", [t["name"] for t in tools])
                self.assertIn(canary, json.dumps(tools))
                self.assertEqual(text_of(self.ok(cli(p, "call", "innocent", '{"text": "a", "class": "b"}'))), "ok")
            self.assertFalse(os.path.exists(canary))


class TestFakeHttp(FakeCase):
    """The fake server over Streamable HTTP."""

    def test_pages_headers_and_server_requests(self):
        with mcp_servers.fake_http("http") as srv:
            r = self.ok(cli({"url": srv.url}, "list"))
            self.assertEqual(len(r), 6)
            env = dict(os.environ, MCPC_IT_SECRET="s3cr3t")
            params = {"url": srv.url, "headers": {"X-Api-Key": "k-${MCPC_IT_SECRET}", "X-Plain": "$1"}}
            r = self.ok(cli(params, "call", "echo", json.dumps({"n": 1}), env=env))
            headers = r["structuredContent"]["headers"]
            self.assertEqual(headers["x-api-key"], "k-s3cr3t")
            self.assertEqual(headers["x-plain"], "$1")
            self.assertEqual(headers["mcp-protocol-version"], "2025-06-18")
            self.assertTrue(headers["mcp-session-id"].startswith("s-"))
            self.assertIn("text/event-stream", headers["accept"])
            # the server asks (ping, sampling) in its event stream; the answers are POSTed back
            r = self.ok(cli({"url": srv.url}, "call", "ask"))
            ping, other = r["structuredContent"]["answers"]
            self.assertEqual(ping, {"jsonrpc": "2.0", "id": "p1", "result": {}})
            self.assertEqual(other["error"]["code"], -32601)
            self.assertIn("DELETE session", srv.log())

    def test_session_expiry(self):
        with mcp_servers.fake_http("http") as srv:
            r = self.ok(cli({"url": srv.url}, "call", "expire", options=["--repeat", "2"]))
            self.assertEqual(r["structuredContent"]["initializes"], 2)

    def test_hang(self):
        with mcp_servers.fake_http("http") as srv:
            r = cli({"url": srv.url}, "call", "hang", options=["--call-ms", "1500"])
            self.failed(r, EXIT_TIMEOUT, "ETIMEDOUT", "no answer within 1500 ms")
            took = float(r.field("elapsed").split()[0])
            self.assertGreaterEqual(took, 1490)
            self.assertLess(took, 2000, str(r))
            self.assertLess(r.elapsed, 5, str(r))

    def test_huge(self):
        with mcp_servers.fake_http("http") as srv:
            for tool in ("huge", "huge_event"):  # a JSON body, and an event in a stream
                r = cli({"url": srv.url}, "call", tool, options=["--max-message", "1000000"])
                self.failed(r, EXIT_TOO_BIG, "EMSGSIZE", "longer than the limit of 1000000 bytes")

    def test_malformed(self):
        with mcp_servers.fake_http("http") as srv:
            r = cli({"url": srv.url}, "call", "malformed")
            self.failed(r, EXIT_REQUEST, "EPROTO", "the result is not an object")
            r = cli({"url": srv.url}, "call", "garbage", options=["--call-ms", "20000"])
            self.failed(r, EXIT_REQUEST, "EPROTO", "malformed messages")
            self.assertLess(r.elapsed, 10, str(r))

    def test_dies(self):
        with mcp_servers.fake_http("http") as srv:
            r = cli({"url": srv.url}, "call", "exit")
            self.failed(r, EXIT_REQUEST, "EPROTO", "ended before the response")
            self.assertTrue(wait_for(lambda: srv.proc.poll() is not None, 5))
            r = cli({"url": srv.url}, "list")
            self.failed(r, EXIT_GONE, "ECONNREFUSED", "initialize", "Couldn't connect")

    def test_flood_while_answering(self):
        """A server that asks, then sends 64 MiB of notifications: the answer goes out while the
        stream is read, and the notifications are dropped as they come (memory stays small)."""
        with mcp_servers.fake_http("http") as srv:
            r = self.ok(cli({"url": srv.url}, "call", "flood_ask", options=["--meta", "--call-ms", "60000"]))
            self.assertEqual(r["result"]["structuredContent"]["answers"][0]["result"], {}, r)
            self.assertLess(r["maxrss_kb"], 48 * 1024, r)
            self.assertIn("flood of", srv.log())

    def test_flood_not_read(self):
        """A server that floods its stream and accepts nothing until the flood is out: the stream
        is paused once 1 MiB waits unread, so memory stays small, and the connect limit ends it."""
        with mcp_servers.fake_http("http", "--flood-init") as srv:
            r = cli({"url": srv.url}, "list", options=["--connect-ms", "3000"])
            self.failed(r, EXIT_TIMEOUT, "ETIMEDOUT", "notifications/initialized", "no answer within 3000 ms")
            self.assertLess(int(r.field("maxrss").split()[0]), 48 * 1024, str(r))
            self.assertLess(r.elapsed, 3 + 2 + 2, str(r))  # the limit, and DELETE at close (2 s at most)

    def test_redirect_not_followed(self):
        with mcp_servers.fake_http("http") as target:
            with mcp_servers.fake_http("http", "--redirect", target.url) as srv:
                r = cli({"url": srv.url}, "list")
                self.failed(r, EXIT_CONNECT, "EPROTO", "HTTP 307", "redirects are not followed")
            self.assertNotIn("initialize", target.log())

    def test_crafted_tools(self):
        with mcp_servers.fake_http("http", "--tools", "crafted") as srv:
            self.assertEqual(self.ok(cli({"url": srv.url}, "list")), mcp_servers.CRAFTED_TOOLS)


class TestFakeSse(FakeCase):
    """The fake server over the legacy HTTP+SSE transport."""

    def test_list_and_call(self):
        with mcp_servers.fake_http("sse") as srv:
            r = self.ok(cli({"url": srv.url, "headers": {"X-Api-Key": "k"}}, "list"))
            self.assertEqual(len(r), 6)
            r = self.ok(cli({"url": srv.url, "headers": {"X-Api-Key": "k"}}, "call", "echo", '{"a":[1]}'))
            self.assertEqual(r["structuredContent"]["arguments"], {"a": [1]})
            self.assertEqual(r["structuredContent"]["headers"]["x-api-key"], "k")

    def test_hang_huge_malformed_dies(self):
        with mcp_servers.fake_http("sse") as srv:
            r = cli({"url": srv.url}, "call", "hang", options=["--call-ms", "1500"])
            self.failed(r, EXIT_TIMEOUT, "ETIMEDOUT", "no answer within 1500 ms")
            self.assertLess(float(r.field("elapsed").split()[0]), 2000, str(r))
            r = cli({"url": srv.url}, "call", "huge", options=["--max-message", "1000000"])
            self.failed(r, EXIT_TOO_BIG, "EMSGSIZE", "longer than the limit of 1000000 bytes")
            r = cli({"url": srv.url}, "call", "malformed")
            self.failed(r, EXIT_REQUEST, "EPROTO", "the result is not an object")
            r = cli({"url": srv.url}, "call", "exit")
            self.failed(r, EXIT_GONE, "ECONNRESET", "ended its SSE stream")

    def test_endpoint_elsewhere_refused(self):
        """An endpoint event naming another port, host or scheme is refused before anything is sent
        (all on loopback port 1, in case it were not)."""
        for endpoint, shown in (("http://127.0.0.1:1/message", "http://127.0.0.1:1,"),
                                ("http://localhost:1/message", "http://localhost:1,"),
                                ("https://127.0.0.1:1/message", "https://127.0.0.1:1,")):
            with mcp_servers.fake_http("sse", "--endpoint", endpoint) as srv:
                r = cli({"url": srv.url}, "list")
                self.failed(r, EXIT_CONNECT, "EPROTO", "endpoint event names " + shown, "refused")
                self.assertNotIn("POST", srv.log())


if __name__ == "__main__":
    unittest.main()
