"""What the audit of native compactions says was lost, checked on every dev native compaction.

The sessions are imported with ``compactlens import`` and audited with ``audit --json``
(``native_audit.py``); what is true is read here from the raw files: each summary's text and the
harness's working directory. On every compaction:

- no file is counted twice in its lost list: two lost paths are one file when they resolve to
  the same absolute path against the raw working directory, or when one is a bare file name
  that exactly one other reported path of the compaction has;
- no lost file is named by the raw summary: by the path itself, or by a tail of two or more of
  its segments (as a path of its own) or its file name (with a dot) that no other reported path
  has, each as a whole (not inside a longer name);
- no date, version or slash-separated word is among its artifacts, kept or lost.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.analytics.jobs.native_audit import (
    AuditedCompaction,
    NativeAudit,
    file_name,
    names,
    resolve,
)

NOT_ARTIFACTS = {
    "date": re.compile(r"^\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}$|^\d+(?:/\d+)+$"),
    "version": re.compile(r"^v?\d+(?:\.\d+){1,3}(?:[-+][0-9A-Za-z.]+)?$"),
    "slash-separated words": re.compile(r"^[A-Za-z]+(?:/[A-Za-z]+)+$"),
}


def _paths(entry: AuditedCompaction) -> list[str]:
    """The reported artifacts without whitespace: paths (commands and errors have spaces)."""
    every = entry.entry["artifacts"]["kept"] + entry.entry["artifacts"]["lost"]
    return [a for a in every if not any(c.isspace() for c in a)]


def double_counts(entry: AuditedCompaction) -> list[str]:
    """The lost paths that are a file already counted in the lost list."""
    cwd, paths = entry.raw.cwd, _paths(entry)
    lost = [a for a in entry.entry["artifacts"]["lost"] if a in paths]

    def identity(path: str) -> str:
        if "/" in path.replace("\\", "/").removeprefix("./"):
            return resolve(path, cwd)
        others = {resolve(p, cwd) for p in paths if p != path and file_name(p) == path}
        if len(others) == 1:
            return others.pop()
        return resolve(path, cwd) if not others else path

    seen = Counter(identity(a) for a in lost)
    return sorted(a for a in lost if seen[identity(a)] > 1)


def _ids(audit: NativeAudit) -> list[str]:
    return [f"{c.raw.file}#{c.native_id}" for c in audit.compactions]


def test_every_dev_native_compaction_is_audited(native_audit: NativeAudit) -> None:
    harnesses = Counter(c.raw.harness for c in native_audit.compactions)
    assert harnesses == {"claude-code": 7, "codex": 2, "openhands": 13}
    for compaction in native_audit.compactions:
        assert compaction.entry["artifacts"]["kept"] or compaction.entry["artifacts"]["lost"]


def test_no_file_is_counted_twice_in_a_compactions_lost_list(native_audit: NativeAudit) -> None:
    twice = {
        f"{c.raw.file}#{c.native_id}": found
        for c in native_audit.compactions
        if (found := double_counts(c))
    }
    assert twice == {}


def test_no_lost_file_is_named_by_the_raw_summary(native_audit: NativeAudit) -> None:
    named: dict[str, list[str]] = {}
    for c in native_audit.compactions:
        if c.summary is None:  # Codex's remote compaction: the summary is encrypted
            continue
        paths = _paths(c)
        found = [a for a in c.entry["artifacts"]["lost"] if names(c.summary, a, paths)]
        if found:
            named[f"{c.raw.file}#{c.native_id}"] = found
    assert named == {}


@pytest.mark.parametrize("kind", sorted(NOT_ARTIFACTS))
def test_no_date_version_or_slash_separated_word_is_an_artifact(
    native_audit: NativeAudit, kind: str
) -> None:
    pattern = NOT_ARTIFACTS[kind]
    found = {
        f"{c.raw.file}#{c.native_id}": hits
        for c in native_audit.compactions
        if (hits := [a for a in _paths(c) if pattern.match(a)])
    }
    assert found == {}


def test_a_summary_that_names_a_file_by_its_tail_or_unique_name_keeps_it() -> None:
    paths = ["/home/u/cli/cmd/config.go", "cmd/run.go", "/x/run.go"]
    assert names("Edited `cmd/config.go` and config.go.", paths[0], paths)
    assert names("Read config.go first", paths[0], paths)
    assert not names("Read myconfig.go first", paths[0], paths)
    assert not names("Read run.go", "cmd/run.go", paths)  # two files have that name
    assert not names("Read x/run.go", "/a/x/run.go", ["/a/x/run.go", "/y/x/run.go"])  # shared tail
    assert not names("See src/x/run.go", "/a/x/run.go", ["/a/x/run.go", "/b/run.go"])  # longer
