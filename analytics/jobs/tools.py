"""Which tool each message calls or answers: the name a post-mortem or a cause shows.

``tool_name`` of a tool result is the name of the call it answers (the latest earlier assistant
call with its ``tool_call_id``), else its own ``name``; of an assistant message, its calls'
names joined by ``", "``; otherwise null. Pure Polars over the store's ``messages`` frame;
a frame without call columns (no ``tool_call_ids``/``tool_names``, no ``tool_calls``) or without
``tool_call_id`` has no calls or no results: its names come out null, never an error.
"""

from __future__ import annotations

import polars as pl

_CALLS_DTYPE = pl.List(pl.Struct({"id": pl.String, "name": pl.String, "arguments": pl.String}))


def _calls(messages: pl.DataFrame) -> pl.DataFrame:
    """session_id, call_idx, id, name of every tool call. The store keeps each message's call
    ids and names as lists (``tool_call_ids``, ``tool_names``, present whatever the capture);
    a frame without them (a hand-built one) has its ``tool_calls`` JSON decoded instead."""
    if {"tool_call_ids", "tool_names"} <= set(messages.columns):
        return (
            messages.select(
                pl.col("session_id").cast(pl.String),
                pl.col("idx").cast(pl.Int64).alias("call_idx"),
                pl.col("tool_call_ids").alias("id"),
                pl.col("tool_names").alias("name"),
            )
            .filter(pl.col("id").list.len() > 0)
            .explode("id", "name")
        )
    if "tool_calls" not in messages.columns:
        return pl.DataFrame(
            schema={
                "session_id": pl.String,
                "call_idx": pl.Int64,
                "id": pl.String,
                "name": pl.String,
            }
        )
    return (
        messages.filter(pl.col("tool_calls").is_not_null())
        .select(
            pl.col("session_id").cast(pl.String),
            pl.col("idx").cast(pl.Int64).alias("call_idx"),
            pl.col("tool_calls").cast(pl.String).str.json_decode(_CALLS_DTYPE).alias("c"),
        )
        .explode("c")
        .filter(pl.col("c").is_not_null())
        .select("session_id", "call_idx", pl.col("c").struct.field("id", "name"))
    )


def tool_names(messages: pl.DataFrame, wanted: pl.DataFrame | None = None) -> pl.DataFrame:
    """session_id, idx, tool_name: the tool each message calls or answers (null if none), for
    every message, or only for the (session_id, idx) rows of ``wanted`` (calls are still looked
    up among all of ``messages``: a result's call comes before it)."""
    own = pl.col("name") if "name" in messages.columns else pl.lit(None)
    answers = pl.col("tool_call_id") if "tool_call_id" in messages.columns else pl.lit(None)
    rows = messages.select(
        pl.col("session_id").cast(pl.String),
        pl.col("idx").cast(pl.Int64),
        own.cast(pl.String).alias("own"),
        answers.cast(pl.String).alias("tool_call_id"),
    )
    if wanted is not None:
        rows = rows.join(wanted.select("session_id", "idx").unique(), on=["session_id", "idx"])
    calls = _calls(messages)
    answered = (
        rows.filter(pl.col("tool_call_id").is_not_null())
        .select("session_id", "idx", pl.col("tool_call_id").alias("id"))
        .join(calls, on=["session_id", "id"])
        .filter(pl.col("call_idx") < pl.col("idx"))
        .sort("call_idx")
        .group_by("session_id", "idx")
        .agg(pl.col("name").last().alias("answered"))
    )
    called = (
        calls.join(  # in call order: the names are joined in the order they were called
            rows.select("session_id", pl.col("idx").alias("call_idx")),
            on=["session_id", "call_idx"],
            maintain_order="left",
        )
        .group_by("session_id", "call_idx")
        .agg(pl.col("name").str.join(", ").alias("called"))
    )
    return (
        rows.join(answered, on=["session_id", "idx"], how="left")
        .join(
            called, left_on=["session_id", "idx"], right_on=["session_id", "call_idx"], how="left"
        )
        .select(
            "session_id",
            "idx",
            pl.when(pl.col("tool_call_id").is_not_null())
            .then(pl.coalesce("answered", "own"))
            .otherwise(pl.col("called"))
            .alias("tool_name"),
        )
    )
