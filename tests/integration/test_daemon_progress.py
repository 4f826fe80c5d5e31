"""Streamed output through ipyboxd: each client's progress notifications carry its own token
(integer or string, whatever it chose) and the output arrives byte for byte, also when it holds
quotes, backslashes, control characters and non-ASCII text. The daemon passes the worker's
progress lines on with only the token swapped (daemon/routing.c progress_fast)."""
import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_fixture import DaemonCase  # noqa: E402

# 0.57 MB in lines of every awkward kind (no \r, collapsed as a terminal would; no ANSI escapes,
# which are taken out of output).
CODE = r"""
import sys
parts = ['plain', 'quote " and \\ backslash', 'tab\there', 'ctl \x01\x02\x7f', 'utf-8 é ü 中文 🙂',
         '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,', '\\u0000 not a nul']
for i in range(20000):
    sys.stdout.write('%d %s\n' % (i, parts[i % len(parts)]))
sys.stdout.flush()
"""


def expected():
    parts = ['plain', 'quote " and \\ backslash', 'tab\there', 'ctl \x01\x02\x7f', 'utf-8 é ü 中文 🙂',
             '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,', '\\u0000 not a nul']
    return "".join("%d %s\n" % (i, parts[i % len(parts)]) for i in range(20000))


class ProgressThroughTheDaemon(DaemonCase):
    def test_tokens_and_text_pass_through(self):
        d = self.daemon()
        tokens = [7, "b-tok", 0, 'q"\\é']
        clients = [d.client() for _ in tokens]
        for c in clients:
            c.request("ipybox/createSession", {})
        results, errors = {}, []

        def run(i):
            try:
                c = clients[i]
                c.notifications.clear()
                _, r = c.execute(CODE, progress_token=tokens[i], max_output_chars=1000, timeout=300)
                results[i] = (r, list(c.notifications))
            except Exception as e:  # noqa: BLE001
                errors.append((i, repr(e)))
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(tokens))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        self.assertEqual(errors, [])
        want = expected()
        for i, tok in enumerate(tokens):
            r, notes = results[i]
            self.assertFalse(r.get("isError"), r)
            progress = [n for n in notes if n.get("method") == "notifications/progress"]
            self.assertGreater(len(progress), 1, "client %d got %d progress notifications" % (i, len(progress)))
            for n in progress:
                self.assertEqual(n["params"]["progressToken"], tok)
                self.assertIs(type(n["params"]["progressToken"]), type(tok))
            values = [n["params"]["progress"] for n in progress]
            self.assertEqual(values, sorted(values))
            self.assertEqual(len(set(values)), len(values))
            got = "".join(n["params"].get("message", "") for n in progress)
            self.assertEqual(len(got), len(want), "client %d" % i)
            self.assertEqual(got, want, "client %d" % i)
        for c in clients:
            c.close()

    def test_no_token_no_progress(self):
        d = self.daemon()
        c = d.client()
        c.request("ipybox/createSession", {})
        c.notifications.clear()
        text, _ = c.execute("for i in range(3000): print(i)", max_output_chars=100000)
        self.assertEqual(text, "".join("%d\n" % i for i in range(3000)))
        self.assertEqual([n for n in c.notifications if n.get("method") == "notifications/progress"], [])
        c.close()


if __name__ == "__main__":
    unittest.main()
