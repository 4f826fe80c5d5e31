# The sandbox's zygote (architecture.md, "Zygote kernels"), part of the kernel's launcher: the
# launcher is supervisor/kernel_standby.py, this file and supervisor/kernel_launch.py, joined in
# that order by kernel_launch.S and run as one `python -c` script (kernel_launch.py's main() is
# last). Started by the shim with a SOCK_SEQPACKET socket on fd 3, the interpreter is the
# zygote (_zygote): prepare() and parsed_app() once, then a kernel forked for each FORK record,
# which makes fresh what a new interpreter has fresh and runs run() with the app the zygote
# parsed; and, with --standby, a standby kernel for each STANDBY record (kernel_standby.py).
# Nothing here is a security boundary for the sandbox: code in a kernel may undo all of it,
# and then only harms its own session (what the zygote must never do is in architecture.md).


def _import_psutil_as_pid1():
    """psutil looks at /proc/<its pid> at import: its Linux module sets HAS_PROC_SMAPS and
    HAS_PROC_SMAPS_ROLLUP from smaps and smaps_rollup there and defines Process.io_counters
    only where io is, and psutil's Process takes io_counters and memory_maps from that. The
    zygote has no pid in the kernels' /proc (P1's): /proc/<its pid> is another process or none.
    So in the zygote psutil is imported first, with os.getpid() answering 1 to psutil's own
    code: PID 1 of P1 (the shim, which the sandbox cannot change) is a process there, as every
    kernel will be, and K checks the answers against its own pid (_pid_view_differs). Returns
    why it failed, or None."""
    import os, sys
    getpid = os.getpid

    def pid_for_psutil():
        if sys._getframe(1).f_globals.get('__name__', '').partition('.')[0] == 'psutil':
            return 1
        return getpid()

    os.getpid = pid_for_psutil
    try:
        import psutil  # noqa: F401
    except ImportError:
        pass
    finally:
        os.getpid = getpid
    for name, m in list(sys.modules.items()):
        d = getattr(m, '__dict__', None)
        if isinstance(d, dict) and any(v is pid_for_psutil for v in d.values()):
            return 'module %s kept the os.getpid of psutil\'s import' % name
    return None


def _pid_view_differs():
    """True when what psutil found at the zygote's import (/proc/1, _import_psutil_as_pid1) is
    not what it finds for this process, as a fresh start would have imported it."""
    import os, sys
    pslinux = sys.modules.get('psutil._pslinux')
    if pslinux is None:
        return False
    found = (getattr(pslinux, 'HAS_PROC_SMAPS', None), getattr(pslinux, 'HAS_PROC_SMAPS_ROLLUP', None),
             hasattr(getattr(pslinux, 'Process', None), 'io_counters'))
    pid = os.getpid()
    return found != tuple(os.path.exists('/proc/%d/%s' % (pid, f)) for f in ('smaps', 'smaps_rollup', 'io'))


def _exec_slow():
    """Start fresh, in place: same pid, same argv, today's start (fd 3 is closed: the slow way)."""
    import os
    with open('/proc/self/cmdline', 'rb') as f:
        argv = f.read().split(b'\0')[:-1]
    os.execv(argv[0], argv)


