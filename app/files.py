"""Offloaded tool results on disk, read confined to the offload root.

The store records each offload's ``file_path`` relative to the offloader's work directory
(``.compactlens/tool_results/<session>/<call>.txt``). The work directory is the one the session
recorded (metadata ``offload_root``), else the home, else ``<home>/offload`` (where the CLI's
replays write). A path is served only if it is relative, has no ``..``, no component on the way
down is a symbolic link, and the real file lies under ``<work dir>/.compactlens/tool_results``.
Nothing here writes or deletes files, and nothing here knows about Streamlit.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

OFFLOAD_DIR = Path(".compactlens") / "tool_results"
PREVIEW_BYTES = 200_000
LANGUAGES = {
    ".py": "python",
    ".js": "javascript",
    ".ts": "typescript",
    ".json": "json",
    ".md": "markdown",
    ".sh": "bash",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".html": "html",
    ".css": "css",
    ".sql": "sql",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".cpp": "cpp",
    ".diff": "diff",
    ".patch": "diff",
    ".xml": "xml",
    ".log": "log",
}


class UnsafePathError(ValueError):
    """A requested path that is not a plain file under the offload root."""


def work_dirs(home: Path, metadata: Mapping[str, Any]) -> list[Path]:
    """Where a session's offload files may live, most specific first."""
    recorded = metadata.get("offload_root") or metadata.get("work_dir")
    dirs = [Path(str(recorded))] if recorded else []
    return [*dirs, home, home / "offload"]


def resolve_offload(work_dir: Path, relative: str) -> Path:
    """The real path of ``relative`` under ``work_dir``'s offload root, or ``UnsafePathError``
    (``FileNotFoundError`` when it is safe but names no file: absent, too long, through a
    file, or holding a NUL byte)."""
    rel = PurePosixPath(relative.replace("\\", "/"))
    if not relative or rel.is_absolute() or ".." in rel.parts:
        raise UnsafePathError(f"{relative!r} is not a relative path inside the offload folder")
    if "\0" in relative:  # no file name holds one; os calls would raise ValueError
        raise FileNotFoundError(f"{relative!r} holds a NUL byte: no file has that name")
    try:
        real = _walk_down(work_dir, relative, rel)
    except FileNotFoundError:
        raise
    except OSError as exc:  # ENAMETOOLONG, ENOTDIR, ELOOP, EACCES: no file to serve
        raise FileNotFoundError(f"{relative!r}: {exc.strerror or exc}") from None
    root = (work_dir / OFFLOAD_DIR).resolve()
    if not real.is_relative_to(root):
        raise UnsafePathError(f"{relative!r} is outside the offload folder {root}")
    if not real.is_file():
        raise UnsafePathError(f"{relative!r} is not a regular file")
    return real


def _walk_down(work_dir: Path, relative: str, rel: PurePosixPath) -> Path:
    """``rel`` under ``work_dir`` resolved, refusing a symbolic link at any step."""
    current = work_dir
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            raise UnsafePathError(f"{relative!r} goes through a symbolic link: refused")
    return current.resolve(strict=True)


def find_offload(dirs: list[Path], relative: str) -> Path:
    """The first work directory holding ``relative`` safely; the first refusal is raised as is,
    and ``FileNotFoundError`` when no directory has it."""
    for work_dir in dirs:
        try:
            return resolve_offload(work_dir, relative)
        except FileNotFoundError:
            continue
    raise FileNotFoundError(f"{relative!r} is in none of: {', '.join(str(d) for d in dirs)}")


def read_text(path: Path, limit: int = PREVIEW_BYTES) -> tuple[str, bool]:
    """The file's first ``limit`` bytes as text (invalid UTF-8 replaced), and whether it was
    cut."""
    with path.open("rb") as fh:
        data = fh.read(limit + 1)
    return data[:limit].decode("utf-8", "replace"), len(data) > limit


def language_for(name: str, text: str = "") -> str | None:
    """A syntax-highlighting language guessed from the extension (``.txt`` results: from the
    first characters: JSON, a diff, Python, HTML, else plain)."""
    suffix = Path(name).suffix.lower()
    if suffix in LANGUAGES:
        return LANGUAGES[suffix]
    head = text.lstrip()[:200]
    if head.startswith(("{", "[")):
        return "json"
    if head.startswith(("diff --git", "--- ", "@@ ")):
        return "diff"
    if head.startswith(("def ", "import ", "from ", "class ")):
        return "python"
    if head.lower().startswith(("<!doctype html", "<html", "<script", "<div", "<p>")):
        return "html"
    return None


def listed(dirs: list[Path], session_folder: str) -> list[str]:
    """Relative paths of the regular files (not links) in a session's offload folder."""
    out: list[str] = []
    for work_dir in dirs:
        folder = work_dir / OFFLOAD_DIR / session_folder
        if folder.is_dir() and not folder.is_symlink():
            out += [
                str((OFFLOAD_DIR / session_folder / p.name).as_posix())
                for p in sorted(folder.iterdir())
                if p.is_file() and not p.is_symlink()
            ]
    return sorted(set(out))
