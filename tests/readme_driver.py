"""Runs the README's agent-loop example against a scripted model, with nothing but ``compactor``.

``tests/test_readme.py`` calls ``run_agent_loop`` in the test process, and
``tests/test_install.py`` runs this file as a script in a fresh virtual environment where only
``pip install <checkout>`` (no extras) has been done: it must import nothing outside the
standard library and ``compactor``. As a script it prints one JSON line of what happened.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from compactor import Message, TokenUsage, ToolCall

SECTION = "## Using the compactor in an agent loop"


def agent_loop_block(readme: Path) -> str:
    """The first ``python`` block of the README's agent-loop section."""
    section = readme.read_text(encoding="utf-8").split(SECTION, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    if match is None:
        raise AssertionError("the README lost its agent-loop example")
    return match.group(1)


class ScriptedModel:
    """Each call reads a file with a large result, until it has done ``turns`` calls."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.views: list[list[Message]] = []

    def __call__(self, view: list[Message]) -> tuple[Message, list[Message], TokenUsage, bool]:
        self.views.append(view)
        n = len(self.views)
        call = ToolCall(id=f"c{n}", name="read_file", arguments=f'{{"path": "src/m{n}.py"}}')
        reply = Message(role="assistant", content=f"Reading src/m{n}.py.", tool_calls=(call,))
        body = "\n".join(f"line {i} of src/m{n}.py" for i in range(2_000))
        result = Message(role="tool", tool_call_id=call.id, content=body)
        usage = TokenUsage(input_tokens=sum(len(m.content) for m in view) // 4)
        return reply, [result], usage, n >= self.turns


def run_agent_loop(readme: Path, turns: int) -> tuple[ScriptedModel, dict[str, object]]:
    """Executes the example (in the current folder) and returns the model and its namespace."""
    model = ScriptedModel(turns)
    namespace: dict[str, object] = {"call_your_model": model, "done": False}
    exec(compile(agent_loop_block(readme), str(readme), "exec"), namespace)
    return model, namespace


def main(readme: str, turns: str) -> None:
    model, namespace = run_agent_loop(Path(readme), int(turns))
    window = namespace["compactor"].context_window  # type: ignore[attr-defined]
    largest = max(sum(len(m.content) for m in v) // 4 for v in model.views)
    loaded = sorted(n for n in ("duckdb", "polars", "streamlit", "plotly") if n in sys.modules)
    print(
        json.dumps(
            {"calls": len(model.views), "largest_view": largest, "window": window, "loaded": loaded}
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
