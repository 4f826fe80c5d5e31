# The kernel's launcher (run as `python -c <this> -f connection.json` in the sandbox; embedded
# by kernel_launch.S). It does what `python -m ipykernel_launcher` does, plus:
# - the working directory /app and the user site-packages directory (created and put on
#   sys.path, so that `!pip install` results import at once);
# - no debugger: importing debugpy is a quarter of the kernel's start-up and no tool offers
#   debugging (the block is lifted once ipykernel has looked, so code can import debugpy);
# - interrupts that reach only user code (_gate_interrupts);
# - output that waits for the supervisor instead of piling up (_bound_output);
# - with --approve-shell (SHELL_GATE, set by the supervisor in our argv), shell commands that
#   ask the application first (_shell_gate);
# - the connection file left as the supervisor wrote it (_keep_connection_file).
# Started by the shim with a SOCK_SEQPACKET socket on fd 3, it is the sandbox's zygote instead
# (_zygote; architecture.md, "Zygote kernels"): prepare() and parsed_app() once, then a kernel
# forked for each FORK record, which makes fresh what a new interpreter has fresh and runs
# run() with the app the zygote parsed.
# Nothing here is a security boundary: code in the kernel may undo all of it, and then only
# harms its own session.


def _gate_interrupts():
    """SIGINT raises KeyboardInterrupt only inside the code of a cell, and once per cell.

    ipykernel installs the default handler for the whole of each request, so an interrupt
    that lands outside the cell's code (before it starts, while the reply is sent, in
    IPython's bookkeeping) used to break the request: no reply came, or the kernel exited.
    Inside InteractiveShell.run_code, below its frame, every exception is caught and shown
    as the cell's error; that is the only place the interrupt is raised. Elsewhere it is
    dropped, and the supervisor sends it again while the cell has not ended."""
    import asyncio
    import contextlib
    import signal
    from IPython.core.interactiveshell import InteractiveShell
    from ipykernel.ipkernel import IPythonKernel
    from ipykernel.kernelbase import Kernel

    run_code = InteractiveShell.run_code
    target = run_code.__code__
    state = {"cell": 0, "raised": -1}

    async def counted_run_code(self, *args, **kwargs):
        state["cell"] += 1
        return await run_code(self, *args, **kwargs)

    def on_sigint(signum, frame):
        if state["raised"] == state["cell"]:
            return
        # run_code's own frame is not safe (its try has not begun, or has ended): only a frame
        # it called.
        f = frame.f_back if frame is not None and frame.f_code is not target else None
        while f is not None:
            if f.f_code is target:
                state["raised"] = state["cell"]
                raise KeyboardInterrupt
            f = f.f_back

    def pre_handler_hook(self):
        self.saved_sigint_handler = signal.signal(signal.SIGINT, on_sigint)

    # A cell with top-level await runs as a task on the kernel's event loop; ipykernel 6.17
    # cancels it from its io_loop's thread, which does not wake the event loop, so the cell
    # never ended (no reply: a restart). The task is cancelled on its own loop instead; the
    # CancelledError surfaces in the cell's code and run_code reports it as the cell's error.
    @contextlib.contextmanager
    def cancel_on_sigint(self, future):
        loop = asyncio.get_event_loop()

        def handle_sigint(*args):
            loop.call_soon_threadsafe(lambda: None if future.done() else future.cancel())

        saved = signal.signal(signal.SIGINT, handle_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, saved)

    InteractiveShell.run_code = counted_run_code
    Kernel.pre_handler_hook = pre_handler_hook
    IPythonKernel._cancel_on_sigint = cancel_on_sigint


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


def _keep_connection_file():
    """ipykernel writes the connection file again once its sockets are bound (unlink, then a
    new file with the same ports and key): the supervisor wrote it (kernel.c) and never reads
    it back, so the kernel leaves it as it is."""
    from ipykernel import kernelapp

    def write_connection_file(self):
        pass

    kernelapp.IPKernelApp.write_connection_file = write_connection_file


