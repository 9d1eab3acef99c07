"""The pipeline: ``ProgressiveCompactor`` measures the view, picks a tier and acts on it.

``progressive`` (the compactor), ``offload`` (large tool results to files, a placeholder left),
``fallback`` (the token-budget fallback and Emergency truncation, no LLM call), ``pairs``
(tool call/result integrity), ``notify`` (the compaction notice). Internal: ``_tiers`` (the tier
decision and the pair-safe head/tail split), ``_summary_step`` (the Soft/Full step: offload,
summarise, build the compaction message), ``_tooltime`` (offload as results arrive), ``_work``
(one compaction in progress) and ``_outcome`` (a compaction's view and record with
provenance). It uses ``summaries`` and ``writing``; neither uses it. The public names are
re-exported by ``compactor``.
"""
