"""Every emergency's post-mortem and counterfactual search on the dev transcripts, with figures.

The tests search counterfactuals on a sample of sessions that covers every cause
(``tests/analytics/replay/test_postmortem_transcripts.py``); this bench runs the search on all of
them, as a user's cold ``compactlens postmortem`` does: the dev transcripts are replayed at each
window into a fresh home (``compactlens replay``), then ``compactlens postmortem --json`` runs.
Prints, per window: the replay's and the post-mortem's seconds and their ratio (a cold
post-mortem should cost at most about twice the replay that built the store), the emergencies
by cause, the share of avoidable baselines that reproduced (bar 90%), the share of emergencies
settled (bar 95%: avoided by a verified change, unavoidable at this window with its
``window_needed``, a failed summariser or a manual compaction), and the sessions given one
verified fix for all their avoidable emergencies; exits 1 when a share is under its bar.

Run: ``.venv/bin/python bench/postmortem_sweep.py [--window 8000 --window 16000] [PATH ...]``
(default: the dev transcripts; pass held-out files or folders to judge them instead).
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
from analytics.jobs.causes import UNAVOIDABLE

TRANSCRIPTS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "transcripts"
SETTLED = (*UNAVOIDABLE, "summarizer_failed", "manual")
BAR = 0.9
SETTLED_BAR = 0.95


def _dev() -> list[Path]:
    return sorted(p for p in TRANSCRIPTS.iterdir() if p.is_dir() and p.name != "native")


def _run(*args: str) -> str:
    done = CliRunner().invoke(app, list(args))
    if done.exit_code != 0:
        raise SystemExit(f"compactlens {' '.join(args[:2])} failed: {done.output[-2000:]}")
    return done.stdout


def sweep(window: int, home: Path, paths: list[Path]) -> bool:
    """Replay, post-mortems, figures for one window; whether both shares reach their bars."""
    started = time.perf_counter()
    _run("replay", *map(str, paths), "--window", str(window), "--home", str(home))
    replay_s = time.perf_counter() - started
    started = time.perf_counter()
    answer = json.loads(_run("postmortem", "--json", "--home", str(home)))
    postmortem_s = time.perf_counter() - started
    found: list[dict[str, Any]] = answer["postmortems"]
    others = [p for p in found if p["cause"] not in UNAVOIDABLE]
    reproduced = sum(bool(p["reproduced"]) for p in others) / max(len(others), 1)
    settled = sum(
        p["cause"] in SETTLED
        or bool(p["smallest_change_verified"])
        or bool(p.get("window_verified"))
        for p in found
    ) / max(len(found), 1)
    causes = ", ".join(f"{c} {n}" for c, n in Counter(p["cause"] for p in found).most_common())
    print(
        f"window {window:,}: replay {replay_s:.1f} s, postmortem {postmortem_s:.1f} s "
        f"({postmortem_s / max(replay_s, 1e-9):.1f}x the replay; target about 2x)"
    )
    sessions = len({p["session_id"] for p in found})
    print(f"  emergencies {len(found)} in {sessions} sessions ({causes})")
    print(f"  baselines reproduced {reproduced:.1%} of {len(others)} avoidable (bar {BAR:.0%})")
    print(
        f"  settled (verified fix, unavoidable with window_needed, summariser, manual) "
        f"{settled:.1%} of {len(found)} (bar {SETTLED_BAR:.0%})"
    )
    fixes = answer.get("sessions") or []
    verified = sum(bool(s["session_fix"] and s["session_fix"]["verified"]) for s in fixes)
    fleet = answer["summary"].get("fleet_fix") or {}
    print(
        f"  session fixes verified {verified} of {len(fixes)}; the change fixing most sessions: "
        f"{fleet.get('change')} ({fleet.get('sessions', 0)} of {fleet.get('of', 0)})"
    )
    return reproduced >= BAR and settled >= SETTLED_BAR


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, action="append", help="tokens (repeatable)")
    parser.add_argument("paths", nargs="*", type=Path, help="transcripts (default: dev set)")
    args = parser.parse_args()
    windows = args.window or [8_000, 16_000]
    held = True
    for window in windows:
        with tempfile.TemporaryDirectory(prefix=f"compactlens-sweep-{window}-") as tmp:
            held = sweep(window, Path(tmp), args.paths or _dev()) and held
    print("every share reached the bar" if held else "a share is under the bar")
    return 0 if held else 1


if __name__ == "__main__":
    raise SystemExit(main())
