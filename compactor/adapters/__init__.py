"""Framework adapters: the compactor inside pydantic-ai, LangChain and the OpenAI Agents SDK.

Each lives in its own module and imports its framework only when used (one extra each:
``pip install 'compactlens[pydantic-ai]'``, ``[langchain]``, ``[openai-agents]``):

- ``compactor.adapters.pydantic_ai.CompactionProcessor``: a history processor for
  ``ProcessHistory``;
- ``compactor.adapters.langchain.CompactionMiddleware``: an ``AgentMiddleware`` for
  ``create_agent``;
- ``compactor.adapters.openai_agents.CompactingSession``: a ``Session`` wrapper.

This package imports none of them, so that importing it needs no framework.
"""

from compactor.adapters._common import CompactionOptions, MissingFrameworkError

__all__ = ["CompactionOptions", "MissingFrameworkError"]
