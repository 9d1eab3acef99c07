"""One file, many spellings: the forms a history gives one path, resolved and merged.

A transcript names the same file as ``/Users/u/cli/cmd/entire/config.go``,
``cmd/entire/config.go``, ``./cmd/entire/config.go`` or ``config.go`` (and, on Windows,
``G:\\repo\\src`` beside ``g:/repo/src``). :func:`path_form` spells each one way;
:func:`working_dirs` finds each session's working directory (the importer's, else inferred from
its paths); :func:`artifact_keys` gives every form of a compaction the file it names, and
:func:`merged_artifacts` makes one artifact of each file. Pure Polars, no I/O; it decides
nothing about what a summary kept (:mod:`analytics.jobs.audit` does).
"""

from __future__ import annotations

import polars as pl

WORKDIR_COLUMNS = ("session_id", "cwd")
_ROOTED = r"^(?:/|~/|[a-z]:/)"
_SEGMENT = r"(?:[^./][^/]*|\.[^./][^/]*|\.\.[^/]+)"  # a name that is not . or ..
_UP_DEPTH = 4
"""``a/../`` pairs resolved, one per pass: deeper climbs keep the rest."""


def path_form(path: pl.Expr) -> pl.Expr:
    """One spelling of a path: ``\\`` as ``/``, a drive's letter in lower case, ``./`` and
    ``/./`` dropped, ``//`` collapsed, ``a/../`` resolved, no trailing ``/``."""
    out = path.str.replace_all(r"\\", "/")
    out = (
        pl.when(out.str.contains(r"^[A-Za-z]:/"))
        .then(pl.concat_str(out.str.slice(0, 1).str.to_lowercase(), out.str.slice(1)))
        .otherwise(out)
    )
    out = out.str.replace_all(r"/{2,}", "/")
    for _ in range(2):
        out = out.str.replace_all(r"(^|/)\./", "$1")
    for _ in range(_UP_DEPTH):
        out = out.str.replace(rf"(^|/){_SEGMENT}/\.\.(?:/|$)", "$1")
    return out.str.replace(r"(.)/$", "$1")


def working_dirs(found: pl.DataFrame, recorded: pl.DataFrame | None = None) -> pl.DataFrame:
    """:data:`WORKDIR_COLUMNS` plus ``source``: each session's working directory, as
    ``recorded`` (session_id, cwd; the importer's, e.g. Claude Code's ``cwd``) says, else
    inferred from its paths (``inferred``): the folder that most of its relative paths are
    the tails of rooted ones under (``cmd/x.go`` beside ``/home/u/cli/cmd/x.go``: ``/home/u/cli``).
    A session with neither has no row."""
    forms = (
        found.filter(pl.col("kind") == "path")
        .select("session_id", form=path_form(pl.col("artifact")))
        .unique()
    )
    rooted = forms.filter(pl.col("form").str.contains(_ROOTED))
    relative = forms.filter(
        ~pl.col("form").str.contains(_ROOTED)
        & pl.col("form").str.contains("/")
        & ~pl.col("form").str.starts_with("../")
    )
    votes = (
        relative.join(rooted.rename({"form": "full"}), on="session_id")
        .filter(pl.col("full").str.ends_with(pl.concat_str(pl.lit("/"), "form")))
        .select(
            "session_id",
            "form",
            cwd=pl.col("full").str.slice(
                0, pl.col("full").str.len_chars() - pl.col("form").str.len_chars() - 1
            ),
        )
        .group_by("session_id", "cwd")
        .agg(votes=pl.col("form").n_unique())
        .sort(["session_id", "votes", "cwd"], descending=[False, True, False])
        .unique(subset="session_id", keep="first", maintain_order=True)
        .select("session_id", "cwd", source=pl.lit("inferred"))
    )
    if recorded is None or recorded.is_empty():
        return votes
    given = recorded.select(
        pl.col("session_id").cast(pl.String), cwd=path_form(pl.col("cwd").cast(pl.String))
    ).filter(pl.col("cwd").is_not_null() & (pl.col("cwd") != ""))
    return pl.concat(
        [
            given.with_columns(source=pl.lit("recorded")),
            votes.join(given, on="session_id", how="anti"),
        ]
    )


