"""Spool folders a hostile or unlucky user leaves behind (issue 16 items 9 and 13).

A symbolic link in the spool (``agent.jsonl -> ~/secret``) is never read, and its target's bytes
are copied nowhere (no quarantine row, no event); a FIFO or a directory named like a spool file
is skipped; a file that vanishes or is swapped for a link between the listing and the read, and
another user's file the projector may not read, are skipped with a line while every other file
is stored, and tried again on the next pass. Everything is real: links, FIFOs, files deleted
during an ingest, and a projector process without the capability to read other users' files
(``setpriv`` drops root's DAC override; the test skips where that is not possible).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from analytics.store import open_store
from analytics.store.projector import Projector
from tests.analytics.spool_helpers import (
    NO_DAC,
    NOBODY,
    skip_unless_unreadable,
    usage_lines,
    write_lines,
)

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 60
SECRET = "root:x:0:0:the secret only root may read"


def _secret(tmp_path: Path) -> Path:
    """A file outside the spool whose lines look like bad spool lines (they would be
    quarantined, raw bytes and all, if it were read)."""
    secret = tmp_path / "secret"
    secret.write_text(f'{SECRET}\n{{"event_id": "{SECRET}"}}\n')
    return secret


def _leaks(home: Path) -> int:
    with open_store(home) as store:
        return int(
            store.query(
                "SELECT (SELECT count(*) FROM quarantine WHERE contains(raw, ?)) "
                "+ (SELECT count(*) FROM events WHERE contains(CAST(payload AS VARCHAR), ?))",
                [SECRET, SECRET],
            ).item()
        )


def _cli(home: Path, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    argv = [*prefix, sys.executable, "-m", "analytics.cli", *args, "--home", str(home)]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT_S)


def test_a_symlink_in_the_spool_is_not_read_and_its_target_is_copied_nowhere(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    write_lines(spool / "good.jsonl", usage_lines("good", 3))
    (spool / "agent.jsonl").symlink_to(_secret(tmp_path))
    (spool / "inside.jsonl").symlink_to(spool / "good.jsonl")  # a link is a link, wherever to

    with open_store(tmp_path) as store:
        result = Projector(store, spool).ingest()
        assert (result.new_events, result.quarantined) == (3, 0)
        assert store.counts()["quarantine"] == 0
        assert sorted(store.offsets()) == ["good.jsonl"]
    assert result.skipped == [
        "agent.jsonl: a symbolic link, not a regular file; not read",
        "inside.jsonl: a symbolic link, not a regular file; not read",
    ]
    assert _leaks(tmp_path) == 0

    done = _cli(tmp_path, "ingest")
    assert done.returncode == 1, done.stderr
    assert "agent.jsonl: a symbolic link" in done.stderr, done.stderr
    assert SECRET not in done.stdout + done.stderr


def test_a_hard_link_in_the_spool_is_not_read_and_its_target_is_copied_nowhere(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    write_lines(spool / "good.jsonl", usage_lines("good", 3))
    os.link(_secret(tmp_path), spool / "agent.jsonl")

    with open_store(tmp_path) as store:
        result = Projector(store, spool).ingest()
        assert (result.new_events, result.quarantined) == (3, 0)
        assert sorted(store.offsets()) == ["good.jsonl"]
    (line,) = result.skipped
    assert line.startswith("agent.jsonl: a file with 2 hard links")
    assert _leaks(tmp_path) == 0

    # the second name gone, the file is an ordinary spool file of one name (and bad lines)
    (tmp_path / "secret").unlink()
    with open_store(tmp_path) as store:
        assert Projector(store, spool).ingest().quarantined == 2


def test_a_fifo_or_a_directory_named_like_a_spool_file_is_skipped_with_a_line(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    write_lines(spool / "good.jsonl", usage_lines("good", 2))
    os.mkfifo(spool / "pipe.jsonl")  # opening it for reading would wait for a writer
    (spool / "folder.jsonl").mkdir()
    with open_store(tmp_path) as store:
        result = Projector(store, spool).ingest()
    assert result.new_events == 2
    assert result.skipped == [
        "folder.jsonl: a directory, not a regular file; not read",
        "pipe.jsonl: a FIFO (named pipe), not a regular file; not read",
    ]


def _spool_of_four(spool: Path) -> list[Path]:
    """Four files, the first large enough that its chunks commit one by one."""
    files = [spool / f"{k}-producer.jsonl" for k in range(4)]
    write_lines(files[0], usage_lines("first", 2_000))
    for k, path in enumerate(files[1:], start=1):
        write_lines(path, usage_lines(f"p{k}", 5))
    return files


def test_a_spool_file_deleted_during_an_ingest_is_skipped_and_the_rest_is_stored(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    files = _spool_of_four(spool)
    with open_store(tmp_path) as store:
        projector = Projector(store, spool, chunk_bytes=64 * 1024)
        # listed and planned, then gone: deleted after the first commit, before it is read
        result = projector.ingest(lambda done, todo: files[3].unlink(missing_ok=True))
        assert result.new_events == 2_000 + 5 + 5
        assert result.skipped == [
            "3-producer.jsonl: gone before it could be read (deleted or renamed); "
            "tried again next time"
        ]
        write_lines(files[3], usage_lines("p3", 5))  # it comes back: read on the next pass
        again = projector.ingest()
        assert (again.new_events, again.skipped) == (5, [])


def test_a_spool_file_swapped_for_a_symlink_during_an_ingest_is_not_read(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    files = _spool_of_four(spool)
    secret = _secret(tmp_path)

    def swap(done: int, todo: int) -> None:
        if not files[3].is_symlink():
            files[3].unlink()
            files[3].symlink_to(secret)

    with open_store(tmp_path) as store:
        result = Projector(store, spool, chunk_bytes=64 * 1024).ingest(swap)
    assert result.quarantined == 0
    assert result.skipped == ["3-producer.jsonl: a symbolic link, not a regular file; not read"]
    assert _leaks(tmp_path) == 0


# ---------------------------------------------------------------- another user's file


def _others_file(spool: Path) -> Path:
    """A spool file of another user (nobody), mode 0600, sorting first."""
    other = spool / "0-other-user.jsonl"
    write_lines(other, usage_lines("other", 4))
    os.chown(other, NOBODY, NOBODY)
    other.chmod(0o600)
    return other


def test_another_users_unreadable_spool_file_blocks_none_of_the_others(tmp_path: Path) -> None:
    skip_unless_unreadable(tmp_path)
    spool = tmp_path / "spool"
    _others_file(spool)
    for k in range(11):
        write_lines(spool / f"{k + 1:02d}-agent.jsonl", usage_lines(f"agent-{k}", 1))

    done = _cli(tmp_path, "ingest", prefix=NO_DAC)
    assert done.returncode == 1, done.stderr
    assert "0-other-user.jsonl: cannot be read (Permission denied)" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    with open_store(tmp_path) as store:
        assert store.counts()["events"] == 11


def test_ingest_watch_says_an_unreadable_file_once_and_reads_it_once_it_can(
    tmp_path: Path,
) -> None:
    skip_unless_unreadable(tmp_path)
    spool = tmp_path / "spool"
    other = _others_file(spool)
    write_lines(spool / "1-agent.jsonl", usage_lines("agent", 3))
    argv = [*NO_DAC, sys.executable, "-m", "analytics.cli", "ingest", "--watch"]
    proc = subprocess.Popen(
        [*argv, "--interval", "0.05", "--home", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    lines: list[str] = []
    batches = threading.Semaphore(0)

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip())
            if line.startswith("+"):
                batches.release()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        assert batches.acquire(timeout=TIMEOUT_S), lines  # the readable file, the other skipped
        os.chown(other, 0, 0)  # now the watcher may read it: on the next pass
        assert batches.acquire(timeout=TIMEOUT_S), lines
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(TIMEOUT_S) == 0, lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(TIMEOUT_S)
    said = [line for line in lines if "0-other-user.jsonl: cannot be read" in line]
    assert len(said) == 1, lines  # once, not on every pass
    with open_store(tmp_path) as store:
        assert store.counts()["events"] == 3 + 4
