"""Offloading large tool results to files, leaving a placeholder with a preview in context.

``CompactionOffloader`` runs at compaction time (default threshold 4000 bytes, 10 preview lines;
the compactor passes its own ``offload_threshold``). ``OffloadHook`` runs at tool-execution time
(10000 bytes, 20 lines). Both write ``<work_dir>/.compactlens/tool_results/<session>/<id>.txt``
(files 0600, folders 0700) with sanitised names. The idempotency key is (tool_call_id, content
hash): an existing identical file is reused, not rewritten, across restarts. Any ``str`` can be
offloaded: lone surrogates are written through and read back unchanged. Nothing here
decides *when* to offload; that is the compactor's job.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path

from compactor.errors import OffloadError
from compactor.messages import Message
from compactor.records import OffloadEntry
from compactor.tokens import utf8_len
from compactor.writing._safepath import confined, safe_name

log = logging.getLogger(__name__)

OFFLOAD_DIR = Path(".compactlens") / "tool_results"
HASH_SECRET_FILE = Path(".compactlens") / "hash-secret"
"""Metadata capture keys each session's hashes with HMAC(this secret, session id): a session
resumed by a new process hashes equal messages equally. Owner-only, beside the offloaded files
(which hold the very content the hashes stand for)."""
PLACEHOLDER_PREFIX = "[offloaded: "


def is_offloaded(content: str) -> bool:
    return content.startswith(PLACEHOLDER_PREFIX)


def offloadable(msg: Message, threshold: int) -> bool:
    """Whether ``msg`` is a tool result larger than ``threshold`` UTF-8 bytes and not yet a
    placeholder: one the offloader moves to a file (if its placeholder comes out smaller)."""
    content = msg.content
    return bool(msg.tool_call_id) and utf8_len(content) > threshold and not is_offloaded(content)


def result_path(session_id: str, tool_call_id: str) -> str:
    """Where the offloader first tries to put a result, relative to its work dir (the path a
    placeholder names)."""
    return str(
        OFFLOAD_DIR
        / safe_name(session_id or "default")
        / f"{safe_name(tool_call_id or 'result')}.txt"
    )


def _preview(content: str, lines: int, chars: int) -> str:
    head = "\n".join(content.splitlines()[:lines])
    if len(head) > chars:
        head = head[:chars] + "…"
    return head


def render_placeholder(rel_path: str, content: str, lines: int, chars: int) -> str:
    n_lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    n_bytes = utf8_len(content)
    parts = [f"{PLACEHOLDER_PREFIX}{rel_path} | {n_lines} lines / {n_bytes} bytes]"]
    preview = _preview(content, lines, chars)
    if preview:
        parts.append(f"Preview (first {min(lines, n_lines)} lines):")
        parts.append(preview)
    parts.append(f"[Full result saved to {rel_path}; read it back with read_file.]")
    return "\n".join(parts)


class CompactionOffloader:
    """Moves tool results above ``threshold`` bytes into per-session files."""

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        session_id: str,
        *,
        threshold: int = 4000,
        preview_lines: int = 10,
        preview_chars: int = 2000,
    ) -> None:
        self.work_dir = Path(work_dir)
        self.session_id = session_id
        self.threshold = threshold
        self.preview_lines = preview_lines
        self.preview_chars = preview_chars
        self._cache: dict[tuple[str, str], OffloadEntry] = {}

    def for_session(self, session_id: str) -> CompactionOffloader:
        """The same settings bound to another session (fresh cache, its own folder)."""
        return type(self)(
            self.work_dir,
            session_id,
            threshold=self.threshold,
            preview_lines=self.preview_lines,
            preview_chars=self.preview_chars,
        )

    def hash_secret(self) -> bytes | None:
        """The work dir's secret for metadata hashes (``HASH_SECRET_FILE``), made on first use
        (32 random bytes, file 0600, created whole: written to a file of its own, then linked
        into place, so processes and threads starting at once all read the same one). None,
        with a warning logged, when it cannot be read or written, or is not a regular file of
        32 bytes (a symlink is not followed): the compactor then keys hashes per process."""
        path = self.work_dir / HASH_SECRET_FILE
        try:
            return _read_secret(path) or _create_secret(path)
        except OSError as exc:
            log.warning("metadata hashes keyed for this process only: %s", exc)
            return None

    @property
    def session_dir(self) -> Path:
        return confined(self.work_dir, str(OFFLOAD_DIR), safe_name(self.session_id or "default"))

    def offload(
        self,
        msg: Message,
        *,
        threshold: int | None = None,
        preview_lines: int | None = None,
        preview_chars: int | None = None,
        tool_name: str = "",
    ) -> tuple[OffloadEntry, Message] | None:
        """Write ``msg``'s content to a file and return (entry, placeholder message).

        Returns None when the message is not a tool result, is not above the threshold, is
        already a placeholder, or a placeholder would not be smaller than the content. Raises
        ``OffloadError`` when the file cannot be written (the caller keeps the original).
        """
        limit = self.threshold if threshold is None else threshold
        if not offloadable(msg, limit):
            return None
        content = msg.content
        data = content.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(data).hexdigest()
        key = (msg.tool_call_id or "", digest)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._write(msg, data, digest, tool_name)
        lines = self.preview_lines if preview_lines is None else preview_lines
        chars = self.preview_chars if preview_chars is None else preview_chars
        placeholder = render_placeholder(entry.file_path, content, lines, chars)
        if utf8_len(placeholder) >= len(data):
            return None
        self._cache[key] = entry
        return entry, msg.model_copy(update={"content": placeholder})

    def _write(self, msg: Message, data: bytes, digest: str, tool_name: str) -> OffloadEntry:
        base = safe_name(msg.tool_call_id or "result")
        try:
            folder = self.session_dir
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(folder, 0o700)
            target = folder / f"{base}.txt"
            if target.exists() and not _same_content(target, data, digest):
                target = folder / f"{base}-{digest[:8]}.txt"
            if not (target.exists() and _same_content(target, data, digest)):
                _atomic_write(target, data)
        except (OSError, ValueError) as exc:
            raise OffloadError(
                f"could not offload tool result {msg.tool_call_id!r} to {self.work_dir}: "
                f"{exc}; content kept in context"
            ) from exc
        text = data.decode("utf-8", "replace")
        return OffloadEntry(
            tool_call_id=msg.tool_call_id or "",
            tool_name=tool_name or (msg.name or ""),
            file_path=str(target.relative_to(self.work_dir.resolve())),
            bytes=len(data),
            lines=text.count("\n") + (0 if text.endswith("\n") or not text else 1),
            sha256=digest,
        )

    def read_back(self, entry: OffloadEntry) -> str:
        """The full content of an offloaded result (confined to the work dir), exactly as it was
        in the message: the file holds its bytes with any lone surrogates passed through."""
        data = confined(self.work_dir, entry.file_path).read_bytes()
        return data.decode("utf-8", "surrogatepass")

    def delete_session(self) -> bool:
        """Remove this session's offload folder (cascade GC)."""
        folder = self.session_dir
        if folder.exists():
            shutil.rmtree(folder)
            return True
        return False


