"""The ``compactlens`` command: one module per command group, terminal output, the app server.

``main`` is the typer app's entry point (the console script); ``common`` the shared options and
errors; ``commands``, ``ingesting`` and ``inputs`` do the work without the terminal, ``terminal``
prints; ``analysis`` and ``demo`` are the analysis and demo commands; ``serve`` starts the app.
"""
