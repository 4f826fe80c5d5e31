"""A request over JSON-RPC's 16 MiB limit is refused with an error that carries its id when the
start of the message shows one (so the client can match it instead of waiting for its timeout),
and the connection goes on serving: embedded `ipybox mcp`, ipyboxd's socket, and the
`ipybox mcp --connect` bridge (which applies the limit itself)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
from ipybox_test import McpClient, require_sandbox  # noqa: E402
from daemon_fixture import Daemon  # noqa: E402

PAD = b"a" * (17 << 20)


def big_call(rid, id_first=True):
    """A 17 MiB tools/call; its id before the huge arguments, or after them."""
    head = b'{"jsonrpc":"2.0",' + (b'"id":%s,' % rid if id_first else b'')
    tail = b'"}}' + (b'' if id_first else b',"id":%s' % rid) + b'}\n'
    return head + b'"method":"tools/call","params":{"name":"execute_ipython_cell","arguments":{"code":"' + PAD + tail


class OversizedRequests(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)

    def check(self, client):
        client.send_raw(big_call(b"7"))
        m = client.read_message(120)
        self.assertEqual(m.get("id"), 7, m)
        self.assertEqual(m["error"]["code"], -32600, m)
        self.assertIn("too large (over 16 MiB", m["error"]["message"])
        client.send_raw(big_call(b'"call-8"'))
        self.assertEqual(client.read_message(120).get("id"), "call-8")
        # The id comes after the part that is read: it cannot be known, so null.
        client.send_raw(big_call(b"9", id_first=False))
        m = client.read_message(120)
        self.assertIsNone(m.get("id"), m)
        self.assertIn("too large", m["error"]["message"])
        # Still serving, tool calls included.
        self.assertEqual(client.request("ping"), {})
        text, r = client.execute("print(6 * 7)")
        self.assertFalse(r.get("isError"), r)
        self.assertEqual(text.strip(), "42")

    def test_embedded(self):
        with McpClient("--embedded") as c:
            self.check(c)

    def test_daemon_socket_and_bridge(self):
        d = Daemon()
        self.addCleanup(d.close)
        s = d.client()
        self.addCleanup(s.close)
        self.check(s)
        with McpClient("--connect", d.sock) as b:
            self.check(b)


if __name__ == "__main__":
    unittest.main()
