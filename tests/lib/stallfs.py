"""A FUSE filesystem that never answers FLUSH until told to: close() of any file opened on it
blocks (uninterruptibly, once the request has been read) in whoever closes it. Spoken straight
to /dev/fuse (no libfuse), mounted with mount(2); needs root.

    with StallFS() as fs:
        fd = os.open(fs.file, os.O_RDONLY)
        ...                      # hand fd to someone; their close() waits
        fs.wait_flushes(1)       # a close is waiting
        fs.answer()              # every FLUSH so far and from now on is answered

StallFS(parent=DIR) mounts below DIR (default: the temporary directory); stall_names: names
whose LOOKUP (in the root) is held until answer(), then answered "no such file".
"""
import ctypes
import errno
import os
import select
import struct
import tempfile
import threading

IN_HEADER = struct.Struct("<IIQQIIIHH")   # len, opcode, unique, nodeid, uid, gid, pid, extlen, pad
OUT_HEADER = struct.Struct("<IiQ")        # len, error, unique
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")  # ino size blocks atime mtime ctime *nsec mode nlink uid gid rdev blksize flags

LOOKUP, FORGET, GETATTR, OPEN, RELEASE, FLUSH, INIT, OPENDIR, RELEASEDIR, INTERRUPT, DESTROY, BATCH_FORGET = \
    1, 2, 3, 14, 18, 25, 26, 27, 29, 36, 38, 42
NO_REPLY = (FORGET, BATCH_FORGET, INTERRUPT)
ROOT, FILE = 1, 2


def attr(node):
    mode = 0o40755 if node == ROOT else 0o100644
    return ATTR.pack(node, 0, 0, 0, 0, 0, 0, 0, 0, mode, 2 if node == ROOT else 1, 0, 0, 0, 4096, 0)


class StallFS:
    def __init__(self, parent=None, stall_names=()):
        self.dir = tempfile.mkdtemp(prefix="ipybox-stallfs-", dir=parent)
        self.stall_names = {n.encode() for n in stall_names}
        self.lookups = 0
        self.pending_lookups = []
        self.file = os.path.join(self.dir, "f")
        self.flushes = 0
        self.answering = False
        self.pending = []
        self.cond = threading.Condition()
        self.dev = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
        self.stop_r, self.stop_w = os.pipe()
        libc = ctypes.CDLL(None, use_errno=True)
        opts = "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other" % self.dev
        if libc.mount(b"stallfs", self.dir.encode(), b"fuse.stallfs", 0x2 | 0x4, opts.encode()) != 0:
            e = ctypes.get_errno()
            os.close(self.dev)
            os.rmdir(self.dir)
            raise OSError(e, "mount fuse: " + os.strerror(e))
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def reply(self, unique, err=0, body=b""):
        try:
            os.write(self.dev, OUT_HEADER.pack(OUT_HEADER.size + len(body), -err, unique) + body)
        except OSError:
            pass  # the request was interrupted, or the connection is gone

    def serve(self):
        while True:
            r, _, _ = select.select([self.dev, self.stop_r], [], [])
            if self.stop_r in r:
                return
            try:
                req = os.read(self.dev, 1 << 20 | 4096)
            except OSError as e:
                if e.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):
                    continue
                return  # ENODEV: unmounted
            ln, op, unique, node = IN_HEADER.unpack_from(req)[:4]
            body = req[IN_HEADER.size:ln]
            if op in NO_REPLY:
                continue
            if op == INIT:
                major, minor = struct.unpack_from("<II", body)
                out = struct.pack("<IIIIHHIIHH", 7, min(minor, 31), 0, 0, 16, 12, 65536, 1, 0, 0)
                self.reply(unique, 0, out + bytes(64 - len(out)))
            elif op == LOOKUP:
                name = body.split(b"\0")[0]
                if node == ROOT and name == b"f":
                    self.reply(unique, 0, struct.pack("<QQQQII", FILE, 0, 0, 0, 0, 0) + attr(FILE))
                elif node == ROOT and name in self.stall_names:
                    with self.cond:
                        self.lookups += 1
                        if self.answering:
                            self.reply(unique, errno.ENOENT)
                        else:
                            self.pending_lookups.append(unique)
                        self.cond.notify_all()
                else:
                    self.reply(unique, errno.ENOENT)
            elif op == GETATTR:
                self.reply(unique, 0, struct.pack("<QII", 0, 0, 0) + attr(node))
            elif op in (OPEN, OPENDIR):
                self.reply(unique, 0, struct.pack("<QII", 1, 0, 0))
            elif op in (RELEASE, RELEASEDIR, DESTROY):
                self.reply(unique)
            elif op == FLUSH:
                with self.cond:
                    self.flushes += 1
                    if self.answering:
                        self.reply(unique)
                    else:
                        self.pending.append(unique)
                    self.cond.notify_all()
            else:
                self.reply(unique, errno.ENOSYS)

    def wait_flushes(self, n, timeout=20):
        with self.cond:
            return self.cond.wait_for(lambda: self.flushes >= n, timeout)

    def wait_lookups(self, n, timeout=20):
        with self.cond:
            return self.cond.wait_for(lambda: self.lookups >= n, timeout)

    def answer(self):
        with self.cond:
            self.answering = True
            for u in self.pending:
                self.reply(u)
            self.pending = []
            for u in self.pending_lookups:
                self.reply(u, errno.ENOENT)
            self.pending_lookups = []

    def close(self):
        self.answer()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.umount2(self.dir.encode(), 2)  # MNT_DETACH
        os.write(self.stop_w, b"x")
        self.thread.join(10)
        for fd in (self.dev, self.stop_r, self.stop_w):
            os.close(fd)
        os.rmdir(self.dir)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
