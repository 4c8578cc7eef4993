"""Request and response shapes of the long-term memory tools."""

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema

from memory.longterm.selectors import MAX_QUERIES, MAX_QUERY_CHARS
from memory.longterm.services import (
    ARCHIVAL_MAX_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MESSAGE_MAX_CHARS,
    MESSAGES_PER_APPEND,
)
from pattern_site.kernel.apitypes import (
    ITEMS_MAX,
    NAME_MAX,
    Day,
    Id,
    InputSchema,
    Moment,
)

# The tools' descriptions, written for the model that calls them: the HTTP
# endpoints' OpenAPI descriptions and the MCP tool descriptions alike.
SEARCH_TOOL = """Search memory by meaning and by words. `domain`: archival_memory (your
long-term facts, the default), conversations (your past messages),
constellation_messages (the messages across your constellation that you may read: an
agent's own, since conversations are private to their agent and the partner; the partner
reads every agent's), files (passages of the folders attached to you), activity (what
happened in your constellation), blocks (the memory blocks you can read) or all (every
domain). Each result says its `kind`: archival, message, file, activity or block.
`mode`: fts (words), vector (meaning), hybrid (both) or auto; activity and blocks are
matched by words. With domain blocks, `as_of` (an ISO date-time) searches the blocks as
they were then; a block result names its label and version. Narrow with `filters` (tags,
metadata keys, time range, role, conversation)."""


RECALL_TOOL = """Your long-term archival memory, entry by entry.
- insert: store `content` (optionally under a `label`, with `tags`).
- append: add `content` to the entry named by `label` or `entry_id`.
- read: the entry named by `label` or `entry_id`.
- delete: remove that entry.
Without an action and with a `query`: search your archival memory and your
past conversations."""


ARCHIVAL_MEMORY_INSERT = """Store a fact in your archival memory (long-term,
searchable, not in your context). Add `tags` to find it again by topic."""


OBSERVATIONS_SEARCH = """Consolidator role only: read the recent archival
observations of every agent of your constellation (yours included), newest
first: those of the last `since_hours` hours, optionally only one `domain`
(the domain an agent stored them with, e.g. task_patterns) and only those
matching `query` (by meaning and by words). Use it to find patterns across
agents, then store them with archival_memory_insert (domain meta_patterns)
and put the key insights in a shared block."""

ARCHIVAL_MEMORY_SEARCH = """Search your archival memory by meaning and by words;
returns up to `top_k` entries, optionally only those with all of `tags` or
created between `start_datetime` and `end_datetime`."""

SearchDomain = Literal[
    "archival_memory",
    "conversations",
    "constellation_messages",
    "files",
    "activity",
    "blocks",
    "all",
]


SearchModeIn = Literal["fts", "vector", "hybrid", "auto"]


CONTENT_EXAMPLE = "Sam's sister Ana visits on the first weekend of June."

# A tag as sent: the services strip and lower-case it.
Tag = Annotated[str, Field(max_length=MAX_TAG_CHARS)]
ArchivalContent = Annotated[str, Field(max_length=ARCHIVAL_MAX_CHARS)]
ArchivalLabel = Annotated[str, Field(max_length=200)]
DomainName = Annotated[str, Field(min_length=1, max_length=NAME_MAX)]
Query = Annotated[str, Field(max_length=MAX_QUERY_CHARS)]
TAGS_EXAMPLE = ["family", "plans"]
METADATA_EXAMPLE = {"source": "check-in", "confidence": "high"}


ArchivalTierIn = Literal["conversation", "agent", "constellation"]
ArchivalLifetimeIn = Literal["long_term", "short_term", "conversation"]
ArchivalSourceIn = Literal["agent", "partner", "system", "consolidation", "import"]


