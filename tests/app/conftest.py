"""The fixture store every AppTest page test reads, built once for the package.

``fixture_home`` replays the fixture transcripts (``fixtures.build_home``) into a real store and
points ``COMPACTLENS_HOME`` at it while the tests run; at the end the cached owner is released
(closing the store and stopping its projector thread). Each test leaves ``__main__`` as it found
it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
import streamlit as st

from tests.app.fixtures import FixtureHome, build_home


@pytest.fixture(scope="package")
def fixture_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FixtureHome]:
    built = build_home(tmp_path_factory.mktemp("app-home"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COMPACTLENS_HOME", str(built.home))
        yield built
        st.cache_resource.clear()  # closes the store and stops its projector thread
        st.cache_data.clear()


@pytest.fixture(autouse=True)
def _main_module_restored() -> Iterator[None]:
    """Streamlit runs a page as ``sys.modules["__main__"]`` and leaves it there. A process
    started later in the same worker by ``multiprocessing`` with "spawn" (a Dask cluster, the
    tuning pool) re-runs ``__main__``'s file first, and would run app/main.py: put it back."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main