def _warm_caches():
    """Work every kernel does at its first cell, done once in the zygote: IPython's input
    transformer tokenizes the cell, and tokenize compiles its pattern at the first call (1.5 ms).
    A constant string, through a TransformerManager of our own: it fills only the caches of
    the re and tokenize modules (the same patterns a kernel would compile), no state of a
    kernel's shell, which is made in the kernel.

    And the patterns that every kernel's initialize() compiled (0.8 ms), all constants of
    IPython: the completer's default delimiters (a CompletionSplitter of our own, no shell),
    IPCompleter's three patterns, and `*.py`, `*.ipy` of the config and startup file globs
    (fnmatch's cache and re's; the directories are listed by the kernel). A kernel configured
    otherwise compiles its own, as a slow start does. test_zygote checks that a forked kernel's
    first cell finds in re's cache the patterns a slow kernel's finds, no more."""
    import fnmatch, re
    from IPython.core.completer import CompletionSplitter
    from IPython.core.inputtransformer2 import TransformerManager
    from jupyter_client.jsonutil import parse_date
    TransformerManager().transform_cell('1 + 1\n')
    CompletionSplitter()
    for pattern in (r'([^\\] )', r'^[\w|\s.]+\(([^)]*)\).*', r'[\s|\[]*(\w+)(?:\s*=\s*.*)'):
        re.compile(pattern)
    for pattern in ('*.py', '*.ipy'):
        fnmatch.filter((), pattern)
    # A message's header date, parsed by dateutil (its first parse builds its parser's tables):
    # every kernel parses one at its first message.
    parse_date('2000-01-01T00:00:00.000000Z')


def _user_site_runs_code():
    """True when the user site holds what a fresh start would run or import instead of what the
    zygote loaded: .pth files, usercustomize/sitecustomize, a module of a name the zygote has."""
    import os, site, sys
    loaded = frozenset(m.partition('.')[0] for m in _ZYGOTE_MODULES or sys.modules)
    try:
        names = os.listdir(site.getusersitepackages())
    except OSError:
        return False
    for n in names:
        base = n.partition('.')[0]
        if (n.endswith('.pth') or base in ('usercustomize', 'sitecustomize') or
                (base in loaded and not n.endswith(('.dist-info', '.egg-info')))):
            return True
    return False


# The modules the zygote had at READY (set there; every forked kernel inherits it).
_ZYGOTE_MODULES = None


def _zygote_channel():
    """fd 3 as the zygote's channel when the shim made this interpreter a zygote (a
    SOCK_SEQPACKET socket there), else None: a kernel started the slow way has only fds 0-2."""
    import os, stat, socket
    try:
        if not stat.S_ISSOCK(os.fstat(3).st_mode):
            return None
    except OSError:
        return None
    chan = socket.socket(fileno=3)
    if chan.type != socket.SOCK_SEQPACKET:
        chan.detach()
        return None
    return chan


