"""Request and response bodies of the memory endpoints."""

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from ninja import Field, Schema


class BlockSummaryOut(Schema):
    id: UUID
    label: str
    description: str
    block_type: str
    permission: str
    access: str = Field(description="Your effective right: read, append or write.")
    approval_required: bool
    owner_id: int | None
    owner: str | None
    shared_from: str | None
    pinned: bool
    size: int
    char_limit: int
    updated_at: datetime


class BlockOut(BlockSummaryOut):
    schema_: dict[str, Any] = Field(alias="schema")
    rendered: str
    content: Any = Field(description="Structured content, shaped by the schema.")


class BlockCreateIn(Schema):
    label: str = Field(min_length=1, max_length=100)
    agent_id: int | None = Field(
        None, description="Owner; agents may omit it (themselves)."
    )
    constellation_id: int | None = Field(
        None, description="For a constellation-level block (humans only)."
    )
    template: (
        Literal["persona", "human", "scratchpad", "organization", "custom"] | None
    ) = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    description: str | None = None
    block_type: Literal["core", "working", "archival", "log"] | None = None
    permission: Literal[
        "read_only", "partner", "human", "append", "read_write", "admin"
    ] = "read_write"
    char_limit: int | None = Field(None, gt=0, le=1_000_000)
    pinned: bool = False
    content: Any = None


class BlockPatchIn(Schema):
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    permission: (
        Literal["read_only", "partner", "human", "append", "read_write", "admin"] | None
    ) = None
    pinned: bool | None = None
    block_type: Literal["core", "working", "archival", "log"] | None = None
    char_limit: int | None = Field(None, gt=0, le=1_000_000)


class OperationsIn(Schema):
    operations: list[dict[str, Any]] = Field(
        min_length=1,
        description=(
            "Schema operations, e.g. {'op': 'append_text', 'text': '...'}, "
            "{'op': 'set_field', 'field': 'mood', 'value': 'calm'}, "
            "{'op': 'push_item', 'item': '...'}; composite blocks add 'section'."
        ),
    )
    summary: str | None = Field(None, max_length=300)


class ChangeOut(Schema):
    status: Literal["applied", "unchanged", "pending_approval", "moved"]
    message: str
    block_id: UUID
    label: str
    size: int
    char_limit: int
    version_id: int | None = None
    approval_id: int | None = None


class VersionOut(Schema):
    id: int
    created_at: datetime
    actor_kind: str
    actor_id: str
    actor_name: str
    summary: str
    size: int


class VersionViewOut(Schema):
    version: VersionOut
    rendered: str
    content: Any


class DiffOut(Schema):
    kind: Literal["text", "fields"]
    unified: str | None = None
    changes: list[dict[str, Any]] | None = None


class RollbackIn(Schema):
    version_id: int


class ShareIn(Schema):
    agent_id: int
    access: Literal["read_only", "append_only", "read_write"]


class AttachmentOut(Schema):
    agent_id: int
    agent: str
    access: str
    attached_at: datetime


class ApprovalOut(Schema):
    id: int
    block_id: UUID
    label: str
    agent_id: int
    agent: str
    operations: list[dict[str, Any]]
    summary: str
    status: str
    decided_by: str
    decided_at: datetime | None
    result: str
    created_at: datetime


class DecisionIn(Schema):
    approve: bool


class ImportOut(Schema):
    created: list[BlockSummaryOut]


# --- tools -------------------------------------------------------------------------


class ContextToolIn(Schema):
    operation: Literal["append", "replace", "archive", "load", "swap"]
    label: str = Field(description="The block to act on (for swap: the working one).")
    content: str | None = Field(None, description="append: the text to add.")
    old: str | None = Field(None, description="replace: the exact text to find.")
    new: str | None = Field(None, description="replace: its replacement.")
    section: str | None = Field(None, description="Section of a composite block.")
    archival_label: str | None = Field(
        None, description="swap: the archival block to bring into working memory."
    )


class CoreMemoryIn(Schema):
    label: str = Field(description='Which block: "persona", "human", ...')
    content: str


class ToolRuleIn(Schema):
    tool: str
    kind: Literal[
        "start_constraint", "exit_loop", "continue_loop", "max_calls", "requires_prior"
    ]
    value: int | str | None = None


class ContextBuildIn(Schema):
    agent_id: int | None = Field(None, description="Agents may omit it (themselves).")
    batch_block_ids: list[str] = Field(
        default_factory=list,
        description="Ids or labels of working blocks to include for this request.",
    )
    base_instructions: str | None = None
    tool_rules: list[ToolRuleIn] = Field(default_factory=list)
    model: str | None = None
    include_descriptions: bool = True


class SectionOut(Schema):
    name: str
    text: str
    tokens: int
    blocks: list[str]


class ContextOut(Schema):
    system_prompt: str
    sections: list[SectionOut]
    metadata: dict[str, Any]


