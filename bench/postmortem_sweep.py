"""Every emergency's post-mortem and counterfactual search on the dev transcripts, with figures.

The tests search counterfactuals on a sample of sessions that covers every cause
(``tests/analytics/replay/test_postmortem_transcripts.py``); this bench runs the search on all of
them, as a user's cold ``compactlens postmortem`` does: the dev transcripts are replayed at each
window into a fresh home (``compactlens replay``), then ``compactlens postmortem --json`` runs.
Prints, per window: the replay's and the post-mortem's seconds, the emergencies by cause, the
share of non-``fixed_prompt`` baselines that reproduced and the share of emergencies settled
(avoided by a verified change, or a cause no config can help), each against the 90% bar the
tests hold the sample to; exits 1 when a share is under it.

Run: ``.venv/bin/python bench/postmortem_sweep.py [--window 8000 --window 16000]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from analytics.cli.main import app

TRANSCRIPTS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "transcripts"
UNAVOIDABLE = ("fixed_prompt", "summarizer_failed", "manual")
BAR = 0.9


def _dev() -> list[Path]:
    return sorted(p for p in TRANSCRIPTS.iterdir() if p.is_dir() and p.name != "native")


def _run(*args: str) -> str:
    done = CliRunner().invoke(app, list(args))
    if done.exit_code != 0:
        raise SystemExit(f"compactlens {' '.join(args[:2])} failed: {done.output[-2000:]}")
    return done.stdout


def sweep(window: int, home: Path) -> bool:
    """Replay, post-mortems, figures for one window; whether both shares reach the bar."""
    started = time.perf_counter()
    _run("replay", *map(str, _dev()), "--window", str(window), "--home", str(home))
    replay_s = time.perf_counter() - started
    started = time.perf_counter()
    found: list[dict[str, Any]] = json.loads(_run("postmortem", "--json", "--home", str(home)))[
        "postmortems"
    ]
    postmortem_s = time.perf_counter() - started
    others = [p for p in found if p["cause"] != "fixed_prompt"]
    reproduced = sum(bool(p["reproduced"]) for p in others) / max(len(others), 1)
    settled = sum(
        p["cause"] in UNAVOIDABLE or bool(p["smallest_change_verified"]) for p in found
    ) / max(len(found), 1)
    causes = ", ".join(f"{c} {n}" for c, n in Counter(p["cause"] for p in found).most_common())
    print(f"window {window:,}: replay {replay_s:.1f} s, postmortem {postmortem_s:.1f} s")
    sessions = len({p["session_id"] for p in found})
    print(f"  emergencies {len(found)} in {sessions} sessions ({causes})")
    print(f"  baselines reproduced {reproduced:.1%} of {len(others)} (bar {BAR:.0%})")
    print(f"  settled (verified fix or unavoidable) {settled:.1%} of {len(found)} (bar {BAR:.0%})")
    return reproduced >= BAR and settled >= BAR


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, action="append", help="tokens (repeatable)")
    windows = parser.parse_args().window or [8_000, 16_000]
    held = True
    for window in windows:
        with tempfile.TemporaryDirectory(prefix=f"compactlens-sweep-{window}-") as tmp:
            held = sweep(window, Path(tmp)) and held
    print("every share reached the bar" if held else "a share is under the bar")
    return 0 if held else 1


if __name__ == "__main__":
    raise SystemExit(main())
