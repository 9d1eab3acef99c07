"""The fixture store every AppTest page test reads, built once for the package.

``fixture_home`` replays the fixture transcripts (``fixtures.build_home``) into a real store and
points ``COMPACTLENS_HOME`` at it while the tests run; at the end the cached owner is released
(closing the store and stopping its projector thread). Each test leaves ``__main__`` as it found
it.
``_component_scan_once`` makes Streamlit scan the installed packages for components once per
process rather than on every ``AppTest.run``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import streamlit as st

from tests.app.fixtures import FixtureHome, build_home


@pytest.fixture(scope="package", autouse=True)
def _component_scan_once() -> Iterator[None]:
    """Every ``AppTest.run`` has Streamlit scan the metadata of every installed distribution
    for v2 component manifests (``discover_and_register_components``), about a second a run and
    most of a page's time here. The installed packages do not change while the tests run, so
    the first scan's manifests serve every run after it (a copy of the list each time), as a
    real server scans once when it starts. A Streamlit without that scanner runs as it is."""
    scanner = _manifest_scanner()
    if scanner is None:
        yield
        return
    scan = cache(scanner.scan_component_manifests)

    def scanned(max_workers: int | None = None) -> list[tuple[Any, Path]]:
        return list(scan(max_workers))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scanner, "scan_component_manifests", scanned)
        yield


def _manifest_scanner() -> ModuleType | None:
    try:
        scanner = importlib.import_module("streamlit.components.v2.manifest_scanner")
    except ImportError:
        return None
    return scanner if hasattr(scanner, "scan_component_manifests") else None


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
