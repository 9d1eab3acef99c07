"""App page speed: each page's script run (``AppTest.run``) on a store of 100,000 compactions.

The store is built through the projector from real events: a few synthetic sessions
(``analytics.replay.synthetic``, 200 steps, message text cut to 600 characters so that 10^5
compactions fit in about 2.5 GB of spool) run through ``CompactionSession`` at a 6k window with a
``SpoolSink``, then their spool lines cloned under new session ids (every UUID in a clone gets a
suffix of its own, so event, record and compaction ids stay unique) until the store holds
100,000 compaction events; plus one session of 5,000 turns (full text, 32k window) run for
real. The projector loads it all, the job tables
are refreshed once (as the app does when it opens a store), then each page is opened in
``streamlit.testing`` with its query parameters and its script run is timed with the data cache
cleared first, so every read goes to the store.

Targets (issue 10): each page at most 1.5 s; the timeline of the 5,000-turn session at most 1 s.
Run: ``.venv/bin/python bench/app_pages.py`` (``--compactions N`` for a quick run). Exits 1
when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

from analytics.queries.materialize import refresh
from analytics.replay.synthetic import generate_session
from analytics.store import open_store
from analytics.store.projector import Projector
from compactor import (
    CompactionOffloader,
    CompactionSession,
    ExtractiveSummarizer,
    ProgressiveCompactor,
    SpoolSink,
)

MAIN = Path(__file__).resolve().parents[1] / "app" / "main.py"
COMPACTIONS = 100_000
TEMPLATES = 4
TEMPLATE_STEPS = 200
TEMPLATE_WINDOW = 6_000
TEMPLATE_CHARS = 600
LONG_TURNS = 5_000
PAGE_TARGET_S = 1.5
TIMELINE_TARGET_S = 1.0
LONG_ID = "long-5000-turns"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def run_session(
    home: Path, sid: str, seed: int, steps: int, window: int, chars: int | None = None
) -> None:
    msgs = generate_session(seed, steps=steps)
    if chars is not None:
        msgs = [m.model_copy(update={"content": m.content[:chars]}) for m in msgs]
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(), window, offloader=CompactionOffloader(home, sid)
    )
    sink = SpoolSink(home / "spool")
    session = CompactionSession(compactor, msgs[0], session_id=sid, event_sink=sink, agent="bench")
    for msg in msgs[1:]:
        if msg.role == "assistant":
            session.prepare()
        session.append(msg)
    session.close()
    sink.close()


def templates(tmp: Path) -> list[tuple[str, str, int]]:
    """(session id, its spool text, its compaction events) of each template session."""
    for seed in range(TEMPLATES):
        run_session(tmp, f"tpl-{seed}", seed, TEMPLATE_STEPS, TEMPLATE_WINDOW, TEMPLATE_CHARS)
    by_session: dict[str, list[str]] = {}
    for path in sorted((tmp / "spool").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            sid = line.split('"session_id":"', 1)[1].split('"', 1)[0]
            by_session.setdefault(sid, []).append(line)
    return [
        (sid, "\n".join(lines) + "\n", sum('"compaction_recorded"' in x for x in lines))
        for sid, lines in sorted(by_session.items())
    ]


def _suffixed(suffix: str) -> Callable[[re.Match[str]], str]:
    """A UUID with its last 12 hex digits replaced: unique per (original, clone)."""

    def replace(match: re.Match[str]) -> str:
        return match.group()[:24] + suffix

    return replace


def write_clones(spool: Path, target: int, tpls: list[tuple[str, str, int]]) -> int:
    """Clone the templates into ``spool`` until ``target`` compaction events; returns how many
    sessions were written."""
    spool.mkdir(parents=True, exist_ok=True)
    made, k = 0, 0
    with (spool / "clones.jsonl").open("w", encoding="utf-8") as out:
        while made < target:
            sid, text, n = tpls[k % len(tpls)]
            suffix = f"{k:012x}"
            clone = text.replace(f'"{sid}"', f'"fleet-{k:06d}"')
            out.write(UUID.sub(_suffixed(suffix), clone))
            made += n
            k += 1
    return k


def build(home: Path, compactions: int) -> str:
    started = time.perf_counter()
    tpls = templates(home / "templates")
    sessions = write_clones(home / "spool", compactions, tpls)
    long_id = LONG_ID
    run_session(home, long_id, 99, LONG_TURNS, 32_000)
    with open_store(home) as store:
        ingested = Projector(store, home / "spool").ingest()
        refresh(store)
        n = store.query("SELECT count(*) FROM compactions").item()
    print(
        f"store: {n:,} compactions in {sessions + 1:,} sessions, {ingested.new_events:,} events "
        f"(built in {time.perf_counter() - started:.0f} s)"
    )
    return long_id


def page_times(home: Path, long_id: str) -> list[tuple[str, float, float]]:
    """(page, seconds of its script run, target) for every page."""
    os.environ["COMPACTLENS_HOME"] = str(home)
    AppTest.from_file(str(MAIN), default_timeout=600).run()  # opens the store once
    ids = _ids(home, long_id)
    pages = [
        ("overview", "", {}, PAGE_TARGET_S),
        ("sessions", "sessions", {}, PAGE_TARGET_S),
        ("timeline 5,000 turns", "timeline", {"session": long_id}, TIMELINE_TARGET_S),
        ("timeline (fleet session)", "timeline", {"session": ids["fleet"]}, PAGE_TARGET_S),
        ("diff", "diff", {"session": long_id, "compaction": ids["compaction"]}, PAGE_TARGET_S),
        ("offloads", "offloads", {"session": long_id}, PAGE_TARGET_S),
        ("retention (fleet)", "retention", {}, PAGE_TARGET_S),
        ("retention (session)", "retention", {"session": long_id}, PAGE_TARGET_S),
        ("emergencies (fleet)", "emergencies", {}, PAGE_TARGET_S),
        ("emergencies (session)", "emergencies", {"session": ids["emergency"]}, PAGE_TARGET_S),
        ("tuning", "tuning", {}, PAGE_TARGET_S),
    ]
    out = []
    for label, page, params, target in pages:
        at = AppTest.from_file(str(MAIN), default_timeout=600)
        at.run()
        at.query_params.update(params)
        if page:
            at.switch_page(f"views/{page}.py")
        st.cache_data.clear()
        started = time.perf_counter()
        at.run()
        took = time.perf_counter() - started
        if at.exception:
            raise SystemExit(f"{label}: {at.exception[0].value}")
        out.append((label, took, target))
    return out


def _ids(home: Path, long_id: str) -> dict[str, str]:
    """Ids the pages are opened on, read before the app owns the store."""
    from app.context import owner

    own = owner()

    def one(sql: str) -> str:
        return str(own.read(lambda s: s.query(sql).item()))

    return {
        "fleet": one("SELECT session_id FROM sessions WHERE session_id LIKE 'fleet-%' LIMIT 1"),
        "compaction": one(
            f"SELECT id FROM compactions WHERE session_id = '{long_id}' AND effective "
            "ORDER BY seq DESC LIMIT 1"
        ),
        "emergency": one("SELECT session_id FROM compactions WHERE tier = 4 AND effective LIMIT 1"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compactions", type=int, default=COMPACTIONS)
    parser.add_argument(
        "--home", type=Path, help="build the store here and keep it (reused when it exists)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="compactlens-app-bench-") as tmp:
        home = args.home or Path(tmp)
        built = (home / "compactlens.duckdb").exists()
        long_id = LONG_ID if built else build(home, args.compactions)
        times = page_times(home, long_id)
        st.cache_resource.clear()
    missed = 0
    print(f"{'page':<28} {'seconds':>8} {'target':>7}")
    for label, took, target in times:
        ok = took <= target
        missed += not ok
        print(f"{label:<28} {took:>8.3f} {target:>7.1f}  {'ok' if ok else 'MISSED'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