class ArchivalEntryIn(InputSchema):
    content: ArchivalContent = Field(examples=[CONTENT_EXAMPLE])
    tags: list[Tag] = Field([], max_length=MAX_TAGS, examples=[TAGS_EXAMPLE])
    metadata: dict[str, Any] = Field({}, examples=[METADATA_EXAMPLE])
    importance: float = Field(0.5, ge=0.0, le=1.0, examples=[0.8])
    label: ArchivalLabel | None = Field(
        None, description="A name to read it back by.", examples=["ana_visit"]
    )
    agent_id: Id | None = Field(
        None,
        description="Humans: whose memory. Agents: omit (their own).",
        examples=[None],
    )
    tier: ArchivalTierIn = Field(
        "agent",
        description="How widely it applies: one conversation, the agent, or the"
        " whole constellation.",
        examples=["agent"],
    )
    lifetime: ArchivalLifetimeIn = Field(
        "short_term",
        description="Short-term entries that prove relevant become long-term.",
        examples=["short_term"],
    )
    source_conversation_id: Id | None = Field(
        None, description="The conversation it was learned in.", examples=[None]
    )


class ArchivalEntryPatchIn(InputSchema):
    content: ArchivalContent | None = Field(
        None, examples=["Ana visits on the second weekend of June instead."]
    )
    tags: list[Tag] | None = Field(None, max_length=MAX_TAGS, examples=[TAGS_EXAMPLE])
    metadata: dict[str, Any] | None = Field(None, examples=[METADATA_EXAMPLE])
    importance: float | None = Field(None, ge=0.0, le=1.0, examples=[0.9])
    label: ArchivalLabel | None = Field(None, examples=["ana_visit"])


class ArchivalEntryOut(Schema):
    id: int
    agent_id: int
    label: str | None = None
    content: str
    tags: list[str]
    metadata: dict[str, Any]
    importance: float
    source: str
    access_count: int
    accessed_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    embedding_state: str
    tier: str
    lifetime: str
    source_conversation_id: int | None = None
    superseded_at: datetime | None = None
    superseded_by_id: int | None = None
    superseded_reason: str
    history: list[dict[str, Any]]


class ArchivalPageOut(Schema):
    count: int
    results: list[ArchivalEntryOut]


class SearchFiltersIn(InputSchema):
    agent_id: Id | None = Field(None, examples=[None])
    tags: list[Tag] = Field([], max_length=MAX_TAGS, examples=[["family"]])
    metadata_keys: list[Annotated[str, Field(max_length=NAME_MAX)]] = Field(
        [], max_length=MAX_TAGS, examples=[[]]
    )
    since: Moment | None = Field(None, examples=["2026-05-01T00:00:00Z"])
    until: Moment | None = Field(None, examples=[None])
    role: Literal["user", "assistant", "tool", "system"] | None = Field(
        None, examples=[None]
    )
    conversation_id: Id | None = Field(None, examples=[None])


class SearchIn(InputSchema):
    query: Query = Field(
        "",
        description="Any text; search operators are taken literally. May be "
        "empty when ``queries`` is given.",
        examples=["when is Ana visiting"],
    )
    queries: list[Query] = Field(
        [],
        max_length=MAX_QUERIES - 1,
        description="More phrasings of the same question (paraphrases, the "
        "keywords alone), searched with ``query`` and fused into one ranking "
        f"(reciprocal rank); at most {MAX_QUERIES} phrasings in all.",
        examples=[[]],
    )
    domain: SearchDomain = Field("archival_memory", examples=["all"])
    mode: SearchModeIn = Field("auto", examples=["auto"])
    limit: int = Field(10, ge=1, le=50, examples=[5])
    filters: SearchFiltersIn = SearchFiltersIn()
    constellation_id: Id | None = Field(
        None,
        description="Humans in several constellations: which one.",
        examples=[None],
    )
    as_of: Moment | None = Field(
        None,
        description="Domain blocks only: search the blocks as they were at "
        "this time (naive means UTC).",
        examples=[None],
    )
    explain: bool = Field(
        False,
        description="Also answer how each result ranked (scores, folded "
        "duplicates, the marked snippet) and each stage's time.",
        examples=[False],
    )


