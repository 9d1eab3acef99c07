"""``import`` says how many of the harness's own compactions it stored (issue 27 item 5).

Two Claude Code sessions that compacted themselves are imported through the command line; the
figure the import table prints is compared with the ``compact_boundary`` lines of the raw files
(counted here), and a second import of the same files stores none again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.analytics.cli_helpers import run
from tests.app.native import FILES, NATIVE, raw_boundaries

pytestmark = pytest.mark.skipif(not NATIVE.is_dir(), reason=f"no transcripts at {NATIVE}")


def _stored(output: str) -> int:
    found = re.search(r"harness compactions stored\s*│\s*([\d,]+)", output)
    assert found, output
    return int(found.group(1).replace(",", ""))


def test_import_counts_the_harness_compactions_it_stored(tmp_path: Path) -> None:
    files = [NATIVE / f for f in FILES]
    boundaries = sum(len(raw_boundaries(f)) for f in files)
    assert boundaries > 0

    first = run("import", *files, "--home", tmp_path)
    again = run("import", *files, "--home", tmp_path)

    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    assert _stored(first.output) == boundaries
    assert _stored(again.output) == 0  # already in the store: nothing stored twice
    # no row for the Go harness's record files when none were read (it said "records 0")
    assert "harness9" not in first.output


def test_audit_compares_re_reads_on_the_same_histories_only(tmp_path: Path) -> None:
    """Two sessions imported, one replayed: the same-histories comparison holds that one and
    its replay alone (its native compactions are that file's boundaries, counted here), while
    the overall summary holds both."""
    files = [NATIVE / f for f in FILES]
    assert run("import", *files, "--home", tmp_path).exit_code == 0
    replayed = run("replay", files[1], "--window", "200000", "--home", tmp_path)
    assert replayed.exit_code == 0, replayed.output
    done = run("audit", "--json", "--home", tmp_path)
    assert done.exit_code == 0, done.output
    found = json.loads(done.stdout)
    both = sum(len(raw_boundaries(f)) for f in files)
    one = len(raw_boundaries(files[1]))
    assert 0 < one < both
    assert found["summary"]["native"]["compactions"] == both
    same = found["same_histories"]
    assert same["sessions"] == 1, same
    assert same["rates"]["native"]["compactions"] == one, same
    ours = same["rates"].get("compactlens", {}).get("compactions", 0)
    assert ours > 0 and ours == found["summary"]["compactlens"]["compactions"], same
    assert "same 1 session " in same["note"], same
