"""A real small tmpfs for full-disk tests, and a way to fill it (tests run as root here).

``small_tmpfs`` mounts one and skips the test, with the reason, where mounting is not possible;
``fill_disk`` fills it to a chosen number of free bytes. Other test folders can import both.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(mount_point: Path, size: str = "64k") -> Iterator[Path]:
    """``mount_point`` as a tmpfs of ``size`` for the duration; skipped where it cannot be made."""
    mount_point.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


def fill_disk(folder: Path, *, leave: int = 0, name: str = "filler.bin") -> Path:
    """Fill the file system of ``folder`` with one file, then give back ``leave`` bytes (whole
    pages: tmpfs allocates 4 KiB at a time). Deleting the returned file frees the disk."""
    filler = folder / name
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        block = b"\0" * 4096
        while True:
            try:
                if os.write(fd, block) == 0:
                    break
            except OSError:
                break
        if leave:
            os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)
    return filler
