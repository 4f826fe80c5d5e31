# The kernel's output streams (ipykernel 6.17's OutStream and its iopub thread), patched the
# same way in every kernel by prepare() in kernel_launch.py: output that waits for the
# supervisor (_bound_output), flushes that wait only for output (_flush_only_output), what is
# written to fds 1 and 2 in its own cell (_watch_fds), output in the order it was written, a
# forked child's too (_output_in_order), no sleep before a reply (_reply_without_sleep).
# kernel_launch.S joins this file before kernel_launch.py; like the rest of the launcher it is
# no security boundary: code in the kernel may undo all of it, and then only harms its own
# session.

# Functions that take a lock and then enter the try that releases it: an interrupt there would
# leave the lock held for good (the output streams' hand-over: cells that print hung), so it
# is dropped there, and the supervisor sends it again while the cell has not ended.
_UNINTERRUPTED = set()


def _bound_output(limit=1 << 20):
    """The kernel waits for the supervisor rather than buffering without end.

    iopub is an XPUB socket that does not drop (XPUB_NODROP) with a small high-water mark: when
    the supervisor stops reading (its client does not read), the sending thread blocks. A
    write to stdout/stderr is cut into pieces of at most `limit` characters, and once that much
    waits, the writer waits until it has been sent; waiting stays interruptible."""
    import threading
    import zmq
    from ipykernel import iostream, kernelapp

    def init_iopub(self, context):
        sock = context.socket(zmq.XPUB)
        sock.setsockopt(zmq.XPUB_NODROP, 1)
        sock.sndhwm = 4
        sock.linger = 1000
        self.iopub_socket = sock
        self.iopub_port = self._bind_socket(sock, self.iopub_port)
        self.configure_tornado_logger()
        self.iopub_thread = iostream.IOPubThread(sock, pipe=True)
        self.iopub_thread.start()
        self.iopub_socket = self.iopub_thread.background_socket

    kernelapp.IPKernelApp.init_iopub = init_iopub

    write = iostream.OutStream.write

    def wait_sent(self):
        thread = self.pub_thread.thread if self.pub_thread else None
        if thread is None or thread.ident == threading.get_ident() or not self._is_master_process():
            return
        sent = threading.Event()
        self.pub_thread.schedule(self._flush)
        self.pub_thread.schedule(sent.set)
        while not sent.wait(1.0):
            if not thread.is_alive():
                return

    def bounded_write(self, string):
        if not isinstance(string, str) or len(string) <= limit:
            n = write(self, string)
            if self._buffer.tell() >= limit:
                wait_sent(self)
            return n
        for i in range(0, len(string), limit):
            write(self, string[i:i + limit])
            wait_sent(self)
        return len(string)

    iostream.OutStream.write = bounded_write


def _flush_only_output():
    """ipykernel's OutStream.flush() hands a flush and then an event to the iopub thread and
    waits for the event, even when nothing waits to be sent: about 0.2 ms each, and a cell
    flushes six times, a start four (1 ms of a `1+1`). Here, in the kernel's own process with
    its iopub thread alive, a flush with nothing buffered and no flush under way returns at
    once. The iopub thread's flush (its timer's, or one asked for earlier) takes the buffer and
    then queues the message's send behind what is queued already; from taking to queueing it
    holds a lock that this flush only tries. So when this one finds the lock free and nothing
    buffered, every earlier output is queued, and what the kernel queues after it (a display,
    the idle status) goes out after that output; the supervisor ends a cell at its reply and its
    idle status (execute.c). Without the lock, the idle status could be queued while a large
    output was being made into a message, and that output went out after it: lost (2 to 3 in
    100 writes of 30 to 60 KB to fds 1 and 2; 14 in 100 prints of 300 KB followed by 0.2 s of
    work, an attacker's review). A flush with output, one during a flush,
    a forked child's and the iopub thread's own wait as before (a child never takes the lock)."""
    import threading
    from ipykernel import iostream

    init, flush, flush_now = iostream.OutStream.__init__, iostream.OutStream.flush, iostream.OutStream._flush

    def init_with_lock(self, *args, **kwargs):
        self._ipb_flushing = threading.RLock()
        init(self, *args, **kwargs)

    def flush_queued(self):
        # Not in a forked child: the iopub thread may have held the lock when the child was
        # forked, and the child has no such thread to release it.
        if not self._is_master_process():
            return flush_now(self)
        with self._ipb_flushing:
            flush_now(self)

    def flush_if_buffered(self):
        thread = self.pub_thread.thread if self.pub_thread else None
        if (self.echo is None and thread is not None and thread is not threading.current_thread() and
                thread.is_alive() and self._is_master_process() and self._ipb_flushing.acquire(blocking=False)):
            try:
                with self._buffer_lock:
                    idle = not self._buffer.tell()
            finally:
                self._ipb_flushing.release()
            if idle:
                return
        flush(self)

    iostream.OutStream.__init__ = init_with_lock
    iostream.OutStream._flush = flush_queued
    iostream.OutStream.flush = flush_if_buffered
    _UNINTERRUPTED.add(flush_if_buffered.__code__)


