"""Request and response shapes of the long-term memory tools."""

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema

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
    keyword_part: float | None = Field(
        None, description="The keyword list's share of ``fused``."
    )
    vector_part: float | None = Field(
        None, description="The vector list's share of ``fused``."
    )
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
    fusion: Literal["weighted", "rrf"] | None = None
    keyword_weight: float | None = Field(None, ge=0.0, le=1.0)
    context_weight: float | None = Field(None, ge=0.0, le=1.0)
    date_weight: float | None = Field(None, ge=0.0, le=1.0)
    candidate_depth: int | None = Field(None, ge=10, le=400)


class RetrievalConfigOut(Schema):
    constellation_id: int
    rerank_enabled: bool
    decay_rate: float
    fusion: str
    keyword_weight: float
    context_weight: float
    date_weight: float
    candidate_depth: int
