"""Drives `ipybox mcp` with the official MCP TypeScript SDK (@modelcontextprotocol/sdk).

The node test is tests/integration/ts/sdk_test.mjs. Its npm dependencies are installed into
$BUILD/node (never into the source tree): package.json and sdk_test.mjs are copied there, `npm install`
runs only when node_modules is missing or package.json changed, and node runs with that directory as
its working directory so that the imports resolve. node and npm are required (the test dependency
script installs them): without them the test fails rather than skips."""
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
from ipybox_test import IPYBOX, BUILD, require_sandbox  # noqa: E402

TS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'ts')
NODE_DIR = os.path.join(BUILD, 'node')
# Records the package.json that node_modules was installed from.
STAMP = os.path.join(NODE_DIR, 'node_modules', '.ipybox-package.json')


def _read(path):
    try:
        with open(path, 'rb') as f:
            return f.read()
    except FileNotFoundError:
        return None


def _tail(text, n=20000):
    return text if len(text) <= n else '[... %d chars cut ...]\n' % (len(text) - n) + text[-n:]


class TestTypeScriptSdk(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.node = shutil.which('node')
        self.npm = shutil.which('npm')
        missing = [name for name, p in (('node', self.node), ('npm', self.npm)) if not p]
        if missing:
            self.fail('%s not found on PATH: the TypeScript SDK test needs Node.js (>= 18) and npm; install '
                      'them with the test dependency script' % ' and '.join(missing))

    def _install(self):
        os.makedirs(NODE_DIR, exist_ok=True)
        pkg = _read(os.path.join(TS, 'package.json'))
        self.assertIsNotNone(pkg, 'missing %s' % os.path.join(TS, 'package.json'))
        if _read(os.path.join(NODE_DIR, 'package.json')) != pkg:
            with open(os.path.join(NODE_DIR, 'package.json'), 'wb') as f:
                f.write(pkg)
        if os.path.isdir(os.path.join(NODE_DIR, 'node_modules')) and _read(STAMP) == pkg:
            return
        r = subprocess.run([self.npm, 'install', '--no-audit', '--no-fund'], cwd=NODE_DIR,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            self.fail('npm install in %s failed (exit %d):\n%s\n%s' % (NODE_DIR, r.returncode, _tail(r.stdout),
                                                                     _tail(r.stderr)))
        with open(STAMP, 'wb') as f:
            f.write(pkg)

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


if __name__ == '__main__':
    unittest.main()