def _pipe_counter():
    """A function that tells how many bytes wait in the pipe whose read end it is given (0 if
    that cannot be told): one ioctl, as it runs at every write."""
    import fcntl, sys, termios
    ioctl, nread, order = fcntl.ioctl, termios.FIONREAD, sys.byteorder

    def in_pipe(fd):
        count = bytearray(4)
        try:
            ioctl(fd, nread, count, True)
        except OSError:
            return 0
        return int.from_bytes(count, order)

    return in_pipe


def _watch_fds(bound=2.0):
    """What is written to fds 1 and 2 (by C code, by children, by os.write) reaches the cell
    through a pipe that a thread of ipykernel's stream reads (OutStream._watch_pipe_fd). Two
    faults of that thread (ipykernel 6.17), mended here:
    - it decoded each 1000-byte read alone: a character cut by a read's end (any multibyte
      UTF-8, '€' * 600 written at once) raised, the thread ended, and from then on nothing
      written to that fd reached a cell, and a writer blocked once 64 KiB waited in the pipe;
    - a cell's end did not wait for it: what was still in the pipe, or read and not yet handed
      to the stream, went out after the cell's idle status, into the next cell or nowhere.
    This thread decodes as it goes (bytes that are not UTF-8 become U+FFFD) and counts what it
    has handed on, under a lock held from each read to the hand-over; flush() first waits, at
    most `bound` seconds, until what was in the pipe when it was called has been handed on."""
    import codecs, os, select, sys, threading
    from ipykernel import iostream

    setup, flush = iostream.OutStream._setup_stream_redirects, iostream.OutStream.flush
    in_pipe = _pipe_counter()

    def setup_stream_redirects(self, name):
        self._ipb_handed = threading.Condition()
        self._ipb_handed_bytes = 0
        setup(self, name)

    def watch_pipe_fd(self):
        decoder = codecs.getincrementaldecoder('utf-8')('replace')
        handed = self._ipb_handed
        poller = select.poll()
        poller.register(self._fid, select.POLLIN)
        try:
            while self._should_watch:
                poller.poll()
                # Set before the read, cleared after the hand-over: _output_in_order's writes
                # look at the pipe and then at this, without the lock.
                self._ipb_reading = True
                with handed:
                    data = os.read(self._fid, 1 << 16)
                    if not data:
                        return
                    text = decoder.decode(data)
                    if text:
                        self.write(text)
                    os.write(self._original_stdstream_copy, data)
                    self._ipb_handed_bytes += len(data)
                    self._ipb_reading = False
                    handed.notify_all()
        except Exception:
            self._exc = sys.exc_info()

    def drained_flush(self):
        handed = getattr(self, '_ipb_handed', None)
        thread = getattr(self, 'watch_fd_thread', None)
        if (handed is not None and thread is not None and thread.is_alive() and
                thread is not threading.current_thread() and self._is_master_process() and
                handed.acquire(timeout=bound)):
            try:
                target = self._ipb_handed_bytes + in_pipe(self._fid)
                handed.wait_for(lambda: self._ipb_handed_bytes >= target or not thread.is_alive(), bound)
            finally:
                handed.release()
        flush(self)

    iostream.OutStream._setup_stream_redirects = setup_stream_redirects
    iostream.OutStream._watch_pipe_fd = watch_pipe_fd
    iostream.OutStream.flush = drained_flush
    _UNINTERRUPTED.add(drained_flush.__code__)