def artifact_keys(found: pl.DataFrame, workdirs: pl.DataFrame) -> pl.DataFrame:
    """``found`` (session_id, compaction_id, kind, artifact) with ``key``: the file each path
    names, the same for all its forms in a compaction. A rooted path is its own key. A relative
    one is resolved against its session's ``workdirs`` cwd when another form of the compaction
    is that file too; else it is the one path of the compaction it is a tail of (when several
    are, the longest, if the others are its tails: ``checkpoint/id.go`` said in
    ``cmd/cli``); else it stays resolved (or itself, without a cwd). A bare file name is the
    one file of the compaction with that name, else (no file has it) the cwd's, else itself.
    A command or an error line is its own key."""
    paths = (
        found.filter(pl.col("kind") == "path")
        .join(workdirs.select("session_id", "cwd"), on="session_id", how="left")
        .with_columns(form=path_form(pl.col("artifact")))
        .with_columns(
            rooted=pl.col("form").str.contains(_ROOTED),
            slashed=pl.col("form").str.contains("/"),
        )
        .with_columns(
            resolved=pl.when(pl.col("rooted"))
            .then("form")
            .when(pl.col("slashed") & pl.col("cwd").is_not_null())
            .then(path_form(pl.concat_str("cwd", pl.lit("/"), "form")))
        )
        .with_columns(full=pl.coalesce("resolved", "form"))
    )
    slashed = paths.filter(pl.col("slashed"))
    spellings = slashed.group_by("compaction_id", "full").agg(
        forms=pl.col("form").n_unique(), written=pl.col("rooted").any()
    )
    fulls = spellings.select("compaction_id", "full", "written")
    relative = (
        slashed.filter(~pl.col("rooted") & ~pl.col("form").str.starts_with("../"))
        .select("compaction_id", "form", own="full")
        .unique()
        .join(spellings, left_on=["compaction_id", "own"], right_on=["compaction_id", "full"])
        .filter(pl.col("forms") == 1)  # no other form is that file: a tail of one, maybe
        .drop("written")  # the candidates' own flag is the one that counts below
    )
    chains = (
        relative.join(fulls, on="compaction_id")
        .filter(
            (pl.col("full") != pl.col("own"))
            & pl.col("full").str.ends_with(pl.concat_str(pl.lit("/"), "form"))
        )
        # a path written rooted outranks a guess against the cwd (an agent that worked in
        # another repository than the one it started in)
        .filter(pl.col("written") | ~pl.col("written").any().over("compaction_id", "form"))
        .with_columns(
            longest=pl.col("full")
            .sort_by(pl.col("full").str.len_chars())
            .last()
            .over("compaction_id", "form")
        )
        .group_by("compaction_id", "form")
        .agg(
            chained=pl.col("longest").first(),
            agree=(
                (pl.col("longest") == pl.col("full"))
                | pl.col("longest").str.ends_with(pl.concat_str(pl.lit("/"), "full"))
            ).all(),
        )
        .filter("agree")
        .drop("agree")
    )
    keyed = slashed.join(
        chains, on=["compaction_id", "form"], how="left", maintain_order="left"
    ).with_columns(key=pl.coalesce("chained", "full"))
    names = (
        keyed.select("compaction_id", "key")
        .unique()
        .group_by("compaction_id", name=pl.col("key").str.split("/").list.last())
        .agg(named=pl.col("key").first(), files=pl.len())
    )
    bare = (
        paths.filter(~pl.col("slashed"))
        .join(
            names,
            left_on=["compaction_id", "form"],
            right_on=["compaction_id", "name"],
            how="left",
            maintain_order="left",
        )
        .with_columns(
            key=pl.when(pl.col("files") == 1)
            .then("named")
            .when(pl.col("files").is_null() & pl.col("cwd").is_not_null())
            .then(path_form(pl.concat_str("cwd", pl.lit("/"), "form")))
            .otherwise("form")
        )
    )
    columns = [*found.columns, "key"]
    others = found.filter(pl.col("kind") != "path").with_columns(key=pl.col("artifact"))
    return (
        pl.concat([keyed.select(columns), bare.select(columns), others.select(columns)])
        .join(
            found.with_row_index("order").select("compaction_id", "kind", "artifact", "order"),
            on=["compaction_id", "kind", "artifact"],
        )
        .sort("order")
        .drop("order")
    )


def merged_artifacts(keyed: pl.DataFrame) -> pl.DataFrame:
    """One row per file (per command, per error line) of each compaction, from
    :func:`artifact_keys`: session_id, compaction_id, kind, artifact (its longest form), forms
    (every form, in head order), key; in the order of each one's first form."""
    return (
        keyed.group_by("session_id", "compaction_id", "kind", "key", maintain_order=True)
        .agg(
            artifact=pl.col("artifact")
            .sort_by(pl.col("artifact").str.len_chars(), descending=True, maintain_order=True)
            .first(),
            forms=pl.col("artifact"),
        )
        .select("session_id", "compaction_id", "kind", "artifact", "forms", "key")
    )
