"""File paths mentioned in agent transcripts, for the extractive summary's "Files touched".

Heuristics only: a regex over text, with URLs, traceback frames (library files the agent never
touched), DOIs and ``a/``/``b/`` diff prefixes removed first. Nothing here reads the disk.
"""

from __future__ import annotations

import re

MAX_PATH_CHARS = 200

_URL_RE = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://\S*")
# The lookahead rejects dot-less words before the costlier body runs (about 40% faster).
_PATH_RE = re.compile(
    r"(?<![\w/.:\\-])(?=[\w.~/-]*\.[A-Za-z])"
    r"((?:~|\.{1,2})?/?(?:[\w.-]+/)*[\w-][\w.-]*\.([A-Za-z][A-Za-z0-9]{0,7}))(?![\w/(])"
)
# Traceback frames name library files the agent never touched.
_FRAME_RE = re.compile(r'(?m)^\s*File "[^"\n]*", line \d+.*$')
_DOI_RE = re.compile(r"^\d+\.\d+/")
_DIFF_A_RE = re.compile(r"(?m)^(diff --git |--- )a/")
_DIFF_B_RE = re.compile(r"(?m)^(diff --git \S+ |\+\+\+ )b/")
# A bare name (no slash) counts as a file only with one of these, so ``iam.physical`` does not.
_EXTENSION_WORDS = (
    "py pyi pyx ipynb js mjs cjs ts tsx jsx json jsonl yaml yml toml ini cfg conf md rst txt csv "
    "tsv xml html htm css scss sh bash zsh go rs java kt c h cc cpp hpp cs rb php swift sql lock "
    "log diff patch dockerfile proto gradle mk in"
)
_KNOWN_EXTENSIONS = frozenset(_EXTENSION_WORDS.split())


def add_text_paths(files: dict[str, None], text: str) -> None:
    """Add the file paths mentioned in ``text`` (URLs, traceback frames, diff prefixes aside)."""
    if "." not in text:
        return
    # Each clean-up runs only when its cheap marker is present: most messages need none.
    if "://" in text:
        text = _URL_RE.sub(" ", text)
    if 'File "' in text:
        text = _FRAME_RE.sub(" ", text)
    if "a/" in text:
        text = _DIFF_B_RE.sub(r"\1", _DIFF_A_RE.sub(r"\1", text))
    for match in _PATH_RE.finditer(text):
        path, ext = match.group(1), match.group(2)
        if "/" in path:
            if "//" not in path and not _DOI_RE.match(path):
                add_path(files, path)
        elif ext in _KNOWN_EXTENSIONS:  # case-sensitive, so initials like "H.H" do not count
            add_path(files, path)


def add_path(files: dict[str, None], path: str) -> None:
    path = path.removeprefix("./")
    if path and len(path) <= MAX_PATH_CHARS:
        files.setdefault(path, None)
