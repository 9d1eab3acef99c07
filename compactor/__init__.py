"""compactor: progressive context compaction for LLM agent loops.

The public surface: every name a caller may import, re-exported explicitly. Nothing else here.
"""

from compactor.anchors import Anchor, AnchorType, merge_anchors, parse_anchors_and_summary
from compactor.config import CompactorConfig
from compactor.errors import (
    ChatModelError,
    CompactorError,
    OffloadError,
    RecordStoreError,
    SummarizerError,
)
from compactor.messages import (
    Message,
    ToolCall,
    from_openai,
    messages_from_anthropic,
    messages_from_openai,
    messages_to_anthropic,
    messages_to_openai,
    to_openai,
)
from compactor.offload import CompactionOffloader, OffloadHook
from compactor.records import (
    CompactionRecord,
    CompactionTier,
    JsonlRecordStore,
    OffloadEntry,
    RecordStore,
)
from compactor.summarize import (
    ChatCompletion,
    ChatModel,
    LLMSummarizer,
    PreviousCompaction,
    Summarizer,
    SummaryResult,
    TokenUsage,
)
from compactor.tokens import (
    ByteEstimator,
    CalibratedEstimator,
    TokenEstimator,
    estimate_tokens,
    estimate_tool_schema_tokens,
)

__all__ = [
    "Anchor",
    "AnchorType",
    "ByteEstimator",
    "CalibratedEstimator",
    "ChatCompletion",
    "ChatModel",
    "ChatModelError",
    "CompactionOffloader",
    "CompactionRecord",
    "CompactionTier",
    "CompactorConfig",
    "CompactorError",
    "JsonlRecordStore",
    "LLMSummarizer",
    "Message",
    "OffloadEntry",
    "OffloadError",
    "OffloadHook",
    "PreviousCompaction",
    "RecordStore",
    "RecordStoreError",
    "Summarizer",
    "SummarizerError",
    "SummaryResult",
    "TokenEstimator",
    "TokenUsage",
    "ToolCall",
    "estimate_tokens",
    "estimate_tool_schema_tokens",
    "from_openai",
    "merge_anchors",
    "messages_from_anthropic",
    "messages_from_openai",
    "messages_to_anthropic",
    "messages_to_openai",
    "parse_anchors_and_summary",
    "to_openai",
]
