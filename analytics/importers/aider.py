"""aider chat history markdown (``.aider.chat.history.md``) → one session per chat.

Streamed line by line; a session is yielded as soon as the next ``# aider chat started at``
header arrives. Text before the first header (if any) is chat 0. Within a chat: a run of
``#### `` lines is one user message (a line without the prefix ends it); ``> `` lines are
aider's own terminal output (command echoes, lint output, ``Tokens: …`` lines), which aider does
not send to the model, so they are counted but not made into messages; every other line belongs
to the assistant reply in progress. A ``Tokens: N sent, M received`` line gives the usage of the
latest assistant reply since the last user message. There are no tool-call ids in this format.

Metadata keys: ``source_sha256``; ``chat_index``; ``output_lines`` (``> `` lines);
``unattached_usage`` (``Tokens:`` lines with no reply to attach to, e.g. an interrupted one);
``peak_sent_tokens`` (the largest ``sent`` figure of the chat, attached or not).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from analytics.errors import TranscriptError
from analytics.importers.reading import MAX_COUNT, Reporter, SourceFile
from analytics.importers.session import ImportedSession, TurnUsage
from compactor import Message

HEADER = re.compile(r"^# aider chat started at (.+?)\s*$")
_MODE_LINE = re.compile(r"^-\*-.*-\*-\s*$")
_TOKEN_PART = re.compile(r"([\d][\d.,]*)\s*([kKmM]?)\s+(sent|received|cache write|cache hit)\b")
_MODEL = re.compile(r"^(?:Main model|Models?):\s+(\S+)")


@dataclass
class _Chat:
    """One chat being read; ``feed`` it lines, then ``session``."""

    index: int
    started_at: datetime | None = None
    messages: list[Message] = field(default_factory=list)
    usage: list[TurnUsage] = field(default_factory=list)
    model: str | None = None
    output_lines: int = 0
    unattached_usage: int = 0
    peak_sent: int | None = None
    problems: list[str] = field(default_factory=list)
    """Problems of the line just fed, for the reader to report with its number."""
    _kind: str | None = None
    _block: list[str] = field(default_factory=list)
    _reply_index: int | None = None

    def feed(self, line: str) -> None:
        if line.startswith("####") and (len(line) == 4 or line[4] in " \t"):
            self._start("user")
            self._block.append(line[5:].rstrip())
        elif line.startswith("> ") or line.rstrip() == ">":  # not ">>>>>>> REPLACE"
            self._start("output")
            self._output(line[1:].strip())
        elif not line.strip():
            if self._kind == "assistant":
                self._block.append("")
            else:
                self._start(None)
        else:
            self._start("assistant")
            self._block.append(line)

    def _start(self, kind: str | None) -> None:
        if kind == self._kind:
            return
        text = "\n".join(self._block).strip("\n")
        if self._kind == "user":
            self.messages.append(Message(role="user", content="\n".join(self._block)))
            self._reply_index = None
        elif self._kind == "assistant" and text.strip():
            self._reply_index = len(self.messages)
            self.messages.append(Message(role="assistant", content=text))
        self._kind, self._block = kind, []

    def _output(self, text: str) -> None:
        self.output_lines += 1
        model = _MODEL.match(text)
        if model and self.model is None:
            self.model = model.group(1)
        if not text.startswith("Tokens:"):
            return
        figures: dict[str, int | None] = {}
        for num, unit, kind in _TOKEN_PART.findall(text):
            figures[kind] = _number(num, unit)
            if figures[kind] is None:
                self.problems.append(
                    f"Tokens: '{num}{unit} {kind}' is no count of tokens (expected a number up "
                    f"to {MAX_COUNT:,}); that figure is left empty, everything else kept"
                )
        sent = figures.get("sent")
        if sent is not None:
            self.peak_sent = max(self.peak_sent or 0, sent)
        index = self._reply_index
        attached = any(u.message_index == index for u in self.usage)
        if index is None or attached or "sent" not in figures:
            self.unattached_usage += 1
            return
        self.usage.append(
            TurnUsage(
                message_index=index,
                input_tokens=sent,
                output_tokens=figures.get("received"),
                cache_read_tokens=figures.get("cache hit"),
                cache_write_tokens=figures.get("cache write"),
            )
        )

    def close(self) -> None:
        """End the block in progress (call before ``is_empty`` and ``session``)."""
        self._start(None)

    @property
    def is_empty(self) -> bool:
        return not self.messages and not self.output_lines

    def session(self, src: SourceFile) -> ImportedSession:
        return ImportedSession(
            session_id=f"{src.key}:{self.index}",
            source_path=str(src.path),
            format="aider",
            messages=self.messages,
            usage=self.usage,
            agent="aider",
            model=self.model,
            started_at=self.started_at,
            metadata={
                "source_sha256": src.sha256,
                "chat_index": self.index,
                "output_lines": self.output_lines,
                "unattached_usage": self.unattached_usage,
                "peak_sent_tokens": self.peak_sent,
            },
        )


def _number(num: str, unit: str) -> int | None:
    """``5,244`` → 5244; ``12k`` → 12000; ``1.2k`` → 1200; ``1.1M`` → 1100000; None for what
    is no number (``1.2.3``) or more than ``MAX_COUNT``."""
    try:
        value = float(num.replace(",", ""))
    except ValueError:
        return None
    scaled = value * {"": 1, "k": 1_000, "m": 1_000_000}[unit.lower()]
    return round(scaled) if 0 <= scaled <= MAX_COUNT else None


def iter_aider_sessions(
    path: Path, report: Reporter, document: object | None = None
) -> Iterator[ImportedSession]:
    """One session per chat, yielded as each chat ends."""
    del document  # markdown: never parsed as JSON
    src = SourceFile.of(path, report)
    chat = _Chat(index=0)
    for lineno, line in _lines(path, report):
        header = HEADER.match(line)
        if header is None:
            if not (lineno == 1 and _MODE_LINE.match(line)):
                chat.feed(line)
                for problem in chat.problems:
                    report(problem, lineno)
                chat.problems.clear()
            continue
        chat.close()
        if chat.index > 0 or not chat.is_empty:
            yield chat.session(src)
        chat = _Chat(index=chat.index + 1, started_at=_started(header.group(1)))
    chat.close()
    if chat.index > 0 or not chat.is_empty:
        yield chat.session(src)


def _lines(path: Path, report: Reporter) -> Iterator[tuple[int, str]]:
    try:
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    report(
                        f"not UTF-8 text (invalid byte at column {exc.start + 1}); "
                        "undecodable bytes replaced",
                        lineno,
                    )
                    text = raw.decode("utf-8", errors="replace")
                yield lineno, text.rstrip("\r\n")
    except OSError as exc:
        raise TranscriptError(str(path), f"cannot read the file: {exc.strerror or exc}") from None


def _started(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
