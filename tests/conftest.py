"""The whole suite's set-up: the Hypothesis profile, the tiers, and how workers share the run.

Tiers (markers): a test with none of ``hypothesis``, ``integration`` and ``e2e`` is in the fast
tier (pure functions on hand-built inputs: about 20 s for all of them on one core);
``hypothesis`` marks the property tests and state machines (Hypothesis marks ``@given`` tests
itself); ``integration`` tests use real stores, the command line, transcripts and replays; ``e2e``
tests start servers, browsers, PostgreSQL or processes they signal. A module marks its tier with
``pytestmark``; a test that uses the PostgreSQL server is ``e2e`` whatever its module says, and
an unmarked one that uses a temporary folder is ``integration``. The fast tier alone:
``pytest -m "not hypothesis and not integration and not e2e"``.

Under pytest-xdist (``.ci/check`` runs ``-n auto --dist loadscope``) a module's tests (a class's,
for tests in a class) run on one worker, so a module-scoped fixture is built once per run, not
once per worker; data shared across modules is built once for all workers by ``builds``
(``tests/builds.py``). The modules known to be long go first, so that no worker is left with a
long one at the end. (``--dist loadgroup`` would allow groups across modules, but pytest-xdist
3.8 cannot apply its groups under pytest 9.)
"""

from __future__ import annotations

import pytest
from hypothesis import settings

from tests.builds import BuildCache
from tests.fuzzing import CI_PROFILE

settings.load_profile(CI_PROFILE)  # --hypothesis-profile, read after this, overrides it

LONG_FIRST = (
    "tests/app/test_browser.py",
    "tests/analytics/replay/test_postmortem_transcripts.py",
    "tests/analytics/jobs/test_cache_model_reality.py",
    "tests/analytics/queries/test_stats_agree.py",
)
"""Modules whose fixtures take the longest: scheduled first (the rest keep their order)."""


@pytest.fixture(scope="session")
def builds(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> BuildCache:
    """Expensive test data built once for all workers (``tests/builds.py``)."""
    return BuildCache.for_run(pytestconfig, tmp_path_factory)


def _module_path(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


E2E_FIXTURES = frozenset({"postgres"})
"""A test that uses one of these (itself or through another fixture) is end-to-end."""
INTEGRATION_FIXTURES = frozenset({"tmp_path", "tmp_path_factory", "tmpdir", "builds"})
"""A test that uses one of these touches real files: an integration test at least."""


def _tier(item: pytest.Item) -> str | None:
    """The tier a test is in by what it uses, when its module did not mark it."""
    marked = {m.name for m in item.iter_markers()}
    used = set(getattr(item, "fixturenames", ()))
    if "e2e" not in marked and used & E2E_FIXTURES:
        return "e2e"
    if not marked & {"e2e", "integration"} and used & INTEGRATION_FIXTURES:
        return "integration"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = _tier(item)
        if tier is not None:
            item.add_marker(getattr(pytest.mark, tier))
    rank = {path: i for i, path in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(_module_path(item), len(rank)))
