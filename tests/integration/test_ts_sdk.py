"""Drives `ipybox mcp` with the official MCP TypeScript SDK (@modelcontextprotocol/sdk), and
`ipyboxd --user --socket` with the same SDK over a unix-socket transport.

The node tests are tests/integration/ts/sdk_test.mjs and ts/socket_test.mjs. Their npm dependencies
are installed into $BUILD/node (never into the source tree) by tests/lib/mcp_servers.py: package.json is
copied there and `npm install` runs only when node_modules is missing or package.json changed; the .mjs
files are copied there too and node runs with that directory as its working directory so that the imports
resolve. node and npm are required (the test dependency script installs them): without them the test
fails rather than skips."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
from ipybox_test import IPYBOX, require_sandbox  # noqa: E402
import mcp_servers  # noqa: E402

IPYBOXD = os.path.join(os.path.dirname(os.path.abspath(IPYBOX)), 'ipyboxd')
TS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'ts')
NODE_DIR = mcp_servers.NODE_DIR


def _read(path):
    try:
        with open(path, 'rb') as f:
            return f.read()
    except FileNotFoundError:
        return None


_tail = mcp_servers.tail


class TestTypeScriptSdk(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        # node and npm missing is a failure (NodeSetupError is an AssertionError), not a skip.
        self.node, self.npm = mcp_servers.node_tools()

    def _install(self):
        mcp_servers.install_node_packages()

    def test_mcp_typescript_sdk_client(self):
        self._install()
        shutil.copyfile(os.path.join(TS, 'sdk_test.mjs'), os.path.join(NODE_DIR, 'sdk_test.mjs'))
        env = dict(os.environ, IPYBOX=os.path.abspath(IPYBOX))
        env.pop('NODE_OPTIONS', None)
        try:
            r = subprocess.run([self.node, '--test', '--test-reporter=spec', 'sdk_test.mjs'], cwd=NODE_DIR, env=env,
                               capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b'').decode(errors='replace') if isinstance(e.stdout, bytes) else (e.stdout or '')
            self.fail('node --test did not finish within 600 s:\n' + _tail(out))
        if r.returncode != 0:
            self.fail('node --test sdk_test.mjs failed (exit %d)\n--- stdout ---\n%s\n--- stderr ---\n%s'
                      % (r.returncode, _tail(r.stdout), _tail(r.stderr)))

    def test_mcp_typescript_sdk_over_daemon_socket(self):
        """ipyboxd --user --socket: the SDK's Client over a unix-socket Transport (socket_test.mjs) with
        the SDK's stdio framing; a cell's state is kept, ipybox/listSessions shows the connection's
        private session attached; the daemon stops on SIGTERM with status 0."""
        self.assertTrue(os.access(IPYBOXD, os.X_OK), 'no ipyboxd binary at %s' % IPYBOXD)
        self._install()
        for name in ('socket_test.mjs', 'unix_transport.mjs'):
            shutil.copyfile(os.path.join(TS, name), os.path.join(NODE_DIR, name))
        tmp = tempfile.mkdtemp(prefix='ipybox-ts-socket-')
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        sock = os.path.join(tmp, 'd.sock')
        state = os.path.join(tmp, 'state')
        os.mkdir(state)
        log_path = os.path.join(tmp, 'ipyboxd.log')
        env = dict(os.environ, XDG_STATE_HOME=state)
        with open(log_path, 'wb') as log:
            daemon = subprocess.Popen([IPYBOXD, '--user', '--socket', sock], env=env, stdin=subprocess.DEVNULL,
                                      stdout=log, stderr=subprocess.STDOUT)

        def stop():  # runs before the temporary directory goes (cleanups run last in, first out)
            if daemon.poll() is None:
                daemon.terminate()  # SIGTERM: the daemon closes its sessions and their workers
                try:
                    daemon.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    daemon.kill()
                    daemon.wait(timeout=10)
        self.addCleanup(stop)

        def daemon_log():
            return _tail(_read(log_path).decode(errors='replace'))

        deadline = time.monotonic() + 20
        while not os.path.exists(sock):
            if daemon.poll() is not None:
                self.fail('ipyboxd exited with %d before listening:\n%s' % (daemon.returncode, daemon_log()))
            if time.monotonic() > deadline:
                self.fail('ipyboxd did not create %s within 20 s:\n%s' % (sock, daemon_log()))
            time.sleep(0.05)

        node_env = dict(os.environ)
        node_env.pop('NODE_OPTIONS', None)
        try:
            r = subprocess.run([self.node, 'socket_test.mjs', sock], cwd=NODE_DIR, env=node_env,
                               capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b'').decode(errors='replace') if isinstance(e.stdout, bytes) else (e.stdout or '')
            self.fail('node socket_test.mjs did not finish within 300 s:\n%s\n--- ipyboxd ---\n%s'
                      % (_tail(out), daemon_log()))
        if r.returncode != 0:
            self.fail('node socket_test.mjs failed (exit %d)\n--- stdout ---\n%s\n--- stderr ---\n%s\n'
                      '--- ipyboxd ---\n%s' % (r.returncode, _tail(r.stdout), _tail(r.stderr), daemon_log()))
        lines = r.stdout.strip().splitlines()
        self.assertTrue(lines, 'socket_test.mjs printed nothing; stderr:\n' + _tail(r.stderr))
        summary = json.loads(lines[-1])
        self.assertIs(summary.get('ok'), True, summary)
        self.assertEqual(summary['server']['name'], 'ipybox', summary)
        self.assertIn('execute_ipython_cell', summary['tools'], summary)
        self.assertEqual([c['code'] for c in summary['cells']], ['x = 6 * 7', 'print(x)'], summary)
        self.assertEqual(summary['cells'][1]['text'].strip(), '42', summary)
        self.assertEqual(summary['sessionsBefore'], [], summary)
        self.assertEqual(len(summary['sessions']), 1, summary)
        session = summary['sessions'][0]
        self.assertIs(session['attached'], True, summary)
        self.assertIs(session['anonymous'], True, summary)
        self.assertEqual(session['clients'], 1, summary)

        daemon.send_signal(signal.SIGTERM)
        try:
            code = daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.fail('ipyboxd did not exit within 20 s of SIGTERM:\n' + daemon_log())
        self.assertEqual(code, 0, 'ipyboxd exited with %d after SIGTERM:\n%s' % (code, daemon_log()))


    def _tools_test(self, mode, target):
        """Runs tools_test.mjs (register server-everything, one cell calling two of its tools in a
        loop, each call approved or declined by the SDK client's elicitation handler)."""
        for name in ('tools_test.mjs', 'unix_transport.mjs'):
            shutil.copyfile(os.path.join(TS, name), os.path.join(NODE_DIR, name))
        params = mcp_servers.everything_stdio_params()
        node_env = dict(os.environ)
        node_env.pop('NODE_OPTIONS', None)
        r = subprocess.run([self.node, 'tools_test.mjs', mode, target, json.dumps(params)], cwd=NODE_DIR,
                           env=node_env, capture_output=True, text=True, timeout=400)
        lines = r.stdout.strip().splitlines()
        self.assertEqual(r.returncode, 0, 'tools_test.mjs %s failed:\n%s\n%s' % (mode, _tail(r.stdout), _tail(r.stderr)))
        summary = json.loads(lines[-1])
        self.assertIs(summary.get('ok'), True, summary)
        self.assertIn('get_structured_content', summary['modules'])
        # Three echo calls and one get-sum, each put to the client before it ran.
        self.assertEqual(len(summary['asked']), 4, summary)
        self.assertEqual(sum("'echo'" in m for m in summary['asked']), 3, summary)
        self.assertIn("['Echo: yes-1', 'rejected no-2', 'Echo: yes-3', 'The sum of 20 and 22 is 42.']",
                      summary['text'], summary)

    def test_tool_calls_approved_by_an_sdk_client(self):
        """`ipybox mcp --embedded`: the SDK client's elicitation handler approves or declines the
        kernel's tool calls."""
        self._install()
        tmp = tempfile.mkdtemp(prefix='ipybox-ts-tools-')
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        old = os.environ.get('XDG_STATE_HOME')
        os.environ['XDG_STATE_HOME'] = tmp
        try:
            self._tools_test('stdio', os.path.abspath(IPYBOX))
        finally:
            if old is None:
                del os.environ['XDG_STATE_HOME']
            else:
                os.environ['XDG_STATE_HOME'] = old

    def test_tool_calls_approved_by_an_sdk_client_through_the_daemon(self):
        """The same through `ipyboxd --user`: the worker's questions reach the client whose cell runs."""
        self._install()
        tmp = tempfile.mkdtemp(prefix='ipybox-ts-tools-d-')
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        sock = os.path.join(tmp, 'd.sock')
        os.mkdir(os.path.join(tmp, 'state'))
        log_path = os.path.join(tmp, 'ipyboxd.log')
        with open(log_path, 'wb') as log:
            daemon = subprocess.Popen([IPYBOXD, '--user', '--socket', sock],
                                      env=dict(os.environ, XDG_STATE_HOME=os.path.join(tmp, 'state')),
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

        def stop():
            if daemon.poll() is None:
                daemon.terminate()
                try:
                    daemon.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    daemon.kill()
                    daemon.wait()
        self.addCleanup(stop)
        deadline = time.monotonic() + 20
        while not os.path.exists(sock):
            self.assertIsNone(daemon.poll(), _tail(_read(log_path).decode(errors='replace')))
            self.assertLess(time.monotonic(), deadline, 'ipyboxd did not listen within 20 s')
            time.sleep(0.05)
        try:
            self._tools_test('socket', sock)
        except AssertionError as e:
            raise AssertionError('%s\n--- ipyboxd ---\n%s' % (e, _tail(_read(log_path).decode(errors='replace'))))


if __name__ == '__main__':
    unittest.main()
