"""Tuning lab (``/tuning[?run=ID]``): tuning runs, their Pareto front, the recommended config,
and a small run started from the page with live progress.

Runs are the logs ``compactlens tune`` (or this page) writes under ``<home>/tuning``, read by
``load_runs``; a run's figures per strategy are ``totals`` of its held-back sessions' metrics,
its front ``pareto_front``; the recommended configuration is the TOML the run wrote. A run
started here is ``run_tune`` in a background thread (``app.tuning_job``), which keeps its
``tune --json`` object beside the log: then the table is that object's strategies (cost and
cache reads/writes beside the tokens), with the recommended row marked, the objective, the
rule in words, the held-back files and the per-model profiles with their warnings. The form
offers a small sample of the stored transcripts (``tuning_job.sample``) and says how many
sessions it will replay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import streamlit as st

from analytics import (
    STRATEGY_KINDS,
    AnalyticsError,
    SessionMetrics,
    baseline_line,
    count_sessions,
    load_runs,
    load_summary,
    pareto_figure,
    pareto_front,
    totals,
)
from app import tuning_job
from app.context import home, read
from app.owner import allowed_roots
from app.widgets import md_escape, url_choice
from app.words import plural

HOW = (
    "No tuning run in this store yet. Start a small one below, or from the command line: "
    "`compactlens tune PATH --window 32000` (it replays your sessions under several "
    "configurations and rival strategies, and writes a recommended config)."
)
METRIC_FIELDS = tuple(SessionMetrics.model_fields)


def strategy_table(trials: pl.DataFrame, run_id: str, window: int) -> pl.DataFrame:
    """Each strategy's ``totals`` over the run's held-back sessions."""
    rows = trials.filter((pl.col("run_id") == run_id) & pl.col("held_back"))
    out = []
    for group in rows.partition_by("key", maintain_order=True):
        metrics = [
            SessionMetrics.model_validate({k: r[k] for k in METRIC_FIELDS if k in r})
            for r in group.iter_rows(named=True)
        ]
        first = group.row(0, named=True)
        out.append({"name": first["name"], "kind": first["kind"], **totals(metrics, window)})
    return pl.DataFrame(out, infer_schema_length=None)


def _recommendation(summary: dict[str, Any]) -> None:
    """The objective, the rule in words, the held-back files, the per-model profiles."""
    rec = summary.get("recommended") or {}
    priced = summary.get("price_profile") or "each session's model's profile"
    st.text(f"objective: {summary.get('objective')} · priced under {priced}")
    if rec.get("rule"):
        st.text(f"rule: {rec['rule']}")
    if line := baseline_line(rec):
        st.text(line)
    files = rec.get("held_back_sessions") or []
    st.caption(f"Held-back transcript files ({len(files)}): the recommendation's figures")
    if files:
        st.dataframe(pl.DataFrame({"held-back file": files}), hide_index=True)
    profiles = summary.get("profiles") or []
    st.subheader(f"Per-model profiles ({len(profiles)})")
    if profiles:
        rows = [{k: p.get(k) for k in ("model", "sessions", "name", "path")} for p in profiles]
        st.dataframe(pl.DataFrame(rows), hide_index=True)
    else:
        st.caption("None: no model had enough tuning sessions of its own (5 or more).")
    for note in summary.get("notes") or []:  # they name models and paths: data
        (st.warning if "warning" in note else st.caption)(md_escape(note))


def _show_run(run: dict[str, object], trials: pl.DataFrame) -> None:
    run_id, window = str(run["run_id"]), int(str(run["window"]))
    st.text(f"run {run_id} · window {window:,} · {plural(int(str(run['sessions'])), 'session')}")
    summary = load_summary(home(), run_id)
    if summary is not None and summary.get("strategies"):
        table = tuning_job.summary_table(summary)
        front = [str(n) for n in summary.get("pareto", [])]
    else:
        table = strategy_table(trials, run_id, window) if trials.height else pl.DataFrame()
        front = pareto_front(table) if table.height else []
    if table.height == 0:
        st.info("This run has no finished trial on its held-back sessions yet.")
        return
    x = "cost" if summary is not None and summary.get("objective") == "cost" else "tokens_billed"
    st.plotly_chart(pareto_figure(table, front, x), key=f"pareto_{run_id}", theme=None)
    st.dataframe(table if summary else table.sort("tokens_billed"), hide_index=True)
    st.text("Pareto front: " + ", ".join(front))
    if summary is not None:
        _recommendation(summary)
    else:
        st.caption(
            "This run was started from the command line: `compactlens tune PATH --json` "
            "prints its objective, rule, recommended row, held-back files and profiles."
        )
    toml = home() / "tuning" / f"{run_id}-recommended.toml"
    if toml.is_file():
        st.subheader("Recommended config")
        text = toml.read_text(encoding="utf-8")
        st.code(text, language="toml")
        st.download_button("download the recommended config", text, toml.name, "text/plain")
    else:
        st.info("No progressive configuration was feasible on the tuning sessions of this run.")


def _runs() -> None:
    found = load_runs(home())
    if found.runs.height == 0:
        st.info(HOW)
        return
    runs = found.runs.sort("started_at", descending=True)
    st.subheader(f"Runs ({runs.height})")
    st.dataframe(runs.drop("path"), hide_index=True)
    ids = [str(r) for r in runs.get_column("run_id").to_list()]
    run_id = url_choice("run", ids, "run", default=ids[0])
    _show_run(runs.filter(pl.col("run_id") == run_id).row(0, named=True), found.trials)


@st.fragment(run_every=0.5)
def _progress(job: tuning_job.TuningJob) -> None:
    progress = job.progress
    if job.running:
        done, total = (progress.done, progress.total) if progress else (0, 1)
        best = f", best so far {progress.best_name}" if progress and progress.best_name else ""
        eta = f", about {progress.eta_s:.0f} s left" if progress and progress.eta_s else ""
        sessions = (
            f" on {plural(progress.sessions, 'session')}" if progress and progress.sessions else ""
        )
        st.progress(
            done / max(total, 1), text=f"{done} of {plural(total, 'trial')}{sessions}{best}{eta}"
        )
        return
    if job.error:
        st.error(f"The tuning run failed: {md_escape(job.error)}")
    else:
        st.success(f"Tuning run {job.run_id} finished.")
    if st.session_state.get("tuning_shown") != job.run_id:
        st.session_state["tuning_shown"] = job.run_id
        st.rerun(scope="app")


def _chosen(text: str, roots: list[Path]) -> list[Path] | None:
    """The form's paths, confined to ``roots`` and existing; None (with one error) if not."""
    given = [p.strip() for p in text.splitlines() if p.strip()]
    try:
        chosen = tuning_job.confine(given, home(), roots)
    except tuning_job.PathNotAllowedError as exc:
        st.error(f"Refused: {md_escape(str(exc))}")
        return None
    missing = [str(p) for p in chosen if not p.exists()]
    if not chosen or missing:
        shown = md_escape(", ".join(missing) or "all")
        st.error(f"Give existing transcript paths (missing: {shown}).")
        return None
    return chosen


