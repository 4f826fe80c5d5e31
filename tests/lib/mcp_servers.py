"""MCP servers for the tests, all on this machine.

* The npm packages the tests need (tests/integration/ts/package.json: the MCP TypeScript SDK and
  @modelcontextprotocol/server-everything) installed into $BUILD/node, never into the source tree:
  package.json is copied there and `npm install` runs only when node_modules is missing or
  package.json changed (under a lock, so that test processes do not install at once). node and npm
  are required: without them the tests that need them fail rather than skip.
* server-everything: everything_stdio_params() runs it over stdio; everything_http("sse" or
  "streamableHttp") starts it on a free port and yields its URL on 127.0.0.1. It listens on every
  interface; tests only ever connect to 127.0.0.1. node runs it with ts/webcrypto.cjs preloaded,
  so that it runs on Node.js 18 too.
* A small fake MCP server (fake_mcp_server.py, run as this file's `fake` command) that
  misbehaves on request, over stdio, Streamable HTTP or legacy SSE on 127.0.0.1:
  fake_stdio_params(...) and fake_http(...).

Standard library only (Debian's /usr/bin/python3).
"""
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
TS = os.path.join(ROOT, "tests", "integration", "ts")
NODE_DIR = os.path.join(BUILD, "node")
# Records the package.json that node_modules was installed from.
STAMP = os.path.join(NODE_DIR, "node_modules", ".ipybox-package.json")
EVERYTHING_DIST = os.path.join(NODE_DIR, "node_modules", "@modelcontextprotocol", "server-everything", "dist",
                               "index.js")
# node's arguments for server-everything: a preload that gives Node.js 18 (Debian 12's) the global
# `crypto` that the SDK's Streamable HTTP server uses (ts/webcrypto.cjs; nothing on newer Node.js).
EVERYTHING_ARGS = ["--require", os.path.join(TS, "webcrypto.cjs"), EVERYTHING_DIST]
PYTHON = "/usr/bin/python3"
THIS = os.path.abspath(__file__)


class NodeSetupError(AssertionError):
    """node, npm or the npm install is missing or failed (a test failure, not an error or a skip)."""


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def tail(text, n=20000):
    return text if len(text) <= n else "[... %d chars cut ...]\n" % (len(text) - n) + text[-n:]


def node_tools():
    """(node, npm) paths; NodeSetupError when either is missing."""
    node, npm = shutil.which("node"), shutil.which("npm")
    missing = [name for name, p in (("node", node), ("npm", npm)) if not p]
    if missing:
        raise NodeSetupError("%s not found on PATH: these tests need Node.js (>= 18) and npm; install them with "
                             "the test dependency script" % " and ".join(missing))
    return node, npm


