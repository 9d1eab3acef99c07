"""Fixtures shared by the compactor tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compactor.tmpfs import small_tmpfs


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB tmpfs (needs root and mount); skipped where it cannot be made."""
    with small_tmpfs(tmp_path / "tiny") as mount_point:
        yield mount_point
