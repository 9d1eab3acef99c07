"""Tests for format_notification and format_tokens: the seed's two-line compaction notice.

Records are built by hand with the seed's example figures (SPEC 3.6, seed section 5.4); the
percentage saved is computed here from the record's token counts.
"""

from __future__ import annotations

import pytest

from compactor import (
    Anchor,
    AnchorType,
    CompactionRecord,
    CompactionTier,
    OffloadEntry,
    format_notification,
)
from compactor.pipeline.notify import format_tokens
from compactor.summaries.anchors import ANCHOR_ORDER

KB = 1024


def offloads(sizes_kb: list[int]) -> list[OffloadEntry]:
    return [
        OffloadEntry(
            tool_call_id=f"call_{i}",
            tool_name="bash",
            file_path=f".compactlens/tool_results/s/call_{i}.txt",
            bytes=size * KB,
            lines=size * 10,
        )
        for i, size in enumerate(sizes_kb)
    ]


def five_anchors() -> list[Anchor]:
    return [Anchor(type=t, content=f"- something about {t.value}") for t in ANCHOR_ORDER]


def record(
    tier: CompactionTier,
    before: int,
    after: int,
    **fields: object,
) -> CompactionRecord:
    data: dict[str, object] = {
        "session_id": "s1",
        "tier": tier,
        "tokens_before": before,
        "tokens_after": after,
        "compression_ratio": after / before if before else 0.0,
    }
    data.update(fields)
    return CompactionRecord.model_validate(data)


def saved_percent(rec: CompactionRecord) -> int:
    return round(100 * (rec.tokens_before - rec.tokens_after) / rec.tokens_before)


def full_record(tier: CompactionTier = CompactionTier.FULL) -> CompactionRecord:
    return record(
        tier,
        45_200,
        8_100,
        anchors=five_anchors(),
        offloaded=offloads([20, 12, 10]),
        summarized=28,
        preserved_tail=6,
    )


# ---------------------------------------------------------------- format_tokens


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0"),
        (999, "999"),
        (1000, "1.0K"),
        (8_100, "8.1K"),
        (45_200, "45.2K"),
        (1_000_000, "1.0M"),
        (1_200_000, "1.2M"),
    ],
)
def test_format_tokens_uses_k_and_m_above_a_thousand(n: int, text: str) -> None:
    assert format_tokens(n) == text


@pytest.mark.parametrize(("n", "text"), [(999_949, "999.9K"), (999_950, "1.0M")])
def test_format_tokens_switches_to_m_where_k_would_round_to_a_thousand(n: int, text: str) -> None:
    assert format_tokens(n) == text


# ---------------------------------------------------------------- English


def test_full_notification_in_english() -> None:
    rec = full_record()

    text = format_notification(rec)

    assert saved_percent(rec) == 82  # the seed's example figures
    assert text == (
        f"⚡ Context compacted [Full] 45.2K→8.1K tokens ({saved_percent(rec)}% saved)\n"
        "   5 anchors | 3 offloaded (42KB) | 28 summarized | tail 6 kept"
    )


def test_soft_notification_uses_the_soft_label_and_the_same_details() -> None:
    rec = full_record(CompactionTier.SOFT)

    first, second = format_notification(rec).split("\n")

    assert first.startswith("⚡ Context compacted [Soft] 45.2K→8.1K tokens")
    assert second == "   5 anchors | 3 offloaded (42KB) | 28 summarized | tail 6 kept"


def test_warn_notification_says_no_summary_and_no_tail() -> None:
    rec = record(CompactionTier.WARN, 76_800, 72_300, offloaded=offloads([10, 8]))

    text = format_notification(rec)

    assert text == (
        f"⚡ Context compacted [Warn] 76.8K→72.3K tokens ({saved_percent(rec)}% saved)\n"
        "   2 offloaded (18KB) | no summary"
    )


def test_emergency_notification_says_truncation_and_tail() -> None:
    rec = record(
        CompactionTier.EMERGENCY,
        98_500,
        12_000,
        preserved_tail=1,
        error="emergency fallback: forced truncation",
    )

    text = format_notification(rec)

    assert text == (
        f"⚡ Context compacted [Emergency] 98.5K→12.0K tokens ({saved_percent(rec)}% saved)\n"
        "   ⚠ emergency truncation | tail 1 kept"
    )


def test_all_na_anchors_are_not_counted() -> None:
    anchors = [Anchor(type=t, content="N/A") for t in ANCHOR_ORDER]
    rec = record(CompactionTier.FULL, 2_000, 500, anchors=anchors, summarized=4, preserved_tail=6)

    assert format_notification(rec).split("\n")[1] == "   4 summarized | tail 6 kept"


def test_partly_filled_anchors_count_every_anchor() -> None:
    anchors = [Anchor(type=AnchorType.USER_INTENT, content="Fix the cache")] + [
        Anchor(type=t, content="N/A") for t in ANCHOR_ORDER[1:]
    ]
    rec = record(CompactionTier.FULL, 2_000, 500, anchors=anchors, summarized=4, preserved_tail=6)

    assert format_notification(rec).split("\n")[1].startswith("   5 anchors | ")


def test_error_is_appended_to_the_details_cut_to_80_characters() -> None:
    error = "LLM summary failed in TierFull: " + "x" * 200
    rec = record(CompactionTier.FULL, 10_000, 4_000, preserved_tail=6, error=error)

    second = format_notification(rec).split("\n")[1]

    assert second.endswith(f" | ⚠ {error[:80]}")
    assert error[:81] not in second


@pytest.mark.parametrize(
    ("before", "after"), [(10_000, 3_333), (10_000, 9_951), (1_500, 1_500), (777, 1)]
)
def test_percent_saved_is_computed_from_the_record(before: int, after: int) -> None:
    rec = record(CompactionTier.FULL, before, after, preserved_tail=6)

    first = format_notification(rec).split("\n")[0]

    assert first.endswith(f"({saved_percent(rec)}% saved)")


def test_zero_tokens_before_reports_zero_percent() -> None:
    rec = record(CompactionTier.WARN, 0, 0)

    assert "(0% saved)" in format_notification(rec)


# ---------------------------------------------------------------- Chinese (seed 5.4)


def test_full_notification_in_chinese_matches_the_seed() -> None:
    text = format_notification(full_record(), locale="zh")

    assert text == (
        "⚡ 上下文压缩 [Full] 45.2K→8.1K tokens（82% 压缩率）\n"
        "   5 锚点 | 3 offload(42KB) | 28 条摘要 | 保留尾部 6 条"
    )


def test_warn_notification_in_chinese_matches_the_seed() -> None:
    rec = record(CompactionTier.WARN, 76_800, 72_300, offloaded=offloads([10, 8]))

    assert format_notification(rec, locale="zh") == (
        "⚡ 上下文压缩 [Warn] 76.8K→72.3K tokens（6% 压缩率）\n   2 offload(18KB) | 无摘要"
    )


def test_emergency_notification_in_chinese_matches_the_seed() -> None:
    rec = record(CompactionTier.EMERGENCY, 98_500, 12_000, preserved_tail=1)

    assert format_notification(rec, locale="zh") == (
        "⚡ 上下文压缩 [Emergency] 98.5K→12.0K tokens（88% 压缩率）\n"
        "   ⚠ 紧急截断回退 | 保留尾部 1 条"
    )
