"""Connecting to a daemon's unix socket without waiting forever when it does not accept.

asyncio's own connect cannot wait for room in a full listen queue: a unix socket's
non-blocking connect fails with EAGAIN at once, and asyncio then takes the socket for
connected (it polls writable). A blocking connect waits at most SO_SNDTIMEO, then fails with
EAGAIN; it runs in a worker thread so that the event loop goes on meanwhile."""
from __future__ import annotations

import asyncio
import errno
import socket
import struct

# As `ipybox mcp` (client/cli.h CLI_CONNECT_TIMEOUT_MS).
CONNECT_TIMEOUT = 5.0


class NotAccepting(OSError):
    """The daemon did not take the connection within the timeout (its listen queue is full)."""


def _connect(path: str, timeout: float) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sec = int(timeout)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", sec, int((timeout - sec) * 1e6)))
        try:
            s.connect(path)
        except BlockingIOError:
            raise NotAccepting(errno.ETIMEDOUT, "ipyboxd at %s did not accept the connection within %g s (its "
                                                "listen queue is full: the daemon is stuck or overloaded)"
                               % (path, timeout)) from None
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 0))
        s.setblocking(False)
        return s
    except BaseException:
        s.close()
        raise


async def open_unix(path: str, limit: int, timeout: float = CONNECT_TIMEOUT):
    """(reader, writer) for the daemon at path; NotAccepting when it does not take the
    connection within timeout, OSError as connect(2) fails otherwise."""
    sock = await asyncio.get_running_loop().run_in_executor(None, _connect, path, timeout)
    try:
        return await asyncio.open_unix_connection(sock=sock, limit=limit)
    except BaseException:
        sock.close()
        raise
