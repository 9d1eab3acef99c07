"""Translation of everything that can go wrong in an LLM call into one readable cause.

The adapters funnel every SDK exception and every unusable response body through here, so a
caller only ever sees ``ChatModelError`` with a message that says what happened and what to do.
This module never imports an SDK itself: it receives the SDK module and looks the exception
classes up by name (``openai`` and ``anthropic`` share the names).
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from compactor.errors import ChatModelError

INSTALL_HINT = "pip install 'compactlens[llm]'"
EXCERPT_CHARS = 200


@dataclass(frozen=True)
class Failure:
    """A cause (what happened) and advice (what to do), before the adapter context is added."""

    cause: str
    advice: str


class BadResponseError(Exception):
    """Raised by the body parsers for a 2xx response that is not a usable completion."""

    def __init__(self, cause: str, advice: str) -> None:
        super().__init__(cause)
        self.failure = Failure(cause, advice)


def import_sdk(module: str, adapter: str) -> ModuleType:
    """The SDK module, or ``ChatModelError`` naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ChatModelError(
            f"{adapter} needs the {module!r} package, which could not be imported ({exc}); "
            f"install the LLM extras: {INSTALL_HINT}"
        ) from exc


def excerpt(text: str | bytes, limit: int = EXCERPT_CHARS) -> str:
    """A short, single-line, quoted excerpt of a body for an error message."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[:limit] + "…"
    return repr(flat)


def decode_json_object(response: Any) -> dict[str, Any]:
    """The JSON object of an ``httpx`` response, or ``BadResponseError`` quoting the body."""
    content: bytes = response.content
    content_type = response.headers.get("content-type", "?")
    status = response.status_code
    try:
        body = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        raise BadResponseError(
            f"malformed response: body is not JSON (HTTP {status}, content-type {content_type}): "
            f"{excerpt(content)}",
            "check that base_url points at the API root of a compatible server",
        ) from None
    if not isinstance(body, dict):
        raise BadResponseError(
            f"malformed response: JSON body is a {type(body).__name__}, not an object: "
            f"{excerpt(content)}",
            "check that base_url points at the API root of a compatible server",
        )
    return body


def describe_exception(
    exc: BaseException, sdk: ModuleType, timeout_s: float, retries: int = 0
) -> Failure:
    """Cause and advice for an exception raised by an SDK call (after ``retries`` retries)."""
    failure = _describe(exc, sdk, timeout_s)
    retryable = isinstance(exc, sdk.APIConnectionError) or (
        isinstance(exc, sdk.APIStatusError) and (exc.status_code == 429 or exc.status_code >= 500)
    )
    if retries > 0 and retryable:
        return Failure(f"{failure.cause} (on the last of {retries + 1} attempts)", failure.advice)
    return failure


def _describe(exc: BaseException, sdk: ModuleType, timeout_s: float) -> Failure:
    if isinstance(exc, sdk.APITimeoutError):
        return Failure(
            f"request timed out after {timeout_s:g}s",
            "raise timeout_s or check that the server is not overloaded",
        )
    if isinstance(exc, sdk.APIConnectionError):
        reason = exc.__cause__ or exc.__context__ or exc
        return Failure(
            f"connection error: {type(reason).__name__}: {reason}",
            "check that the server is running and that base_url is right",
        )
    if isinstance(exc, sdk.APIStatusError):
        return _describe_status(exc.status_code, exc.response)
    if isinstance(exc, sdk.APIResponseValidationError):
        return Failure(
            f"malformed response: {exc}: {excerpt(exc.response.content)}",
            "check that base_url points at the API root of a compatible server",
        )
    message = str(exc) or "no message"
    if "auth" in message.lower() or "api_key" in message.lower():
        advice = "pass api_key= or set the provider's API key environment variable"
    else:
        advice = "check the adapter's arguments; this may be a bug in the SDK or the adapter"
    return Failure(f"{type(exc).__name__}: {message}", advice)


def _describe_status(status: int, response: Any) -> Failure:
    body = excerpt(response.content)
    cause = f"HTTP {status} from the server: {body}"
    if status in (401, 403):
        return Failure(cause, "check api_key (or the provider's API key environment variable)")
    if status == 404:
        return Failure(cause, "check the model name and base_url (the path up to the API root)")
    if status == 429:
        return Failure(cause, "the server is rate limiting; retry later or raise max_retries")
    if status >= 500:
        return Failure(cause, "the server failed; check its logs, retry later or raise max_retries")
    return Failure(cause, "the server rejected the request; check the model name and parameters")


def chat_model_error(adapter: str, model: str, endpoint: str, failure: Failure) -> ChatModelError:
    """The one error type callers see: adapter, model, endpoint, cause and advice."""
    return ChatModelError(
        f"{adapter} (model {model!r}, endpoint {endpoint}): {failure.cause}; {failure.advice}"
    )
