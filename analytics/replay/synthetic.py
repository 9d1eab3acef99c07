"""A deterministic, seeded generator of realistic coding-agent sessions for demos and benchmarks.

A session reads files, lists directories, runs tests that fail and then pass, greps, edits,
and states decisions and plans, with tool results of realistic sizes (some far above the offload
threshold). Same seed, same session, byte for byte. It writes nothing and calls nothing.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from compactor import Message, ToolCall

SYSTEM_PROMPT = (
    "You are a careful coding agent working in a Python repository. Use the tools to read, "
    "search, edit and test code. Explain decisions briefly before acting."
)

_MODULES = [
    "api/routes.py",
    "api/auth.py",
    "core/models.py",
    "core/cache.py",
    "core/db.py",
    "services/billing.py",
    "services/email.py",
    "utils/dates.py",
    "cli/main.py",
    "tests/test_routes.py",
    "tests/test_cache.py",
    "tests/test_billing.py",
]
_TASKS = [
    "Fix the flaky cache invalidation bug in core/cache.py: stale entries survive a write "
    "and tests/test_cache.py::test_write_invalidates fails about one run in five.",
    "Add rate limiting to the login endpoint in api/auth.py (5 attempts per minute per IP) "
    "with tests, without breaking the existing session handling.",
    "Billing totals are off by one cent for some invoices; find the rounding error in "
    "services/billing.py and make tests/test_billing.py pass.",
]
_REQUESTS = [
    "Also add a docstring to every public function you touch.",
    "Please keep the changelog entry short, one line.",
    "Also make sure the CLI still runs on Python 3.11.",
    "Don't change the database schema in this pull request.",
    "Please add a test for the empty input case too.",
    "Also rename the helper to something that says what it does.",
    "Make the error message name the offending file.",
]
"""Follow-up requests a user makes mid-session: what a summary must not silently lose."""

_DECISIONS = [
    "I'll use a monotonic clock instead of time.time() so the TTL check is not affected by "
    "clock changes.",
    "Decided to keep the public API unchanged and fix this inside the cache layer.",
    "Going with Decimal for money arithmetic instead of float rounding.",
    "I will add a regression test first, then change the implementation.",
    "Let's use a token bucket per IP rather than a fixed window, since bursts are expected.",
    "Decided to invalidate on write rather than on read, so stale entries never survive.",
    "I'll switch the retry loop to exponential backoff with jitter.",
    "Going with a per-request database session instead of a global one.",
    "We should store timestamps in UTC and convert only for display.",
    "I'll use a dataclass for the invoice line instead of a plain dict.",
    "Decided to keep the old endpoint as a deprecated alias for one release.",
    "Going with pytest parametrisation rather than one test per rounding case.",
    "I'll use a lock around the cache refill so two writers cannot race.",
    "We should log the rejected login attempts at warning level, not error.",
]


@dataclass
class _Ids:
    n: int = 0

    def next(self) -> str:
        self.n += 1
        return f"call_{self.n:05d}"


def _python_file(rng: random.Random, path: str, lines: int) -> str:
    out = [f'"""{path}: generated module."""', "", "from __future__ import annotations", ""]
    for i in range(lines // 6):
        name = rng.choice(["load", "save", "compute", "check", "render", "parse"])
        out += [
            f"def {name}_{i}(value: int) -> int:",
            f'    """Step {i} of {path}."""',
            f"    result = value * {rng.randint(2, 97)} + {rng.randint(0, 999)}",
            "    if result % 7 == 0:",
            "        return result // 7",
            "    return result",
        ]
    return "\n".join(out) + "\n"


def _ls(rng: random.Random, folder: str, n: int) -> str:
    rows = [f"total {n * 8}"]
    for i in range(n):
        size = rng.randint(120, 98_000)
        rows.append(
            f"-rw-r--r--  1 dev  staff  {size:>6}  Nov {rng.randint(1, 28):>2} "
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}  {folder}/file_{i:03d}.py"
        )
    return "\n".join(rows) + "\n"


def _pytest(rng: random.Random, test_file: str, failing: bool) -> tuple[str, bool]:
    n = rng.randint(12, 60)
    dots = "".join("F" if failing and i == n // 2 else "." for i in range(n))
    text = [
        "============ test session starts ============",
        f"collected {n} items",
        "",
        f"{test_file} {dots}",
    ]
    if failing:
        text += [
            "",
            "================= FAILURES =================",
            "___________ test_write_invalidates ___________",
            "Traceback (most recent call last):",
            f'  File "{test_file}", line {rng.randint(20, 200)}, in test_write_invalidates',
            "    assert cache.get(key) == new_value",
            f"AssertionError: assert {rng.randint(1, 99)} == {rng.randint(100, 200)}",
            f"FAILED {test_file}::test_write_invalidates - AssertionError",
            f"========= 1 failed, {n - 1} passed in {rng.uniform(0.5, 9):.2f}s =========",
            "exit code 1",
        ]
    else:
        text += [f"========= {n} passed in {rng.uniform(0.5, 9):.2f}s =========", "exit code 0"]
    return "\n".join(text) + "\n", failing


def _call(ids: _Ids, name: str, **args: str) -> ToolCall:
    return ToolCall(id=ids.next(), name=name, arguments=json.dumps(args))


def generate_session(
    seed: int = 7,
    *,
    steps: int = 60,
    huge_result_bytes: int = 0,
    offload_dir: str = "",
    follow_ups: int = 0,
) -> list[Message]:
    """A system prompt, a task, then ``steps`` agent steps (each an assistant turn with 1-3
    tool calls and their results), ending with a summary message.

    With ``follow_ups``, that many distinct follow-up requests (up to ``len(_REQUESTS)``) come
    at steps spread over the first two thirds of the session, besides any the seed brings:
    more than a summary keeps, so the oldest is forgotten without a word (a silent drop).

    With ``huge_result_bytes``, the build-log step returns a result of that size (the single
    huge result that pushes a context past Emergency), and the agent later reads part of it
    back from ``<offload_dir>/<call id>.txt``, as it would from an offload placeholder."""
    rng = random.Random(seed)
    ids = _Ids()
    task = rng.choice(_TASKS)
    msgs = [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=task)]
    fixed_at = rng.randint(steps // 2, steps - 5)
    flood_at = rng.randint(steps * 3 // 4, steps - 2)
    asked = rng.sample(_REQUESTS, min(follow_ups, len(_REQUESTS)))
    ask_at = {1 + i * (steps * 2 // 3) // max(len(asked), 1): r for i, r in enumerate(asked)}
    for step in range(steps):
        if step in ask_at:
            msgs.append(Message(role="assistant", content="Done with that part."))
            msgs.append(Message(role="user", content=ask_at[step]))
        if step == flood_at:
            flood = _build_log_flood(rng, ids, huge_result_bytes)
            msgs.extend(flood)
            if huge_result_bytes and offload_dir:
                msgs.extend(_read_back(ids, flood[-1], offload_dir))
            continue
        kind = rng.choices(
            ["read", "ls", "test", "grep", "edit", "think"], weights=[5, 2, 3, 3, 2, 2]
        )[0]
        if step == fixed_at:
            kind = "test"
        if kind == "think":
            text = (
                rng.choice(_DECISIONS) + " Next I will run the tests again and then check "
                f"{rng.choice(_MODULES)}."
            )
            msgs.append(Message(role="assistant", content=text))
            if rng.random() < 0.3:
                msgs.append(Message(role="user", content="Sounds good, go ahead."))
            elif rng.random() < 0.5:
                msgs.append(Message(role="user", content=rng.choice(_REQUESTS)))
            continue
        calls, results = _tool_step(rng, ids, kind, failing=step < fixed_at)
        lead = rng.choice(
            [
                "Let me look at this.",
                "Checking the code path.",
                "Running the relevant tests.",
                rng.choice(_DECISIONS),
            ]
        )
        msgs.append(Message(role="assistant", content=lead, tool_calls=tuple(calls)))
        msgs.extend(results)
    msgs.append(
        Message(
            role="assistant",
            content="The fix is in place and every test passes. "
            "Next steps: open a pull request and ask for review.",
        )
    )
    return msgs


def _build_log_flood(rng: random.Random, ids: _Ids, size: int = 0) -> list[Message]:
    """One verbose build: the kind of single huge result that pushes a context past 95%."""
    call = _call(ids, "bash", command="make build VERBOSE=1")
    count = size // 80 if size else rng.randint(700, 900)
    lines = [
        f"[{i:05d}] cc -O2 -c src/module_{i % 97}.c -o build/module_{i % 97}.o "
        f"-Iinclude -DLEVEL={rng.randint(0, 9)}"
        for i in range(count)
    ]
    lines.append("build finished with 3 warnings")
    return [
        Message(role="assistant", content="Let me rebuild to be sure.", tool_calls=(call,)),
        Message(role="tool", tool_call_id=call.id, name="bash", content="\n".join(lines)),
    ]


def _read_back(ids: _Ids, result: Message, offload_dir: str) -> list[Message]:
    """The agent reads the end of an offloaded result back, by the path the placeholder gave."""
    path = f"{offload_dir.rstrip('/')}/{result.tool_call_id}.txt"
    call = _call(ids, "bash", command=f"tail -n 20 {path}")
    tail = "\n".join(result.content.splitlines()[-20:])
    return [
        Message(
            role="assistant",
            content="The build log was offloaded; reading its last lines back.",
            tool_calls=(call,),
        ),
        Message(role="tool", tool_call_id=call.id, name="bash", content=tail),
    ]


def _tool_step(
    rng: random.Random, ids: _Ids, kind: str, failing: bool
) -> tuple[list[ToolCall], list[Message]]:
    calls: list[ToolCall] = []
    results: list[Message] = []
    for _ in range(rng.choice([1, 1, 1, 2, 3]) if kind in ("read", "grep") else 1):
        path = rng.choice(_MODULES)
        is_error = False
        if kind == "read":
            call = _call(ids, "read_file", path=path)
            out = _python_file(rng, path, rng.choice([40, 120, 400, 900]))
        elif kind == "ls":
            folder = path.split("/")[0]
            call = _call(ids, "bash", command=f"ls -la {folder}")
            out = _ls(rng, folder, rng.choice([20, 80, 250]))
        elif kind == "test":
            test_file = rng.choice([m for m in _MODULES if m.startswith("tests/")])
            call = _call(ids, "bash", command=f"pytest -x {test_file}")
            out, is_error = _pytest(rng, test_file, failing)
        elif kind == "grep":
            word = rng.choice(["invalidate", "round", "session", "ttl", "limit"])
            call = _call(ids, "grep", pattern=word, path=".")
            out = (
                "\n".join(
                    f"{rng.choice(_MODULES)}:{rng.randint(1, 400)}:    {word}(x)"
                    for _ in range(rng.randint(3, 60))
                )
                + "\n"
            )
        else:
            call = _call(
                ids, "edit_file", path=path, old="return result", new="return max(result, 0)"
            )
            out = f"Edited {path}: 1 replacement"
        calls.append(call)
        results.append(
            Message(
                role="tool", tool_call_id=call.id, name=call.name, content=out, is_error=is_error
            )
        )
    return calls, results
