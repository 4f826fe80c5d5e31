"""ipyboxd as root, sandboxed MCP servers (tests/lib/system_fixture.py): the server of a
session's worker runs in a sandbox the monitor made, in a pool uid, and ends with its worker;
one the monitor cannot make is refused with the reason, never started another way."""
import os
import pwd
import signal
import socket
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import wait_for  # noqa: E402
from monitor_channel import IPBM, IPBM_ADOPT, IPBM_ERROR, IPBM_SPAWNED, adopt, ipbm, spawn, steal_fd  # noqa: E402
import system_fixture as sf  # noqa: E402
from system_fixture import POOL_END, POOL_START, USERS, cmdline, pool_pids, ppid_of, proc_uids, text  # noqa: E402
from test_mcp_sandboxed import PROBE_SERVER, probe_params  # noqa: E402


def probe_servers():
    """(pid, uid) of the processes running test_mcp_sandboxed's probe server itself."""
    return [(p, u) for p, u in proc_uids() if cmdline(p)[:3] == ["/usr/bin/python3", "-c", PROBE_SERVER]]


def run_procs(uid):
    """(pid, uid) of uid's `ipybox run` processes that start the probe server."""
    return [(p, u) for p, u in proc_uids() if u == uid and "run" in cmdline(p)[1:2] and PROBE_SERVER in cmdline(p)]


class SystemServiceMcpServers(sf.SystemServiceCase):
    def test_a_sandboxed_mcp_server_runs_in_a_sandbox_the_monitor_made(self):
        # The session's worker runs as the user; the server's `ipybox run` gets a sub-channel of
        # the worker's, so the server runs in a pool uid (not the user's, as unprivileged user
        # namespaces would have it), sees nothing of the user's home, and ends with the session.
        user = pwd.getpwnam(USERS[0])
        secret = os.path.join(user.pw_dir, "ipbt-mcp-secret")
        with open(secret, "w") as f:
            f.write("the user's secret")
        os.chown(secret, user.pw_uid, user.pw_gid)
        self.addCleanup(os.unlink, secret)
        c = self.client(USERS[0], "--approve-tools", "*")
        r = c.call("register_mcp_server", {"server_name": "boxed", "server_params": probe_params(sandbox={})})
        self.assertFalse(r.get("isError"), text(r))

        def probe(what, arg):
            out, res = c.execute("from mcptools.boxed import probe\nprint(repr(probe.run(what=%r, arg=%r)))"
                                 % (what, arg), timeout=120)
            self.assertFalse(res.get("isError"), out)
            return eval(out.strip().splitlines()[-1])

        self.assertTrue(probe("read", secret).startswith("ERR FileNotFoundError"))
        self.assertEqual(probe("env", "HOME"), "/home/appuser")
        servers = probe_servers()
        self.assertTrue(servers, "no process runs the probe server")
        self.assertEqual([p for p, u in servers if not POOL_START <= u < POOL_END], [],
                         "the server runs outside the service's uid pool")
        # The worker dies: its sub-channels close and the server's sandbox is killed with them.
        worker = {ppid_of(p) for p, u in run_procs(user.pw_uid)}
        self.assertEqual(len(worker), 1, worker)
        os.kill(worker.pop(), signal.SIGKILL)
        self.assertTrue(wait_for(lambda: not probe_servers(), 30), "the server outlived its worker")

    def test_a_sandboxed_mcp_server_the_monitor_cannot_make_is_refused_with_the_reason(self):
        # Acting as A's frontend, take what the monitor allows A: the server is refused, never
        # started another way, and the registration says why.
        c = self.client(USERS[0], "--approve-tools", "*")
        self.assertEqual(c.execute("print(1)")[0], "1\n")
        chan = socket.socket(fileno=steal_fd(self.frontend_pid(USERS[0]), 4))
        worker = adopt(chan)
        worker.settimeout(20)
        boxed = {"server_name": "boxed", "server_params": probe_params(sandbox={})}
        subs = []
        for i in range(40):  # every sub-channel A may hold
            worker.send(ipbm(IPBM_ADOPT, id=200 + i))
            msg, fds, _, _ = socket.recv_fds(worker, IPBM.size, 1)
            subs += [socket.socket(fileno=fd) for fd in fds]
            if IPBM.unpack(msg)[1] == IPBM_ERROR:
                break
        r = c.call("register_mcp_server", boxed)
        self.assertTrue(r.get("isError"), text(r))
        print("refused: " + text(r))
        self.assertIn("sandboxed MCP servers' channels open, the most the service allows", text(r))
        for x in subs:
            x.close()
        rd, wr = os.pipe()
        keep, shims = [], set()
        for _ in range(40):  # every sandbox A may run
            reply = spawn(worker, (rd, wr, wr), keep)
            if reply[1] != IPBM_SPAWNED:
                break
            shims.add(reply[4])
        self.assertEqual(reply[1], IPBM_ERROR)
        r = c.call("register_mcp_server", boxed)
        self.assertTrue(r.get("isError"), text(r))
        print("refused: " + text(r))
        self.assertIn("its sandbox could not be made", text(r))
        self.assertIn("sandboxes running, the most the service allows", text(r))
        self.assertFalse(probe_servers(), "the server runs")
        # All of it given back: the same registration works.
        for x in keep + [worker, chan]:
            x.close()
        os.close(rd)
        os.close(wr)
        self.assertTrue(wait_for(lambda: not shims & set(pool_pids()), 30))
        r = c.call("register_mcp_server", boxed)
        self.assertFalse(r.get("isError"), text(r))


if __name__ == "__main__":
    unittest.main()
