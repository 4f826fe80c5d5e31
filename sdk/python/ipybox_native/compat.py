"""ipybox's CodeExecutor, for code ported from ipybox with only the import changed: its
constructor arguments, `stream(code, timeout, chunks)`, `execute()` that approves every call,
and its result shape (`text` stripped, or None when the cell printed nothing; `images` as
paths of PNG files written to `images_dir`). `Sandbox` keeps this SDK's own shapes."""
from __future__ import annotations

import abc
import errno
import json
import logging
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Dict, List, Optional, Union

from .errors import Cancelled
from .results import ApprovalRequest, ExecutionResult, Image, OutputChunk
from .sandbox import Sandbox

log = logging.getLogger("ipybox_native")

#: ipybox's name for an output chunk (the same shape: `text`).
CodeExecutionChunk = OutputChunk

# ipybox has no timeout when none is given; the supervisor's longest is a day.
NO_TIMEOUT = 86400.0
EXTENSIONS = {"image/png": ".png", "image/jpeg": ".jpg", "image/svg+xml": ".svg"}


@dataclass
class CodeExecutionResult(metaclass=abc.ABCMeta):
    """A finished cell, as ipybox's CodeExecutor returns it.

    `text`: what the cell printed and the value of its last expression, stripped of leading
    and trailing whitespace, or None when it produced no text. `images`: the images it
    displayed, each written to `images_dir` (a Path per file). `result`: this SDK's whole
    ExecutionResult (status, note, the images' bytes), for code that wants more.

    A Sandbox's ExecutionResult is registered as a virtual subclass, so code that matched
    Sandbox results against this name (an alias of ExecutionResult before) keeps working.
    """

    text: Optional[str]
    images: List[Path] = field(default_factory=list)
    result: Optional[ExecutionResult] = field(default=None, repr=False, compare=False)


CodeExecutionResult.register(ExecutionResult)


# Servers given to generate_mcp_sources(), registered by every CodeExecutor that starts later.
_SOURCES: Dict[str, Dict[str, Any]] = {}


async def generate_mcp_sources(server_name: str, server_params: Dict[str, Any],
                               root_dir: Union[str, os.PathLike, None] = None) -> None:
    """ipybox's generate_mcp_sources(), for ported code: remembers the server, and every
    CodeExecutor started later in this process registers it (register_mcp_server), so that
    its tools are `mcptools.<server_name>.<tool>` in the kernel, as in ipybox.

    Unlike ipybox, nothing is written to root_dir (the supervisor generates the modules
    inside the sandbox, where the kernel imports them), nothing is contacted now (a server
    that does not answer fails the CodeExecutor's start), and it returns None rather than
    the module names (CodeExecutor.register_mcp_server returns those)."""
    if not isinstance(server_name, str) or not server_name:
        raise ValueError("server_name must be a non-empty string")
    if not isinstance(server_params, dict):
        raise TypeError("server_params must be a dict ({command, args, env} or {url, headers})")
    _SOURCES[server_name] = dict(server_params)


