"""The dev native sessions imported and audited once per worker, for the native artifact tests."""

from __future__ import annotations

import pytest

from tests.analytics.jobs.native_audit import SOURCES, NativeAudit, build_native_audit


@pytest.fixture(scope="session")
def native_audit(tmp_path_factory: pytest.TempPathFactory) -> NativeAudit:
    if not SOURCES:
        pytest.skip("the dev native transcripts are not present")
    return build_native_audit(tmp_path_factory.mktemp("native-audit"))
