# The kernel's launcher (run as `python -c <this> -f connection.json` in the sandbox; embedded
# by kernel_launch.S). It does what `python -m ipykernel_launcher` does, plus:
# - the working directory /app and the user site-packages directory (created and put on
#   sys.path, so that `!pip install` results import at once);
# - no debugger: importing debugpy is a quarter of the kernel's start-up and no tool offers
#   debugging (the block is lifted once ipykernel has looked, so code can import debugpy);
# - interrupts that reach only user code (_gate_interrupts);
# - output that waits for the supervisor instead of piling up, and comes in the order it was
#   written (kernel_output.py);
# - with --approve-shell (SHELL_GATE, set by the supervisor in our argv), shell commands that
#   ask the application first (_shell_gate);
# - the connection file left as the supervisor wrote it (_keep_connection_file);
# - a shell message that does not wake the control thread for nothing (_no_control_wakeup).
# Started by the shim with a SOCK_SEQPACKET socket on fd 3, it is the sandbox's zygote instead
# (_zygote, in supervisor/kernel_zygote.py; the standby's steps are in kernel_standby.py).
# kernel_launch.S joins kernel_standby.py, kernel_zygote.py, kernel_output.py and this file, in
# that order, into the one script; main(), last here, runs once all are defined.
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
        if state["raised"] == state["cell"] or (frame is not None and frame.f_code in _UNINTERRUPTED):
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


def _keep_connection_file():
    """ipykernel writes the connection file again once its sockets are bound (unlink, then a
    new file with the same ports and key): the supervisor wrote it (kernel.c) and never reads
    it back, so the kernel leaves it as it is."""
    from ipykernel import kernelapp

    def write_connection_file(self):
        pass

    kernelapp.IPKernelApp.write_connection_file = write_connection_file


def _no_control_wakeup():
    """ipykernel 6.17's dispatch_shell begins with `await self._flush_control_queue()`, a
    coroutine that schedules a flush of the control stream on the control thread and returns a
    future without awaiting it: the shell never waits for the control thread, and the call
    wakes that thread at every shell message, where it takes the GIL while the request runs
    (0.45 ms a cell, about 1 ms at a kernel's first message). The control thread's loop reads
    its socket by itself, and the supervisor sends nothing on it. So when _flush_control_queue
    awaits nothing, it is replaced by one that does nothing; an ipykernel whose shell waits for
    the flush (an await in it) keeps its own. What is lost: kernel code that reads the control
    socket's events from another thread (not thread-safe) can take the edge of its zmq fd, and
    then control messages wait in it; stock 6.17's flush at the next shell message read them,
    here they stay until the reset (an attacker's review; the kernel only harms itself)."""
    import dis
    from ipykernel.kernelbase import Kernel
    flush = getattr(Kernel, '_flush_control_queue', None)
    awaits = ('GET_AWAITABLE', 'YIELD_VALUE', 'YIELD_FROM')
    if flush is None or any(i.opname in awaits for i in dis.get_instructions(flush)):
        return

    async def _flush_control_queue(self):
        return None

    Kernel._flush_control_queue = _flush_control_queue


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
    once (kernel_zygote.py), the slow way runs it and run() in one process.
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
    _flush_only_output()
    _watch_fds()
    _output_in_order()
    _reply_without_sleep()
    _no_control_wakeup()
    _history_refusals()
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


START_NOTE = 'ipybox: note: '


def _start_note(text):
    """Tells the user something of this kernel's start: the supervisor passes each line of the
    kernel's stderr that begins with START_NOTE, written while it starts, on with the call
    that started it (supervisor/kernel.c, stderrnote.h). Before init_io, fd 2 is that stderr."""
    import os
    os.write(2, (START_NOTE + ' '.join(text.split()) + '\n').encode('utf-8', 'backslashreplace'))


def _history_refusals():
    """A history database that refuses the session's row in any way is IPython's case of one
    that cannot record it (history kept in memory, a message): IPython 8.5 catches only
    OperationalError, and a trigger that kernel code put in the database raises
    IntegrityError, or never ends, at every start. The row's insert gets 2 s (sqlite's
    progress handler ends it), and any database error is an OperationalError."""
    import sqlite3, time
    from IPython.core import history
    new_session = history.HistoryManager.new_session

    def guarded(self, conn=None):
        db = self.db if conn is None else conn
        handler = getattr(db, 'set_progress_handler', None)
        if handler:
            deadline = time.monotonic() + 2
            handler(lambda: time.monotonic() > deadline, 10000)
        try:
            return new_session(self, conn)
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError as e:
            raise sqlite3.OperationalError('%s: %s' % (type(e).__name__, e)) from e
        finally:
            if handler:
                handler(None, 0)

    history.HistoryManager.new_session = guarded


