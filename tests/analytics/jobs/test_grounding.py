"""Is what a summary says in the history it replaced (issue 31, item 3)?

Real replays (mini-swe-agent trajectories at a 16k window, summarised by our extractive
summariser, grounded by construction) must have at most 10% of their claims flagged; claims
planted into the same compactions (a number, a file, a constraint the history never had: the
test checks that it never had them) must be found ungrounded with recall of at least 0.9.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from analytics.jobs.grounding import summary_grounding
from analytics.queries import frames as queries
from analytics.store import EventStore
from tests.cli import invoke_ok
from tests.transcripts import TRANSCRIPTS

MINI = TRANSCRIPTS / "mini-swe-agent"
CONSTRAINTS = (
    ("Never modify anything under the migrations directory", "migrations directory"),
    ("All timestamps must be stored in Pacific time", "pacific time"),
    ("The user requires the legacy XML exporter to stay untouched", "xml exporter"),
    ("Keep compatibility with the vendored copy of leftpad", "leftpad"),
    ("Tabs, not spaces, are mandatory for indentation in this repository", "mandatory"),
    ("Do not call the billing service from tests", "billing service"),
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not MINI.is_dir(), reason=f"no transcripts at {MINI}"),
]


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pl.DataFrame]:
    home = tmp_path_factory.mktemp("grounding")
    files = sorted(p for p in MINI.rglob("*.traj.json"))[:4] or sorted(MINI.rglob("*.json"))[:4]
    invoke_ok("replay", *map(str, files), "--window", "16000", "--home", str(home))
    with EventStore(Path(home) / "compactlens.duckdb", read_only=True) as store:
        return {
            "compactions": queries.compactions_frame(store),
            "anchor_items": queries.anchor_items_frame(store),
            "views": queries.views_frame(store),
            "messages": queries.messages_frame(store),
        }


def _grounding(frames: dict[str, pl.DataFrame], items: pl.DataFrame | None = None) -> pl.DataFrame:
    return summary_grounding(
        frames["compactions"],
        frames["anchor_items"] if items is None else items,
        frames["views"],
        frames["messages"],
    )


def test_extractive_summaries_are_at_most_a_tenth_ungrounded(
    frames: dict[str, pl.DataFrame],
) -> None:
    found = _grounding(frames)
    claims = frames["anchor_items"].height
    assert claims > 100, "too few anchor items to measure"
    anchors = found.filter(pl.col("kind") == "anchor")
    assert anchors.height == claims  # every anchor item is checked
    flagged = anchors.filter(~pl.col("grounded")).height
    assert flagged / claims <= 0.10, found.filter(~pl.col("grounded")).head(10)


def _history(frames: dict[str, pl.DataFrame], session: str) -> str:
    rows = frames["messages"].filter(pl.col("session_id") == session)
    return "\n".join(
        f"{c or ''}\n{t or ''}" for c, t in rows.select("content", "tool_calls").rows()
    )


def test_planted_claims_are_found_ungrounded(frames: dict[str, pl.DataFrame]) -> None:
    rng = random.Random(7)
    done = frames["compactions"].filter(pl.col("effective").fill_null(True) & (pl.col("tier") > 0))
    planted: list[dict[str, object]] = []
    for k, row in enumerate(done.head(30).iter_rows(named=True)):
        history = _history(frames, row["session_id"]).lower()
        number = next(
            str(n) for n in iter(lambda: rng.randint(10_000, 99_999), None) if str(n) not in history
        )
        path = f"src/ledgerwise/{rng.choice(['quorum', 'sprocket', 'tessellate'])}_{k}.py"
        claim, phrase = CONSTRAINTS[k % len(CONSTRAINTS)]
        assert path not in history and phrase not in history  # never in the history
        for text in (f"The full test suite took {number} seconds", f"Edited {path}", claim):
            planted.append(
                {
                    "compaction_id": row["id"],
                    "session_id": row["session_id"],
                    "anchor_type": "decisions",
                    "position": 1000 + len(planted),
                    "item": text,
                }
            )
    assert len(planted) >= 30
    items = pl.concat([frames["anchor_items"], pl.DataFrame(planted)], how="diagonal_relaxed")
    found = _grounding(frames, items).filter(pl.col("position") >= 1000)
    assert found.height == len(planted)
    recall = found.filter(~pl.col("grounded")).height / len(planted)
    print(f"planted claims found ungrounded: {recall:.3f} of {len(planted)}")
    assert recall >= 0.9, found.filter(pl.col("grounded")).select("claim")
