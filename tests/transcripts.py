"""Where the shared public transcripts are, for the tests that read them.

``DEV`` is the development set of the five transcript formats: the folders beside ``native/``
(the top level's manifest.json and SOURCES.md describe them and are no transcripts); ``NATIVE``
holds the sessions in which Claude Code, Codex and OpenHands compacted their own context, read by
the native-compaction tests only. Tests read them in place and never copy them.
"""

from __future__ import annotations

from pathlib import Path

TRANSCRIPTS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "transcripts"
NATIVE = TRANSCRIPTS / "native"
DEV: list[Path] = (
    sorted(p for p in TRANSCRIPTS.iterdir() if p.is_dir() and p != NATIVE)
    if TRANSCRIPTS.is_dir()
    else []
)
CTF = TRANSCRIPTS / "swe-agent" / "trajectories" / "demonstrations" / "ctf"
"""The swe-agent CTF demonstrations: small real sessions, one per file, for end-to-end runs."""
