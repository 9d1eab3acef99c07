"""Issue 18's promise on the dev transcripts: the recommended config costs no more than the
baselines on held-back sessions.

For each window (16k, 32k) and price profile (``anthropic``, ``deepseek``) this runs the tuning
lab on the dev transcripts (the folders beside ``native/`` under ../shared/data/transcripts)
with the default grid and every rival, then again with ``--objective tokens`` (the run's log is
resumed: nothing is replayed twice). It prints every baseline's held-back cost, tokens billed and
artifact retention beside the recommendation's, then the cheapest progressive configs, and
whether the recommendation on tokens alone differs. A baseline counts when it has 0 turns over
the window (masking, which never guards the window, usually has some). Exits 1 when the
recommendation costs more than any counted baseline.

Run: ``.venv/bin/python bench/tuning_recommendation.py [--home DIR] [--windows 16000 32000]
[--profiles anthropic deepseek]`` (about 20 minutes on two cores; with ``--home`` a second run
resumes the logs and takes seconds).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from analytics.tuning import run_tune, tune_json
from analytics.tuning.prices import resolve_profile
from compactor import CompactorConfig

TRANSCRIPTS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "transcripts"


def _row(row: dict[str, Any], mark: str = " ") -> str:
    return (
        f" {mark} {row['name'][:72]:72} {row['cost']:>9.4f} {row['tokens_billed']:>11,} "
        f"{row['artifact_retention']:>6.3f} {row['turns_over_window']:>5}"
    )


def one_run(dev: list[Path], window: int, profile: str, home: Path) -> bool:
    """Tune at ``window`` under ``profile``; print the table; True when the promise holds."""
    started = time.perf_counter()
    priced = resolve_profile(profile)
    on_cost = tune_json(run_tune(dev, window, home=home, price_profile=priced, objective="cost"))
    on_tokens = tune_json(
        run_tune(dev, window, home=home, price_profile=priced, objective="tokens")
    )
    rec = on_cost["recommended"]
    rows = on_cost["strategies"]
    chosen = next(r for r in rows if r["name"] == rec["name"])
    defaults = CompactorConfig().model_dump(mode="json")
    baselines = [r for r in rows if r["kind"] != "progressive" or r["config"] == defaults]
    print(f"\n== window {window:,}, profile {profile} ({time.perf_counter() - started:.0f} s)")
    print(f"rule: {rec['rule']}")
    print(
        f"   {'strategy (held-back sessions)':72} {'cost':>9} {'tokens':>11} {'ret':>6} {'over':>5}"
    )
    print(_row(chosen, "▶"))
    holds = True
    for row in sorted(baselines, key=lambda r: r["cost"]):
        counted = row["turns_over_window"] == 0
        beaten = chosen["cost"] <= row["cost"]
        holds = holds and (beaten or not counted)
        mark = "" if counted else "(over the window: not counted)"
        print(_row(row) + f"  {'≥ ▶' if beaten else '< ▶ FAIL'} {mark}")
    cheapest = sorted((r for r in rows if r["kind"] == "progressive"), key=lambda r: r["cost"])
    print("   cheapest progressive configs:")
    for row in cheapest[:3]:
        print(_row(row, "▶" if row["name"] == rec["name"] else " "))
    tokens_rec = on_tokens["recommended"]["name"]
    same = tokens_rec == rec["name"]
    print(f"on tokens alone: {tokens_rec}" + (" (the same)" if same else " (differs)"))
    if not same:
        other = next(r for r in rows if r["name"] == tokens_rec)
        print(_row(other, "t"))
    for note in on_cost["notes"]:
        if note.startswith(("retention price", "warning: no progressive")):
            print(note)
    print(
        f"promise {'holds' if holds else 'FAILS'}: the recommendation costs no more than any "
        "baseline with 0 turns over the window"
    )
    return holds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, help="keep the run logs here (resumable)")
    parser.add_argument("--windows", type=int, nargs="+", default=[16_000, 32_000])
    parser.add_argument("--profiles", nargs="+", default=["anthropic", "deepseek"])
    args = parser.parse_args()
    dev = sorted(p for p in TRANSCRIPTS.iterdir() if p.is_dir() and p.name != "native")
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as scratch:
        home = args.home or Path(scratch)
        results = [
            one_run(dev, window, profile, home / f"{window}-{profile}")
            for window in args.windows
            for profile in args.profiles
        ]
    print(f"\n{sum(results)} of {len(results)} runs keep the promise")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
