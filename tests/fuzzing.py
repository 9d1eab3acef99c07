"""Hypothesis profiles: derandomised for CI and plain ``pytest``, random and long on demand.

``ci`` (loaded by ``tests/conftest.py`` unless ``--hypothesis-profile`` names another) runs every
property test with a seed derived from the test itself and no example database, so a run fails
only for what the submitted code does, never for the luck of the draw. ``fuzz`` (what
``bench/fuzz.py`` runs) draws at random, keeps failing examples in ``.hypothesis/`` and tries
``FUZZ_FACTOR`` times as many examples (20 unless ``COMPACTLENS_FUZZ_FACTOR`` says); a test
that sets its own count writes ``max_examples=examples(N)`` so that the factor reaches it too.
"""

from __future__ import annotations

import os

from hypothesis import settings

CI_PROFILE = "ci"
FUZZ_PROFILE = "fuzz"
FUZZ_FACTOR = int(os.environ.get("COMPACTLENS_FUZZ_FACTOR", "20"))
"""How many times the CI's examples ``fuzz`` tries (``bench/fuzz.py --factor`` sets it)."""
CI_EXAMPLES = 100
"""Hypothesis's own default count, kept for the tests that do not set one."""

settings.register_profile(
    CI_PROFILE, derandomize=True, database=None, deadline=None, max_examples=CI_EXAMPLES
)
settings.register_profile(
    FUZZ_PROFILE, derandomize=False, deadline=None, max_examples=CI_EXAMPLES * FUZZ_FACTOR
)


def examples(count: int) -> int:
    """``count`` under the CI profile; ``FUZZ_FACTOR`` times as many under ``fuzz``."""
    return count * FUZZ_FACTOR if settings.get_current_profile_name() == FUZZ_PROFILE else count
