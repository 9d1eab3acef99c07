"""``python -m analytics.cli``: the same command as the ``compactlens`` console script."""

from analytics.cli.main import main

main()
