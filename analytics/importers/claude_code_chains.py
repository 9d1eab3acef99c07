"""Claude Code lines as a forest: rebuilding conversation chains from ``parentUuid`` links.

``Line`` is one user or assistant JSONL line, already converted (the raw JSON is not kept).
``build_chains`` finds the roots, picks the live branch of each tree and returns the chains in
file order. No JSON parsing and no ``Message`` building here (see ``claude_code``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from analytics.importers.session import TurnUsage
from compactor import Message, ToolCall


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
class Chain:
    """One conversation chain in file order, from a tree of ``tree_size`` lines."""

    lines: list[Line]
    tree_size: int

    @property
    def off_branch(self) -> int:
        """Lines of the tree on abandoned branches (edited or retried turns)."""
        return self.tree_size - len(self.lines)


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
    chains = [_live_branch(root, children) for root in sorted(roots, key=lambda ln: ln.lineno)]
    reached = sum(chain.tree_size for chain in chains)
    return Forest(chains, len(by_uuid) - reached, len(lines) - len(by_uuid))


def _live_branch(root: Line, children: dict[str, list[Line]]) -> Chain:
    """The live chain of ``root``'s tree, in file order.

    The spine is the path from the root to the newest line. Lines hanging off the spine that
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
    newest = max(tree, key=lambda ln: ln.lineno)
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
            if not _belongs(node, call_ids, responses):
                continue
            live.add(node.uuid)
            call_ids.update(call.id for call in node.calls)
        if node.uuid in live:
            chain.append(node)
    return Chain(chain, len(tree))


def _belongs(node: Line, call_ids: set[str], responses: set[str]) -> bool:
    if node.response_id is not None:
        return node.response_id in responses
    results = [m.tool_call_id for m in node.user_messages if m.tool_call_id is not None]
    return bool(results) and len(results) == len(node.user_messages) and set(results) <= call_ids
