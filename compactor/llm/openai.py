"""``OpenAIChatModel``: any OpenAI-compatible chat-completions endpoint through the ``openai`` SDK.

OpenAI itself, vLLM, Ollama and the llama.cpp server all speak ``POST {base_url}/chat/completions``;
point ``base_url`` at the API root (e.g. ``http://localhost:11434/v1``). The SDK is imported when
the adapter is constructed, not when this module is imported. The adapter returns whatever text
the model wrote, garbage included: judging a summary is the compactor's job, not the transport's.
"""

from __future__ import annotations

import json
import os
from typing import Any

from compactor.llm.base import SDKChatModel, token_usage
from compactor.llm.failures import BadResponseError, excerpt
from compactor.messages import Message, messages_to_openai
from compactor.summaries.summarize import ChatCompletion

# Local servers ignore the key, but the SDK refuses to build a client without one.
PLACEHOLDER_API_KEY = "not-needed"
_NOT_A_COMPLETION = "check that base_url points at an OpenAI-compatible API root (often …/v1)"


class OpenAIChatModel(SDKChatModel):
    """A ``ChatModel`` over ``chat.completions.create`` of the official ``openai`` SDK.

    ``api_key`` falls back to ``OPENAI_API_KEY``, then to a placeholder (local servers need none);
    ``base_url`` falls back to ``OPENAI_BASE_URL``, then to OpenAI. ``timeout_s`` bounds every
    request, also with an injected ``client`` (an ``openai.OpenAI`` or ``openai.AsyncOpenAI``).
    ``max_tokens`` is sent as ``max_tokens``, which every compatible server understands.
    """

    sdk_module = "openai"
    sync_client_class = "OpenAI"
    async_client_class = "AsyncOpenAI"
    endpoint_path = "/chat/completions"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 0,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
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
        self.temperature = temperature

    def _client_kwargs(self) -> dict[str, Any]:
        kwargs = super()._client_kwargs()
        if not self.api_key and not os.environ.get("OPENAI_API_KEY"):
            kwargs["api_key"] = PLACEHOLDER_API_KEY
        return kwargs

    def _request_kwargs(self, messages: list[Message]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages_to_openai(messages),
            "timeout": self.timeout_s,
        }
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        return kwargs

    def _create(self, client: Any) -> Any:
        return client.chat.completions.with_raw_response.create

    def _parse(self, body: dict[str, Any]) -> ChatCompletion:
        return parse_chat_completion(body, self.model)


def parse_chat_completion(body: dict[str, Any], requested_model: str) -> ChatCompletion:
    """Text, usage and model of a chat-completions body; ``BadResponseError`` if unusable."""
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise BadResponseError(
            "malformed response: JSON is not a chat completion (no non-empty 'choices' list): "
            f"{excerpt(json.dumps(body))}",
            _NOT_A_COMPLETION,
        )
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise BadResponseError(
            f"malformed response: the first choice has no 'message' object: {excerpt(str(first))}",
            _NOT_A_COMPLETION,
        )
    text = _content_text(message.get("content"))
    if text is None:
        if message.get("tool_calls"):
            raise BadResponseError(
                "the model answered with tool calls instead of text",
                "use a model or server configuration that answers plain chat without tools",
            )
        raise BadResponseError(
            f"malformed response: the first choice's message has no text 'content': "
            f"{excerpt(json.dumps(message))}",
            _NOT_A_COMPLETION,
        )
    if not text.strip():
        raise BadResponseError(
            f"the completion text is empty ({text!r}, finish_reason "
            f"{first.get('finish_reason')!r})",
            "check max_tokens and that the model answers in text",
        )
    model = body.get("model")
    return ChatCompletion(
        text=text,
        usage=token_usage(body.get("usage"), "prompt_tokens", "completion_tokens"),
        model=model if isinstance(model, str) and model else requested_model,
    )


def _content_text(content: Any) -> str | None:
    """Message content as text: a string, or the text parts some servers send as a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        texts = [t for t in parts if isinstance(t, str)]
        return "".join(texts) if texts else None
    return None
