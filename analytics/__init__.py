"""analytics: the read side of compactlens.

Importers, the event store and its projections, Polars jobs, replay and tuning, the CLI. It
imports only the public names of `compactor`; `duckdb` is imported by the store layer alone.
"""