# Named examples of the search tool's request body, one per kind of search.
SEARCH_EXAMPLES = {
    "archival": {
        "summary": "Your archival memory (the default domain)",
        "value": {"query": "when is Ana visiting"},
    },
    "everything": {
        "summary": "Every domain at once, by words only",
        "value": {"query": "budget review", "domain": "all", "mode": "fts"},
    },
    "files": {
        "summary": "Passages of the folders attached to you",
        "value": {"query": "hotel check-in time", "domain": "files", "limit": 5},
    },
    "activity": {
        "summary": "What happened in the constellation this month",
        "value": {
            "query": "approval rejected",
            "domain": "activity",
            "filters": {"since": "2026-05-01T00:00:00Z"},
        },
    },
    "blocks_as_of": {
        "summary": "Memory blocks as they were on a past day",
        "value": {
            "query": "Ana visit",
            "domain": "blocks",
            "as_of": "2026-05-01T12:00:00Z",
        },
    },
}


# The answers of the search tools leave out what is null (``AgentTool.
# exclude_none``): a field that may be null is optional here, so the
# document says it may be absent.
EXPLAIN_ONLY = "With `explain: true` only."


class ScoresOut(Schema):
    fts_rank: int | None = None
    bm25: float | None = None
    vector_rank: int | None = None
    vector_distance: float | None = None
    keyword_part: float | None = Field(
        None, description="The keyword list's share of ``fused``."
    )
    vector_part: float | None = Field(
        None, description="The vector list's share of ``fused``."
    )
    fused: float
    relevance: float | None = None
    reranker: float | None = Field(
        None, description="The re-rank model's score, when it ordered the hit."
    )
    score: float


class SearchHitOut(Schema):
    kind: Literal["archival", "message", "file", "activity", "block"]
    id: int | str = Field(
        description="The entry's, message's, passage's or event's id; a block's UUID."
    )
    agent_id: int | None = Field(
        None,
        description="Whose it is; None for files, constellation blocks and "
        "events no agent caused.",
    )
    agent_name: str | None = None
    content: str
    snippet_html: str | None = Field(
        None,
        description="The matching passage, the query's words marked with "
        f"<mark>. {EXPLAIN_ONLY}",
    )
    created_at: datetime = Field(
        description="When it was written; a file passage: when its file "
        "last changed; a block: when the version found was made."
    )
    label: str | None = None
    tags: list[str] | None = None
    conversation_id: int | None = None
    role: str | None = None
    position: int | None = None
    # Files.
    folder: str | None = None
    folder_id: int | None = None
    file_id: int | None = None
    path: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    cite: str | None = Field(None, description="folder/path:start-end")
    # Activity.
    event_type: str | None = None
    importance: str | None = None
    # Blocks (``label`` too).
    block_id: str | None = None
    version: int | None = Field(
        None, description="The block's version found (1 = its first)."
    )
    provenance: dict[str, Any]
    scores: ScoresOut | None = Field(None, description=f"How it ranked. {EXPLAIN_ONLY}")
    duplicates: list[int] | None = Field(
        None,
        description=f"Ids of near-identical rows folded into it. {EXPLAIN_ONLY}",
    )


class SearchOut(Schema):
    query: str
    domain: str
    mode_used: str = Field(
        description="fts (words), vector (meaning) or hybrid (both): what ran."
    )
    degraded: str = Field(
        description="Why the search did less than asked (no model, entries "
        "still waiting for an embedding, a failed re-rank); empty: it did not."
    )
    pending_embeddings: int | None = Field(
        None,
        description="Entries you may see still waiting for their embedding "
        "(a few seconds after writing), matched by keywords only; absent "
        "when none wait or meaning was not searched.",
    )
    results: list[SearchHitOut]
    mode_requested: str | None = Field(None, description=EXPLAIN_ONLY)
    quantised: bool | None = Field(
        None,
        description="Vectors searched by the quantised fast path (setting, or "
        "hybrid over a large constellation); false: exact KNN or no vector "
        f"search. {EXPLAIN_ONLY}",
    )
    timings_ms: dict[str, float] | None = Field(
        None, description=f"Each stage's time, per domain. {EXPLAIN_ONLY}"
    )


