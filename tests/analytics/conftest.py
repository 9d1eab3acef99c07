"""Fixtures shared by the analytics tests: the dev-set replays, built once for every worker."""

from __future__ import annotations

import pytest

from tests.analytics.replayed import DevReplays
from tests.builds import BuildCache


@pytest.fixture(scope="session")
def dev_replays(builds: BuildCache) -> DevReplays:
    return DevReplays(builds)
