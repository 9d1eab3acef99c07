"""Event payloads built from compactor objects: messages, compaction outcomes, offloads.

With ``capture="metadata"`` no builder here writes message content, summaries, anchor text,
previews or error text, only sizes, hashes, roles, names and fixed error codes. The schema the
payloads follow is ``schema``; nothing here writes anywhere.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence

from compactor.events.schema import (
    REDACTED,
    AnchorItem,
    Capture,
    CompactionRecorded,
    MessageAppended,
    SyntheticMessage,
    ToolResultOffloaded,
    ViewItem,
    ViewStatus,
)
from compactor.messages import Message, ToolCall
from compactor.pipeline._outcome import CompactionOutcome
from compactor.records import CompactionRecord, OffloadEntry
from compactor.tokens import message_bytes
from compactor.writing._encoding import scrub


def hash_key(capture: Capture, session_id: str = "", secret: bytes | None = None) -> bytes | None:
    """The key a session's hashes are made with: none for full capture (content addresses are
    shared, so text is stored once); for metadata capture one per session, so that a metadata
    session's hashes match each other but never another session's content. With a ``secret``
    it is HMAC(secret, session id), the same in every process (a resumed session hashes equal
    messages equally); without, a random one, for this process only."""
    if capture != "metadata":
        return None
    if secret is None:
        return secrets.token_bytes(16)
    own = session_id.encode("utf-8", "surrogatepass")
    return hmac.new(secret, own, hashlib.sha256).digest()[:16]


def sha256_of(msg: Message, key: bytes | None = None) -> str:
    """Content address of a message: role, content, tool calls and ids (keyed with ``key``,
    an HMAC, when given). Lone surrogates are hashed as ``surrogatepass`` writes them, in
    every field, so no text a model produced can make hashing raise."""
    h = hmac.new(key, digestmod=hashlib.sha256) if key else hashlib.sha256()
    h.update(_raw(msg.role))
    h.update(b"\0")
    h.update(_raw(msg.content))
    for tc in msg.tool_calls:
        h.update(_raw(f"\0{tc.id}\0{tc.name}\0"))
        h.update(_raw(tc.arguments))
    h.update(_raw(f"\0{msg.tool_call_id or ''}\0{int(msg.is_error)}"))
    return h.hexdigest()


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _opt(text: str | None) -> str | None:
    return None if text is None else scrub(text)


def _clean_call(tc: ToolCall) -> ToolCall:
    """``tc`` with its id, name and arguments scrubbed (the same object when already clean)."""
    fields = {"id": scrub(tc.id), "name": scrub(tc.name), "arguments": scrub(tc.arguments)}
    if all(getattr(tc, k) is v for k, v in fields.items()):
        return tc
    return tc.model_copy(update=fields)


def message_appended(
    index: int,
    msg: Message,
    capture: Capture,
    *,
    n_bytes: int | None = None,
    key: bytes | None = None,
) -> MessageAppended:
    """The payload for one appended message (``n_bytes``: its size, if already counted;
    ``key``: the session's ``hash_key``). Ids and names are scrubbed here; content is left to
    the serialiser, which scrubs it on the way out (``model_json_line``)."""
    full = capture == "full"
    return MessageAppended(
        index=index,
        role=msg.role,
        bytes=message_bytes(msg) if n_bytes is None else n_bytes,
        sha256=sha256_of(msg, key),
        tool_call_id=_opt(msg.tool_call_id),
        tool_call_ids=[scrub(tc.id) for tc in msg.tool_calls],
        tool_names=[scrub(tc.name) for tc in msg.tool_calls],
        is_error=msg.is_error,
        name=_opt(msg.name),
        content=msg.content if full else None,
        tool_calls=[_clean_call(tc) for tc in msg.tool_calls] if full else None,
    )


def redact_record(record: CompactionRecord, key: bytes | None = None) -> CompactionRecord:
    """The record without summary, anchor text or error text (for ``capture="metadata"``):
    the error becomes its fixed codes, which never quote a provider or the content; the
    offloaded results' content hashes are keyed with ``key`` (the session's ``hash_key``),
    like every other hash of the session."""
    anchors = [a.model_copy(update={"content": REDACTED}) for a in record.anchors]
    error = "; ".join(record.error_codes) if record.error else ""
    if record.error and not record.error_codes:
        error = "error"  # a record from elsewhere, without codes: say only that there was one
    offloaded = [e.model_copy(update={"sha256": _keyed(e.sha256, key)}) for e in record.offloaded]
    summary = None if record.summary_text is None else ""
    update = {"summary_text": summary, "anchors": anchors, "error": error, "offloaded": offloaded}
    return record.model_copy(update=update)


def anchor_item_rows(record: CompactionRecord) -> list[AnchorItem]:
    """Every item of every real anchor of ``record``, in anchor order."""
    return [
        AnchorItem(anchor_type=a.type.value, position=i, item=item)
        for a in record.anchors
        for i, item in enumerate(a.items)
    ]


def compaction_recorded(
    outcome: CompactionOutcome,
    index_of: Sequence[int | None],
    capture: Capture,
    key: bytes | None = None,
) -> CompactionRecorded:
    """The event payload for one compaction. ``index_of[p]`` is the history index of input p;
    ``key`` the session's ``hash_key``."""
    statuses = outcome.status_of_inputs()
    digests = [sha256_of(m, key) for m in outcome.inputs]
    sizes = [message_bytes(m) for m in outcome.inputs]
    before = [
        ViewItem(
            index=index_of[p],
            sha256=digests[p],
            role=m.role,
            bytes=sizes[p],
            status="system" if m.role == "system" and p == 0 else statuses[p],
        )
        for p, m in enumerate(outcome.inputs)
    ]
    after: list[ViewItem] = []
    synthetic: list[SyntheticMessage] = []
    for m, src in zip(outcome.view, outcome.sources, strict=True):
        if src is not None and m is outcome.inputs[src]:  # kept as is: measured above already
            digest, size = digests[src], sizes[src]
        else:
            digest, size = sha256_of(m, key), message_bytes(m)
        if src is None:
            status: ViewStatus = "synthetic"
        elif m.role == "system" and src == 0:
            status = "system"
        else:
            status = statuses[src]
        index = index_of[src] if src is not None else None
        after.append(ViewItem(index=index, sha256=digest, role=m.role, bytes=size, status=status))
        if status in ("synthetic", "offloaded", "changed"):
            synthetic.append(
                SyntheticMessage(
                    sha256=digest,
                    role=m.role,
                    bytes=size,
                    source_index=index,
                    tool_call_id=_opt(m.tool_call_id),
                    content=m.content if capture == "full" else None,
                )
            )
    full = capture == "full"
    record = outcome.record if full else redact_record(outcome.record, key)
    return CompactionRecorded(
        record=record,
        before=before,
        after=after,
        synthetic=synthetic,
        anchor_items=anchor_item_rows(record) if full else [],
    )


