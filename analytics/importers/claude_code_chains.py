"""Claude Code lines as a forest: rebuilding conversation chains from ``parentUuid`` links.

``Line`` is one JSONL line with a ``uuid``, already converted (the raw JSON is not kept): a user
or assistant line, or a *link* (progress, system and other lines that carry no message but that
the chain runs through). A ``compact_boundary`` is a link whose parent is its
``logicalParentUuid``, so the chain after a compaction continues the one before it; the compact
summary after it is a user line holding the summary, not a message. ``build_chains`` finds the
roots, picks the live branch of each tree and returns the chains in file order. No JSON parsing
and no ``Message`` building here (see ``claude_code``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

from analytics.importers.session import TurnUsage
from compactor import Message, ToolCall


@dataclass(frozen=True)
class Boundary:
    """A ``compact_boundary`` line: Claude Code compacted its context here."""

    uuid: str
    lineno: int
    trigger: Literal["auto", "manual"]
    pre_tokens: int | None
    """``compactMetadata.preTokens``: Claude Code's own count of the context it compacted."""
    timestamp: str | None
    post_tokens: int | None = None
    """``compactMetadata.postTokens`` (newer versions): its count of the conversation it left
    (the summary and what it kept; its system prompt and tools are not in it)."""


@dataclass
class Line:
    """One line with a uuid. Assistant lines have ``response_id`` (``message.id``); links carry
    no message (``boundary`` when they mark a compaction); a compact summary has ``summary``."""

    lineno: int
    uuid: str
    parent: str | None
    sidechain: bool
    kind: Literal["user", "assistant", "link"] = "link"
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
    boundary: Boundary | None = None
    summary: str | None = None
    """The text of a compact summary (``isCompactSummary``): the harness's, not a message."""

    @property
    def is_message(self) -> bool:
        """A user or assistant line: what the chain is made of (links only connect it)."""
        return self.kind != "link"


@dataclass(frozen=True)
class Chain:
    """One conversation chain in file order (links included), from a tree of ``tree_size``
    user and assistant lines."""

    lines: list[Line]
    tree_size: int

    @property
    def messages(self) -> list[Line]:
        """The chain's user and assistant lines."""
        return [ln for ln in self.lines if ln.is_message]

    @property
    def off_branch(self) -> int:
        """User and assistant lines of the tree on abandoned branches (edited or retried turns)."""
        return self.tree_size - len(self.messages)


@dataclass(frozen=True)
class Forest:
    """The chains in root (file) order, and counts of the lines that are in none of them."""

    chains: list[Chain]
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
    ordered = sorted(roots, key=lambda ln: ln.lineno)
    built = [_live_branch(root, children) for root in ordered]
    reached = sum(size for _chain, size in built)
    chains = [chain for chain, _size in built if chain.messages]
    return Forest(chains, len(by_uuid) - reached, len(lines) - len(by_uuid))


def _live_branch(root: Line, children: dict[str, list[Line]]) -> tuple[Chain, int]:
    """The live chain of ``root``'s tree, in file order, and the tree's size in lines.

    The spine is the path from the root to the newest user or assistant line (a link, such as
    a progress line of a running tool, never decides the branch). Lines hanging off the spine that
    belong to it are added back: another line of a response on the spine, or the result of a
    tool call on it (CLI 2.x links each parallel tool result to the line holding its call, so
    parallel calls look like branches but are not).
    """
    parent_of: dict[str, Line] = {}
    tree = [root]
    for node in tree:  # breadth-first; the list grows while we walk it
        for child in children.get(node.uuid, ()):
            parent_of[child.uuid] = node
            tree.append(child)
    newest = max(tree, key=lambda ln: (ln.is_message, ln.lineno))
    live = {newest.uuid}
    node = newest
    while node is not root:
        node = parent_of[node.uuid]
        live.add(node.uuid)
    call_ids = {call.id for node in tree if node.uuid in live for call in node.calls}
    responses = {node.response_id for node in tree if node.uuid in live and node.response_id}
    chain: list[Line] = []
    for node in sorted(tree, key=lambda ln: ln.lineno):  # parents come before their children
        parent = parent_of.get(node.uuid)
        if node.uuid not in live and parent is not None and parent.uuid in live:
            if node.is_message and not _belongs(node, call_ids, responses):
                continue  # a link passes through: what hangs off it must belong itself
            live.add(node.uuid)
            call_ids.update(call.id for call in node.calls)
        if node.uuid in live:
            chain.append(node)
    return Chain(chain, sum(ln.is_message for ln in tree)), len(tree)


def _belongs(node: Line, call_ids: set[str], responses: set[str]) -> bool:
    if node.response_id is not None:
        return node.response_id in responses
    results = [m.tool_call_id for m in node.user_messages if m.tool_call_id is not None]
    return bool(results) and len(results) == len(node.user_messages) and set(results) <= call_ids