class CodeExecutor(Sandbox):
    """ipybox's CodeExecutor on an ipybox-native sandbox.

        async with CodeExecutor() as executor:
            result = await executor.execute("print('hello world')")
            assert result.text == "hello world"

    ipybox's arguments, and what they mean here:

    - tool_server_host/port, kernel_gateway_host/port: accepted and unused (there are no
      servers or ports; the kernel and its tool calls talk to the supervisor over pipes).
    - kernel_env: variables for the kernel (--container-env-var); like ipybox's kernels, the
      sandbox inherits nothing from this process.
    - working_dir: the host directory the kernel works in; here it is the workspace the kernel
      sees as /app (its working directory), not at its host path.
    - images_dir: where images are written (default `images` in the current directory,
      created when the first image arrives), as <8 hex digits>.png (.jpg, .svg for those types).
    - approval_timeout: seconds an ApprovalRequest may stay undecided before it is rejected
      (None: no limit here; the supervisor withdraws a question after 10 minutes anyway).
    - connect_timeout, log_level: connect_timeout is unused (server starts count against
      --mcp-timeout); log_level DEBUG turns on --verbose.
    - kernel_init_timeout: seconds for the sandbox and kernel to start (at least 120, since a
      sandbox starts more than a kernel).
    - sandbox: unused; the kernel always runs in the sandbox. sandbox_config: a
      sandbox-runtime JSON file; its network.allowedDomains become --allowed-domain, the rest
      is not used (the sandbox sees no host files but /app, --container-bind ones and the
      system's own).
    - approve_tool_calls: False lets every MCP tool call run unasked (--approve-tools '*').
    - approve_shell_cmds, require_shell_escape: as in ipybox (--approve-shell,
      --require-shell-escape).

    Every Sandbox keyword (allowed_domain, mcp_config, approval=, ipybox=, transport=, ...)
    is taken too.
    """

    def __init__(self, tool_server_host: Optional[str] = None, tool_server_port: Optional[int] = None,
                 kernel_gateway_host: Optional[str] = None, kernel_gateway_port: Optional[int] = None,
                 kernel_env: Optional[Dict[str, str]] = None, working_dir: Union[str, os.PathLike, None] = None,
                 images_dir: Union[str, os.PathLike, None] = None, approval_timeout: Optional[float] = None,
                 connect_timeout: float = 30, kernel_init_timeout: float = 10, sandbox: bool = False,
                 sandbox_config: Union[str, os.PathLike, None] = None, log_level: str = "WARNING",
                 approve_tool_calls: bool = True, approve_shell_cmds: bool = False,
                 require_shell_escape: bool = False, **options: Any):
        if require_shell_escape and not approve_shell_cmds:
            raise ValueError("require_shell_escape=True requires approve_shell_cmds=True")
        if approval_timeout is not None and not approval_timeout > 0:
            raise ValueError("approval_timeout must be a positive number of seconds or None")
        if kernel_env:
            env = options.get("container_env_var")
            merged = dict(kernel_env)
            if isinstance(env, dict):
                merged.update(env)
            elif env is not None:
                for kv in [env] if isinstance(env, str) else env:
                    k, _, v = str(kv).partition("=")
                    merged[k] = v
            options["container_env_var"] = merged
        if working_dir is not None:
            if options.get("workspace") is not None:
                raise ValueError("working_dir and workspace name the same thing (the host directory behind /app); "
                                 "give one")
            options["workspace"] = os.path.abspath(os.fspath(working_dir))
        if sandbox_config is not None:
            domains = _allowed_domains(sandbox_config)
            if domains:
                given = options.get("allowed_domain") or []
                options["allowed_domain"] = ([given] if isinstance(given, str) else list(given)) + domains
        if not approve_tool_calls:
            given = options.get("approve_tools") or []
            options["approve_tools"] = ([given] if isinstance(given, str) else list(given)) + ["*"]
        if approve_shell_cmds:
            options["approve_shell_cmds"] = True
        if require_shell_escape:
            options["require_shell_escape"] = True
        if str(log_level).upper() == "DEBUG":
            options.setdefault("verbose", True)
        options.setdefault("start_timeout", max(120.0, float(kernel_init_timeout)))
        self._sandbox_trees = _sandbox_trees(options)
        super().__init__(**options)
        self.images_dir = Path(images_dir) if images_dir is not None else Path("images")
        self.approval_timeout = approval_timeout
        self.kernel_env = dict(kernel_env or {})

    async def _start(self) -> None:
        await super()._start()
        try:
            for name, params in list(_SOURCES.items()):
                await self.register_mcp_server(name, params)
        except BaseException:
            await self._teardown()
            raise

    async def stop(self) -> None:
        """ipybox's name for close()."""
        await self.close()

    def _approval_created(self, req: ApprovalRequest) -> None:
        if self.approval_timeout is None or self._loop is None:
            return

        def expire() -> None:
            if not req.decided:
                log.warning("rejected %s/%s: not approved within approval_timeout (%g s)", req.server_name,
                            req.tool_name, self.approval_timeout)
                req.reject()

        self._loop.call_later(self.approval_timeout, expire)

    async def stream(self, code: str, timeout: Optional[float] = None,  # type: ignore[override]
                     chunks: bool = False, *, max_output_chars: Optional[int] = None
                     ) -> AsyncIterator[Union[ApprovalRequest, OutputChunk, CodeExecutionResult]]:
        """Runs code; yields ApprovalRequest items for tool calls and shell commands (accept()
        or reject() each), OutputChunk items as output arrives when `chunks` is true, and last
        a CodeExecutionResult. A failed cell raises CodeExecutionError (ExecutionError),
        TimeoutError (an asyncio.TimeoutError too) or KernelDied; after cancel() the stream
        ends without a result. timeout: seconds (None: none, as in ipybox, up to a day);
        time waiting for an approval does not count."""
        agen = super().stream(code, NO_TIMEOUT if timeout is None else timeout, check=True,
                              max_output_chars=max_output_chars)
        try:
            async for item in agen:
                if isinstance(item, OutputChunk):
                    if chunks:
                        yield item
                elif isinstance(item, ExecutionResult):
                    yield self._ported(item)
                else:
                    yield item
        except Cancelled:
            return  # ipybox: a cancelled cell ends the stream cleanly
        finally:
            await agen.aclose()

    async def execute(self, code: str, timeout: Optional[float] = None,  # type: ignore[override]
                      *, max_output_chars: Optional[int] = None) -> CodeExecutionResult:
        """Runs code, accepting every tool call and shell command it asks for (as ipybox's
        execute() does; an `approval=` callback, when given, decides instead), and returns
        the CodeExecutionResult; after cancel(), a result with text None and no images."""
        async for item in self.stream(code, timeout, max_output_chars=max_output_chars):
            if isinstance(item, ApprovalRequest):
                item.accept()
            elif isinstance(item, CodeExecutionResult):
                return item
        return CodeExecutionResult(text=None, images=[])

    def _ported(self, r: ExecutionResult) -> CodeExecutionResult:
        return CodeExecutionResult(text=r.text.strip() if r.text else None,
                                   images=[self._save(img) for img in r.images], result=r)

    def _save(self, img: Image) -> Path:
        name = uuid.uuid4().hex[:8] + EXTENSIONS.get(img.mime_type, ".bin")
        dfd = _open_images_dir(os.path.abspath(self.images_dir), self._sandbox_trees)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=dfd)
        finally:
            os.close(dfd)
        with os.fdopen(fd, "wb") as f:
            f.write(img.data)
        return self.images_dir / name


