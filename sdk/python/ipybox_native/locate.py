"""Finding the `ipybox` binary and a running ipyboxd, the way the `ipybox` CLI does."""
from __future__ import annotations

import os
import pwd
import shutil
import stat
from typing import List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
# From a checkout: sdk/python/ipybox_native/ -> build/bin/ipybox.
CHECKOUT_BINARY = os.path.normpath(os.path.join(HERE, "..", "..", "..", "build", "bin", "ipybox"))


def binary_candidates(explicit: Optional[str] = None) -> List[str]:
    """Where to look for `ipybox`, in order: the argument, $IPYBOX_BIN, the checkout this
    package sits in, PATH, /usr/local/bin and /usr/bin."""
    if explicit:
        return [explicit]
    env = os.environ.get("IPYBOX_BIN")
    if env:
        return [env]
    found = [CHECKOUT_BINARY]
    on_path = shutil.which("ipybox")
    if on_path:
        found.append(on_path)
    found += ["/usr/local/bin/ipybox", "/usr/bin/ipybox"]
    return found


def find_binary(explicit: Optional[str] = None) -> Tuple[Optional[str], List[str]]:
    """The first candidate that is an executable file, and every path tried."""
    tried = binary_candidates(explicit)
    for path in tried:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path, tried
    return None, tried


def _private_dir(path: str, uid: int, missing_ok: bool) -> bool:
    """A directory no other user controls: ours, not writable by group or others."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return missing_ok
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o022


def runtime_dir_fallback() -> Optional[str]:
    """/run/user/$UID when XDG_RUNTIME_DIR is not set and that directory (and its ipybox/,
    when there) is this user's alone, as `ipybox mcp` and `ipyboxd --user` decide."""
    uid = os.geteuid()
    d = "/run/user/%d" % uid
    if _private_dir(d, uid, False) and _private_dir(os.path.join(d, "ipybox"), uid, True):
        return d
    return None


def daemon_sockets() -> List[str]:
    """The sockets `ipybox mcp` tries: the user's own daemon, then the system service's."""
    paths = []
    rt = os.environ.get("XDG_RUNTIME_DIR")
    if not rt:
        rt = runtime_dir_fallback()
    if rt and rt.startswith("/"):
        paths.append(os.path.join(rt, "ipybox", "ipybox.sock"))
    try:
        name = pwd.getpwuid(os.getuid()).pw_name
        if name and "/" not in name:
            paths.append("/run/ipybox/%s/ipybox.sock" % name)
    except KeyError:
        pass
    return paths

