"""What the library writes, whole or not at all and fail-open: events, records, files.

``sinks`` (where events go: the JSONL spool, a callback, memory). Internal: ``_recording`` (a
session's events, each emitted inside one fail-open guard), ``_appending`` (whole-line appends
and advisory locks), ``_seqindex`` (a session's next ``seq`` beside the spool), ``_safepath``
(safe file names from untrusted ids), ``_encoding`` (any ``str`` as valid UTF-8) and ``_faults``
(failures logged by type and code, once per kind). The public names are re-exported by
``compactor``.
"""