class RecallIn(InputSchema):
    """The ``recall`` tool; without an action and with a query: search."""

    action: Literal["insert", "append", "read", "delete", "search"] | None = Field(
        None, examples=["insert"]
    )
    label: ArchivalLabel | None = Field(None, examples=["ana_visit"])
    entry_id: Id | None = Field(None, examples=[None])
    content: ArchivalContent | None = Field(None, examples=[CONTENT_EXAMPLE])
    query: Query | None = Field(None, examples=[None])
    limit: int = Field(10, ge=1, le=50, examples=[10])
    tags: list[Tag] = Field([], max_length=MAX_TAGS, examples=[TAGS_EXAMPLE])
    metadata: dict[str, Any] = Field({}, examples=[METADATA_EXAMPLE])
    importance: float = Field(0.5, ge=0.0, le=1.0, examples=[0.7])


class RecallOut(Schema):
    action: str
    message: str
    entry: ArchivalEntryOut | None = None
    results: list[SearchHitOut] | None = None
    degraded: str = ""
    pending_embeddings: int | None = Field(
        None, description="As the search tool's: entries matched by keywords only."
    )


class LettaInsertIn(InputSchema):
    content: ArchivalContent = Field(examples=[CONTENT_EXAMPLE])
    tags: list[Tag] = Field([], max_length=MAX_TAGS, examples=[TAGS_EXAMPLE])
    domain: DomainName | None = Field(
        None,
        description="What the fact is about (kept as metadata.domain), so a"
        " consolidator finds the observations of one domain.",
        examples=["task_patterns"],
    )


class ObservationsSearchIn(InputSchema):
    query: Query | None = Field(None, examples=[None])
    domain: DomainName | None = Field(None, examples=["task_patterns"])
    since_hours: int = Field(24, ge=1, le=24 * 90, examples=[24])
    limit: int = Field(20, ge=1, le=50, examples=[20])


class ObservationOut(Schema):
    id: int
    agent_id: int
    agent: str
    timestamp: datetime
    domain: str
    content: str
    tags: list[str]


class LettaSearchIn(InputSchema):
    query: Query = Field(examples=["Ana visit"])
    tags: list[Tag] = Field([], max_length=MAX_TAGS, examples=[["family"]])
    top_k: int = Field(10, ge=1, le=50, examples=[5])
    start_datetime: Moment | None = Field(None, examples=["2026-05-01T00:00:00Z"])
    end_datetime: Moment | None = Field(None, examples=[None])


class LettaSearchHitOut(Schema):
    id: int
    timestamp: datetime
    content: str
    tags: list[str]


class ConversationIn(InputSchema):
    title: str = Field("", max_length=200, examples=["Monday planning"])
    agent_id: Id | None = Field(
        None, description="Humans: whose conversation.", examples=[None]
    )


class ConversationOut(Schema):
    id: int
    agent_id: int
    title: str
    status: str
    started_at: datetime
    ended_at: datetime | None
    message_count: int


class ConversationStatusIn(InputSchema):
    status: Literal["active", "idle", "archived"] = Field(examples=["archived"])


class MessageToolCallIn(InputSchema):
    id: str = Field(min_length=1, max_length=100, examples=["call_1"])
    name: str = Field(min_length=1, max_length=100, examples=["archival_search"])
    arguments: str = Field(
        "",
        max_length=MESSAGE_MAX_CHARS,
        description="The call's arguments as JSON text.",
        examples=['{"q": "x"}'],
    )


class MessageIn(InputSchema):
    role: Literal["user", "assistant", "tool", "system"] = Field(examples=["user"])
    content: str = Field(
        max_length=MESSAGE_MAX_CHARS, examples=["Can we move the dentist to Friday?"]
    )
    author: str = Field("", max_length=NAME_MAX, examples=["Sam"])
    tool_calls: list[MessageToolCallIn] = Field(
        default_factory=list,
        max_length=ITEMS_MAX,
        description="An assistant message's tool calls (its content may be empty).",
    )
    tool_call_id: str = Field(
        "",
        max_length=100,
        description="A tool message: the call it answers.",
        examples=[""],
    )


