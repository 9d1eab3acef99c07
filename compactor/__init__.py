"""compactor: progressive context compaction for LLM agent loops.

The public surface (SPEC 3.1): every name a caller may import, re-exported explicitly. The event
schema is the documented module ``compactor.events``; every other module is internal.
"""

from compactor.config import CompactorConfig
from compactor.errors import (
    ChatModelError,
    CompactorError,
    CompactorInUseError,
    OffloadError,
    RecordStoreError,
    ResumeMismatchError,
    SessionInUseError,
    SummarizerError,
)
from compactor.llm import AnthropicChatModel, OpenAIChatModel
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
from compactor.otlp import OtlpSink
from compactor.pipeline.fallback import TokenBudgetCompactor
from compactor.pipeline.notify import format_notification
from compactor.pipeline.offload import CompactionOffloader, OffloadHook
from compactor.pipeline.pairs import repair_orphaned_tool_pairs, validate_history
from compactor.pipeline.progressive import ProgressiveCompactor
from compactor.protocols import (
    Compactor,
    ForceCompactor,
    MemoryExtractor,
    RecordedCompactor,
    TodoInjector,
)
from compactor.records import (
    CompactionRecord,
    CompactionTier,
    DroppedMessage,
    JsonlRecordStore,
    OffloadEntry,
    RecordStore,
    SummarizerStats,
)
from compactor.session import CompactionSession
from compactor.summaries.anchors import Anchor, AnchorType, merge_anchors, parse_anchors_and_summary
from compactor.summaries.extractive import ExtractiveSummarizer
from compactor.summaries.summarize import (
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
    OverheadCalibratedEstimator,
    TokenEstimator,
    estimate_tokens,
    estimate_tool_schema_tokens,
    message_bytes,
)
from compactor.writing.sinks import EventSink, MemorySink, SpoolSink, TeeSink

__all__ = [
    "Anchor",
    "AnchorType",
    "AnthropicChatModel",
    "ByteEstimator",
    "CalibratedEstimator",
    "ChatCompletion",
    "ChatModel",
    "ChatModelError",
    "CompactionOffloader",
    "CompactionRecord",
    "CompactionSession",
    "CompactionTier",
    "Compactor",
    "CompactorConfig",
    "CompactorError",
    "CompactorInUseError",
    "DroppedMessage",
    "EventSink",
    "ExtractiveSummarizer",
    "ForceCompactor",
    "JsonlRecordStore",
    "LLMSummarizer",
    "MemoryExtractor",
    "MemorySink",
    "Message",
    "OffloadEntry",
    "OffloadError",
    "OffloadHook",
    "OpenAIChatModel",
    "OtlpSink",
    "OverheadCalibratedEstimator",
    "PreviousCompaction",
    "ProgressiveCompactor",
    "RecordStore",
    "RecordStoreError",
    "RecordedCompactor",
    "ResumeMismatchError",
    "SessionInUseError",
    "SpoolSink",
    "Summarizer",
    "SummarizerError",
    "SummarizerStats",
    "SummaryResult",
    "TeeSink",
    "TodoInjector",
    "TokenBudgetCompactor",
    "TokenEstimator",
    "TokenUsage",
    "ToolCall",
    "estimate_tokens",
    "estimate_tool_schema_tokens",
    "format_notification",
    "from_openai",
    "merge_anchors",
    "message_bytes",
    "messages_from_anthropic",
    "messages_from_openai",
    "messages_to_anthropic",
    "messages_to_openai",
    "parse_anchors_and_summary",
    "repair_orphaned_tool_pairs",
    "to_openai",
    "validate_history",
]