def install_node_packages():
    """Installs tests/integration/ts/package.json into $BUILD/node when needed; returns NODE_DIR."""
    _, npm = node_tools()
    os.makedirs(NODE_DIR, exist_ok=True)
    pkg = _read(os.path.join(TS, "package.json"))
    if pkg is None:
        raise NodeSetupError("missing %s" % os.path.join(TS, "package.json"))
    with open(os.path.join(NODE_DIR, ".install.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _read(os.path.join(NODE_DIR, "package.json")) != pkg:
            with open(os.path.join(NODE_DIR, "package.json"), "wb") as f:
                f.write(pkg)
        if os.path.isdir(os.path.join(NODE_DIR, "node_modules")) and _read(STAMP) == pkg:
            return NODE_DIR
        r = subprocess.run([npm, "install", "--no-audit", "--no-fund"], cwd=NODE_DIR, capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            raise NodeSetupError("npm install in %s failed (exit %d):\n%s\n%s"
                                 % (NODE_DIR, r.returncode, tail(r.stdout), tail(r.stderr)))
        with open(STAMP, "wb") as f:
            f.write(pkg)
    return NODE_DIR


def everything_stdio_params(env=None):
    """Params for server-everything over stdio (node found on PATH by the client)."""
    install_node_packages()
    p = {"command": "node", "args": [*EVERYTHING_ARGS, "stdio"]}
    if env is not None:
        p["env"] = env
    return p


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(proc, port, log_path, what, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise AssertionError("%s exited with %d before listening:\n%s"
                                 % (what, proc.returncode, tail((_read(log_path) or b"").decode(errors="replace"))))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("%s did not accept connections on 127.0.0.1:%d within %d s:\n%s"
                                 % (what, port, timeout, tail((_read(log_path) or b"").decode(errors="replace"))))
        time.sleep(0.05)


def _stop(proc):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    # anything it started in its group
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class Server:
    """A server process the tests started: url, pid, and its log so far."""

    def __init__(self, proc, url, log_path):
        self.proc, self.url, self.log_path = proc, url, log_path

    @property
    def pid(self):
        return self.proc.pid

    def log(self):
        return (_read(self.log_path) or b"").decode(errors="replace")


@contextlib.contextmanager
def everything_http(transport):
    """server-everything over "sse" or "streamableHttp" on a free port; yields a Server whose url
    is on 127.0.0.1 (/sse or /mcp). Killed (its process group) afterwards."""
    if transport not in ("sse", "streamableHttp"):
        raise ValueError("transport must be 'sse' or 'streamableHttp'")
    node, _ = node_tools()
    install_node_packages()
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="ipybox-everything-")
    log_path = os.path.join(tmp, "server.log")
    env = dict(os.environ, PORT=str(port))
    env.pop("NODE_OPTIONS", None)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([node, *EVERYTHING_ARGS, transport], cwd=NODE_DIR, env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_listening(proc, port, log_path, "server-everything (%s)" % transport)
        path = "/sse" if transport == "sse" else "/mcp"
        yield Server(proc, "http://127.0.0.1:%d%s" % (port, path), log_path)
    finally:
        _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


def fake_stdio_params(*options, env=None):
    """Params running the fake server over stdio with these options (see fake_main())."""
    p = {"command": PYTHON, "args": [THIS, "fake", "--transport", "stdio", *options]}
    if env is not None:
        p["env"] = env
    return p


def read_events(path):
    """The lines a fake server started with --events path wrote so far (a list of dicts)."""
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


@contextlib.contextmanager
def fake_server_params(kind, canary=None):
    """Params for a fake stdio server of a kind, for tests of the whole tool-calling path:
      "errors"     tools fail (an isError result), hang (never answers), ok (answers "ok")
      "misbehave"  tools huge (a 24 MiB answer, over the client's default limit), malformed
                   (garbage, then a result that is not an object), hang, ok
      "hostile"    a tool list crafted to inject code into generated Python: names, titles,
                   descriptions, property names, defaults and enums carrying code that would
                   create `canary` (a host path) and /app/pwned if it ever ran; its tools answer "ok"
    A context manager, so that a kind needing files or processes can clean up after."""
    if kind not in ("errors", "misbehave", "hostile"):
        raise ValueError("unknown fake server kind %r" % kind)
    options = ["--tools", kind]
    if kind == "misbehave":
        options += ["--huge-bytes", str(24 << 20)]
    if canary:
        options += ["--canary", canary]
    yield fake_stdio_params(*options)


@contextlib.contextmanager
def fake_http(transport="http", *options):
    """The fake server over "http" (Streamable HTTP at /mcp) or "sse" (legacy, /sse) on
    127.0.0.1; yields a Server. The server writes what it saw to its log."""
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="ipybox-fake-mcp-")
    log_path = os.path.join(tmp, "server.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([PYTHON, THIS, "fake", "--transport", transport, "--port", str(port), *options],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        _wait_listening(proc, port, log_path, "the fake MCP server (%s)" % transport)
        path = "/sse" if transport == "sse" else "/mcp"
        yield Server(proc, "http://127.0.0.1:%d%s" % (port, path), log_path)
    finally:
        _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


# The fake server itself is fake_mcp_server.py; this file stays its command (tests and the C
# suites' fixtures run `mcp_servers.py fake ...`).
from fake_mcp_server import CRAFTED_TOOLS, fake_main  # noqa: E402,F401


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "fake":
        fake_main(sys.argv[2:])
    else:
        print("usage: mcp_servers.py fake [options]  (see --help)", file=sys.stderr)
        sys.exit(2)