def _enter_app(tell=True, rescue=False):
    """cwd /app, and the user site on sys.path (created, so that `!pip install --user` results
    import at once; not in a rescue start). Kernel code can chmod /app or $HOME, or put a file
    where the user site goes: then the start goes on without (cwd $HOME or /, the user site not
    made) and tells it (tell), so that a reset still gives a kernel in which the user can mend
    it. Returns whether all was done."""
    import os, sys, site
    done = True
    try:
        os.chdir('/app')
    except OSError as e:
        done = False
        # $HOME, where a cell's temporary names still find a writable directory when /tmp is
        # full (tempfile.gettempdir() tries the cwd last); / when $HOME is shut too.
        here = os.path.expanduser('~')
        try:
            os.chdir(here)
        except OSError:
            here = '/'
            os.chdir(here)
        if tell:
            _start_note('/app could not be entered (%s), so this kernel runs in %s. Once /app is usable '
                        'again (`os.chmod("/app", 0o755)` if its mode was changed), a reset starts the '
                        'kernel in /app.' % (e.strerror, here))
    if rescue:
        return done
    user_site = site.getusersitepackages()
    try:
        os.makedirs(user_site, exist_ok=True)
    except OSError as e:
        done = False
        if tell:
            _start_note('The user site %s could not be made (%s): what `pip install --user` puts there '
                        'will not import until a reset after it can be.' % (user_site, e.strerror))
    if user_site not in sys.path:
        at = next((i for i, p in enumerate(sys.path) if p.endswith(('dist-packages', 'site-packages'))),
                  len(sys.path))
        sys.path.insert(at, user_site)
    return done


def _rescue_asked():
    """Whether the supervisor asked for a rescue start: the start after one that failed
    (supervisor/kernel.c start_or_rescue), with `-s` from the shim and this in the connection
    file. Code the sandbox wrote that every start runs by design (a .pth or usercustomize in
    the user site, a config, startup file or extension in IPython's directory, $PYTHONSTARTUP,
    a module in /app that the start imports, such as storemagic.py) made every start fail;
    a rescue start runs none of it, so the user gets a kernel in which to mend it."""
    import json, sys
    try:
        with open(sys.argv[sys.argv.index('-f') + 1]) as f:
            return json.load(f).get('ipybox_rescue') is True
    except (ValueError, IndexError, OSError, AttributeError):
        return False


def _initialize(app, rescue=False):
    """app.initialize(), with a way out for IPython's directory: IPython makes its profile
    (~/.ipython/profile_default, with startup/, security/ and db/) at every start, and opens the
    history database there, and a start failed when it could not, so every start after kernel
    code had put a file or a dangling symlink there, or chmod'ed it. A profile that cannot be
    made, or is not a writable directory (IPython's own rule for ~/.ipython), gives this kernel a
    fresh IPython directory in /tmp, as IPython itself takes for an unwritable ~/.ipython, and
    a note (_start_note); $IPYTHONDIR names it while initialize() runs, for the shell, which
    looks for the directory again. A rescue start (_rescue_asked) takes a fresh directory at
    once, without a note (the supervisor tells it), leaves out $PYTHONSTARTUP and keeps the cwd
    off sys.path until initialize() has run, then puts it there as IPython does."""
    import os
    given = os.environ.get('IPYTHONDIR')
    fresh = []
    if rescue:
        import tempfile
        app.ipython_dir = os.environ['IPYTHONDIR'] = tempfile.mkdtemp(prefix='ipython-')
        fresh.append(app.ipython_dir)
        app.ignore_cwd = True
        app.exec_PYTHONSTARTUP = False

    def init_profile_dir():
        try:
            type(app).init_profile_dir(app)
            location = app.profile_dir.location
            if os.path.isdir(location) and os.access(location, os.W_OK | os.X_OK):
                return
            why, spoiled = 'not a writable directory', location
            app.profile_dir = None
            if location in app.config_file_paths:
                app.config_file_paths.remove(location)
        except OSError as e:
            why = e.strerror or str(e)
            try:
                spoiled = os.path.join(app.ipython_dir, 'profile_' + app.profile)
            except OSError:
                # IPython's own choice of the directory failed (a dangling symlink at ~/.ipython)
                spoiled = os.path.expanduser(given or '~/.ipython')
        import tempfile
        app.ipython_dir = os.environ['IPYTHONDIR'] = tempfile.mkdtemp(prefix='ipython-')
        fresh.append(app.ipython_dir)
        _start_note("IPython's directory %s could not be used (%s), so this kernel has a fresh one, "
                    "%s, without the config, startup files and history there. Once it is mended, "
                    "a reset uses it again." % (spoiled, why, app.ipython_dir))
        return type(app).init_profile_dir(app)

    app.init_profile_dir = init_profile_dir
    try:
        app.initialize()
    finally:
        del app.init_profile_dir
        if fresh and given is None:
            os.environ.pop('IPYTHONDIR', None)
        elif fresh:
            os.environ['IPYTHONDIR'] = given
    if rescue:
        app.ignore_cwd = False
        app.init_path()


def run(wrap_magics, app=None):
    """The rest of a kernel's start, in the kernel itself: cwd /app, the user site on
    sys.path, IPKernelApp's initialize() (the connection file, sockets, threads, the shell from
    the profile in $HOME) and start(). A forked kernel has its app from parsed_app(), parsed
    in the zygote: initialize() then does all but the parse."""
    rescue = app is None and _rescue_asked()
    _enter_app(rescue=rescue)
    from ipykernel import kernelapp
    # What kernelapp.launch_new_instance() does, with the shell's magics wrapped in between.
    if app is None:
        app = kernelapp.IPKernelApp.instance()
        _initialize(app, rescue)
    else:
        app.parse_command_line = lambda argv=None: None
        try:
            _initialize(app)
        finally:
            del app.parse_command_line
    if wrap_magics:
        wrap_magics(app.shell)
    app.start()


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