class MessageToolCallOut(Schema):
    id: str
    name: str
    arguments: str


class MessagesAppendIn(InputSchema):
    messages: list[MessageIn] = Field(min_length=1, max_length=MESSAGES_PER_APPEND)
    batch_id: str = Field(
        "",
        max_length=64,
        description="Groups the messages of one exchange.",
        examples=["turn-0042"],
    )


class MessageOut(Schema):
    id: int
    conversation_id: int
    role: str
    author: str
    content: str
    tool_calls: list[MessageToolCallOut]
    tool_call_id: str
    position: int
    batch_id: str
    created_at: datetime


class MessagePageOut(Schema):
    conversation: ConversationOut
    messages: list[MessageOut]
    next_after: int | None


class RetrievalConfigIn(InputSchema):
    rerank_enabled: bool | None = Field(None, examples=[True])
    decay_rate: float | None = Field(None, ge=0.5, le=1.0, examples=[0.95])
    conversation_decay_rate: float | None = Field(None, ge=0.5, le=1.0, examples=[0.99])
    constellation_decay_rate: float | None = Field(
        None, ge=0.5, le=1.0, examples=[0.998]
    )
    archival_cap: int | None = Field(None, ge=1, examples=[10_000])
    fusion: Literal["weighted", "rrf"] | None = Field(None, examples=["weighted"])
    keyword_weight: float | None = Field(None, ge=0.0, le=1.0, examples=[0.6])
    context_weight: float | None = Field(None, ge=0.0, le=1.0, examples=[0.2])
    date_weight: float | None = Field(None, ge=0.0, le=1.0, examples=[0.2])
    candidate_depth: int | None = Field(None, ge=10, le=400, examples=[40])
    reranker: Literal["off", "onnx", "http", "llm"] | None = Field(
        None, examples=["onnx"]
    )
    reranker_depth: int | None = Field(None, ge=5, le=200, examples=[50])
    time_weight: float | None = Field(None, ge=0.0, le=1.0, examples=[0.5])
    when_weight: float | None = Field(None, ge=0.0, le=1.0, examples=[0.0])
    late_weight: float | None = Field(None, ge=0.0, le=1.0, examples=[0.0])


class RetrievalConfigOut(Schema):
    constellation_id: int
    rerank_enabled: bool
    decay_rate: float
    conversation_decay_rate: float
    constellation_decay_rate: float
    archival_cap: int
    fusion: str
    keyword_weight: float
    context_weight: float
    date_weight: float
    candidate_depth: int
    reranker: str
    reranker_depth: int
    time_weight: float
    when_weight: float
    late_weight: float


class ConsolidationRunOut(Schema):
    id: int
    constellation_id: int
    agent_id: int | None
    started_at: datetime
    finished_at: datetime
    decided_by: str
    scored: int
    promoted: int
    merged: int
    contradicted: int
    pruned: int
    capped: int


CONVERSATION_SEARCH = """Search your past conversations (your own messages
and the ones you received) by meaning and by words; optionally only messages
of some `roles` (user, assistant, tool), up to `limit` of them, sent between
`start_date` and `end_date` (YYYY-MM-DD, both days included)."""


class ConversationSearchIn(InputSchema):
    query: Query = Field(examples=["dentist appointment"])
    roles: list[Literal["user", "assistant", "tool"]] = Field(
        [], max_length=3, examples=[["user"]]
    )
    limit: int = Field(10, ge=1, le=50, examples=[5])
    start_date: Day | None = Field(None, examples=["2026-05-01"])
    end_date: Day | None = Field(None, examples=[None])


SEND_MESSAGE = "send_message"
SEND_MESSAGE_TOOL = """Send a message to your partner: it is stored in your
conversation and shown in the dashboard's chat.  It ends your turn, and in a
turn it is your answer to whoever sent you the message; use it once, with
everything you want to say."""


class SendMessageIn(InputSchema):
    message: str = Field(
        min_length=1,
        max_length=MESSAGE_MAX_CHARS,
        examples=["The dentist is moved to Friday at 10."],
    )