def _shell_gate(escape):
    """Every shell command of IPython asks first, through the tool channel, as server "ipybox":
    tool "shell" for !cmd, !!cmd, %sx, %system, %sc, aliases, %pip and getoutput (the command as
    IPython expanded it, {var} and $var filled in: the hooks sit where IPython hands the final
    string to its process runner), tool "shell_magic" for %%bash, %%sh, %%script and the other
    script magics (the cell; the magic's line first when it has one, or for an interpreter
    other than bash or sh). A command that is not approved does not run: the cell gets
    ShellCommandRejected (a mcptools.ToolRejected). With escape (require_shell_escape),
    subprocess, os.system, os.exec*, os.spawn*, os.posix_spawn* and pty.spawn raise RuntimeError
    (ipybox's messages) except while an approved command runs. Returns the function that wraps
    the shell's script magics (they exist once the shell does)."""
    import contextvars
    import os
    import subprocess
    from IPython.core import interactiveshell
    from ipykernel import zmqshell
    from mcptools import _runtime

    class ShellCommandRejected(_runtime.ToolRejected):
        """The application did not approve a shell command (it did not run)."""

    ShellCommandRejected.__module__ = "mcptools"
    # Set only in the context of an approved command. Script magics start their process on
    # their event loop's thread, in a coroutine handed over with run_coroutine_threadsafe: its
    # task runs in a copy of the caller's context, so the approval goes with it, and with
    # nothing else that thread (or any other) runs meanwhile.
    allowed = contextvars.ContextVar("ipybox_shell_allowed", default=False)

    def ask(tool, cmd):
        if not isinstance(cmd, str):
            raise TypeError("a shell command must be a str, not %s" % type(cmd).__name__)
        try:
            _runtime.call("ipybox", tool, {"cmd": cmd})
        except _runtime.ToolRejected as e:
            why = e.message.split(" was rejected: ", 1)[-1]
            shown = cmd if len(cmd) <= 200 else cmd[:200] + "..."
            raise ShellCommandRejected("ipybox", tool, "rejected",
                                       "Rejected: the shell command %r did not run: %s" % (shown, why)) from None

    def gated(run):
        def run_approved(cmd, *args, **kwargs):
            ask("shell", cmd)
            token = allowed.set(True)
            try:
                return run(cmd, *args, **kwargs)
            finally:
                allowed.reset(token)
        return run_approved

    # ZMQInteractiveShell.system_piped (!cmd) and InteractiveShell.getoutput (!!cmd, %sx,
    # %system, %sc) call these module globals with the expanded command.
    zmqshell.system = gated(zmqshell.system)
    interactiveshell.system = gated(interactiveshell.system)
    interactiveshell.getoutput = gated(interactiveshell.getoutput)

    if escape:
        def permitted():
            return allowed.get()

        popen = subprocess.Popen

        class GuardedPopen(popen):
            def __init__(self, *args, **kwargs):
                if not permitted():
                    raise RuntimeError("Direct subprocess calls are not allowed. Use ! syntax.")
                super().__init__(*args, **kwargs)

        GuardedPopen.__name__ = GuardedPopen.__qualname__ = "Popen"
        GuardedPopen.__module__ = "subprocess"
        subprocess.Popen = GuardedPopen

        def guard(name, fn, message):
            def guarded(*args, **kwargs):
                if not permitted():
                    raise RuntimeError(message)
                return fn(*args, **kwargs)
            guarded.__name__ = guarded.__qualname__ = name
            guarded.__wrapped__ = fn
            return guarded

        os.system = guard("system", os.system, "Direct os.system() calls are not allowed. Use ! syntax.")
        for name in ("execv", "execve", "execl", "execle", "execvp", "execvpe", "execlp", "execlpe",
                     "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe",
                     "posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                setattr(os, name, guard(name, getattr(os, name),
                                        "Direct os.%s() calls are not allowed. Use ! syntax." % name))
        import pty
        pty.spawn = guard("spawn", pty.spawn, "Direct pty.spawn() calls are not allowed. Use ! syntax.")

    def wrap_magics(shell):
        cells = shell.magics_manager.magics["cell"]
        script = shell.magics_manager.registry.get("ScriptMagics")
        for name in list(script.magics["cell"]) if script is not None else ():
            fn = cells.get(name)
            if fn is None:
                continue

            def magic(line, cell, _name=name, _fn=fn):
                plain = _name in ("bash", "sh") and not line.strip()
                ask("shell_magic", cell if plain else "%%%%%s %s\n%s" % (_name, line, cell))
                token = allowed.set(True)
                try:
                    return _fn(line, cell)
                finally:
                    allowed.reset(token)

            magic.__name__ = magic.__qualname__ = name
            magic.__doc__ = fn.__doc__
            cells[name] = magic

    return wrap_magics


def _set_sys_path():
    """No cwd on sys.path (`-c` put it first), and /opt/ipybox, a read-only bind, last. Done
    before any import; doing it again changes nothing."""
    import sys
    if sys.path and sys.path[0] in ('', '/'):
        del sys.path[0]
    if MCPDIR not in sys.path:
        sys.path.append(MCPDIR)


