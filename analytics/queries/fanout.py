"""A Dask cluster for the job refresh: connect, ship frames, run pure functions, fetch results.

``DaskFanout`` wraps a ``distributed.Client`` the way ``analytics.tuning.execution.DaskBackend``
does (the same client, ``scatter`` once and ``submit(..., pure=False)``; the room rules keep the
query layer from importing the tuning lab). It is given an address (its own client, closed with
it) or a client the caller made (left open). A scheduler that cannot be reached, or is lost
during a refresh, raises ``DaskUnavailableError`` naming the address, never a traceback from
deep inside ``distributed``. It reads and writes no store: ``materialize`` reads the frames in
the calling process (the store's owner) and writes the rows that come back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from analytics.errors import AnalyticsError
from analytics.extras import require

CONNECT_TIMEOUT_S = 10.0
"""How long connecting to a Dask scheduler may take before the refresh gives up."""


class DaskUnavailableError(AnalyticsError):
    """The Dask scheduler named by ``--dask`` could not be reached, or was lost mid-refresh."""

    def __init__(self, address: str, reason: str, doing: str = "connect to") -> None:
        self.address = address
        kept = (
            ""
            if doing == "connect to"
            else "; the job tables written so far are kept, the rest are refreshed next time"
        )
        super().__init__(
            f"could not {doing} the Dask scheduler at {address!r}: {reason}. Check that "
            "`dask scheduler` runs there (and its workers), or drop --dask to compute in this "
            f"process{kept}"
        )


class DaskFanout:
    """Tasks on a Dask cluster (see the module doc)."""

    def __init__(self, client: Any, address: str, *, owned: bool) -> None:
        self.client = client
        self.address = address
        self._owned = owned

    @classmethod
    def connect(cls, dask: Any, *, timeout_s: float | None = None) -> DaskFanout:
        """A fanout over ``dask``: a scheduler address (``tcp://host:8786``) or a client."""
        if not isinstance(dask, str):
            address = getattr(getattr(dask, "scheduler", None), "address", None)
            return cls(dask, str(address or "the given client"), owned=False)
        require("distributed", "tune", "a Dask fan-out (--dask)")
        import distributed
        from distributed.comm.addressing import resolve_address

        wait = CONNECT_TIMEOUT_S if timeout_s is None else timeout_s
        client_class: Any = distributed.Client
        try:
            resolve_address(dask)  # a malformed one, before a Client half-made of it lingers
            client = client_class(dask, timeout=wait, set_as_default=False)
        except (OSError, ValueError, TypeError) as exc:  # refused, timed out, bad scheme
            raise DaskUnavailableError(dask, _reason(exc)) from None
        return cls(client, dask, owned=True)

    def scatter(self, frames: dict[str, Any]) -> dict[str, Any]:
        """Each value sent to the cluster once; a future per name (tasks take them as args).
        Scattered as a list: a dict's names would become the data's keys on the cluster, and
        the next chunk's frames of the same names would be taken for this one's."""
        names = list(frames)
        try:
            futures = self.client.scatter([frames[n] for n in names], hash=False)
        except OSError as exc:
            raise DaskUnavailableError(self.address, _reason(exc), "send data to") from None
        return dict(zip(names, futures, strict=True))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` as a task (futures among ``args`` are resolved on the worker)."""
        try:
            return self.client.submit(fn, *args, pure=False)
        except OSError as exc:
            raise DaskUnavailableError(self.address, _reason(exc), "submit a task to") from None

    def result(self, future: Any) -> Any:
        """The task's result; its own exception is raised as it is (the job's failure)."""
        import distributed

        lost: tuple[type[BaseException], ...] = (OSError, distributed.KilledWorker)
        try:
            return future.result()
        except lost as exc:  # the scheduler went away, or workers died running the task
            raise DaskUnavailableError(self.address, _reason(exc), "get a result from") from None

    def close(self) -> None:
        if self._owned:
            self.client.close()

    def __enter__(self) -> DaskFanout:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
