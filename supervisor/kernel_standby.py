# The standby kernel (--standby; architecture.md, "The standby kernel"), part of the kernel's
# launcher: supervisor/kernel_standby.py, kernel_zygote.py and kernel_launch.py, joined in that
# order by kernel_launch.S and run as one `python -c` script. A standby is a kernel forked from
# the zygote beside the running one (kernel_zygote.py's fork_standby and standby), which builds
# IPython's shell (the largest part of a start) and waits; a reset activates it instead of
# forking. Kernel code has its uid and can name it, so until then it holds every signal blocked,
# is not dumpable, has no socket and no key, reads no config file and imports nothing (nothing
# the sandbox wrote runs in it: it outlives the old kernel), and before it takes over it checks
# that nothing kernel code could change in it, or under it, did. Here: its steps.

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
    """The syscall numbers the standby's checks need, or None when this machine, IPython or
    ipykernel is not one the standby was made for. Imports nothing: the zygote runs it whether the standby is
    on or not, and its modules are every kernel's."""
    import os
    from ipykernel import kernelapp
    import IPython
    # IPython 7 looked for the profile in the cwd (/app) first, which the checks do not watch.
    if IPython.version_info[0] < 8:
        return None
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
    profile, the shell (with its history thread held back), the Session and the control
    thread's object, with no config file and no import. Returns what _standby_activate needs,
    or None when this start cannot be prepared (the reset forks)."""
    import os, sys
    # The standby runs beside the old kernel, and survives its KILL_ALL: nothing the sandbox
    # wrote may run in it, or it would outlive the reset. So it reads no config file and
    # imports nothing (every module a kernel needs is the zygote's). A config file is code
    # even in JSON: traitlets imports and calls what it names (InteractiveShell.loop_runner,
    # the "()" factories of IPKernelApp.logging_config, kernel_class).
    refused = []

    class Refuser:
        """Any import while the standby prepares: refused (its module never runs), and then
        there is no standby."""
        @staticmethod
        def find_spec(name, path=None, target=None):
            refused.append(name)
            raise ImportError('no import in a standby: %s' % name)

    refuser = Refuser()
    sys.meta_path.insert(0, refuser)
    try:
        st = _standby_prepare_shell(app)
    finally:
        sys.meta_path.remove(refuser)
    return None if refused else st


def _standby_prepare_shell(app):
    """_standby_prepare's steps, while imports are refused (these are the zygote's modules)."""
    import os, sys
    from ipykernel import ipkernel, zmqshell
    from ipykernel.compiler import XCachingCompiler
    from IPython.core import history
    from IPython.core.application import BaseIPythonApplication
    from traitlets.config import loader
    # What cannot be done is told by the start that forks instead.
    if not _enter_app(tell=False):
        return None
    modules = set(sys.modules)
    # Every config file a load looked for, found or not. None is read (above): when one exists
    # there is no standby, and one that appears before the activation makes the standby decline
    # (_standby_declines), so that it takes effect in a kernel started after the reset.
    looked = {}
    saved = {}
    found = []

    def candidates(loader_):
        paths = loader_.path if isinstance(loader_.path, (list, tuple)) else [loader_.path or '.']
        return [os.path.join(os.path.expandvars(os.path.expanduser(p)), loader_.filename) for p in paths]

    def refuse(self):
        # Never reads the file. (IPython's load_config_file turns any error of a loader into a
        # warning and goes on, so what was found is kept here, and checked after.)
        for f in candidates(self):
            looked[f] = _stat_key(f)
            if looked[f] is not None:
                found.append(f)
        raise loader.ConfigFileNotFound('Could not find file: %s' % self.filename)

    # The IPython directory a start takes ($IPYTHONDIR, else ~/.ipython) must be a writable
    # directory: else IPython takes a temporary one (or makes it, or moves ~/.config/ipython
    # there), and a standby made then would keep that after the directory is mended, since
    # its checks watch the directory it took (an attacker's review).
    ipython_dir = os.path.realpath(os.path.expanduser(os.environ.get('IPYTHONDIR') or '~/.ipython'))
    if not (os.path.isdir(ipython_dir) and os.access(ipython_dir, os.W_OK | os.X_OK)):
        return None
    for cls in (loader.PyFileConfigLoader, loader.JSONFileConfigLoader):
        saved[cls] = cls.load_config
        cls.load_config = refuse
    app._init_asyncio_patch()
    app.parse_command_line = lambda argv=None: None
    try:
        BaseIPythonApplication.initialize(app)
    finally:
        del app.parse_command_line
        for cls, fn in saved.items():
            cls.load_config = fn
    if found or app.subapp is not None or app.kernel_class is not ipkernel.IPythonKernel:
        return None
    if os.path.realpath(app.ipython_dir) != ipython_dir:
        return None
    # The message Session, made here as the activation's connection file would make it (~0.5
    # ms): the defaults and the argv's config, a fresh id (this process becomes the kernel),
    # and Session's random default key until the connection file sets the key and the
    # signature scheme.
    app.session
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
    # with no config; _standby_activate applies the config if startup code set one.
    # Formatting a constant int makes them all, with the defaults each makes at its first use
    # (~1 ms more of the first cell): IPython's code on IPython's value, no output, nothing
    # kept but the formatters (an int is not of a deferred type, and none registers for it).
    shell.display_formatter.format(2)
    # (startup/ too: a forked kernel that cannot make it takes a fresh IPython directory)
    dirs = [app.ipython_dir, app.profile_dir.location, app.profile_dir.startup_dir]
    hist = getattr(shell.history_manager, 'hist_file', None)
    if isinstance(hist, str) or hasattr(hist, '__fspath__'):
        dirs.append(os.fspath(hist))
    # Identity and mode (a forked kernel falls back to a temporary IPython directory when it
    # cannot write this one): the old kernel writes its history, so not size or times.
    ident = {d: (_stat_key(d) or (None,) * 3)[:3] for d in dirs}
    # The control thread's object, which init_sockets makes after its sockets (~1.3 ms of the
    # activation): a Thread, not started, and its tornado loop (an epoll fd and a self-pipe of
    # this process). It holds no key and binds nothing; _standby_activate hands it to
    # init_sockets, which starts it as it would start its own. Made last, after the shell, so
    # that it records the excepthooks (sys.excepthook, threading.excepthook) that a kernel's
    # has when init_sockets makes it.
    from ipykernel import kernelapp
    control = kernelapp.ControlThread(daemon=True)
    if _threads() != 1:
        return None
    return {'shell': shell, 'held': held, 'looked': looked, 'ident': ident, 'modules': modules,
            'control': control}


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
        return 2  # a module was imported since it was prepared
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
    # The user site again, as a forked kernel makes it at its start: kernel code may have
    # removed it since (a missing one would be cached as such at the first import, and what
    # `pip install --user` puts there later would not import).
    _enter_app()
    app.init_pdb()
    app.init_blackhole()
    app.init_connection_file()
    app.init_poller()
    # init_sockets makes its control thread as ControlThread(daemon=True) (kernelapp's name,
    # looked up then): it gets the one made while preparing.
    from ipykernel import kernelapp
    control, control_class = st.pop('control'), kernelapp.ControlThread
    kernelapp.ControlThread = lambda daemon: control if daemon is True else control_class(daemon=daemon)
    try:
        app.init_sockets()
    finally:
        kernelapp.ControlThread = control_class
    if app.control_thread is not control:
        raise RuntimeError('the control thread made while preparing was not taken')
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
    else:
        # A kernel that could not record its session makes no saving thread: the one made
        # while it prepared is dropped, with the exit handler that would join it.
        import atexit
        for thread in st['held']:
            atexit.unregister(thread.stop)
            if history.save_thread is thread:
                history.save_thread = None
    app.init_path()
    app.init_shell()
    if app.shell:
        app.init_gui_pylab()
        app.init_extensions()
        app.init_code()
    # Startup code or an extension changed the config (%config, or in place): the formatters
    # made in _standby_prepare take it as formatters made at the first result would.
    if (repr(shell.config), repr(formatting.config)) != config:
        for f in (*formatting.formatters.values(), formatting.ipython_display_formatter,
                  formatting.mimebundle_formatter):
            f._load_config(formatting.config)
    sys.stdout.flush()
    sys.stderr.flush()