@st.cache_data(show_spinner=False, max_entries=16, ttl=300)
def _sessions_in(paths: tuple[str, ...], home_dir: str) -> int | None:
    """How many sessions a run on ``paths`` replays (None: one of them is unreadable now)."""
    try:
        return count_sessions([Path(home_dir) / p for p in paths])
    except (AnalyticsError, OSError):
        return None


def _sample_words(chosen: list[str], stored: int) -> str:
    n = _sessions_in(tuple(chosen), str(home()))
    sessions = plural(n, "session") if n is not None else "the sessions"
    return (
        f"This run will replay {sessions} from {len(chosen)} of the "
        f"{plural(stored, 'transcript file')} "
        "in this store (a small sample, from the smaller ones; edit the list to choose others) "
        "under each strategy and configuration."
    )


def _start_form() -> None:
    st.subheader("Start a small tuning run")
    roots = allowed_roots()
    sources = tuning_job.readable(read("sources"), home(), roots)
    offered = tuning_job.sample(sources, home(), tuning_job.SAMPLE_FILES)
    with st.form("tune"):
        st.caption(_sample_words(offered, len(sources)))
        paths = st.text_area("transcripts (one path per line)", "\n".join(offered))
        window = st.number_input("window (tokens)", 1_000, 1_000_000, 16_000, step=1_000)
        kinds = st.multiselect("strategies", list(STRATEGY_KINDS), ["progressive", "masking"])
        trials = st.number_input("Optuna trials after the grid", 0, 20, 0)
        submitted = st.form_submit_button("start")
    st.caption(
        "Transcripts are read only under "
        + ", ".join(md_escape(str(r)) for r in roots)
        + " (relative paths: under the home; more with `compactlens ui --allow-path DIR`)."
    )
    if submitted:
        chosen = _chosen(str(paths), roots)
        if chosen is None:
            return
        files = [str(p) for p in chosen]
        tuning_job.start(home(), files, int(window), strategies=kinds, trials=int(trials))
    job = tuning_job.current(home())
    if job is not None:
        _progress(job)


def render() -> None:
    st.title("Tuning lab")
    _runs()
    _start_form()


render()