SearchDomain = Literal[
    "archival_memory", "conversations", "constellation_messages", "all"
]
SearchModeIn = Literal["fts", "vector", "hybrid", "auto"]


class ArchivalEntryIn(Schema):
    content: str
    tags: list[str] = []
    metadata: dict[str, Any] = {}
    importance: float = Field(0.5, ge=0.0, le=1.0)
    label: str | None = None
    agent_id: int | None = Field(
        None, description="Humans: whose memory. Agents: omit (their own)."
    )


class ArchivalEntryPatchIn(Schema):
    content: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    importance: float | None = Field(None, ge=0.0, le=1.0)
    label: str | None = None


class ArchivalEntryOut(Schema):
    id: int
    agent_id: int
    label: str | None
    content: str
    tags: list[str]
    metadata: dict[str, Any]
    importance: float
    source: str
    access_count: int
    accessed_at: datetime | None
    created_at: datetime
    updated_at: datetime
    embedding_state: str


class ArchivalPageOut(Schema):
    count: int
    results: list[ArchivalEntryOut]


class SearchFiltersIn(Schema):
    agent_id: int | None = None
    tags: list[str] = []
    metadata_keys: list[str] = []
    since: datetime | None = None
    until: datetime | None = None
    role: Literal["user", "assistant", "tool", "system"] | None = None
    conversation_id: int | None = None


class SearchIn(Schema):
    query: str = Field(..., description="Any text; FTS syntax is taken literally.")
    domain: SearchDomain = "archival_memory"
    mode: SearchModeIn = "auto"
    limit: int = Field(10, ge=1, le=50)
    filters: SearchFiltersIn = SearchFiltersIn()
    constellation_id: int | None = Field(
        None, description="Humans in several constellations: which one."
    )


class ScoresOut(Schema):
    fts_rank: int | None
    bm25: float | None
    vector_rank: int | None
    vector_distance: float | None
    fused: float
    relevance: float | None
    score: float


class SearchHitOut(Schema):
    kind: Literal["archival", "message"]
    id: int
    agent_id: int
    agent_name: str
    content: str
    snippet_html: str
    created_at: datetime
    label: str | None = None
    tags: list[str] = []
    conversation_id: int | None = None
    role: str | None = None
    position: int | None = None
    provenance: dict[str, Any]
    scores: ScoresOut
    duplicates: list[int]


class SearchOut(Schema):
    query: str
    domain: str
    mode_requested: str
    mode_used: str
    degraded: str
    # Vectors searched by the quantised fast path (setting, or hybrid over
    # a large constellation); False: exact KNN or no vector search.
    quantised: bool = False
    results: list[SearchHitOut]
    timings_ms: dict[str, float]


class RecallIn(Schema):
    """The v1 ``recall`` tool; without an action and with a query: search."""

    action: Literal["insert", "append", "read", "delete", "search"] | None = None
    label: str | None = None
    entry_id: int | None = None
    content: str | None = None
    query: str | None = None
    limit: int = Field(10, ge=1, le=50)
    tags: list[str] = []
    metadata: dict[str, Any] = {}
    importance: float = Field(0.5, ge=0.0, le=1.0)


class RecallOut(Schema):
    action: str
    message: str
    entry: ArchivalEntryOut | None = None
    results: list[SearchHitOut] | None = None
    degraded: str = ""


class LettaInsertIn(Schema):
    content: str
    tags: list[str] = []


class LettaSearchIn(Schema):
    query: str
    tags: list[str] = []
    top_k: int = Field(10, ge=1, le=50)
    start_datetime: datetime | None = None
    end_datetime: datetime | None = None


class LettaSearchHitOut(Schema):
    id: int
    timestamp: datetime
    content: str
    tags: list[str]


class ConversationIn(Schema):
    title: str = ""
    agent_id: int | None = Field(None, description="Humans: whose conversation.")


class ConversationOut(Schema):
    id: int
    agent_id: int
    title: str
    status: str
    started_at: datetime
    ended_at: datetime | None
    message_count: int


class ConversationStatusIn(Schema):
    status: Literal["active", "idle", "archived"]


class MessageIn(Schema):
    role: Literal["user", "assistant", "tool", "system"]
    content: str
    author: str = ""


class MessagesAppendIn(Schema):
    messages: list[MessageIn]
    batch_id: str = Field("", max_length=64)


class MessageOut(Schema):
    id: int
    conversation_id: int
    role: str
    author: str
    content: str
    position: int
    batch_id: str
    created_at: datetime


class MessagePageOut(Schema):
    conversation: ConversationOut
    messages: list[MessageOut]
    next_after: int | None


class RetrievalConfigIn(Schema):
    rerank_enabled: bool | None = None
    decay_rate: float | None = Field(None, ge=0.5, le=1.0)


class RetrievalConfigOut(Schema):
    constellation_id: int
    rerank_enabled: bool
    decay_rate: float
