"""The machinery the SDK adapters share: lazy SDK import, client lifecycle, error funnel.

``SDKChatModel`` imports its SDK when it is constructed (never when ``compactor`` or
``compactor.llm`` is imported), builds its sync and async clients on first use, sends each request
through the SDK's raw-response interface and parses the JSON body itself, so that a malformed body
is reported with an excerpt instead of surfacing as a half-built SDK object. Every failure leaves
as ``ChatModelError``; cancellation (``asyncio.CancelledError``) is not a failure and propagates.
Subclasses supply the wire format; this module knows nothing about OpenAI or Anthropic.
"""

from __future__ import annotations

import asyncio
import threading
from types import ModuleType, TracebackType
from typing import Any, ClassVar, Self

from compactor.errors import ChatModelError
from compactor.llm.failures import (
    BadResponseError,
    Failure,
    chat_model_error,
    decode_json_object,
    describe_exception,
    import_sdk,
)
from compactor.messages import Message
from compactor.summaries.summarize import ChatCompletion, TokenUsage


class SDKChatModel:
    """A ``ChatModel`` backed by an official SDK client (see the subclasses)."""

    sdk_module: ClassVar[str]
    sync_client_class: ClassVar[str]
    async_client_class: ClassVar[str]
    endpoint_path: ClassVar[str]

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: str | None,
        timeout_s: float,
        max_retries: int,
        client: Any,
    ) -> None:
        if not model:
            raise ChatModelError(f"{type(self).__name__} needs a model name; got {model!r}")
        if timeout_s <= 0:
            raise ChatModelError(f"timeout_s must be positive; got {timeout_s!r}")
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._sdk: ModuleType = import_sdk(self.sdk_module, type(self).__name__)
        self._sync: Any = None
        self._async: Any = None
        self._owned: list[Any] = []
        self._lock = threading.Lock()
        self._injected = client is not None
        if client is not None:
            if self._is_async_client(client):
                self._async = client
            else:
                self._sync = client

    # ------------------------------------------------------------ what subclasses provide

    def _client_kwargs(self) -> dict[str, Any]:
        """Constructor arguments for a client built by the adapter."""
        return {
            "base_url": self.base_url,
            "api_key": self.api_key,
            "timeout": self.timeout_s,
            "max_retries": self.max_retries,
        }

    def _request_kwargs(self, messages: list[Message]) -> dict[str, Any]:
        raise NotImplementedError

    def _create(self, client: Any) -> Any:
        """The SDK's raw-response ``create`` method of ``client``."""
        raise NotImplementedError

    def _parse(self, body: dict[str, Any]) -> ChatCompletion:
        """A completion from the decoded body, or ``BadResponseError``."""
        raise NotImplementedError

    # ------------------------------------------------------------ the ChatModel protocol

    def complete(self, messages: list[Message]) -> ChatCompletion:
        """One completion for ``messages``; every failure is a ``ChatModelError``."""
        client = self._client(asynchronous=False)
        kwargs = self._request_kwargs(messages)
        try:
            raw = self._create(client)(**kwargs)
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._completion(raw.http_response)

    async def acomplete(self, messages: list[Message]) -> ChatCompletion:
        """``complete`` without blocking the event loop; cancellable."""
        if self._injected and self._async is None:
            # Only a sync client was injected: run it in a worker thread rather than build an
            # async client configured differently from the one the caller chose.
            return await asyncio.to_thread(self.complete, messages)
        client = self._client(asynchronous=True)
        kwargs = self._request_kwargs(messages)
        try:
            raw = await self._create(client)(**kwargs)
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._completion(raw.http_response)

    # ------------------------------------------------------------ lifecycle

    @property
    def endpoint(self) -> str:
        """The URL requests go to (the SDK's default when no base_url was given)."""
        client = self._sync if self._sync is not None else self._async
        resolved = getattr(client, "base_url", None)
        if resolved is None:
            base = self.base_url or f"<{self.sdk_module} SDK default base_url>"
        else:
            base = str(resolved)
        return f"{base.rstrip('/')}{self.endpoint_path}"

    def close(self) -> None:
        """Close the sync client this adapter built (injected clients are the caller's)."""
        for client in [c for c in self._owned if c is self._sync]:
            client.close()
            self._owned.remove(client)

    async def aclose(self) -> None:
        """Close every client this adapter built."""
        self.close()
        for client in list(self._owned):
            await client.close()
            self._owned.remove(client)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------ internals

    def _is_async_client(self, client: Any) -> bool:
        async_class = getattr(self._sdk, self.async_client_class, None)
        if async_class is not None and isinstance(client, async_class):
            return True
        # Provider variants (Bedrock, Vertex, …) do not all subclass the main async class.
        return type(client).__name__.startswith("Async")

    def _client(self, *, asynchronous: bool) -> Any:
        with self._lock:
            current = self._async if asynchronous else self._sync
            if current is not None:
                return current
            if self._injected:
                # The caller injected the other kind of client; building one here would
                # silently ignore the configuration they chose.
                raise self._error(
                    Failure(
                        "only an async client was given, so complete() cannot run",
                        "call acomplete(), or pass a sync client",
                    )
                )
            name = self.async_client_class if asynchronous else self.sync_client_class
            try:
                built = getattr(self._sdk, name)(**self._client_kwargs())
            except Exception as exc:
                raise self._failed(exc) from exc
            self._owned.append(built)
            if asynchronous:
                self._async = built
            else:
                self._sync = built
            return built

    def _completion(self, response: Any) -> ChatCompletion:
        try:
            completion = self._parse(decode_json_object(response))
        except BadResponseError as bad:
            raise self._error(bad.failure) from None
        if not completion.text.strip():
            raise self._error(
                Failure(
                    f"the completion text is empty ({completion.text!r})",
                    "check max_tokens and that the model answers in text",
                )
            )
        return completion

    def _failed(self, exc: Exception) -> ChatModelError:
        failure = describe_exception(exc, self._sdk, self.timeout_s, self.max_retries)
        return self._error(failure)

    def _error(self, failure: Failure) -> ChatModelError:
        return chat_model_error(type(self).__name__, self.model, self.endpoint, failure)


def token_usage(raw: Any, input_key: str, output_key: str) -> TokenUsage | None:
    """``TokenUsage`` from a body's usage object; ``None`` when it is absent or not counts."""
    if not isinstance(raw, dict):
        return None
    counts = [raw.get(input_key), raw.get(output_key)]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        return None
    return TokenUsage(input_tokens=counts[0], output_tokens=counts[1])
