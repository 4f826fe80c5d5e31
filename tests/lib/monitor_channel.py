"""Acting as a user's frontend on its channel to the monitor (monitor/mon_proto.h), for the
tests of the system service that check what the monitor takes from a hostile frontend: the
record format, ADOPT, and a copy of another process's descriptor (pidfd_getfd, as root)."""
import ctypes
import os
import socket
import struct

# struct ipbm_msg (monitor/mon_proto.h): magic, type, id, err, status, nbinds, ro_binds,
# pids_max, cpu_weight, limits, memory_max, uid_base, reserved, text[256].
IPBM = struct.Struct("<IIIiiIIIIIQII256s")
IPBM_MAGIC, IPBM_ADOPT, IPBM_SPAWN, IPBM_KILL = 0x69706d31, 1, 2, 3
IPBM_SPAWNED, IPBM_ERROR, IPBM_EXITED, IPBM_ADOPTED = 100, 101, 102, 103


def ipbm(kind, **fields):
    v = dict(id=0, err=0, status=0, nbinds=0, ro_binds=0, pids_max=0, cpu_weight=0, limits=0, memory_max=0)
    v.update(fields)
    return IPBM.pack(IPBM_MAGIC, kind, v["id"], v["err"], v["status"], v["nbinds"], v["ro_binds"],
                     v["pids_max"], v["cpu_weight"], v["limits"], v["memory_max"], 0, 0, b"")


def adopt(chan):
    """Asks the monitor for a worker channel on a frontend channel: our end of the new one."""
    chan.send(ipbm(IPBM_ADOPT, id=4242))
    chan.settimeout(10)
    msg, fds, _, _ = socket.recv_fds(chan, IPBM.size, 1)
    reply = IPBM.unpack(msg)
    if reply[1] != IPBM_ADOPTED or reply[2] != 4242 or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise AssertionError("ADOPT refused: %r" % (reply,))
    return socket.socket(fileno=fds[0])


def spawn(chan, stdio, keep):
    """Asks the monitor for a sandbox on a worker channel (stdio: the shim's three
    descriptors); keep gets the sync socketpair, which must stay open while the sandbox runs.
    The first reply that is not an EXITED of an earlier sandbox, unpacked."""
    sync, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    keep += [sync, peer]
    socket.send_fds(chan, [ipbm(IPBM_SPAWN)], list(stdio) + [sync.fileno()])
    while True:
        msg, fds, _, _ = socket.recv_fds(chan, IPBM.size, 4)
        for fd in fds:
            os.close(fd)
        reply = IPBM.unpack(msg)
        if reply[1] != IPBM_EXITED:
            return reply


def steal_fd(pid, fd):
    """A copy of another process's descriptor (pidfd_getfd, as root)."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        got = libc.syscall(438, pidfd, fd, 0)  # SYS_pidfd_getfd
        if got < 0:
            raise OSError(ctypes.get_errno(), "pidfd_getfd")
        return got
    finally:
        os.close(pidfd)
