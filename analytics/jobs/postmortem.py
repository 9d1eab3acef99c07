"""Emergency post-mortems (issue 8, job 6): what led to each Emergency compaction, what it lost.

For every effective Emergency compaction (tier 4) of a live session this job finds its turn (the
first turn prepared after the compaction, whose ``view_prepared`` event follows the
``compaction_recorded`` one), the lead-up (the per-turn ratio of the N turns before it), the
messages that added the most tokens in that lead-up (with the name of the tool whose result they
are) and what the compaction dropped. Pure Polars over frames shaped like the store's tables
(``/tmp/jobs_contract.md``): no I/O and no replay. The counterfactuals (replaying the prefix with
single config changes) live in ``analytics.replay.counterfactual``; ``postmortems`` only merges
results it is given, so this module stays pure.

Definitions (each one a choice a reader may want to check):

- ratio of a turn = ``(tokens + reserve_tokens) / context_window`` (the view actually sent);
- lead-up = the ``lead_up_turns`` turns of the session whose ``seq`` is below the compaction's;
- lead-up messages = history indices from the ``history_messages`` of the first lead-up turn (0
  when there is no lead-up) up to, excluding, the ``history_messages`` of the emergency's turn
  (everything when that turn is unknown);
- tokens of a message = ``bytes // 4``; ``tool_name`` of a tool result = the name of the call it
  answers (the latest earlier assistant call with its ``tool_call_id``), else its ``name``; of an
  assistant message = its calls' names joined by ``", "``; otherwise null;
- dropped = ``n_dropped`` and ``dropped_bytes // 4`` of the compaction, or, where those are null,
  the before-side ``compaction_views`` rows whose status is ``"dropped"`` (count, sum of
  ``bytes // 4``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from analytics.jobs.causes import emergency_causes
from analytics.jobs.common import BYTES_PER_TOKEN, is_effective
from analytics.jobs.explanations import cause_keys, reconcile
from analytics.jobs.tools import tool_names
from compactor import CompactionTier

EMERGENCY_TIER = int(CompactionTier.EMERGENCY)
DEFAULT_LEAD_UP_TURNS = 10
DEFAULT_TOP_CONTRIBUTORS = 5


@dataclass(frozen=True)
class PostmortemFrames:
    """The job's frames, one row per emergency / lead-up turn / contributor.

    ``emergencies``: session_id, compaction_id, seq, turn, history_messages, dropped_messages,
    dropped_tokens (ordered by session_id, seq). ``lead_up``: session_id, compaction_id, turn,
    seq, ratio, history_messages (ordered by turn). ``top_contributors``: session_id,
    compaction_id, history_index, role, tool_name, tokens (largest first, ties by history
    index). Every frame carries ``session_id``, so results can be stored per session.
    """

    emergencies: pl.DataFrame
    lead_up: pl.DataFrame
    top_contributors: pl.DataFrame


def emergency_compactions(
    compactions: pl.DataFrame,
    turns: pl.DataFrame,
    compaction_views: pl.DataFrame | None = None,
    sessions: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Effective Emergency compactions of sessions not deleted, with their turn and losses."""
    found = compactions.filter((pl.col("tier") == EMERGENCY_TIER) & is_effective()).select(
        "session_id",
        pl.col("id").alias("compaction_id"),
        "seq",
        pl.col("n_dropped").alias("dropped_messages"),
        (pl.col("dropped_bytes") // BYTES_PER_TOKEN).alias("dropped_tokens"),
    )
    if sessions is not None:
        deleted = sessions.filter(pl.col("deleted_at").is_not_null()).select("session_id")
        found = found.join(deleted, on="session_id", how="anti")
    found = found.join(_turn_after(found, turns), on="compaction_id", how="left")
    if compaction_views is not None:
        found = found.join(_dropped_in_views(compaction_views), on="compaction_id", how="left")
        found = found.with_columns(
            pl.coalesce("dropped_messages", "view_dropped_messages").alias("dropped_messages"),
            pl.coalesce("dropped_tokens", "view_dropped_tokens").alias("dropped_tokens"),
        ).drop("view_dropped_messages", "view_dropped_tokens")
    return found.select(
        "session_id",
        "compaction_id",
        "seq",
        "turn",
        "history_messages",
        pl.col("dropped_messages").cast(pl.Int64),
        pl.col("dropped_tokens").cast(pl.Int64),
    ).sort("session_id", "seq")


def _turn_after(found: pl.DataFrame, turns: pl.DataFrame) -> pl.DataFrame:
    """The first turn each compaction's session prepared after it (its ``view_prepared``)."""
    return (
        found.select("session_id", "compaction_id", pl.col("seq").alias("c_seq"))
        .join(turns.select("session_id", "seq", "turn", "history_messages"), on="session_id")
        .filter(pl.col("seq") > pl.col("c_seq"))
        .sort("seq")
        .group_by("compaction_id", maintain_order=True)
        .first()
        .select("compaction_id", "turn", "history_messages")
    )


def _dropped_in_views(views: pl.DataFrame) -> pl.DataFrame:
    return (
        views.filter((pl.col("side") == "before") & (pl.col("status") == "dropped"))
        .group_by("compaction_id")
        .agg(
            pl.len().cast(pl.Int64).alias("view_dropped_messages"),
            (pl.col("bytes") // BYTES_PER_TOKEN).sum().alias("view_dropped_tokens"),
        )
    )


def lead_up(
    emergencies: pl.DataFrame, turns: pl.DataFrame, n: int = DEFAULT_LEAD_UP_TURNS
) -> pl.DataFrame:
    """The ``n`` turns before each emergency and the emergency's own turn, each with the ratio
    its tier was decided on: ``(tokens_before + reserve_tokens) / context_window``, the estimate
    (calibration included) before any compaction of that turn. An emergency whose turn is
    unknown gets the turns whose seq is below the compaction's."""
    decided = pl.coalesce("tokens_before", "tokens") if "tokens_before" in turns.columns else None
    basis = (pl.col("tokens") if decided is None else decided) + pl.col("reserve_tokens").fill_null(
        0
    )
    in_lead = (
        pl.when(pl.col("e_turn").is_null())
        .then(pl.col("seq") < pl.col("c_seq"))
        .otherwise(pl.col("turn") <= pl.col("e_turn"))
    )
    return (
        emergencies.select(
            "session_id",
            "compaction_id",
            pl.col("seq").alias("c_seq"),
            pl.col("turn").alias("e_turn"),
        )
        .join(turns, on="session_id")
        .filter(in_lead)
        .filter(pl.col("seq").rank("ordinal", descending=True).over("compaction_id") <= n + 1)
        .select(
            "session_id",
            "compaction_id",
            "turn",
            "seq",
            pl.when(pl.col("context_window") > 0)
            .then(basis / pl.col("context_window"))
            .alias("ratio"),
            "history_messages",
        )
        .sort("compaction_id", "seq")
    )


def top_contributors(
    emergencies: pl.DataFrame,
    lead: pl.DataFrame,
    messages: pl.DataFrame,
    k: int = DEFAULT_TOP_CONTRIBUTORS,
) -> pl.DataFrame:
    """The ``k`` messages that added the most tokens in each emergency's lead-up (the top k
    are chosen on sizes first; tool names are looked up for those rows only)."""
    # the lead-up's messages start at its first turn before the emergency's own turn
    own = emergencies.select("compaction_id", pl.col("turn").alias("e_turn"))
    first = (
        lead.join(own, on="compaction_id", how="left")
        .filter(pl.col("e_turn").is_null() | (pl.col("turn") < pl.col("e_turn")))
        .sort("seq")
        .group_by("compaction_id")
        .agg(pl.col("history_messages").first())
    )
    spans = emergencies.select(
        "session_id", "compaction_id", pl.col("history_messages").alias("hi")
    ).join(first.rename({"history_messages": "lo"}), on="compaction_id", how="left")
    sized = messages.select(
        pl.col("session_id").cast(pl.String), pl.col("idx").cast(pl.Int64), "role", "bytes"
    )
    top = (
        spans.join(sized, on="session_id")
        .filter(
            (pl.col("idx") >= pl.col("lo").fill_null(0))
            & (pl.col("hi").is_null() | (pl.col("idx") < pl.col("hi")))
        )
        .select(
            "compaction_id",
            "session_id",
            "idx",
            "role",
            (pl.col("bytes") // BYTES_PER_TOKEN).alias("tokens"),
        )
        .sort(["compaction_id", "tokens", "idx"], descending=[False, True, False])
        .filter(pl.int_range(pl.len()).over("compaction_id") < k)
    )
    # no join of the messages to the sessions first: it would copy every message's columns,
    # which costs more than finding the calls of all of them
    names = tool_names(messages, top)
    return (
        top.join(names, on=["session_id", "idx"], how="left")
        .select(
            "session_id",
            "compaction_id",
            pl.col("idx").alias("history_index"),
            "role",
            "tool_name",
            "tokens",
        )
        .sort(["compaction_id", "tokens", "history_index"], descending=[False, True, False])
    )


def postmortem_frames(
    compactions: pl.DataFrame,
    turns: pl.DataFrame,
    messages: pl.DataFrame,
    compaction_views: pl.DataFrame | None = None,
    sessions: pl.DataFrame | None = None,
    *,
    usage: pl.DataFrame | None = None,
    lead_up_turns: int = DEFAULT_LEAD_UP_TURNS,
    top: int = DEFAULT_TOP_CONTRIBUTORS,
) -> PostmortemFrames:
    """Every emergency's frames (see ``PostmortemFrames``); ``sessions`` drops deleted ones and
    gives each session's thresholds, which (with ``usage``) the causes are found from."""
    found = emergency_compactions(compactions, turns, compaction_views, sessions)
    if sessions is not None:
        causes = emergency_causes(found, compactions, turns, messages, sessions, usage)
        found = found.join(causes, on="compaction_id", how="left", maintain_order="left")
    lead = lead_up(found, turns, lead_up_turns)
    return PostmortemFrames(found, lead, top_contributors(found, lead, messages, top))


def postmortem_dicts(
    frames: PostmortemFrames,
    counterfactuals: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The SPEC 5.3 ``postmortems`` list. ``counterfactuals`` maps a compaction id to the
    ``as_dict()`` of its ``analytics.replay.counterfactual`` report (keys ``counterfactuals``,
    ``smallest_change``, ``summarizer``, ...); without one, ``counterfactuals`` is empty,
    ``smallest_change`` null and ``counterfactual_status`` says why."""
    lead = frames.lead_up.partition_by("compaction_id", as_dict=True)
    top = frames.top_contributors.partition_by("compaction_id", as_dict=True)
    found = counterfactuals or {}
    out: list[dict[str, Any]] = []
    for row in frames.emergencies.iter_rows(named=True):
        cid = row["compaction_id"]
        lead_rows = lead.get((cid,), frames.lead_up.clear())
        top_rows = top.get((cid,), frames.top_contributors.clear())
        item: dict[str, Any] = {
            "session_id": row["session_id"],
            "compaction_id": cid,
            "turn": row["turn"],
            **cause_keys(row),
            "lead_up": lead_rows.select("turn", "ratio").to_dicts(),
            "top_contributors": top_rows.drop("compaction_id", "session_id").to_dicts(),
            "dropped": {"messages": row["dropped_messages"], "tokens": row["dropped_tokens"]},
            "counterfactuals": [],
            "smallest_change": None,
            "counterfactual_status": "not computed",
        }
        if cid in found:
            item.update(found[cid])
            unavailable = found[cid].get("unavailable")
            item["counterfactual_status"] = (
                f"unavailable: {unavailable}" if unavailable else "computed"
            )
        out.append(reconcile(item))
    return out


def postmortems(
    compactions: pl.DataFrame,
    turns: pl.DataFrame,
    messages: pl.DataFrame,
    compaction_views: pl.DataFrame | None = None,
    sessions: pl.DataFrame | None = None,
    *,
    usage: pl.DataFrame | None = None,
    counterfactuals: Mapping[str, Mapping[str, Any]] | None = None,
    lead_up_turns: int = DEFAULT_LEAD_UP_TURNS,
    top: int = DEFAULT_TOP_CONTRIBUTORS,
) -> list[dict[str, Any]]:
    """``postmortem_frames`` then ``postmortem_dicts``: the SPEC 5.3 list, ordered by session
    and seq."""
    frames = postmortem_frames(
        compactions,
        turns,
        messages,
        compaction_views,
        sessions,
        usage=usage,
        lead_up_turns=lead_up_turns,
        top=top,
    )
    return postmortem_dicts(frames, counterfactuals)
