"""The two-line compaction notice (the seed's TUI wording), in English or Chinese.

Pure formatting of a ``CompactionRecord``; no I/O.
"""

from __future__ import annotations

from typing import Literal

from compactor.records import CompactionRecord, CompactionTier
from compactor.summaries.anchors import all_na


def format_tokens(n: int) -> str:
    """``45.2K``, ``1.2M``; plain below 1000."""
    if n >= 999_950:  # what would round to 1000.0K is shown as 1.0M
        return f"{n / 1_000_000:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.1f}K"
    return str(n)


def _kb(n_bytes: int) -> str:
    return f"{round(n_bytes / 1024)}KB"


def format_notification(record: CompactionRecord, locale: Literal["en", "zh"] = "en") -> str:
    """Line one: tier and token change; line two: what was done."""
    saved = round(100 * (1 - record.compression_ratio)) if record.tokens_before else 0
    label = record.tier.label
    before, after = format_tokens(record.tokens_before), format_tokens(record.tokens_after)
    zh = locale == "zh"
    if zh:
        first = f"⚡ 上下文压缩 [{label}] {before}→{after} tokens（{saved}% 压缩率）"
    else:
        first = f"⚡ Context compacted [{label}] {before}→{after} tokens ({saved}% saved)"
    return f"{first}\n   {_details(record, zh)}"


def _details(record: CompactionRecord, zh: bool) -> str:
    tail = record.preserved_tail
    if record.tier == CompactionTier.EMERGENCY:
        return _emergency_details(record, zh)
    parts: list[str] = []
    n_anchors = 0 if not record.anchors or all_na(record.anchors) else len(record.anchors)
    if n_anchors:
        parts.append(f"{n_anchors} 锚点" if zh else f"{n_anchors} anchors")
    if record.offloaded:
        size = _kb(sum(e.bytes for e in record.offloaded))
        count = len(record.offloaded)
        parts.append(f"{count} offload({size})" if zh else f"{count} offloaded ({size})")
    if record.summarized:
        parts.append(f"{record.summarized} 条摘要" if zh else f"{record.summarized} summarized")
    else:
        parts.append("无摘要" if zh else "no summary")
    if record.tier != CompactionTier.WARN:
        parts.append(f"保留尾部 {tail} 条" if zh else f"tail {tail} kept")
    if record.error:
        parts.append(f"⚠ {record.error[:80]}")
    return " | ".join(parts)


def _emergency_details(record: CompactionRecord, zh: bool) -> str:
    """Truncation (something dropped or cut) told apart from an Emergency that only offloaded."""
    tail = record.preserved_tail
    n_off = len(record.offloaded)
    off_kb = _kb(sum(e.bytes for e in record.offloaded))
    if record.emergency == "offload" or (not record.dropped and not record.cut and n_off):
        if zh:
            return f"⚠ 紧急卸载 | {n_off} offload({off_kb}) | 未丢弃消息 | 保留尾部 {tail} 条"
        return (
            f"⚠ emergency offload | {n_off} offloaded ({off_kb}) | nothing dropped | "
            f"tail {tail} kept"
        )
    dropped = len(record.dropped)
    dropped_tokens = format_tokens(sum(d.tokens for d in record.dropped))
    parts = ["⚠ 紧急截断回退" if zh else "⚠ emergency truncation"]
    if dropped:
        parts.append(
            f"丢弃 {dropped} 条({dropped_tokens} tokens)"
            if zh
            else f"{dropped} dropped ({dropped_tokens} tokens)"
        )
    if record.cut:
        parts.append(f"截断 {record.cut} 条" if zh else f"{record.cut} cut")
    if n_off:
        parts.append(f"{n_off} offload({off_kb})" if zh else f"{n_off} offloaded ({off_kb})")
    parts.append(f"保留尾部 {tail} 条" if zh else f"tail {tail} kept")
    return " | ".join(parts)
