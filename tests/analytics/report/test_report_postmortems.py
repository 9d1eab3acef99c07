"""The report's post-mortems sample across sessions: the dev transcripts replayed at 16k.

The truth is read with SQL: the effective Emergency compactions of live sessions per session,
and the causes the post-mortem job gave them. The report must name the sessions with most
emergencies (each with the cause most of its emergencies have), not only the first session's
many, and draw one lead-up for each of them.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from pathlib import Path

import pytest

from analytics.report.html import SAMPLED_SESSIONS
from analytics.store import open_store
from tests.analytics.cli_helpers import run
from tests.analytics.replayed import DevReplays

pytestmark = pytest.mark.integration

SECTION = re.compile(r"<h2>Emergency post-mortems</h2>(.*?)<h2>", re.S)
CELLS = re.compile(r"<tr>((?:<td>.*?</td>)+)</tr>", re.S)


def test_a_report_samples_the_post_mortems_of_the_sessions_with_most_emergencies(
    dev_replays: DevReplays, tmp_path: Path
) -> None:
    home = dev_replays.home(16_000)
    out = tmp_path / "report.html"
    done = run("report", out, "--home", home)  # the jobs are up to date after it
    assert done.exit_code == 0, done.output
    with open_store(home, read_only=True) as store:
        per_session = Counter(
            {
                str(s): int(n)
                for s, n in store.query(
                    """SELECT c.session_id, count(*) FROM compactions c
                       JOIN sessions s USING (session_id)
                       WHERE c.tier = 4 AND coalesce(c.effective, true)
                         AND s.deleted_at IS NULL GROUP BY 1"""
                ).iter_rows()
            }
        )
        causes = store.query("SELECT session_id, cause FROM job_emergencies").rows()
    assert len(per_session) > 1, "emergencies in one session only: the test would prove nothing"
    ranked = sorted(per_session, key=lambda s: (-per_session[s], s))
    expected = ranked[:SAMPLED_SESSIONS]

    page = out.read_text(encoding="utf-8")

    section = SECTION.search(page)
    assert section is not None
    rows = [
        [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", r, re.S)]
        for r in CELLS.findall(section[1])
    ]
    named = [r[0] for r in rows]
    assert named == expected and len(set(named)) > 1
    for sid, total, cause, count, *_rest in rows:
        assert int(total.replace(",", "")) == per_session[sid]
        own = Counter(str(c) for s, c in causes if s == sid)
        assert int(count.replace(",", "")) == own[cause] == max(own.values())
    figure = page[page.index("Context ratio up to one emergency of each") :]
    script = figure[: figure.index("</script>")]
    assert len(re.findall(r'"name":"[^"]*"', script)) == len(expected)  # a line each
