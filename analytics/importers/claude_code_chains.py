"""Claude Code lines as a forest: rebuilding conversation chains from ``parentUuid`` links.

``Line`` is one user or assistant JSONL line, already converted (the raw JSON is not kept).
``build_chains`` finds the roots, picks the live branch of each tree and returns the chains in
file order. No JSON parsing and no ``Message`` building here (see ``claude_code``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from compactor import Message, ToolCall

from analytics.importers.session import TurnUsage


@dataclass
class Line:
    """One user or assistant line. Assistant lines have ``response_id`` (``message.id``)."""

    lineno: int
    uuid: str
    parent: str | None
    sidechain: bool
    session_id: str | None = None
    timestamp: str | None = None
    cwd: str | None = None
    version: str | None = None
    git_branch: str | None = None
    user_messages: list[Message] = field(default_factory=list)
    response_id: str | None = None
    model: str | None = None
    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    usage: TurnUsage | None = None
    problem: str | None = None
    """A non-fatal problem to report for this line (e.g. unreadable usage)."""


@dataclass(frozen=True)
class Forest:
    """The chains in root (file) order, and counts of the lines that are in none of them."""

    chains: list[list[Line]]
    off_branch: int
    """Lines on abandoned branches (edited or retried turns)."""
    unreachable: int
    """Lines no root leads to (a ``parentUuid`` cycle)."""
    duplicates: int
    """Lines repeating an earlier line's uuid."""


def build_chains(lines: list[Line]) -> Forest:
    """Rebuild the chains: one per root, each the live branch of the root's tree.

    A root is a line without a parent, whose parent is not in the file, or whose parent is on
    the other side of the main/side-chain divide. Duplicate uuids keep the first line.
    """
    by_uuid: dict[str, Line] = {}
    for line in lines:
        by_uuid.setdefault(line.uuid, line)
    children: dict[str, list[Line]] = defaultdict(list)
    roots: list[Line] = []
    for line in by_uuid.values():
        parent = by_uuid.get(line.parent) if line.parent and line.parent != line.uuid else None
        if parent is None or parent.sidechain != line.sidechain:
            roots.append(line)
        else:
            children[parent.uuid].append(line)
    chains: list[list[Line]] = []
    off_branch = 0
    reached = 0
    for root in sorted(roots, key=lambda ln: ln.lineno):
        chain, size = _live_branch(root, children)
        chains.append(chain)
        off_branch += size - len(chain)
        reached += size
    return Forest(chains, off_branch, len(by_uuid) - reached, len(lines) - len(by_uuid))


def _live_branch(root: Line, children: dict[str, list[Line]]) -> tuple[list[Line], int]:
    """The path from ``root`` to the newest line of its tree, and the tree's size."""
    parent_of: dict[str, Line] = {}
    newest = root
    stack = [root]
    size = 0
    while stack:
        node = stack.pop()
        size += 1
        if node.lineno > newest.lineno:
            newest = node
        for child in children.get(node.uuid, ()):
            parent_of[child.uuid] = node
            stack.append(child)
    path = [newest]
    while path[-1] is not root:
        path.append(parent_of[path[-1].uuid])
    path.reverse()
    return path, size
