"""The reads and sentences the pages added for issue 17, each on its own.

``estimate_moves`` and ``anchor_coverage`` on a real store of a session run here through
``CompactionSession`` (a calibrating estimator, a provider that counts a hidden prompt);
``config_toml`` against ``replay --config``'s loader; the sentences of ``app.words`` for every
reason; the post-mortem pieces of ``app.postmortem`` in a real Streamlit script run, for the
outcomes the real stores may not hold (a baseline not reproduced, counterfactuals unavailable).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from analytics import anchor_coverage, config_toml, estimate_moves
from analytics.cli.commands import load_config
from analytics.store import EventStore, open_store
from analytics.store.projector import Projector
from app.words import empty_reason, move_sentence
from compactor import (
    CompactionSession,
    CompactorConfig,
    ExtractiveSummarizer,
    Message,
    OverheadCalibratedEstimator,
    ProgressiveCompactor,
    SpoolSink,
)

HIDDEN = 9_000  # tokens the "harness" adds that the compactor never sees
WINDOW = 16_000


def _run(home: Path) -> None:
    sink = SpoolSink(home / "spool")
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(), WINDOW, estimator=OverheadCalibratedEstimator()
    )
    session = CompactionSession(compactor, "You are terse.", session_id="hidden", event_sink=sink)
    session.append(Message(role="user", content="Rename the module."))
    for i in range(4):
        view, _record = session.prepare()
        sent = sum(len(m.content.encode()) for m in view) // 4
        session.observe_usage(input_tokens=sent + HIDDEN)  # the provider counts what is hidden
        session.append(Message(role="assistant", content=f"step {i} " + "done. " * 40))
        session.append(Message(role="user", content="next"))
    session.close()
    sink.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    home = tmp_path_factory.mktemp("moves")
    _run(home)
    with open_store(home) as opened:
        Projector(opened, home / "spool").ingest()
        yield opened


def test_the_estimate_moves_once_when_the_calibrated_estimator_learns_a_hidden_prompt(
    store: EventStore,
) -> None:
    moves = estimate_moves(store, "hidden")

    assert moves.height == 1  # later reports agree with the estimate: no move
    move = moves.row(0, named=True)
    assert (move["reported_turn"], move["turn"]) == (1, 2)
    assert move["input_tokens"] - move["estimated_tokens"] == HIDDEN
    assert move["history_after"] - move["history_before"] >= HIDDEN
    sentence = move_sentence(move)
    assert sentence.startswith(f"Turn 2: for turn 1 the provider counted {move['input_tokens']:,}")
    assert f"{HIDDEN:,} tokens" in sentence and "the line jumps" in sentence


def test_a_report_under_the_estimate_is_said_to_lower_it() -> None:
    row = {
        "reported_turn": 5,
        "turn": 6,
        "estimated_tokens": 12_000,
        "raw_estimated_tokens": 6_000,
        "input_tokens": 9_000,
    }
    assert "the calibrated estimator lowered its estimate" in move_sentence(row)


def test_anchor_coverage_counts_the_session_it_is_asked_about(store: EventStore) -> None:
    cover = anchor_coverage(store, "hidden")
    nobody = anchor_coverage(store, "no-such-session")

    assert cover["sessions"] == 1 and cover["metadata_sessions"] == 0
    assert nobody["sessions"] == 0 and nobody["compactions"] == 0


COVER = {
    "sessions": 2,
    "metadata_sessions": 0,
    "compactions": 6,
    "warn": 1,
    "soft": 3,
    "full": 1,
    "emergency": 1,
    "fell_back": 0,
    "fell_back_error": None,
    "with_items": 4,
}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"compactions": 0}, "No compaction in the fleet yet"),
        ({"metadata_sessions": 2}, "captured as metadata"),
        ({"soft": 0, "full": 0}, "none Soft or Full (Warn offloads 1, Emergency truncations 1)"),
        ({"fell_back": 4, "fell_back_error": "boom"}, "Every one of the 4 Soft/Full compactions"),
        ({"with_items": 0}, "carry no anchor items: every anchor was N/A"),
        ({"with_items": 1}, "Only 1 compaction in the fleet carries anchor items"),
    ],
)
def test_an_empty_retention_chart_names_the_first_reason_that_applies(
    changes: dict[str, Any], expected: str
) -> None:
    assert expected in empty_reason({**COVER, **changes}, "the fleet")


def test_config_toml_is_what_replay_config_loads_without_nulls(tmp_path: Path) -> None:
    config = CompactorConfig(warn=0.55, soft=0.65, min_tail_messages=3)
    assert config.tool_offload_threshold is None  # a field TOML cannot hold

    text = config_toml(config.model_dump(mode="json"))

    assert "tool_offload_threshold" not in text
    path = tmp_path / "fix.toml"
    path.write_text(text, encoding="utf-8")
    assert load_config(path) == config


def test_config_toml_refuses_a_config_that_is_not_one() -> None:
    with pytest.raises(ValueError, match=r"^not a CompactorConfig") as refused:
        config_toml({"warn": 0.9, "soft": 0.1})

    message = str(refused.value)
    assert message.startswith("not a CompactorConfig: config: thresholds must be strictly")
    assert "(got {'warn': 0.9, 'soft': 0.1})" in message and "re-run `compactlens" in message


def _pieces(item: "dict[str, Any]") -> None:  # noqa: UP037 (run as a script: no __future__)
    from app.postmortem import show_cause, show_counterfactuals, show_fix

    show_cause(item)
    show_fix(item)
    show_counterfactuals(item)


def _item(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "session_id": "s1",
        "compaction_id": "c1",
        "turn": 12,
        "cause": "growth",
        "explanation": "The context grew turn by turn to 97% of the window by turn 12.",
        "counterfactuals": [
            {
                "change": "warn_lower",
                "detail": "warn 0.6 -> 0.5",
                "kind": "single",
                "emergency_avoided": None,
                "tokens_billed": None,
            }
        ],
        "smallest_change": None,
        "smallest_change_config": None,
        "smallest_change_verified": None,
        "reproduced": False,
        "counterfactual_status": "computed",
    }
    return {**base, **changes}


def test_not_reproduced_is_said_in_words_and_claims_nothing() -> None:
    at = AppTest.from_function(_pieces, args=(_item(),)).run()

    assert not at.exception
    assert at.subheader[0].value.startswith("Steady growth that compaction did not hold down")
    assert any(w.value.startswith("Not reproduced: replaying") for w in at.warning)
    table = at.table[0].value
    assert list(table["what it changes"]) == ["warn 0.6 -> 0.5"]
    assert list(table["result"]) == ["not replayed"]
    assert not any("avoids it" in m.value for m in at.markdown)


def test_unavailable_counterfactuals_say_why() -> None:
    item = _item(counterfactual_status="unavailable: captured as metadata", counterfactuals=[])
    at = AppTest.from_function(_pieces, args=(item,)).run()

    assert not at.exception
    assert any("unavailable: captured as metadata" in w.value.replace("\\", "") for w in at.warning)
    assert not at.table
