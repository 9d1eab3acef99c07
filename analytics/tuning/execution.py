"""Where replays run: inline, a local process pool (the default), or a Dask cluster.

A *task* is one strategy spec over every session at one window (:func:`evaluate`), in the
sessions' world (calibrated on their usage, or bytes / 4: ``Setting``); the sessions travel to
each worker once (the pool's initializer, Dask's broadcast scatter), the specs per task. Every
backend yields ``(key, metrics)`` as tasks finish, in completion order; callers must not depend
on that order. Nothing here writes files.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol

from analytics.extras import require
from analytics.importers import ImportedSession
from analytics.jobs.prices import PriceProfile
from analytics.tuning.metrics import SessionMetrics, measure
from analytics.tuning.specs import StrategySpec

Task = tuple[str, StrategySpec]
"""A trial key and the spec to evaluate under it."""


@dataclass(frozen=True)
class Setting:
    """What every task of a run shares besides the sessions: the window, the price profile
    (None: each session's model's) and whether the transcripts' usage calibrates the counts."""

    window: int
    profile: PriceProfile | None = None
    calibrate: bool = True


_SESSIONS: list[ImportedSession] = []
"""The sessions of this worker process (set once by the pool's initializer)."""


def evaluate(
    spec: StrategySpec, sessions: Sequence[ImportedSession], setting: Setting
) -> list[SessionMetrics]:
    """Every session replayed under ``spec`` in ``setting``, measured (in session order)."""
    strategy = spec.build()
    window, profile = setting.window, setting.profile
    out: list[SessionMetrics] = []
    for session in sessions:
        started = time.perf_counter()
        result = strategy.run(session, window, calibrate=setting.calibrate)
        out.append(measure(session, result, window, time.perf_counter() - started, profile))
    return out


def _init_worker(sessions: list[ImportedSession]) -> None:
    global _SESSIONS
    _SESSIONS = sessions


def _evaluate_here(
    key: str, spec: StrategySpec, setting: Setting
) -> tuple[str, list[SessionMetrics]]:
    return key, evaluate(spec, _SESSIONS, setting)


def _evaluate_with(
    key: str, spec: StrategySpec, sessions: list[ImportedSession], setting: Setting
) -> tuple[str, list[SessionMetrics]]:
    return key, evaluate(spec, sessions, setting)


class Backend(Protocol):
    """Runs tasks over the sessions it was opened with."""

    def run(
        self, tasks: Sequence[Task], setting: Setting
    ) -> Iterator[tuple[str, list[SessionMetrics]]]:
        """Yields each task's result as it finishes."""
        ...

    def close(self) -> None: ...


class InlineBackend:
    """In this process, one task after another (``workers=0``; tests and debugging)."""

    def __init__(self, sessions: list[ImportedSession]) -> None:
        self.sessions = sessions

    def run(
        self, tasks: Sequence[Task], setting: Setting
    ) -> Iterator[tuple[str, list[SessionMetrics]]]:
        for key, spec in tasks:
            yield key, evaluate(spec, self.sessions, setting)

    def close(self) -> None:
        return None


class PoolBackend:
    """A ``concurrent.futures.ProcessPoolExecutor`` of ``workers`` processes (forkserver)."""

    def __init__(self, sessions: list[ImportedSession], workers: int) -> None:
        method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else None
        self.pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context(method),
            initializer=_init_worker,
            initargs=(sessions,),
        )

    def run(
        self, tasks: Sequence[Task], setting: Setting
    ) -> Iterator[tuple[str, list[SessionMetrics]]]:
        pending: set[Future[tuple[str, list[SessionMetrics]]]] = {
            self.pool.submit(_evaluate_here, key, spec, setting) for key, spec in tasks
        }
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class DaskBackend:
    """A Dask distributed cluster at ``address``; the sessions are broadcast to every worker."""

    def __init__(self, sessions: list[ImportedSession], address: str) -> None:
        require("distributed", "tune", "tuning on a Dask cluster (--dask)")
        import distributed

        client_class: Any = distributed.Client
        self.client: Any = client_class(address)
        self.sessions: Any
        # one future for the whole list (scattering the list itself would make one per session)
        (self.sessions,) = self.client.scatter([sessions], broadcast=True, hash=False)

    def run(
        self, tasks: Sequence[Task], setting: Setting
    ) -> Iterator[tuple[str, list[SessionMetrics]]]:
        import distributed

        as_completed: Any = distributed.as_completed
        futures = [
            self.client.submit(_evaluate_with, key, spec, self.sessions, setting, pure=False)
            for key, spec in tasks
        ]
        for future in as_completed(futures):
            result: tuple[str, list[SessionMetrics]] = future.result()
            yield result

    def close(self) -> None:
        self.client.close()


def open_backend(
    sessions: list[ImportedSession], *, workers: int | None = None, dask: str | None = None
) -> Backend:
    """Dask when ``dask`` is an address; inline for ``workers=0``; else a process pool of
    ``workers`` (default: the CPU count)."""
    if dask:
        return DaskBackend(sessions, dask)
    n = (os.cpu_count() or 1) if workers is None else workers
    if n <= 0:
        return InlineBackend(sessions)
    return PoolBackend(sessions, n)
