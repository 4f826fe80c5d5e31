"""What a cell produces: output chunks while it runs, approval requests for the MCP tool
calls it makes, and the final result."""
from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

META_KEY = "ipybox/execution"


@dataclass(frozen=True)
class Image:
    """An image the cell displayed (a plot, say): its bytes, MIME type (image/png,
    image/jpeg or image/svg+xml) and where the supervisor saved it in the sandbox
    (`/app/images/...`, or None if it could not be saved)."""

    data: bytes = field(repr=False)
    mime_type: str = ""
    path: Optional[str] = None

    def save(self, local_path: str) -> None:
        with open(local_path, "wb") as f:
            f.write(self.data)


@dataclass(frozen=True)
class OutputChunk:
    """Output as it arrives while a cell runs (stdout, stderr and displayed values)."""

    text: str


@dataclass
class ExecutionResult:
    """A finished cell.

    `text` is what the cell printed plus the value of its last expression (and, when it
    raised, the traceback). `images` are the images it displayed. `status` is one of ok,
    error, timeout, timeout_restarted, cancelled, kernel_died, or failed (the cell was not
    run: bad arguments, no kernel); `note` is the supervisor's
    sentence about a timeout, a dead kernel or a limit; `ename`/`evalue`/`traceback`
    describe an exception. `kernel_lost` is true when the kernel (or its sandbox) died
    since the previous cell: this cell ran in a fresh kernel, and `note` says why.
    `egress_refused` lists the destinations the egress proxy or DNS stub refused while the
    cell ran (dicts with host or address, port, dns, reason, allow, count; at most 10), and
    `egress_refused_more` counts the destinations left out.
    """

    text: str = ""
    images: List[Image] = field(default_factory=list)
    status: str = "ok"
    ename: Optional[str] = None
    evalue: Optional[str] = None
    traceback: Optional[str] = None
    note: Optional[str] = None
    kernel_lost: bool = False
    egress_refused: List[Dict[str, Any]] = field(default_factory=list)
    egress_refused_more: int = 0

    @property
    def error(self) -> Optional[BaseException]:
        """The exception `execute()` raises for this result, or None when it succeeded."""
        from .errors import raise_for

        try:
            raise_for(self)
        except Exception as e:  # noqa: BLE001 (it is the value we want)
            return e
        return None

    def output_before_error(self) -> str:
        if self.traceback and self.text.endswith(self.traceback):
            return self.text[: len(self.text) - len(self.traceback)]
        return self.text

    @classmethod
    def from_call_result(cls, res: Any) -> "ExecutionResult":
        """Builds a result from execute_ipython_cell's CallToolResult. Whatever its shape,
        this returns a result (parts of the wrong type are left out)."""
        res = res if isinstance(res, dict) else {}
        meta = _dict(res.get("_meta")).get(META_KEY)
        content = [b for b in _list(res.get("content")) if isinstance(b, dict)]
        full = "".join(_str(b.get("text")) or "" for b in content if b.get("type") == "text")
        blocks = [b for b in content if b.get("type") == "image"]
        if not isinstance(meta, dict):
            # The supervisor refused or could not run the cell (bad arguments, no kernel):
            # the text says why.
            status = "failed" if res.get("isError") else "ok"
            images = [img for img in (_image(b, {}) for b in blocks) if img]
            return cls(text=full, images=images, status=status, note=full if status == "failed" else None)
        n = meta.get("outputBytes")
        text = full
        raw = full.encode("utf-8", "surrogatepass")
        if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < len(raw):
            text = raw[:n].decode("utf-8", "replace")
        infos = _list(meta.get("images"))
        images = []
        for i, b in enumerate(blocks):
            img = _image(b, _dict(infos[i]) if i < len(infos) else {})
            if img:
                images.append(img)
        status = _str(meta.get("status")) or ("error" if res.get("isError") else "ok")
        return cls(text=text, images=images, status=status, ename=_str(meta.get("ename")),
                   evalue=_str(meta.get("evalue")), traceback=_str(meta.get("traceback")),
                   note=_str(meta.get("note")), kernel_lost=meta.get("kernelLost") is True,
                   egress_refused=[r for r in _list(meta.get("egressRefused")) if isinstance(r, dict)],
                   egress_refused_more=_count(meta.get("egressRefusedMore")))


def _count(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def _dict(v: Any) -> Dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> List[Any]:
    return v if isinstance(v, list) else []


def _str(v: Any) -> Optional[str]:
    return v if isinstance(v, str) else None


def _image(block: Dict[str, Any], info: Dict[str, Any]) -> Optional[Image]:
    try:
        data = base64.b64decode(_str(block.get("data")) or "", validate=True)
    except ValueError:
        return None
    return Image(data, _str(block.get("mimeType")) or "", _str(info.get("path")))


class _Done:
    """What accept() and reject() return: awaiting it is allowed and does nothing, so both
    `req.accept()` and `await req.accept()` (ipybox's spelling) work."""

    def __await__(self):
        return
        yield  # pragma: no cover (makes this a generator)


class ApprovalRequest:
    """Code in the sandbox asks to call an MCP tool. Nothing runs until you decide.

    `server_name`, `tool_name` and `tool_args` say what would run; `message` is the
    supervisor's sentence. Call `accept()` or `reject()` once (from any thread); a request
    the supervisor withdraws (the cell was interrupted) ignores later decisions.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, server_name: str, tool_name: str,
                 tool_args: Dict[str, Any], message: str):
        self.server_name = server_name
        self.tool_name = tool_name
        self.tool_args = tool_args
        self.message = message
        self._loop = loop
        self._decision: "asyncio.Future[Optional[bool]]" = loop.create_future()

    def __repr__(self) -> str:
        return "ApprovalRequest(server_name=%r, tool_name=%r, tool_args=%r)" % (
            self.server_name, self.tool_name, self.tool_args)

    def accept(self) -> _Done:
        self._decide(True)
        return _Done()

    def reject(self) -> _Done:
        self._decide(False)
        return _Done()

    @property
    def decided(self) -> bool:
        return self._decision.done()

    def _decide(self, value: Optional[bool]) -> None:
        def set_it() -> None:
            if not self._decision.done():
                self._decision.set_result(value)

        if _in_loop(self._loop):
            set_it()
        else:
            self._loop.call_soon_threadsafe(set_it)

    def _withdraw(self) -> None:
        self._decide(None)

    async def _wait(self) -> Optional[bool]:
        return await self._decision


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False

