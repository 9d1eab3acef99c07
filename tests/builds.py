"""Expensive test data built once and shared by every test worker, kept while its inputs hold.

A build (such as the replays of the dev transcripts) is a folder made by a function.
``BuildCache.get`` returns the folder for a name and a key (a hash of what the build depends on,
``source_key`` for the code and transcripts): the first worker to ask builds it under a file lock
while the others wait, the folder is renamed into place only when whole, and a later run with the
same key builds nothing. Builds of an older key of the same name are removed. The cache lives in
pytest's cache folder (``.pytest_cache``; ``pytest --cache-clear`` empties it), or in the run's
temporary folder when the cache plugin is off. ``BuildCache.copy`` gives a worker its own copy
for tests that write (a DuckDB file opened as owner is written even by a read).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (ROOT / "compactor", ROOT / "analytics")


def source_key(*parts: object, inputs: Iterable[Path] = (), code: Iterable[Path] = ()) -> str:
    """A short hash of ``parts``; of the packages' code and of the test modules in ``code``
    (files or folders: their ``.py`` files); of the DuckDB, Polars and Python versions; and of
    every file under ``inputs`` (path, size and modification time: the shared transcripts are
    read, never written)."""
    digest = hashlib.sha256()
    digest.update(f"{parts!r}|{sys.version}|{duckdb.__version__}|{pl.__version__}".encode())
    for folder in inputs:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            stat = path.stat()
            digest.update(f"{path}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    for source in (*PACKAGES, *code):
        for path in sorted(source.rglob("*.py")) if source.is_dir() else [source]:
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # blocks while another worker builds
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass
class BuildCache:
    """The cache folder, and this worker's copies of what it holds."""

    root: Path
    tmp_path_factory: pytest.TempPathFactory
    _copies: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def for_run(cls, config: pytest.Config, factory: pytest.TempPathFactory) -> BuildCache:
        cache = getattr(config, "cache", None)  # -p no:cacheprovider: no attribute at all
        if cache is None:  # this worker builds for itself
            return cls(factory.mktemp("builds"), factory)
        return cls(cache.mkdir("compactlens-builds"), factory)

    def get(self, name: str, key: str, build: Callable[[Path], None]) -> Path:
        """The folder ``build`` made for ``name`` at ``key``, built here unless a worker or an
        earlier run did. Treat it as read-only: ``copy`` it to write."""
        done = self.root / f"{name}-{key}"
        with _locked(self.root / f"{name}.lock"):
            if not done.is_dir():
                for stale in self.root.glob(f"{name}-*"):
                    shutil.rmtree(stale, ignore_errors=True)
                building = self.root / f"{name}.building-{os.getpid()}"
                shutil.rmtree(building, ignore_errors=True)
                building.mkdir()
                build(building)
                building.rename(done)  # whole or absent: a killed build leaves nothing
        return done

    def copy(self, name: str, key: str, build: Callable[[Path], None]) -> Path:
        """This worker's own copy of ``get(name, key, build)``, made once per worker."""
        if name not in self._copies:
            self._copies[name] = self.new_copy(name, key, build)
        return self._copies[name]

    def new_copy(self, name: str, key: str, build: Callable[[Path], None]) -> Path:
        """A copy of ``get(name, key, build)`` for the caller alone."""
        copy = self.tmp_path_factory.mktemp(name)
        shutil.copytree(self.get(name, key, build), copy, dirs_exist_ok=True)
        return copy
