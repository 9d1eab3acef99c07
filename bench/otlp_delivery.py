"""``compactlens export otlp`` at full size: over 4,000 spans to a slow collector (issue 28, 6.3).

The store is built as ``tests/analytics/report/test_otlp_delivery.py`` builds its (smaller) one:
100 sessions cloned from one synthetic session, each compaction three times (4,200 effective
compactions, twice the OpenTelemetry SDK's queue of 2,048). A loopback collector
(``tests.otlp_receiver``) answers each request after 1 s. Printed: the time to build and ingest
the store, the time of the export, the spans the collector acknowledged and what the command
said; it exits 1 unless every span arrived and the command said so.

Run from the checkout: ``.venv/bin/python -m bench.otlp_delivery [SESSIONS] [DELAY_S]``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from tests.analytics.report.test_otlp_delivery import (
    COPIES,
    _build,
    _clone,
    _export,
    _figures,
    _template,
)
from tests.otlp_receiver import OtlpReceiver


def main(argv: list[str]) -> int:
    sessions = int(argv[0]) if argv else 100
    delay_s = float(argv[1]) if len(argv) > 1 else 1.0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        template = _template(root / "template")
        ids = [f"bulk-{k:03d}" for k in range(sessions)]
        home = _build(root / "bulk", {s: _clone(template, s, copies=COPIES) for s in ids})
        built_s = time.perf_counter() - started
        with OtlpReceiver(delay_s=delay_s) as receiver:
            started = time.perf_counter()
            done = _export(home.path, receiver.url)
            export_s = time.perf_counter() - started
            got, requests = receiver.spans, receiver.answered
    figures = _figures(done)
    print(f"store: {home.sessions:,} sessions, {home.spans:,} spans, built in {built_s:.1f} s")
    print(
        f"export to a collector answering after {delay_s:g} s: {export_s:.1f} s, "
        f"{requests:,} requests, {got:,} spans acknowledged "
        f"({home.spans / export_s:,.0f} spans/s); exit {done.exit_code}"
    )
    print(f"the command said: sent {figures[0]:,}, not delivered {figures[1]} of {figures[2]}")
    ok = got == home.spans and figures == (home.spans, None, None) and done.exit_code == 0
    print("every span delivered and counted" if ok else "MISMATCH:\n" + done.output)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