def _sandbox_trees(options: Dict[str, Any]) -> List[str]:
    """The host directories the kernel writes (the workspace, --container-bind sources), as
    given and resolved now: where sandbox code may have put symlinks."""
    given: List[str] = []
    if options.get("workspace") is not None:
        given.append(os.fspath(options["workspace"]))
    binds = options.get("container_bind")
    if isinstance(binds, dict):
        given += [os.fspath(k) for k in binds]
    elif binds is not None:
        given += [os.fspath(b).split(":", 1)[0] for b in ([binds] if isinstance(binds, (str, os.PathLike)) else binds)]
    trees = []
    for g in given:
        for t in (os.path.abspath(g), os.path.realpath(g)):
            if t not in trees:
                trees.append(t)
    return trees


def _open_images_dir(path: str, trees: List[str]) -> int:
    """A directory fd for images_dir (absolute, made where missing). Below a tree the kernel
    writes, each component is walked from that tree's fd without following a symlink: kernel
    code may have made `images` a symlink to any host directory, and the bytes written are the
    sandbox's. Elsewhere the path is the caller's own."""
    for tree in trees:
        if path != tree and not path.startswith(tree.rstrip("/") + "/"):
            continue
        fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for comp in path[len(tree):].split("/"):
                if not comp:
                    continue
                try:
                    os.mkdir(comp, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                try:
                    nfd = os.open(comp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise OSError(e.errno, "images_dir %s: %s in it is not a directory but a symlink or a file, "
                                      "in %s, which the kernel writes; it is not followed (sandbox code may have "
                                      "made it)" % (path, comp, tree)) from None
                    raise
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd
    os.makedirs(path, exist_ok=True)
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _allowed_domains(path: Union[str, os.PathLike]) -> List[str]:
    """network.allowedDomains of a sandbox-runtime configuration file."""
    try:
        with open(path) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError("sandbox_config %s: %s" % (os.fspath(path), e)) from None
    net = cfg.get("network") if isinstance(cfg, dict) else None
    domains = net.get("allowedDomains") if isinstance(net, dict) else None
    if domains is None:
        return []
    if not isinstance(domains, list) or not all(isinstance(d, str) for d in domains):
        raise ValueError("sandbox_config %s: network.allowedDomains must be a list of strings" % os.fspath(path))
    return domains
