"""Summaries: what a compaction's summary is, and who writes it.

``anchors`` (the five structured facts a summary carries, parsed, merged and formatted),
``summarize`` (the ``Summarizer`` and ``ChatModel`` protocols, the LLM summariser and its
prompts), ``extractive`` (the offline ``ExtractiveSummarizer``: anchors and a summary by rule).
Internal: ``_message`` (the ``[Context Compaction]`` message, rendered and read back exactly),
``_calls`` (summariser calls with a timeout), ``_tool_reading`` (what a tool call did, read by
rule) and ``_paths`` (file paths in transcripts). The public names are re-exported by
``compactor``.
"""