def prepare():
    """What every kernel of a sandbox imports and patches the same way: the zygote runs this
    once (kernel_launch.py's zygote part), the slow way runs it and run() in one process.
    Reads nothing the sandbox writes. Returns the function that wraps the shell's magics, or
    None."""
    import sys
    _set_sys_path()
    sys.modules['debugpy'] = None
    try:
        import ipykernel.ipkernel
    except ImportError as e:
        # The supervisor turns this line into the error that says how to install it.
        sys.stderr.write('ipybox: no ipykernel: %s\n' % (e,))
        sys.exit(3)
    del sys.modules['debugpy']
    _gate_interrupts()
    _bound_output()
    _keep_connection_file()
    wrap_magics = _shell_gate(SHELL_GATE == 2) if SHELL_GATE else None
    from ipykernel import kernelapp  # noqa: F401
    # What initialize() imports besides (init_io, the shell's completer): they read nothing
    # at import.
    import faulthandler  # noqa: F401
    import IPython.core.completerlib  # noqa: F401
    return wrap_magics


def parsed_app():
    """IPKernelApp.instance() with our argv parsed: what initialize() does first, for the
    zygote to do once. The argv is fixed (the kernel's, which the zygote has too), and
    neither the instance nor the parse reads a file, the cwd, the pid or the time, or starts
    a thread (architecture.md, "Zygote kernels"); the values set come from the argv and the
    classes' defaults. Nothing else of initialize() may move here: the profile and its
    config files are in $HOME, which the sandbox writes."""
    from ipykernel import kernelapp
    app = kernelapp.IPKernelApp.instance()
    app.parse_command_line()
    return app


def _enter_app():
    """cwd /app, and the user site on sys.path (created, so that `!pip install --user` results
    import at once)."""
    import os, sys, site
    os.chdir('/app')
    user_site = site.getusersitepackages()
    os.makedirs(user_site, exist_ok=True)
    if user_site not in sys.path:
        at = next((i for i, p in enumerate(sys.path) if p.endswith(('dist-packages', 'site-packages'))),
                  len(sys.path))
        sys.path.insert(at, user_site)


def run(wrap_magics, app=None):
    """The rest of a kernel's start, in the kernel itself: cwd /app, the user site on
    sys.path, IPKernelApp's initialize() (the connection file, sockets, threads, the shell from
    the profile in $HOME) and start(). A forked kernel has its app from parsed_app(), parsed
    in the zygote: initialize() then does all but the parse."""
    _enter_app()
    from ipykernel import kernelapp
    # What kernelapp.launch_new_instance() does, with the shell's magics wrapped in between.
    if app is None:
        app = kernelapp.IPKernelApp.instance()
        app.initialize()
    else:
        app.parse_command_line = lambda argv=None: None
        try:
            app.initialize()
        finally:
            del app.parse_command_line
    if wrap_magics:
        wrap_magics(app.shell)
    app.start()


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
    TransformerManager().transform_cell('1 + 1\n')
    CompletionSplitter()
    for pattern in (r'([^\\] )', r'^[\w|\s.]+\(([^)]*)\).*', r'[\s|\[]*(\w+)(?:\s*=\s*.*)'):
        re.compile(pattern)
    for pattern in ('*.py', '*.ipy'):
        fnmatch.filter((), pattern)


# The standby kernel (--standby; architecture.md, "The standby kernel"): a kernel forked from the
# zygote beside the running one, which builds IPython's shell (the largest part of a start) and
# waits; a reset activates it instead of forking. Kernel code has its uid and can name it, so
# until then it holds every signal blocked, is not dumpable, has no socket and no key, and
# before it takes over it checks that nothing kernel code could change in it, or under it, did.

# ipykernel 6.17's IPKernelApp.initialize(), whose steps the standby runs in two parts
# (_standby_prepare, _standby_activate): another version gets no standby.
_INITIALIZE_NAMES = (
    '_init_asyncio_patch', 'super', 'initialize', 'subapp', 'init_pdb', 'init_blackhole',
    'init_connection_file', 'init_poller', 'init_sockets', 'init_heartbeat', 'write_connection_file',
    'log_connection_info', 'init_io', 'init_signal', 'Exception', 'log_level', 'logging', 'CRITICAL',
    'log', 'error', 'init_kernel', 'init_path', 'init_shell', 'shell', 'init_gui_pylab',
    'init_extensions', 'init_code', 'sys', 'stdout', 'flush', 'stderr')
