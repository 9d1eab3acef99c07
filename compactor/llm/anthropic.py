"""``AnthropicChatModel``: the Anthropic Messages API through the ``anthropic`` SDK.

System messages are joined into the request's ``system`` field and tool results become
``tool_result`` blocks (``compactor.messages.messages_to_anthropic``); the answer's text blocks are
concatenated. The SDK is imported when the adapter is constructed, not when this module is
imported. Like the OpenAI adapter it returns whatever text the model wrote, garbage included.
"""

from __future__ import annotations

import json
from typing import Any

from compactor.llm.base import SDKChatModel, token_usage
from compactor.llm.failures import BadResponseError, excerpt
from compactor.messages import Message, messages_to_anthropic
from compactor.summaries.summarize import ChatCompletion

_NOT_A_MESSAGE = "check that base_url points at an Anthropic-compatible API root (without /v1)"


class AnthropicChatModel(SDKChatModel):
    """A ``ChatModel`` over ``messages.create`` of the official ``anthropic`` SDK.

    ``api_key`` and ``base_url`` fall back to the SDK's own resolution (``ANTHROPIC_API_KEY``,
    ``ANTHROPIC_BASE_URL``, profiles). ``timeout_s`` bounds every request, also with an injected
    ``client`` (an ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic``).
    """

    sdk_module = "anthropic"
    sync_client_class = "Anthropic"
    async_client_class = "AsyncAnthropic"
    endpoint_path = "/v1/messages"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 0,
        max_tokens: int = 4096,
        client: Any = None,
    ) -> None:
        super().__init__(
            model,
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            max_retries=max_retries,
            client=client,
        )
        self.max_tokens = max_tokens

    def _request_kwargs(self, messages: list[Message]) -> dict[str, Any]:
        system, wire = messages_to_anthropic(messages)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": wire,
            "timeout": self.timeout_s,
        }
        if system:
            kwargs["system"] = system
        return kwargs

    def _create(self, client: Any) -> Any:
        return client.messages.with_raw_response.create

    def _parse(self, body: dict[str, Any]) -> ChatCompletion:
        return parse_message(body, self.model)


def parse_message(body: dict[str, Any], requested_model: str) -> ChatCompletion:
    """Text, usage and model of a Messages API body; ``BadResponseError`` if unusable."""
    content = body.get("content")
    if not isinstance(content, list):
        raise BadResponseError(
            "malformed response: JSON is not a Messages API message (no 'content' list): "
            f"{excerpt(json.dumps(body))}",
            _NOT_A_MESSAGE,
        )
    blocks = [b for b in content if isinstance(b, dict)]
    texts = [
        b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    stop_reason = body.get("stop_reason")
    if not texts:
        kinds = [b.get("type") for b in blocks]
        raise BadResponseError(
            f"the response has no text blocks (block types {kinds}, stop_reason {stop_reason!r})",
            "check max_tokens and that the model answers in text",
        )
    text = "".join(texts)
    if not text.strip():
        raise BadResponseError(
            f"the completion text is empty ({text!r}, stop_reason {stop_reason!r})",
            "check max_tokens and that the model answers in text",
        )
    model = body.get("model")
    return ChatCompletion(
        text=text,
        usage=token_usage(body.get("usage"), "input_tokens", "output_tokens"),
        model=model if isinstance(model, str) and model else requested_model,
    )
