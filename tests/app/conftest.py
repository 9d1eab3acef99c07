"""The fixture store every AppTest page test reads, built once for the package.

``fixture_home`` replays the fixture transcripts (``fixtures.build_home``) into a real store and
points ``COMPACTLENS_HOME`` at it while the tests run; at the end the cached owner is released
(closing the store and stopping its projector thread).
"""

from __future__ import annotations

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
