"""Appending to a file of lines whole or not at all, and advisory locks for it.

A write that stops part-way (``ENOSPC`` after a short count) leaves a fragment; the next append
would glue its first line onto it, and both would be lost as one bad line. ``append_whole``
cuts the file back to where it was before, so a file of lines only ever ends at a complete
line, and a caller that keeps what it could not write can simply try again. Nothing here
decides what is written, where, or when to retry.
"""

from __future__ import annotations

import contextlib
import errno
import os


def lock_file(fd: int, *, exclusive: bool) -> None:
    """An advisory whole-file lock where the platform has one (POSIX ``flock``); elsewhere
    appends of one line stay atomic enough, and ``import compactor`` must not fail."""
    if os.name != "posix":
        return
    import fcntl  # POSIX only: imported here so that the package imports on Windows

    fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)


def append_whole(fd: int, data: bytes, *, size: int | None = None) -> int:
    """Append ``data`` to ``fd`` (opened ``O_APPEND``) entirely, or leave the file as it was.

    ``size`` is where the file's last complete write ends, if the caller knows it (default: the
    file's size now); a fragment beyond it, which an earlier failure could not cut, is cut
    first. Returns the size after the append. Raises the ``OSError`` of a failed write after
    cutting the file back to ``size`` (if even that fails, the caller's next ``size`` cuts it).
    """
    now = os.fstat(fd).st_size
    if size is None or now < size:  # shorter: someone else cut the file; start from there
        size = now
    elif now > size:
        os.ftruncate(fd, size)
    view = memoryview(data)
    done = 0
    try:
        while done < len(data):
            n = os.write(fd, view[done:])
            if n <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            done += n
    except OSError:
        if done:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
        raise
    return size + len(data)
