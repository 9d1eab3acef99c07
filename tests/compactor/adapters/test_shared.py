"""What the adapters share (``compactor.adapters._common``): optional frameworks, one session per
conversation, and what framework items carry kept aside and restored, with a toy codec."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import pytest

from compactor import (
    CompactorConfig,
    ExtractiveSummarizer,
    MemorySink,
    Message,
    ProgressiveCompactor,
    SpoolSink,
    ToolCall,
)
from compactor.adapters import CompactionOptions
from compactor.adapters._common import Conversations, Restored, Usage
from compactor.events import UsageReported
from tests.compactor.adapters.scenario import ROOT, tool_output

Item = dict[str, Any]


class ToyCodec:
    """One dict per message; ``extra`` stands for what a compactor message cannot hold."""

    def key(self, item: Item) -> Hashable:
        return id(item)

    def decode(self, items: Sequence[Item]) -> list[tuple[Message, Item]]:
        out = []
        for item in items:
            calls = tuple(
                ToolCall(id=c, name="read", arguments="{}") for c in item.get("calls", ())
            )
            msg = Message(
                role=item["role"],
                content=item["content"],
                tool_calls=calls,
                tool_call_id=item.get("result_of"),
            )
            out.append((msg, item))
        return out

    def encode(self, view: Sequence[Restored[Item]]) -> list[Item]:
        out: list[Item] = []
        for r in view:
            if r.origin is not None and r.exact:
                out.append(r.origin)
            elif r.origin is not None:
                out.append({**r.origin, "content": r.message.content})
            else:
                out.append({"role": r.message.role, "content": r.message.content, "new": True})
        return out


def conversation_items(turns: int, size: int = 20_000) -> list[Item]:
    items: list[Item] = [{"role": "user", "content": "Read every module.", "extra": "task"}]
    for i in range(turns):
        items.append({"role": "assistant", "content": "", "calls": [f"c{i}"], "extra": i})
        output = tool_output(f"m{i}.py", size)
        items.append({"role": "tool", "content": output, "result_of": f"c{i}", "extra": f"r{i}"})
    return items


def conversations(**options: Any) -> Conversations[Item, Item]:
    settings: CompactionOptions = {"context_window": 16_000, "spool": MemorySink()}
    settings.update(options)  # type: ignore[typeddict-item]
    return Conversations(ToyCodec(), settings)


MODULES = {
    "pydantic_ai": ("CompactionProcessor", "pydantic-ai"),
    "langchain": ("CompactionMiddleware", "langchain"),
    "openai_agents": ("CompactingSession", "openai-agents"),
}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_an_adapter_imports_without_its_framework_and_names_the_extra_when_used(
    module: str,
) -> None:
    name, extra = MODULES[module]
    code = (
        "import sys\n"
        "for m in ('pydantic_ai', 'langchain', 'langchain_core', 'langgraph', 'agents'):\n"
        "    sys.modules[m] = None\n"
        f"from compactor.adapters.{module} import {name}\n"
        "from compactor.adapters import MissingFrameworkError\n"
        "args = (None,) if "
        f"{name!r} == 'CompactingSession' else ()\n"
        "try:\n"
        f"    {name}(*args, context_window=1000)\n"
        "except MissingFrameworkError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert line.endswith(f"pip install 'compactlens[{extra}]'") and name in line


def test_a_kept_message_comes_back_as_its_item_and_a_written_one_is_new() -> None:
    conversation = conversations().get("conv")
    items = conversation_items(4, size=12_000)

    conversation.sync(items)
    view = conversation.prepare()

    assert conversation.session.records[-1].effective
    (written,) = [i for i in view if i.get("new")]
    assert written["content"].startswith("[Context Compaction]")
    kept = [i for i in view if not i.get("new")]
    assert kept and all(any(i is item for item in items) for i in kept)  # the very items


def test_an_offloaded_result_is_rebuilt_from_its_item(tmp_path: Path) -> None:
    config = CompactorConfig(tool_offload_threshold=4000)
    conversation = conversations(config=config, work_dir=tmp_path).get(None)
    items = conversation_items(3)

    conversation.sync(items)
    view = conversation.prepare()

    results = [i for i in view if i["role"] == "tool"]
    assert len(results) == 3
    for result, original in zip(results, items[2::2], strict=True):
        assert result is not original and result["content"].startswith("[offloaded: ")
        assert (result["result_of"], result["extra"]) == (original["result_of"], original["extra"])
    assert view[0] is items[0] and view[1] is items[1]


def test_only_the_items_after_the_last_known_one_are_new() -> None:
    conversation = conversations().get(None)
    items = conversation_items(2, size=100)
    conversation.sync(items)
    returned = conversation.prepare()

    later = [*returned, {"role": "assistant", "content": "done"}]
    assert conversation.new_items(later) == later[-1:]
    rebuilt = [dict(i) for i in items]  # a history read back from storage: equal, not the same
    assert conversation.new_items([*rebuilt, {"role": "user", "content": "next"}]) == [
        {"role": "user", "content": "next"}
    ]
    assert conversation.new_items([{"role": "user", "content": "unknown"}]) == [
        {"role": "user", "content": "unknown"}
    ]


def test_the_session_system_prompt_is_counted_but_not_handed_back() -> None:
    conversation = conversations().get(None, system="You read code.")
    conversation.sync([{"role": "user", "content": "hello"}])

    assert conversation.prepare() == [{"role": "user", "content": "hello"}]
    assert conversation.session.view()[0].content == "You read code."


def test_each_conversation_key_gets_a_session_id_of_its_own() -> None:
    named = conversations(session_id="s")
    assert named.get("a").session.session_id == "s"
    assert named.get("b").session.session_id == "s:b"
    assert named.get("a").session.session_id == "s"

    unnamed = conversations()
    assert unnamed.get("thread-9").session.session_id == "thread-9"
    first, second = unnamed.get(None).session.session_id, unnamed.get(None).session.session_id
    assert first == second and len(first) == 36  # one fresh UUID for the key-less conversation


def test_a_compactor_of_another_window_is_refused() -> None:
    compactor = ProgressiveCompactor(ExtractiveSummarizer(), 32_000)
    with pytest.raises(ValueError, match="context_window=16000 differs"):
        conversations(compactor=compactor)
    assert conversations(compactor=compactor, context_window=32_000).template is compactor


def test_usage_is_reported_once_per_view_sent() -> None:
    sink = MemorySink()
    conversation = conversations(spool=sink).get(None)
    conversation.sync([{"role": "user", "content": "hello"}])

    conversation.observe(Usage(input_tokens=10))  # no view sent yet: nothing to describe
    conversation.prepare()
    conversation.observe(Usage(input_tokens=10, output_tokens=3, model="m"))
    conversation.observe(Usage(input_tokens=11))

    (event,) = sink.of_type("usage_reported")
    assert isinstance(event.payload, UsageReported)
    assert (event.payload.input_tokens, event.payload.model) == (10, "m")


def test_a_session_the_spool_holds_is_resumed_without_recording_its_messages_again(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    items = conversation_items(2, size=100)
    first = conversations(spool=spool, session_id="kept")
    first.get(None).sync(items)
    first.get(None).prepare()
    first.close()

    later = conversations(spool=SpoolSink(spool), session_id="kept")
    copies = [dict(i) for i in items]
    later.get(None).sync([*copies, {"role": "user", "content": "new"}])
    later.close()

    appended = [
        line
        for path in spool.glob("*.jsonl")
        for line in path.read_text(encoding="utf-8").splitlines()
        if '"message_appended"' in line
    ]
    assert len(appended) == len(items) + 1
    assert len(later.get(None).session.history) == len(items) + 1


def test_a_spool_path_is_owned_and_closed_an_event_sink_is_not(tmp_path: Path) -> None:
    sink = MemorySink()
    conversations(spool=sink).close()
    assert sink.flushes == 0
    owned = conversations(spool=tmp_path / "spool", config=CompactorConfig())
    owned.get(None).sync([{"role": "user", "content": "hello"}])
    owned.close()
    assert list((tmp_path / "spool").glob("*.jsonl"))
