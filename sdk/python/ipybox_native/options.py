"""Sandbox options, named as the CLI names them (`--allowed-domain` is `allowed_domain`),
turned into the command-line arguments `ipybox mcp` and ipyboxd's createSession take."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping

# name -> (flag, kind). kind: "list" (repeatable; a string or a list of strings), "value"
# (one value), "flag" (True to pass it), "pairs" (repeatable K=V / HOST:REL; also a dict),
# "switch" (True or False: the flag or its --no- form; None: the default).
OPTIONS = {
    "allowed_dir": ("--allowed-dir", "list"),
    "allowed_domain": ("--allowed-domain", "list"),
    "resolve": ("--resolve", "pairs:"),
    "max_connections": ("--max-connections", "value"),
    "container_env_var": ("--container-env-var", "pairs="),
    "container_env_file": ("--container-env-file", "value"),
    "container_bind": ("--container-bind", "pairs:"),
    "rootfs": ("--rootfs", "value"),
    "workspace": ("--workspace", "value"),
    "python": ("--python", "value"),
    "tmp_size": ("--tmp-size", "value"),
    "shm_size": ("--shm-size", "value"),
    "memory": ("--memory", "value"),
    "max_processes": ("--max-processes", "value"),
    "cpu_weight": ("--cpu-weight", "value"),
    "max_output_chars": ("--max-output-chars", "value"),
    "mcp_config": ("--mcp-config", "value"),
    "approve_tools": ("--approve-tools", "list"),
    "mcp_timeout": ("--mcp-timeout", "value"),
    "sandbox_mcp_servers": ("--sandbox-mcp-servers", "flag"),
    "approve_shell_cmds": ("--approve-shell", "flag"),
    "require_shell_escape": ("--require-shell-escape", "flag"),
    "zygote": ("--zygote", "switch"),
    "standby": ("--standby", "switch"),
    "verbose": ("--verbose", "flag"),
}

# Options naming host paths: made absolute here, so that they mean what they meant to the
# caller even when the supervisor runs elsewhere (ipyboxd).
PATH_OPTIONS = {"allowed_dir", "container_env_file", "rootfs", "workspace", "mcp_config"}


def _strings(name: str, value: Any) -> List[str]:
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    try:
        items = list(value)
    except TypeError:
        raise TypeError("%s: expected a string or a list of strings, not %s" % (name, type(value).__name__)) from None
    for v in items:
        if not isinstance(v, (str, os.PathLike)):
            raise TypeError("%s: expected strings, got %r" % (name, v))
    return [os.fspath(v) for v in items]


def _pairs(name: str, value: Any, sep: str) -> List[str]:
    if isinstance(value, Mapping):
        out = []
        for k, v in value.items():
            if not isinstance(k, (str, os.PathLike)) or not isinstance(v, (str, os.PathLike, int, float)):
                raise TypeError("%s: keys and values must be strings" % name)
            k = os.fspath(k)
            if name == "container_bind":
                k = os.path.abspath(k)
            out.append("%s%s%s" % (k, sep, v if not isinstance(v, os.PathLike) else os.fspath(v)))
        return out
    return _strings(name, value)


def _workspace_name(value: Any) -> bool:
    """Whether workspace= names a workspace under ipybox's state directory (a plain string
    without '/', as `--workspace NAME`) rather than a host directory (a path with '/', "~...",
    or a pathlib.Path)."""
    return isinstance(value, str) and "/" not in value and not value.startswith("~")


def to_args(options: Mapping[str, Any]) -> List[str]:
    """Command-line arguments for the given options; None values are left out. Raises
    TypeError for an unknown option or a value of the wrong kind, naming it."""
    args: List[str] = []
    for name, value in options.items():
        if name not in OPTIONS:
            close = [n for n in OPTIONS if n.startswith(name[:6])]
            hint = " (did you mean %s?)" % ", ".join(close) if close else ""
            raise TypeError("unknown sandbox option %r%s; the options are: %s" % (name, hint, ", ".join(OPTIONS)))
        flag, kind = OPTIONS[name]
        if kind == "switch":
            if value is not None and not isinstance(value, bool):
                raise TypeError("%s: expected True, False or None, not %r" % (name, value))
            if value is not None:
                args.append(flag if value else "--no-" + flag[2:])
            continue
        if value is None or value is False:
            continue
        if kind == "flag":
            args.append(flag)
            continue
        if kind == "value":
            if isinstance(value, bool) or not isinstance(value, (str, int, float, os.PathLike)):
                raise TypeError("%s: expected one value, not %r" % (name, value))
            v = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
            values = [v]
        elif kind == "list":
            values = _strings(name, value)
        else:
            values = _pairs(name, value, kind[-1])
        if name in PATH_OPTIONS and not (name == "workspace" and _workspace_name(value)):
            values = [os.path.abspath(os.path.expanduser(v)) for v in values]
        for v in values:
            args += [flag, v]
    # Once every value has its kind (a wrong kind is a TypeError first), ipybox's own checks.
    if options.get("require_shell_escape") and not options.get("approve_shell_cmds"):
        raise ValueError("require_shell_escape=True requires approve_shell_cmds=True")
    if options.get("standby") and options.get("zygote") is False:
        raise ValueError("standby=True requires the zygote (zygote=False turns it off)")
    return args


def allowed_dirs(options: Mapping[str, Any]) -> List[str]:
    """The host directories upload and download may use: those given, else ipybox's default
    (the home directory and /tmp)."""
    given = options.get("allowed_dir")
    if given:
        return [os.path.abspath(os.path.expanduser(d)) for d in _strings("allowed_dir", given)]
    return ["/tmp", os.path.expanduser("~")]


def describe() -> Dict[str, str]:
    """Option name -> its command-line flag (for documentation and errors)."""
    return {n: f for n, (f, _) in OPTIONS.items()}