# sched_getattr and ioprio_get, by machine.
_STANDBY_SYSCALLS = {'x86_64': (315, 252), 'aarch64': (275, 31)}


def _standby_supported():
    """The syscall numbers the standby's checks need, or None when this machine or ipykernel is
    not one the standby was made for. Imports nothing: the zygote runs it whether the standby is
    on or not, and its modules are every kernel's."""
    import os
    from ipykernel import kernelapp
    init = kernelapp.IPKernelApp.initialize
    while hasattr(init, '__wrapped__'):
        init = init.__wrapped__
    if init.__code__.co_names != _INITIALIZE_NAMES:
        return None
    return _STANDBY_SYSCALLS.get(os.uname().machine)


def _standby_attrs(libc, nrs):
    """What a process of the same uid can change in another and that process cannot undo: its
    scheduling attributes (policy, nice, utilization clamps), I/O priority, resource limits and
    CPU affinity. None when one cannot be read."""
    import ctypes, os
    buf = ctypes.create_string_buffer(56)
    if libc.syscall(nrs[0], 0, buf, 56, 0) != 0:
        return None
    io = libc.syscall(nrs[1], 1, 0)  # IOPRIO_WHO_PROCESS, self
    if io < 0:
        return None
    limits = []
    for i in range(16):  # RLIM_NLIMITS
        lim = ctypes.create_string_buffer(16)
        if libc.getrlimit(i, lim) != 0:
            return None
        limits.append(lim.raw)
    return (buf.raw, io, tuple(limits), frozenset(os.sched_getaffinity(0)), os.getpriority(os.PRIO_PROCESS, 0))


def _stat_key(path):
    """What says whether path changed: its identity, size and times, or that it is missing."""
    import os
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return ('error', e.errno)
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _standby_prepare(app):
    """Everything of initialize() up to its sockets that reads no key and starts no thread: the
    profile, the config files, the shell (with its history thread held back). Returns what
    _standby_activate needs, or None when this start cannot be prepared (the reset forks)."""
    import os, sys
    from ipykernel import ipkernel, zmqshell
    from ipykernel.compiler import XCachingCompiler
    from IPython.core import history
    from IPython.core.application import BaseIPythonApplication
    from traitlets.config import loader
    _enter_app()
    modules = set(sys.modules)
    # Every config file a load looked for, found or not: one that appears or changes before the
    # activation must take effect, so the standby then declines. A Python config file is code the
    # sandbox wrote: it must run after the reset, as in a forked kernel (it could read files the
    # old kernel changes later, fork, start threads), so the standby never runs one: when one
    # exists there is no standby. JSON config files are data, read now and checked again.
    looked = {}
    saved = {}
    python_config = []

    def candidates(loader_):
        paths = loader_.path if isinstance(loader_.path, (list, tuple)) else [loader_.path or '.']
        return [os.path.join(os.path.expandvars(os.path.expanduser(p)), loader_.filename) for p in paths]

    def load_py(self):
        # Never runs the file. (IPython's load_config_file turns any error of a loader into a
        # warning and goes on, so what was found is kept here, and checked after.)
        for f in candidates(self):
            looked[f] = _stat_key(f)
            if looked[f] is not None:
                python_config.append(f)
        raise loader.ConfigFileNotFound('Could not find file: %s' % self.filename)

    def load_json(self, _orig=loader.JSONFileConfigLoader.load_config):
        for f in candidates(self):
            looked[f] = _stat_key(f)
        return _orig(self)

    for cls, fn in ((loader.PyFileConfigLoader, load_py), (loader.JSONFileConfigLoader, load_json)):
        saved[cls] = cls.load_config
        cls.load_config = fn
    app._init_asyncio_patch()
    app.parse_command_line = lambda argv=None: None
    try:
        BaseIPythonApplication.initialize(app)
    finally:
        del app.parse_command_line
        for cls, fn in saved.items():
            cls.load_config = fn
    if python_config or app.subapp is not None or app.kernel_class is not ipkernel.IPythonKernel:
        return None
    for section in ('Kernel', 'IPythonKernel', 'IPKernelApp'):
        if 'shell_class' in app.config.get(section, {}) or 'kernel_class' in app.config.get(section, {}):
            return None
    # The history database is opened, and the session recorded in it, at activation, as a forked
    # kernel opens it: kernel code may overwrite or corrupt it meanwhile (a kernel that opens a
    # corrupt one moves it aside and starts a new one); its saving thread starts then too.
    held = []
    start, init_db, new_session = (history.HistorySavingThread.start, history.HistoryAccessor.init_db,
                                   history.HistoryManager.new_session)
    history.HistorySavingThread.start = lambda thread: held.append(thread)
    history.HistoryAccessor.init_db = lambda accessor: setattr(accessor, 'db', history.DummyDB())
    history.HistoryManager.new_session = lambda manager, conn=None: None
    try:
        shell = zmqshell.ZMQInteractiveShell.instance(parent=app, profile_dir=app.profile_dir, user_module=None,
                                                     user_ns=app.user_ns, kernel=None,
                                                     compiler_class=XCachingCompiler)
    finally:
        history.HistorySavingThread.start = start
        history.HistoryAccessor.init_db = init_db
        history.HistoryManager.new_session = new_session
    # The display formatters, which a kernel makes at its first result (~3 ms of its first cell),
    # from the config read above; _standby_activate applies it again if startup code changed it.
    shell.display_formatter.formatters
    dirs = [app.ipython_dir, app.profile_dir.location]
    hist = getattr(shell.history_manager, 'hist_file', None)
    if isinstance(hist, str) or hasattr(hist, '__fspath__'):
        dirs.append(os.fspath(hist))
    # Identity and mode (a forked kernel falls back to a temporary IPython directory when it
    # cannot write this one): the old kernel writes its history, so not size or times.
    ident = {d: (_stat_key(d) or (None,) * 3)[:3] for d in dirs}
    if _threads() != 1:
        return None
    return {'shell': shell, 'held': held, 'looked': looked, 'ident': ident, 'modules': modules}


