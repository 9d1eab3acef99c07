"""What following a growing transcript costs the spool, against storing it whole each pass.

A real transcript is written in ``--steps`` parts, each followed by one import pass of the
watcher's kind (``run_import`` with the watcher's tails, as ``compactlens watch`` runs it), into
one home; the baseline is the same passes without tails (each pass stores the grown file whole as
a new version: what ``watch`` did before), into another; the reference is one import of the
finished file. Printed: the spool bytes and lines of each, as a multiple of the reference, the
passes that extended, replaced or skipped, the seconds all passes took, and whether the stored
live messages equal the reference's (they must).

Run: ``.venv/bin/python bench/watch_growth.py [TRANSCRIPT] [--steps N]`` (default: the 54-line
Claude Code session of the tests in 20 steps).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from analytics.cli.commands import RunReport, run_import
from analytics.importers.identity import Tail
from analytics.store import open_store

DEFAULT = (
    Path(__file__).resolve().parents[1].parent
    / "shared/data/transcripts/native/claude-code/a6/e4c2a0fbd1/0/full.jsonl"
)
LIVE = """SELECT m.idx, m.sha256, m.bytes FROM messages m JOIN sessions s USING (session_id)
WHERE s.deleted_at IS NULL ORDER BY s.session_id, m.idx"""


def _spool(home: Path) -> tuple[int, int]:
    files = list((home / "spool").glob("*.jsonl"))
    return sum(f.stat().st_size for f in files), sum(f.read_bytes().count(b"\n") for f in files)


def _live(home: Path) -> list[tuple[object, ...]]:
    with open_store(home, read_only=True) as store:
        return store.query(LIVE).rows()


def _follow(
    lines: list[str], root: Path, steps: int, tails: dict[str, Tail] | None
) -> tuple[float, list[RunReport]]:
    """Write ``lines`` in ``steps`` parts, one import pass after each: seconds, reports."""
    folder = root / "in"
    folder.mkdir(parents=True)
    live = folder / "session.jsonl"
    reports = []
    start = time.perf_counter()
    for step in range(1, steps + 1):
        upto = max(1, round(len(lines) * step / steps))
        live.write_text("".join(x + "\n" for x in lines[:upto]), encoding="utf-8")
        reports.append(run_import([live], root / "home", tails=tails))
    return time.perf_counter() - start, reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("transcript", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    if not args.transcript.is_file():
        print(f"no transcript at {args.transcript}", file=sys.stderr)
        return 2
    lines = [x for x in args.transcript.read_text(encoding="utf-8").split("\n") if x]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "one" / "in").mkdir(parents=True)
        (root / "one" / "in" / "session.jsonl").write_text(
            "".join(x + "\n" for x in lines), encoding="utf-8"
        )
        run_import([root / "one" / "in"], root / "one" / "home")
        ref_bytes, ref_lines = _spool(root / "one" / "home")
        reference = _live(root / "one" / "home")
        print(f"{args.transcript} ({len(lines)} lines) in {args.steps} passes")
        print(f"  one import of the finished file: {ref_bytes:,} spool bytes, {ref_lines} lines")
        ok = True
        for name, tails in (("whole file each pass (baseline)", None), ("tails (watch)", {})):
            seconds, reports = _follow(lines, root / name, args.steps, tails)
            size, count = _spool(root / name / "home")
            same = _live(root / name / "home") == reference
            ok &= same
            extended = sum(r.extended for r in reports)
            replaced = sum(len(r.replaced) for r in reports)
            skipped = sum(r.skipped for r in reports)
            print(
                f"  {name}: {size:,} bytes ({size / ref_bytes:.2f}x), {count} lines "
                f"({count / ref_lines:.2f}x); {extended} extended, {replaced} replaced, "
                f"{skipped} skipped; {seconds:.1f} s; live messages equal: {same}"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
