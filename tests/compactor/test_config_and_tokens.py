"""Tests for CompactorConfig (defaults, validation, hash) and the token estimators.

Expected token figures are computed here from the documented definition (UTF-8 bytes of
content, tool-call ids, names, arguments and tool_call_id, integer-divided by 4), never typed in.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from pydantic import ValidationError

from compactor import (
    ByteEstimator,
    CalibratedEstimator,
    CompactorConfig,
    Message,
    TokenEstimator,
    ToolCall,
    estimate_tokens,
    estimate_tool_schema_tokens,
)
from compactor.tokens import message_bytes


def utf8(text: str) -> int:
    return len(text.encode("utf-8"))


# ---------------------------------------------------------------- CompactorConfig


def test_config_defaults_match_the_spec() -> None:
    config = CompactorConfig()

    assert (config.warn, config.soft, config.full, config.emergency) == (0.60, 0.70, 0.80, 0.95)
    assert config.offload_threshold == 4000
    assert config.preview_lines == 10
    assert config.min_tail_messages == 6


def test_config_is_frozen() -> None:
    config = CompactorConfig()

    with pytest.raises(ValidationError, match="frozen"):
        config.warn = 0.5  # type: ignore[misc]
    assert config.warn == 0.60


def test_config_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="warn_ratio"):
        CompactorConfig(warn_ratio=0.5)  # type: ignore[call-arg]


def test_thresholds_out_of_order_name_both_fields_and_the_rule() -> None:
    with pytest.raises(ValidationError) as info:
        CompactorConfig(warn=0.8, soft=0.7)

    message = str(info.value)
    assert "strictly increasing" in message
    assert "warn=0.8" in message
    assert "soft=0.7" in message


def test_equal_thresholds_are_rejected_as_not_strictly_increasing() -> None:
    with pytest.raises(ValidationError, match=r"strictly increasing.*full=0\.9.*emergency=0\.9"):
        CompactorConfig(full=0.9, emergency=0.9)


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("warn", 0.0, "greater than 0"),
        ("warn", -0.1, "greater than 0"),
        ("emergency", 1.5, "less than or equal to 1"),
        ("soft", 1.01, "less than or equal to 1"),
    ],
)
def test_threshold_out_of_range_names_the_field_and_the_bound(
    field: str, value: float, rule: str
) -> None:
    with pytest.raises(ValidationError) as info:
        CompactorConfig.model_validate({field: value})

    errors = info.value.errors()
    assert any(e["loc"] == (field,) for e in errors)
    assert field in str(info.value)
    assert rule in str(info.value)


@pytest.mark.parametrize("fallback_target", [0.60, 0.65])
def test_fallback_target_at_or_above_warn_is_rejected(fallback_target: float) -> None:
    with pytest.raises(ValidationError) as info:
        CompactorConfig(fallback_target=fallback_target)

    message = str(info.value)
    assert "fallback_target" in message
    assert "warn=0.6" in message


def test_fallback_target_just_below_warn_is_accepted() -> None:
    assert CompactorConfig(fallback_target=0.59).fallback_target == 0.59


def test_emergency_target_at_or_above_emergency_is_rejected() -> None:
    with pytest.raises(ValidationError, match="emergency_target"):
        CompactorConfig(emergency_target=0.95)


def test_config_hash_is_stable_for_equal_configs() -> None:
    a = CompactorConfig(warn=0.5, soft=0.6, full=0.7, emergency=0.9, fallback_target=0.4)
    b = CompactorConfig(warn=0.5, soft=0.6, full=0.7, emergency=0.9, fallback_target=0.4)

    assert a.config_hash() == b.config_hash()
    assert a.config_hash() == a.config_hash()
    assert len(a.config_hash()) == 12
    int(a.config_hash(), 16)  # hex digits only


@pytest.mark.parametrize(
    "changes",
    [
        {"offload_threshold": 4001},
        {"min_tail_messages": 7},
        {"warn": 0.61},
        {"reserve_tokens": 100},
    ],
)
def test_config_hash_differs_when_any_value_differs(changes: dict[str, Any]) -> None:
    assert CompactorConfig(**changes).config_hash() != CompactorConfig().config_hash()


# ---------------------------------------------------------------- estimate_tokens


def test_estimate_tokens_counts_utf8_bytes_of_content_and_tool_fields() -> None:
    content = "修复 src/缓存.py 里的错误"  # CJK: three bytes per character
    args = json.dumps({"path": "src/缓存.py"}, ensure_ascii=False)
    msgs = [
        Message(role="user", content=content),
        Message(
            role="assistant",
            content="读取文件",
            tool_calls=(
                ToolCall(id="call_甲", name="read_file", arguments=args),
                ToolCall(id="call_2", name="bash", arguments='{"command": "ls"}'),
            ),
        ),
        Message(role="tool", tool_call_id="call_甲", content="内容" * 7),
    ]
    expected_bytes = (
        utf8(content)
        + utf8("读取文件")
        + utf8("call_甲")
        + utf8("read_file")
        + utf8(args)
        + utf8("call_2")
        + utf8("bash")
        + utf8('{"command": "ls"}')
        + utf8("call_甲")
        + utf8("内容" * 7)
    )

    assert utf8(content) > len(content)  # the test really exercises multi-byte text
    assert sum(message_bytes(m) for m in msgs) == expected_bytes
    assert estimate_tokens(msgs) == expected_bytes // 4


def test_estimate_tokens_floors_the_total_not_each_message() -> None:
    # Three messages of 3 bytes: per-message flooring would give 0, the definition gives 9 // 4.
    msgs = [Message(role="user", content="abc")] * 3

    assert estimate_tokens(msgs) == (3 * 3) // 4 == 2


def test_estimate_tokens_of_nothing_is_zero() -> None:
    assert estimate_tokens([]) == 0
    assert estimate_tokens([Message(role="assistant")]) == 0


def schema(description: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": description,
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]


def test_estimate_tool_schema_tokens_counts_compact_json_bytes() -> None:
    tools = schema("Read one file from the workspace")
    compact = json.dumps(tools, separators=(",", ":"))

    assert estimate_tool_schema_tokens(tools) == utf8(compact) // 4
    assert estimate_tool_schema_tokens([]) == utf8("[]") // 4
    assert estimate_tool_schema_tokens(tools * 2) > estimate_tool_schema_tokens(tools)


def test_estimate_tool_schema_tokens_counts_non_ascii_text_as_utf8_bytes() -> None:
    tools = schema("读取一个文件")
    compact = json.dumps(tools, separators=(",", ":"), ensure_ascii=False)

    assert estimate_tool_schema_tokens(tools) == utf8(compact) // 4


# ---------------------------------------------------------------- estimators


def test_byte_estimator_is_bytes_over_four() -> None:
    estimator = ByteEstimator()

    assert isinstance(estimator, TokenEstimator)
    assert estimator.tokens_for_bytes(4003) == 4003 // 4
    assert estimator.name == "bytes/4"


def test_calibrated_estimator_first_observation_sets_the_ratio() -> None:
    estimator = CalibratedEstimator()

    estimator.observe(1000, 1300)

    assert estimator.factor == pytest.approx(1300 / 1000)
    assert estimator.observations == 1
    assert estimator.tokens_for_bytes(8000) == int((8000 // 4) * (1300 / 1000))
    assert isinstance(estimator, TokenEstimator)


def test_calibrated_estimator_converges_toward_reported_over_estimated() -> None:
    estimator = CalibratedEstimator(alpha=0.3)
    estimator.observe(1000, 1000)
    target = 1700 / 1000
    distances = []

    for _ in range(30):
        estimator.observe(1000, 1700)
        distances.append(abs(estimator.factor - target))

    assert all(later < earlier for earlier, later in itertools.pairwise(distances))
    assert distances[-1] < 1e-3
    assert f"{estimator.factor:.3f}" in estimator.name


@pytest.mark.parametrize(
    ("estimated", "reported", "clamped"),
    [(100, 10_000, 4.0), (10_000, 1, 0.25)],
)
def test_calibrated_estimator_clamps_the_factor(
    estimated: int, reported: int, clamped: float
) -> None:
    estimator = CalibratedEstimator()

    for _ in range(5):
        estimator.observe(estimated, reported)

    assert estimator.factor == pytest.approx(clamped)


def test_calibrated_estimator_ignores_non_positive_observations() -> None:
    estimator = CalibratedEstimator(initial_factor=1.5)

    estimator.observe(0, 100)
    estimator.observe(100, 0)
    estimator.observe(-5, 100)

    assert estimator.observations == 0
    assert estimator.factor == 1.5


@pytest.mark.parametrize("alpha", [0.0, -0.5, 1.5])
def test_calibrated_estimator_rejects_alpha_outside_unit_interval(alpha: float) -> None:
    with pytest.raises(ValueError, match="alpha"):
        CalibratedEstimator(alpha=alpha)
