"""The memory app's models, defined in its packages (Django and the
migrations find them here)."""

from memory.blocks.models import (
    ApprovalStatus,
    BlockApproval,
    BlockAttachment,
    BlockSeen,
    BlockSnapshot,
    BlockType,
    BlockUpdate,
    MemoryBlock,
    Permission,
    SharedAccess,
)
from memory.longterm.models import (
    ArchivalEntry,
    ArchivalLifetime,
    ArchivalSource,
    ArchivalTier,
    CompressionKind,
    ConsolidationRun,
    ContextConfig,
    Conversation,
    ConversationStatus,
    Message,
    MessageRole,
    RetrievalConfig,
)
from memory.scratchpad.models import ScratchpadEntry
from memory.search.registry import EmbeddingState

__all__ = [
    "ApprovalStatus",
    "ArchivalEntry",
    "ArchivalLifetime",
    "ArchivalSource",
    "ArchivalTier",
    "BlockApproval",
    "BlockAttachment",
    "BlockSeen",
    "BlockSnapshot",
    "BlockType",
    "BlockUpdate",
    "CompressionKind",
    "ConsolidationRun",
    "ContextConfig",
    "Conversation",
    "ConversationStatus",
    "EmbeddingState",
    "MemoryBlock",
    "Message",
    "MessageRole",
    "Permission",
    "RetrievalConfig",
    "ScratchpadEntry",
    "SharedAccess",
]
