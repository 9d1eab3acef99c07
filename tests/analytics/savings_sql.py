"""What truncations cut, computed with SQL from a store's raw tables, for the stats tests.

Written for the tests, independently of ``analytics.jobs.costs``: a compaction's cut is the
bytes of the messages its before view dropped plus what it took off the messages it shortened
(``changed``), in the compactor's own tokens (its ``tokens_before - tokens_after`` in proportion
to the bytes cut, rounded half to even); content once cut stays out of every later view, so a
turn lacks the session's cut so far, at most what it did not send (``history_tokens -
tokens``).
"""

from __future__ import annotations

CUT_SQL = """
WITH v AS (
  SELECT compaction_id,
    coalesce(sum(bytes) FILTER (WHERE side = 'before'), 0)
      - coalesce(sum(bytes) FILTER (WHERE side = 'after'), 0) AS shrink,
    coalesce(sum(bytes) FILTER (WHERE side = 'before' AND status = 'dropped'), 0) AS dropped,
    coalesce(sum(bytes) FILTER (WHERE side = 'before' AND status = 'changed'), 0)
      - coalesce(sum(bytes) FILTER (WHERE side = 'after' AND status = 'changed'), 0) AS shortened
  FROM compaction_views GROUP BY compaction_id),
c AS (
  SELECT c.session_id, c.seq, c.tier, c.tokens_before, c.tokens_after, v.shrink,
         v.dropped + greatest(v.shortened, 0) AS cut_bytes
  FROM compactions c JOIN v ON v.compaction_id = c.id
  WHERE coalesce(c.effective, true) AND c.tier > 0),
e AS (
  SELECT *, CASE
      WHEN cut_bytes <= 0 THEN 0
      WHEN shrink <= 0 OR tokens_before <= tokens_after THEN cut_bytes // 4
      ELSE CAST(round_even((tokens_before - tokens_after) * cut_bytes / shrink, 0) AS BIGINT)
    END AS cut_tokens
  FROM c),
t AS (
  SELECT t.session_id, t.seq, t.history_tokens - t.tokens AS difference,
    greatest(t.history_tokens - t.tokens, 0) AS unsent,
    (SELECT coalesce(sum(e.cut_tokens), 0) FROM e
      WHERE e.session_id = t.session_id AND e.seq <= t.seq) AS cut_so_far,
    (SELECT coalesce(sum(e.cut_tokens), 0) FROM e
      WHERE e.session_id = t.session_id AND e.seq <= t.seq AND e.tier = 4) AS emergency_so_far,
    (SELECT coalesce(sum(e.cut_bytes), 0) FROM e
      WHERE e.session_id = t.session_id AND e.seq <= t.seq) AS cut_bytes_so_far,
    (SELECT e.tier FROM e WHERE e.session_id = t.session_id AND e.seq <= t.seq
      ORDER BY e.seq DESC LIMIT 1) AS view_tier
  FROM turns t),
per_turn AS (
  SELECT *, least(cut_so_far, unsent) AS cut,
         least(emergency_so_far, least(cut_so_far, unsent)) AS emergency_cut,
         least(cut_bytes_so_far // 4, unsent) AS cut_as_priced
  FROM t)
"""
"""Per turn: ``difference`` (history less view), ``unsent`` (what it did not send), ``cut``
(what truncations before it took out, at most ``unsent``), ``emergency_cut`` (the part Emergency
took), ``cut_as_priced`` (the same from the bytes, as the costs job prices it without usage) and
``view_tier`` (the tier of the compaction that produced its view)."""