def _output_in_order(bound=2.0, look_every=50000):
    """Output reaches the cell in the order it was written, and once. In ipykernel 6.17:
    - a forked child's print went by its route for children, each write() a fresh zmq context
      and TCP connection to the kernel's iopub thread: the pieces of one print arrived in any
      order, after what the kernel printed once the child had exited ('child 61parent 61\n\n'),
      or after the cell's idle status, into the next cell or nowhere (2 in 200 forks on a
      loaded host; the CI run of b48c843 failed on one);
    - the child also sent what the kernel had buffered, not yet sent, when it forked: twice;
    - what a command or C code wrote to fd 1 before a print could come after it (6 to 9 in 200
      `os.system('echo a'); print('b')`).
    Here:
    - a forked child writes its stdout and stderr text, as UTF-8, into the pipe that
      _watch_fds's thread reads, through a descriptor of its own that it checks is still that
      pipe before each write (a child that redirected or closed fds 1 and 2 still writes to
      the cell; when that descriptor is gone, ipykernel's route); it begins with empty stream
      buffers and fresh locks (a lock another thread held at the fork is never released in it);
      it writes whole lines (what follows the last newline waits for the next write or a
      flush, as in a pipe's line buffer: a child that ends with os._exit() unflushed loses it,
      as anywhere), in writes of at most 4096 bytes, which a pipe takes whole, each ending at a
      newline or between two characters (written whole, children writing at once cut each
      other's characters); a non-blocking pipe (the flag is the pipe's: kernel code or a
      command may set it) is waited for, as a blocking write would wait;
    - the kernel's own write() first looks at that pipe and waits, at most `bound` seconds,
      until what waited in it has been handed on, so what a child, a command or C code wrote
      before comes before. A look is an ioctl (2 us here, twice a write), so a stream looks at
      most once per `look_every` ns: a write within 50 us of its stream's last look does not
      wait (a print loop looks about once in 60 writes; what was written to fd 1 in that window
      is ordered only by _watch_fds's thread, as in ipykernel, and still lands in the cell, as
      _watch_fds's flush waits for it);
    - whether a stream is in a forked child is told by an at-fork hook, not by getpid() at each
      write and flush: a system call, 1.3 us of a write's 2.4 here (print loops 2.4 times as
      fast). A process forked without Python's at-fork hooks runs no Python code safely anyway;
    - an interrupt that lands in `look` (or in _watch_fds's and _flush_only_output's flushes),
      after its lock was taken and before the try that releases it, is dropped (_UNINTERRUPTED;
      the supervisor sends it again): it left the lock held, and cells that printed hung.
    What a child writes after its cell ended goes to the cell running then, as what a
    background command writes to fd 1 does (ipykernel's route sent it with the old cell's
    header, and the supervisor dropped it). While a child floods fd 1, a print waits for what
    was in the pipe: a print loop beside `yes` runs at half its speed."""
    import io, os, select, sys, threading, time, weakref
    from ipykernel import iostream

    setup, write, flush = iostream.OutStream._setup_stream_redirects, iostream.OutStream.write, iostream.OutStream.flush
    stream_init = iostream.OutStream.__init__
    streams = weakref.WeakSet()
    monotonic_ns = time.monotonic_ns
    in_pipe = _pipe_counter()

    def setup_stream_redirects(self, name):
        setup(self, name)
        pipe = os.fstat(self._fid)
        fd = os.dup(getattr(sys, name).fileno())
        end = os.fstat(fd)
        if (end.st_dev, end.st_ino) == (pipe.st_dev, pipe.st_ino):
            self._ipb_pipe = (fd, pipe.st_dev, pipe.st_ino)
        else:
            os.close(fd)

    def to_pipe(pipe, text):
        # In writes of at most PIPE_BUF (4096) bytes, which a pipe takes whole, so that children
        # writing at once do not cut each other's characters or lines: each ends after the last
        # newline in it, or else between two characters. A non-blocking pipe (its flag is the
        # pipe's, so the kernel or a command may have set it) is waited for, as a blocking one
        # would be. Returns False when nothing was written and the descriptor is not the pipe's.
        fd, dev, ino = pipe
        data = memoryview(text.encode('utf-8', 'replace'))
        try:
            end = os.fstat(fd)
        except OSError:
            return False
        if (end.st_dev, end.st_ino) != (dev, ino):
            return False
        start = 0
        try:
            while start < len(data):
                stop = min(start + 4096, len(data))
                if stop < len(data):
                    line = data.obj.rfind(b'\n', start, stop)
                    if line >= start:
                        stop = line + 1
                    else:
                        while stop > start + 1 and data[stop] & 0xC0 == 0x80:
                            stop -= 1
                try:
                    start += os.write(fd, data[start:stop])
                except BlockingIOError:
                    poller = select.poll()
                    poller.register(fd, select.POLLOUT)
                    poller.poll()
        except OSError:
            return start > 0
        return True

    def child_write(self, string):
        # Whole lines (a print is two writes, its text and its newline); what follows the last
        # newline waits for the next write or a flush, as in a pipe's line buffer, unless it is
        # long.
        pending = self._ipb_pending + string
        cut = pending.rfind('\n') + 1
        if len(pending) - cut > 1 << 16:
            cut = len(pending)
        out, self._ipb_pending = pending[:cut], pending[cut:]
        if out and not to_pipe(self._ipb_pipe, out):
            write(self, out)

    def flushed(self):
        if self._ipb_forked and self._ipb_pending:
            out, self._ipb_pending = self._ipb_pending, ''
            if not to_pipe(self._ipb_pipe, out):
                write(self, out)
        return flush(self)

    def look(self):
        # The pipe first, then the flag: when the pipe is empty, what was in it has been read,
        # and its hand-over has ended unless the flag (set before each read) is still set.
        if not in_pipe(self._fid) and not self._ipb_reading:
            return
        handed = self._ipb_handed
        thread = self.watch_fd_thread
        if thread is threading.current_thread() or not thread.is_alive() or not handed.acquire(timeout=bound):
            return
        try:
            waiting = in_pipe(self._fid)
            if waiting:
                target = self._ipb_handed_bytes + waiting
                handed.wait_for(lambda: self._ipb_handed_bytes >= target or not thread.is_alive(), bound)
        finally:
            handed.release()

    def ordered_write(self, string):
        if not self._ipb_forked:
            now = monotonic_ns()
            if now - self._ipb_looked >= look_every and self._ipb_pipe is not None:
                self._ipb_looked = now
                look(self)
        elif (self._ipb_pipe is not None and self.echo is None and self.pub_thread is not None and
              isinstance(string, str)):
            child_write(self, string)
            return len(string)
        return write(self, string)

    def init(self, *args, **kwargs):
        streams.add(self)
        stream_init(self, *args, **kwargs)

    def fresh_in_child():
        for stream in streams:
            stream._ipb_forked = True
            stream._ipb_pending = ''
            stream._buffer_lock = threading.RLock()
            stream._buffer = io.StringIO()

    def is_master_process(self):
        return not self._ipb_forked

    iostream.OutStream._ipb_pipe = None
    iostream.OutStream._ipb_forked = False
    iostream.OutStream._ipb_reading = False
    iostream.OutStream._ipb_looked = 0
    iostream.OutStream._ipb_pending = ''
    iostream.OutStream.__init__ = init
    iostream.OutStream._is_master_process = is_master_process
    iostream.OutStream._setup_stream_redirects = setup_stream_redirects
    iostream.OutStream.write = ordered_write
    iostream.OutStream.flush = flushed
    _UNINTERRUPTED.add(look.__code__)
    os.register_at_fork(after_in_child=fresh_in_child)


def _reply_without_sleep():
    """ipykernel sleeps 0.5 ms between flushing a cell's output and sending its execute_reply
    (Kernel._execute_sleep, a workaround for clients that stop reading output at the reply).
    The supervisor ends a cell at its reply and its idle status, which the iopub thread sends
    after every output of the cell (a forked child's too, once the child flushed it; and what
    was written to fds 1 and 2, since flush() waits for _watch_fds's thread), so the sleep only
    delayed each cell: 0 by default here. A config file can still set it."""
    from ipykernel.kernelbase import Kernel
    Kernel.class_traits()['_execute_sleep'].default_value = 0.0