def _same_content(path: Path, data: bytes, digest: str) -> bool:
    try:
        if path.stat().st_size != len(data):
            return False
        return hashlib.sha256(path.read_bytes()).hexdigest() == digest
    except OSError:
        return False


def _atomic_write(target: Path, data: bytes) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class OffloadHook:
    """Tool-execution-time offload: call it on each tool result before it enters the history.

    Same folder scheme and placeholder as the compaction offloader, with its own defaults (10000
    bytes, 20 preview lines). Fails open: on a write error the original message is returned and
    the error is kept in ``errors``.
    """

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        session_id: str,
        *,
        threshold: int = 10000,
        preview_lines: int = 20,
        preview_chars: int = 4000,
    ) -> None:
        self._offloader = CompactionOffloader(
            work_dir,
            session_id,
            threshold=threshold,
            preview_lines=preview_lines,
            preview_chars=preview_chars,
        )
        self.entries: list[OffloadEntry] = []
        self.errors: list[str] = []

    def __call__(self, msg: Message, *, tool_name: str = "") -> Message:
        try:
            done = self._offloader.offload(msg, tool_name=tool_name)
        except OffloadError as exc:
            self.errors.append(str(exc))
            return msg
        if done is None:
            return msg
        entry, placeholder = done
        self.entries.append(entry)
        return placeholder


_SECRET_BYTES = 32


def _read_secret(path: Path) -> bytes | None:
    try:
        # no symlink followed; O_NONBLOCK: a FIFO of that name must not hang the agent
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        data = handle.read(_SECRET_BYTES + 1)
    if len(data) != _SECRET_BYTES:
        raise OSError(f"{path} is not a compactlens hash secret ({len(data)} bytes)")
    return data


def _create_secret(path: Path) -> bytes | None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, aside = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:  # mkstemp: 0600, a name no other writer has
            out.write(secrets.token_bytes(_SECRET_BYTES))
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another writer got there first
            os.link(aside, path)  # atomic: the file appears whole or not at all
    finally:
        os.unlink(aside)
    return _read_secret(path)