def _standby_declines(st, base, now):
    """Why the prepared standby may not become the kernel (ZY_DECLINED's reason), or 0."""
    import sys
    if now != base:
        return 1  # its scheduling, limits, affinity or I/O priority were changed
    if any(_stat_key(f) != k for f, k in st['looked'].items()):
        return 2  # a config file appeared or changed
    if any((_stat_key(d) or (None,) * 3)[:3] != k for d, k in st['ident'].items()):
        return 2
    if set(sys.modules) - st['modules']:
        return 2  # the config imported modules, which may have changed since
    if _user_site_runs_code():
        return 3
    if _pid_view_differs():
        return 4
    if _threads() != 1:
        return 5
    return 0


def _threads():
    """This process's threads, as Linux counts them (threading.active_count() misses threads
    that _thread started)."""
    import os
    return len(os.listdir('/proc/self/task'))


def _standby_activate(app, st):
    """The rest of IPKernelApp.initialize() (6.17's steps, _INITIALIZE_NAMES), with the shell
    made in _standby_prepare: the connection file (the key), sockets, threads, the kernel, the
    history database, then extensions and startup code, which run now as in a fresh start."""
    import sqlite3, sys
    shell = st['shell']
    formatting = shell.display_formatter
    config = (repr(shell.config), repr(formatting.config))
    app.init_pdb()
    app.init_blackhole()
    app.init_connection_file()
    app.init_poller()
    app.init_sockets()
    app.init_heartbeat()
    app.write_connection_file()
    app.log_connection_info()
    app.init_io()
    app.init_signal()
    app.init_kernel()
    if app.kernel.shell is not shell:
        raise RuntimeError('the kernel made a shell of its own')
    shell.parent = app.kernel
    shell.kernel = app.kernel
    # What HistoryManager.__init__ does with its database, held back in _standby_prepare.
    history = shell.history_manager
    history.init_db()
    try:
        history.new_session()
    except sqlite3.OperationalError:
        history.log.error('Failed to create history session in %s. History will not be saved.',
                          history.hist_file, exc_info=True)
        history.hist_file = ':memory:'
    if history.enabled and history.hist_file != ':memory:':
        for thread in st['held']:
            thread.start()
    app.init_path()
    app.init_shell()
    if app.shell:
        app.init_gui_pylab()
        app.init_extensions()
        app.init_code()
    # Startup code or an extension changed the config (%config, or in place): the formatters
    # made in _standby_prepare take it as formatters made at the first result would.
    if (repr(shell.config), repr(formatting.config)) != config:
        for f in formatting.formatters.values():
            f._load_config(formatting.config)
    sys.stdout.flush()
    sys.stderr.flush()


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


def main():
    # Before any import that is not done yet (socket, ctypes, ...): none may come from the cwd.
    _set_sys_path()
    import os
    env = dict(os.environ)
    chan = _zygote_channel()
    if chan is None:
        run(prepare())
    else:
        _zygote(chan, env)


main()
