"""ipyboxd as root, its monitor against a hostile frontend (tests/lib/system_fixture.py,
tests/lib/monitor_channel.py): acting as a user's frontend on its own monitor channel, a user
gets no more than their quota of sandboxes and channels, cannot hand the monitor descriptors it
did not ask for, and neither a channel that stops reading nor descriptors whose close never
returns stop the monitor serving everyone."""
import os
import select
import socket
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import alive, wait_for  # noqa: E402
from monitor_channel import IPBM, IPBM_ADOPT, IPBM_ERROR, IPBM_KILL, IPBM_SPAWN, adopt, ipbm, spawn, steal_fd  # noqa: E402
import stallfs  # noqa: E402
import system_fixture as sf  # noqa: E402
from system_fixture import USERS, cmdline, pool_pids, ppid_of, proc_uids  # noqa: E402


class SystemServiceMonitor(sf.SystemServiceCase):
    def test_spawn_takes_only_the_descriptors_it_expects(self):
        chan = socket.socket(fileno=steal_fd(self.frontend_pid(USERS[0]), 4))
        theirs = adopt(chan)
        sync, sync_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        r, w = os.pipe()
        stream, _ = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with tempfile.TemporaryFile() as f:
            for fds, why in (([r, f.fileno(), w, sync.fileno()], "descriptor 1 is not a pipe"),
                             ([r, w, w, stream.fileno()], "sync descriptor is not a seqpacket")):
                socket.send_fds(theirs, [ipbm(IPBM_SPAWN)], fds)
                theirs.settimeout(10)
                reply = IPBM.unpack(theirs.recv(IPBM.size))
                self.assertEqual(reply[1], 101)  # IPBM_ERROR
                self.assertIn(why, reply[-1].split(b"\0")[0].decode())
        for x in (chan, theirs, sync, sync_peer, stream):
            x.close()
        os.close(r)
        os.close(w)

    def test_the_monitor_holds_each_user_to_a_quota(self):
        # The frontend is the user's: acting as it, A cannot take more than their share.
        chan = socket.socket(fileno=steal_fd(self.frontend_pid(USERS[0]), 4))
        theirs = adopt(chan)
        theirs.settimeout(20)
        r, w = os.pipe()
        keep = []
        replies = []
        for _ in range(40):  # max_sessions_per_user is 16: at most 32 sandboxes
            reply = spawn(theirs, (r, w, w), keep)
            replies.append(reply)
            if reply[1] == IPBM_ERROR:
                break
        self.assertEqual(replies[-1][1], IPBM_ERROR, "40 sandboxes for one user")
        self.assertIn(b"the most the service allows", replies[-1][-1])
        self.assertLessEqual(len(replies) - 1, 32)
        # B is not held back by A's quota; nor by A's channels, also limited (16 + 4).
        for _ in range(24):
            chan.send(ipbm(IPBM_ADOPT, id=7))
        b = self.client(USERS[1])
        self.assertEqual(b.execute("print('b fine')")[0], "b fine\n")
        extra, refused = [], 0
        chan.setblocking(False)
        for _ in range(24):  # answered at once, before B's session started
            msg, fds, _, _ = socket.recv_fds(chan, IPBM.size, 1)
            extra += [socket.socket(fileno=fd) for fd in fds]
            reply = IPBM.unpack(msg)
            refused += reply[1] == IPBM_ERROR and b"sessions open" in reply[-1]
        self.assertGreater(refused, 0)
        self.assertLessEqual(len(extra), 20)  # max_sessions_per_user + 4, one of them `theirs`
        # Closing A's channels frees all of it: the sandboxes are killed, and A starts again.
        shims = {int(x[4]) for x in replies if x[1] == 100}
        for x in extra + keep + [theirs, chan]:
            x.close()
        os.close(r)
        os.close(w)
        self.assertTrue(wait_for(lambda: not shims & set(pool_pids())))
        a = self.client(USERS[0])
        self.assertEqual(a.execute("print('a fine')")[0], "a fine\n")

    def test_a_worker_channel_adopts_sub_channels_that_die_with_it(self):
        # A worker asks for a sub-channel for each sandboxed MCP server it starts: it spawns
        # like the worker's own, adopts nothing, is bounded, and closes with its parent.
        chan = socket.socket(fileno=steal_fd(self.frontend_pid(USERS[0]), 4))
        worker = adopt(chan)
        sub = adopt(worker)
        sync, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        r, w = os.pipe()
        socket.send_fds(sub, [ipbm(IPBM_SPAWN)], [r, w, w, sync.fileno()])
        sub.settimeout(20)
        msg, fds, _, _ = socket.recv_fds(sub, IPBM.size, 4)
        for fd in fds:
            os.close(fd)
        reply = IPBM.unpack(msg)
        self.assertEqual(reply[1], 100, reply[-1].split(b"\0")[0])  # SPAWNED
        shim = reply[4]
        self.assertIn(shim, pool_pids())
        other = adopt(worker)
        other.send(ipbm(IPBM_ADOPT, id=5))
        other.settimeout(10)
        self.assertEqual(other.recv(IPBM.size), b"", "a sub-channel adopted")
        subs, refused = [], None
        worker.settimeout(10)
        for i in range(40):  # max_sessions_per_user is 16: at most 32 sub-channels
            worker.send(ipbm(IPBM_ADOPT, id=100 + i))
            msg, fds, _, _ = socket.recv_fds(worker, IPBM.size, 1)
            subs += [socket.socket(fileno=fd) for fd in fds]
            reply = IPBM.unpack(msg)
            if reply[1] == IPBM_ERROR:
                refused = reply[-1].split(b"\0")[0].decode()
                break
        self.assertIsNotNone(refused, "40 sub-channels for one user")
        self.assertIn("sandboxed MCP servers' channels open, the most the service allows", refused)
        self.assertLessEqual(len(subs) + 1, 32)
        for x in subs:
            x.close()
        # The worker's channel closes (its worker is gone): the sub-channel closes too, and the
        # sandbox it spawned is killed.
        worker.close()
        self.assertTrue(wait_for(lambda: shim not in pool_pids(), 30), "the sub-channel's sandbox survived")
        sub.settimeout(10)
        while True:
            msg, fds, _, _ = socket.recv_fds(sub, IPBM.size, 4)
            for fd in fds:
                os.close(fd)
            if not msg:
                break
            self.assertEqual(IPBM.unpack(msg)[1], 102)  # only an EXITED may come first
        for x in (chan, sub, other, sync, peer):
            x.close()
        os.close(r)
        os.close(w)

    def test_a_hostile_frontend_channel_stops_nothing(self):
        # User A's frontend is theirs to control: act as it on its own monitor channel (fd 4).
        chan = socket.socket(fileno=steal_fd(self.frontend_pid(USERS[0]), 4))
        self.assertEqual(chan.type, socket.SOCK_SEQPACKET)
        theirs = adopt(chan)
        theirs.send(ipbm(IPBM_KILL, id=999))
        # A worker that asks and never reads the answers (limits out of bounds are refused
        # with an error record, and the channel stays open until it stops taking records).
        sent = 0
        try:
            while sent < 100000:
                theirs.send(ipbm(IPBM_SPAWN, memory_max=1), socket.MSG_DONTWAIT)
                sent += 1
        except (BlockingIOError, BrokenPipeError, ConnectionResetError):
            pass  # full, or already closed by the monitor (it could not send an answer): both fine
        self.assertGreater(sent, 0)
        # The monitor still serves everyone: new sessions for B and for A start and answer.
        b = self.client(USERS[1])
        self.assertEqual(b.execute("print('b fine')")[0], "b fine\n")
        a = self.client(USERS[0])
        self.assertEqual(a.execute("print('a fine')")[0], "a fine\n")
        # The channel that stopped reading was closed by the monitor (once it had an answer it
        # could not send): the other end hangs up.
        poller = select.poll()
        poller.register(theirs, select.POLLHUP)

        def hung_up():
            try:
                theirs.send(ipbm(IPBM_SPAWN, memory_max=1), socket.MSG_DONTWAIT)
            except OSError:
                pass
            return any(ev & select.POLLHUP for _, ev in poller.poll(0))
        self.assertTrue(wait_for(hung_up, 30), "the monitor kept a channel that does not read")
        chan.close()
        theirs.close()

    def closers(self):
        """The monitor's children that run its own program (closers: fds.h), and where each
        waits."""
        me = self.svc.proc.pid
        argv = cmdline(me)
        if not argv:
            raise AssertionError("the monitor (pid %d) is gone" % me)
        out = {}
        for pid, _ in proc_uids():
            try:
                if ppid_of(pid) == me and cmdline(pid) == argv:
                    with open("/proc/%d/wchan" % pid) as f:
                        out[pid] = f.read()
            except OSError:
                continue
        return out

    def monitor_fds_on(self, path):
        n = 0
        for fd in os.listdir("/proc/%d/fd" % self.svc.proc.pid):
            try:
                n += os.readlink("/proc/%d/fd/%s" % (self.svc.proc.pid, fd)).startswith(path + "/")
            except OSError:
                pass
        return n

    def test_descriptors_a_user_sends_never_stop_the_monitor(self):
        # A file on a FUSE filesystem whose server does not answer FLUSH: close() waits for it
        # (for ever with signals blocked, as the monitor has them). A user hands such files to
        # the monitor (their own FUSE mount would do; this one is root's, with allow_other, so
        # that the test can open it).
        try:
            fs = stallfs.StallFS()
        except OSError as e:
            self.skipTest("no FUSE here: %s" % e)
        with fs:
            chan = socket.socket(fileno=steal_fd(self.frontend_pid(USERS[0]), 4))
            t1, t2 = adopt(chan), adopt(chan)
            t1.settimeout(20)
            sync, sync_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            r, w = os.pipe()
            # While the test holds the file, it starts no process: a child would close it too.
            f = os.open(fs.file, os.O_RDONLY)
            socket.send_fds(t1, [ipbm(IPBM_SPAWN)], [r, f, w, sync.fileno()])
            self.assertEqual(IPBM.unpack(t1.recv(IPBM.size))[1], IPBM_ERROR)
            self.assertTrue(fs.wait_flushes(1), "the monitor never closed the file")
            # Hundreds more while that close waits: held; with 256 waiting, A is not read.
            for _ in range(2):
                socket.send_fds(t1, [ipbm(IPBM_SPAWN)], [f] * 150)
                self.assertEqual(IPBM.unpack(t1.recv(IPBM.size))[1], IPBM_ERROR)
            socket.send_fds(t1, [ipbm(IPBM_SPAWN)], [f] * 150)
            # Nor is a channel that hangs up with a record queued.
            socket.send_fds(t2, [ipbm(IPBM_SPAWN)], [f] * 150)
            t2.close()
            threading.Thread(target=os.close, args=(f,), daemon=True).start()
            self.assertTrue(fs.wait_flushes(2))
            # The close waits in one of the monitor's children, never in the monitor.
            self.assertTrue(wait_for(lambda: any("fuse" in x or "request_wait_answer" in x
                                                 for x in self.closers().values()), 10),
                            "no child waits on the close: %s" % self.closers())
            with open("/proc/%d/wchan" % self.svc.proc.pid) as st:
                wchan = st.read()
            self.assertFalse("fuse" in wchan or "request_wait_answer" in wchan, wchan)
            self.assertTrue(wait_for(lambda: "wait to be closed" in self.svc.log_text(), 10))
            time.sleep(1)
            self.assertEqual(self.monitor_fds_on(fs.dir), 300)
            b = self.client(USERS[1])
            self.assertEqual(b.execute("print('b fine')")[0], "b fine\n")
            t1.setblocking(False)
            self.assertRaises(BlockingIOError, t1.recv, IPBM.size)
            t1.settimeout(20)
            # Once the filesystem answers, everything held is closed and A is served again.
            fs.answer()
            self.assertEqual(IPBM.unpack(t1.recv(IPBM.size))[1], IPBM_ERROR)
            # (What the hung-up channel queued was never received: it is released with the
            # channel, with no FLUSH.)
            self.assertTrue(wait_for(lambda: fs.flushes >= 2 + 450, 20), "held descriptors not closed: %d" % fs.flushes)
            self.assertTrue(wait_for(lambda: not self.closers(), 10), self.closers())
            self.assertEqual(self.monitor_fds_on(fs.dir), 0)
            self.assertIn("serving the user again", self.svc.log_text())
            a = self.client(USERS[0])
            self.assertEqual(a.execute("print('a fine')")[0], "a fine\n")
            for x in (chan, t1, sync, sync_peer):
                x.close()
            for fd in (r, w):
                os.close(fd)

    def test_a_frontend_channel_takes_no_descriptor_it_did_not_ask_for(self):
        # ADOPT carries none (the monitor makes each channel itself): one that does closes the
        # frontend's channel, and the frontend is restarted.
        old = self.frontend_pid(USERS[0])
        chan = socket.socket(fileno=steal_fd(old, 4))
        mine, _peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        socket.send_fds(chan, [ipbm(IPBM_ADOPT)], [mine.fileno()])
        chan.settimeout(10)
        self.assertEqual(chan.recv(IPBM.size), b"")  # hung up
        self.assertTrue(wait_for(lambda: not alive(old), 10))
        self.assertTrue(wait_for(lambda: self.frontend_pid_or_none(USERS[0]) not in (None, old), 20))
        a = self.client(USERS[0])
        self.assertEqual(a.execute("print('a back')")[0], "a back\n")
        for x in (chan, mine, _peer):
            x.close()


if __name__ == "__main__":
    unittest.main()
