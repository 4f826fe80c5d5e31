"""Cells longer than a client's request timeout: while a call with a progress token runs, ipybox
sends a notifications/progress at least every 10 s even when the cell prints nothing ("still
running, N s", progress increasing), so a client that resets its timeout on progress keeps
waiting. Driven with the official MCP TypeScript SDK (tests/integration/ts/long_cells.mjs, set
up as test_ts_sdk.py does): a 25 s silent cell with a 15 s request timeout, through embedded
`ipybox mcp`, ipyboxd's socket and the `ipybox mcp --connect` bridge; and the control, the same
call without resetTimeoutOnProgress, which times out."""
import json
import os
import re
import shutil
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
CELL_SECONDS = 25
HEARTBEAT = re.compile(r'^still running, (\d+) s$')


class TestLongCells(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.node, _ = mcp_servers.node_tools()  # missing node is a failure, not a skip
        mcp_servers.install_node_packages()
        for name in ('long_cells.mjs', 'unix_transport.mjs'):
            shutil.copyfile(os.path.join(TS, name), os.path.join(NODE_DIR, name))
        self.tmp = tempfile.mkdtemp(prefix='ipybox-long-cells-')
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.env = dict(os.environ, XDG_STATE_HOME=os.path.join(self.tmp, 'state'))
        self.env.pop('NODE_OPTIONS', None)

    def run_node(self, mode, target, args, reset):
        cmd = [self.node, 'long_cells.mjs', mode, target, *args, '--', 'true' if reset else 'false', str(CELL_SECONDS)]
        r = subprocess.run(cmd, cwd=NODE_DIR, env=self.env, capture_output=True, text=True, timeout=300)
        lines = r.stdout.strip().splitlines()
        self.assertEqual(r.returncode, 0, 'long_cells.mjs failed:\n%s\n%s' % (mcp_servers.tail(r.stdout),
                                                                            mcp_servers.tail(r.stderr)))
        self.assertTrue(lines, 'long_cells.mjs printed nothing; stderr:\n' + mcp_servers.tail(r.stderr))
        summary = json.loads(lines[-1])
        summary['stderr'] = mcp_servers.tail(r.stderr, 4000)
        return summary

    def assert_kept_alive(self, s):
        """The call outlived the client's 15 s timeout because heartbeats came while the cell was silent."""
        self.assertIs(s['ok'], True, s)
        self.assertFalse(s['isError'], s)
        self.assertIn('woke', s['text'], s)
        self.assertGreaterEqual(s['elapsed'], CELL_SECONDS, s)
        beats = [p for p in s['progress'] if HEARTBEAT.match(p.get('message', ''))]
        self.assertGreaterEqual(len(beats), 2, s)  # at 10 s and 20 s of a 25 s cell
        for p in beats:
            secs = int(HEARTBEAT.match(p['message']).group(1))
            self.assertEqual(p['_meta']['ipybox/heartbeat']['elapsedSeconds'], secs, p)
        self.assertEqual([int(HEARTBEAT.match(p['message']).group(1)) // 10 for p in beats[:2]], [1, 2], beats)
        values = [p['progress'] for p in s['progress']]
        self.assertEqual(values, sorted(set(values)), 'progress increases: %s' % values)

    def start_daemon(self):
        sock = os.path.join(self.tmp, 'd.sock')
        log_path = os.path.join(self.tmp, 'ipyboxd.log')
        with open(log_path, 'wb') as log:
            daemon = subprocess.Popen([IPYBOXD, '--user', '--socket', sock], env=self.env,
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
            if daemon.poll() is not None or time.monotonic() > deadline:
                with open(log_path, 'rb') as f:
                    self.fail('ipyboxd did not start:\n' + f.read().decode(errors='replace'))
            time.sleep(0.05)
        return sock

    def test_silent_cell_outlives_client_timeout_with_progress(self):
        self.assert_kept_alive(self.run_node('stdio', os.path.abspath(IPYBOX), ['mcp', '--embedded'], True))

    def test_control_without_reset_times_out(self):
        """The same call without resetTimeoutOnProgress: the SDK gives up at 15 s (the test can fail)."""
        s = self.run_node('stdio', os.path.abspath(IPYBOX), ['mcp', '--embedded'], False)
        self.assertIs(s['ok'], False, s)
        self.assertEqual(s['code'], -32001, s)  # the SDK's RequestTimeout
        self.assertIn('timed out', s['error'], s)
        self.assertLess(s['elapsed'], CELL_SECONDS, s)

    def test_heartbeat_through_daemon_socket_and_bridge(self):
        sock = self.start_daemon()
        self.assert_kept_alive(self.run_node('socket', sock, [], True))
        self.assert_kept_alive(self.run_node('stdio', os.path.abspath(IPYBOX), ['mcp', '--connect', sock], True))


if __name__ == '__main__':
    unittest.main()