ViewEntry = tuple[int | None, Message, ViewStatus]
"""One message of a view given directly: its history index (``None`` for a message the
compaction made), the message, and what became of it."""


def views_recorded(
    record: CompactionRecord,
    before: Sequence[ViewEntry],
    after: Sequence[ViewEntry],
    capture: Capture,
    key: bytes | None = None,
) -> CompactionRecorded:
    """The payload for a compaction known by its views rather than by a ``CompactionOutcome``:
    a harness's own compaction read from its transcript. Every ``synthetic`` message of
    ``after`` (the harness's summary, a placeholder) is listed with its content under full
    capture, so the diff can show it; ``key`` is the session's ``hash_key``."""
    synthetic = [
        SyntheticMessage(
            sha256=sha256_of(m, key),
            role=m.role,
            bytes=message_bytes(m),
            tool_call_id=_opt(m.tool_call_id),
            content=m.content if capture == "full" else None,
        )
        for index, m, status in after
        if status == "synthetic"
    ]
    full = capture == "full"
    kept = record if full else redact_record(record, key)
    return CompactionRecorded(
        record=kept,
        before=[_item(e, key) for e in before],
        after=[_item(e, key) for e in after],
        synthetic=synthetic,
        anchor_items=anchor_item_rows(kept) if full else [],
    )


def _item(entry: ViewEntry, key: bytes | None) -> ViewItem:
    index, m, status = entry
    return ViewItem(
        index=index, sha256=sha256_of(m, key), role=m.role, bytes=message_bytes(m), status=status
    )


def offload_events(record: CompactionRecord, key: bytes | None = None) -> list[ToolResultOffloaded]:
    """One payload per offloaded file (its content hash keyed with ``key`` when given)."""
    return [_offloaded(e, record.id, key) for e in record.offloaded]


def tool_time_offloaded(entry: OffloadEntry, key: bytes | None = None) -> ToolResultOffloaded:
    """The payload of a result offloaded as it was appended (``tool_offload_threshold``): no
    compaction made it, so ``record_id`` is empty."""
    return _offloaded(entry, "", key)


def _offloaded(e: OffloadEntry, record_id: str, key: bytes | None) -> ToolResultOffloaded:
    return ToolResultOffloaded(
        record_id=record_id,
        tool_call_id=scrub(e.tool_call_id),
        tool_name=scrub(e.tool_name),
        file_path=scrub(e.file_path),
        bytes=e.bytes,
        lines=e.lines,
        sha256=_keyed(e.sha256, key),
    )


def _keyed(digest: str, key: bytes | None) -> str:
    return hmac.new(key, digest.encode(), hashlib.sha256).hexdigest() if key and digest else digest
