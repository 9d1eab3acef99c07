"""LLM adapters for the ``ChatModel`` protocol: OpenAI-compatible endpoints and Anthropic.

Optional extras (``pip install 'compactlens[llm]'``). Importing this package imports neither SDK:
each adapter imports its SDK when it is constructed and raises ``ChatModelError`` with the install
command when the SDK is missing. Every failure of a call is a ``ChatModelError``.
"""

from compactor.llm.anthropic import AnthropicChatModel
from compactor.llm.openai import OpenAIChatModel

__all__ = ["AnthropicChatModel", "OpenAIChatModel"]