def _zygote(chan, env):
    """Never runs user code: imports what every kernel needs (psutil first, then prepare()),
    parses the kernel's argv (parsed_app()) and warms caches (_warm_caches), then forks a
    kernel for each FORK record from the sandbox's PID 1 (kernel-shim/zygote_proto.h)."""
    import ctypes, errno, gc, os, random, select, signal, site, socket, stat, struct, sys, threading, time
    global _ZYGOTE_MODULES
    _set_sys_path()
    why = _import_psutil_as_pid1()
    wrap_magics = prepare()
    app = parsed_app()
    _warm_caches()
    libc = ctypes.CDLL(None, use_errno=True)
    rec = struct.Struct('=IIii')
    FORK, READY, STARTED, FAILED = 1, 2, 3, 4
    STANDBY, PREPARED, ACTIVATE, ACTIVE, DECLINED = 6, 7, 8, 9, 10
    nrs = _standby_supported()

    def die(why):
        sys.stderr.write('ipybox: the zygote: %s\n' % why)
        sys.stderr.flush()
        os._exit(70)

    if why:
        die(why)
    if threading.active_count() != 1:
        die('a thread was started while importing')
    # IPython.utils.io opens os.devnull at import; a kernel keeps it, as a fresh one has it.
    # Anything else open now would be shared by every kernel.
    keep = []
    for fd in range(4, 256):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3):
            keep.append(fd)
            continue
        die('fd %d is open after the imports' % fd)

    class Refuser:
        """An import in the zygote after READY is a bug: it would read what the sandbox may
        have written meanwhile."""
        @staticmethod
        def find_spec(name, path=None, target=None):
            die('import of %s after READY' % name)

    refuser = Refuser()
    # The top-level names of the modules every kernel has at its fork (no import after READY).
    _ZYGOTE_MODULES = frozenset(sys.modules)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    gc.disable()
    gc.freeze()
    sys.meta_path.insert(0, refuser)
    # Nothing buffered may be written again by every kernel.
    sys.stdout.flush()
    sys.stderr.flush()
    chan.send(rec.pack(READY, 0, 0, 0))

    def fresh(keep_fd=-1, standby=False):
        """In a forked child: fresh what a new interpreter has fresh. A standby keeps its signals
        blocked (they came blocked from the fork) and stays non-dumpable until it is activated."""
        sys.meta_path.remove(refuser)
        chan.detach()
        low = 3
        for fd in sorted(keep + [keep_fd] if keep_fd >= 0 else keep) + [1 << 16]:
            os.closerange(low, fd)
            low = fd + 1
        os.setsid()
        if not standby:
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
        signal.set_wakeup_fd(-1)
        for s in signal.valid_signals():
            if s in (signal.SIGKILL, signal.SIGSTOP):
                continue
            try:
                signal.signal(s, signal.SIG_DFL)
            except (OSError, ValueError, RuntimeError):
                pass
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        if not standby:
            libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE 1, as an exec would make it
        gc.enable()
        # CPython's at-fork hook keeps the parent's thread id here (the zygote's pid in P0).
        threading.main_thread()._set_native_id()
        os.environ.clear()
        os.environ.update({k: v for k, v in env.items() if k != 'PYTHONUSERBASE'})
        site.USER_BASE = None
        site.USER_SITE = None
        random.seed()
        # A, our parent, exits at once (meanwhile the steps above); the parent-death signal
        # is set before anything can exec.
        while os.getppid() != 1:
            time.sleep(0.0002)
        if libc.prctl(1, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != 1:  # PR_SET_PDEATHSIG
            os._exit(1)

    def kernel():
        """K, the kernel: fresh what a new interpreter would have fresh, then run()."""
        fresh()
        # Code the sandbox put in the user site runs at a fresh start: then start fresh, in
        # place (same pid, same argv, today's start).
        if _user_site_runs_code() or _pid_view_differs():
            _exec_slow()
        run(wrap_magics, app)

    def standby(sock, sgen, base):
        """A standby kernel: prepared (_standby_prepare), it waits for ZY_ACTIVATE from PID 1,
        checks (_standby_declines), and becomes the kernel of that generation. It exits when it
        cannot be prepared or declines; PID 1 then forks the kernel from the zygote."""
        fresh(sock.fileno(), standby=True)
        if _user_site_runs_code() or _pid_view_differs() or _standby_attrs(libc, nrs) != base:
            os._exit(0)
        st = _standby_prepare(app)
        if st is None:
            os._exit(0)
        sock.send(rec.pack(PREPARED, sgen, 0, 0))
        data = sock.recv(rec.size + 1)
        if len(data) != rec.size:
            os._exit(0)
        kind, gen, a, b = rec.unpack(data)
        if kind != ACTIVATE or a or b:
            os._exit(0)
        why = _standby_declines(st, base, _standby_attrs(libc, nrs))
        if why:
            sock.send(rec.pack(DECLINED, gen, why, 0))
            os._exit(0)
        # Signals sent while it waited are dropped (setting SIG_IGN discards a pending signal),
        # then it has the dispositions a fresh kernel has at this point, unblocked.
        handlers = {}
        for s in signal.valid_signals():
            if s in (signal.SIGKILL, signal.SIGSTOP):
                continue
            try:
                handlers[s] = signal.signal(s, signal.SIG_IGN)
            except (OSError, ValueError, RuntimeError):
                pass
        for s, h in handlers.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE 1: it is the kernel now
        sock.send(rec.pack(ACTIVE, gen, 0, 0))
        sock.close()
        _standby_activate(app, st)
        if wrap_magics:
            wrap_magics(app.shell)
        app.start()

    def reap(pid):
        while True:
            try:
                os.waitpid(pid, 0)
                return
            except InterruptedError:
                continue
            except ChildProcessError:
                return

    def closefds(extra=()):
        low = 4
        for fd in sorted(keep + list(extra)) + [1 << 16]:
            os.closerange(low, fd)
            low = fd + 1

    def fork_kernel(gen):
        """A: born in the kernels' namespace (P1 holds no other process: the START follows
        KILL_ALL); forks the kernel, says its pid, and goes. K is then a child of the
        namespace's PID 1, which reaps it."""
        try:
            pid = os.fork()
        except OSError as e:
            chan.send(rec.pack(FAILED, gen, e.errno or errno.EAGAIN, 0))
            return
        if pid:
            reap(pid)
            return
        try:
            closefds()
            kpid = os.fork()
        except OSError as e:
            chan.send(rec.pack(FAILED, gen, e.errno or errno.EAGAIN, 0))
            os._exit(0)
        if kpid == 0:
            kernel()
            sys.exit(0)
        try:
            chan.send(rec.pack(STARTED, gen, kpid, 0))
        finally:
            os._exit(0)

    def fork_standby(sgen):
        """A standby, forked while the kernel runs: A is in P1 beside it, where kernel code can
        stop or kill it, so A only forks the standby and tells the zygote its pid through a pipe;
        the zygote waits for A within a bound (then kills it) and answers PID 1 itself, exactly
        once: STARTED with the standby's channel, or FAILED."""
        base = _standby_attrs(libc, nrs)
        if base is None:
            chan.send(rec.pack(FAILED, sgen, errno.ENOTSUP, 0))
            return
        pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        rpipe, wpipe = os.pipe()
        # Born with every signal blocked: kernel code may signal it from its first moment.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        try:
            pid = os.fork()
        except OSError as e:
            pid, err = -1, e.errno or errno.EAGAIN
        if pid == 0:
            try:
                chan.detach()
                os.close(3)
                os.close(rpipe)
                pair[0].close()
                closefds([pair[1].fileno(), wpipe])
                kpid = os.fork()
                if kpid == 0:
                    os.close(wpipe)
                    standby(pair[1], sgen, base)
                    sys.exit(0)
                os.write(wpipe, struct.pack('i', kpid))
            finally:
                os._exit(0)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(wpipe)
        pair[1].close()
        kpid = 0
        if pid > 0:
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                pidfd = -1
            if pidfd >= 0:
                poller = select.poll()
                poller.register(pidfd, select.POLLIN)
                ended = bool(poller.poll(1000))
                os.close(pidfd)
            else:
                deadline = time.monotonic() + 1
                while not (ended := os.waitpid(pid, os.WNOHANG)[0] == pid) and time.monotonic() < deadline:
                    time.sleep(0.001)
                pid = 0 if ended else pid
            if not ended:
                os.kill(pid, signal.SIGKILL)
            if pid:
                reap(pid)
            data = os.read(rpipe, 5) if select.select([rpipe], [], [], 0)[0] else b''
            kpid = struct.unpack('i', data)[0] if len(data) == 4 else 0
            err = errno.ETIMEDOUT
        os.close(rpipe)
        if kpid > 1:
            chan.sendmsg([rec.pack(STARTED, sgen, kpid, 0)],
                         [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack('i', pair[0].fileno()))])
        else:
            chan.send(rec.pack(FAILED, sgen, err, 0))
        pair[0].close()

    while True:
        try:
            data = chan.recv(rec.size + 1)
        except InterruptedError:
            continue
        if len(data) != rec.size:
            die('malformed record from PID 1' if data else 'PID 1 is gone')
        kind, gen, a, b = rec.unpack(data)
        if kind not in (FORK, STANDBY) or a or b:
            die('malformed record from PID 1')
        if kind == FORK:
            fork_kernel(gen)
        elif nrs is None:
            chan.send(rec.pack(FAILED, gen, errno.ENOTSUP, 0))
        else:
            fork_standby(gen)
