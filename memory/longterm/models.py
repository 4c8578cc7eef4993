"""Long-term memory: archival entries, conversations and their messages, and
per-constellation retrieval settings.

Archival entries and messages are searchable tables (``memory.search``):
they carry ``content_hash`` / ``embedded_hash`` / ``embedding_state`` so the
embedding pipeline knows which rows need a vector.
"""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from memory.search.registry import EmbeddingState
from pattern_site.kernel.agents.models import Agent, Constellation


class ArchivalSource(models.TextChoices):
    """Who produced an entry (provenance only: never used to grant access)."""

    AGENT = "agent", "agent"
    PARTNER = "partner", "partner"
    SYSTEM = "system", "system"
    CONSOLIDATION = "consolidation", "consolidation"
    IMPORT = "import", "import"


class ArchivalTier(models.TextChoices):
    """How widely an entry applies; each tier decays at its own rate."""

    CONVERSATION = "conversation", "conversation"
    AGENT = "agent", "agent"
    CONSTELLATION = "constellation", "constellation"


class ArchivalLifetime(models.TextChoices):
    """Short-term entries are promoted to long-term by consolidation when
    they prove relevant; conversation entries matter for one conversation."""

    LONG_TERM = "long_term", "long-term"
    SHORT_TERM = "short_term", "short-term"
    CONVERSATION = "conversation", "conversation"


class SupersededReason(models.TextChoices):
    MERGED = "merged", "merged into another entry"
    CONTRADICTED = "contradicted", "contradicted by a newer entry"
    PRUNED = "pruned", "relevance fell below the floor"
    CAPPED = "capped", "over the scope's entry cap"


class ArchivalEntry(models.Model):
    """A fact an agent keeps for the long term, outside its context window."""

    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="archival_entries"
    )
    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="archival_entries"
    )
    label = models.CharField(max_length=200, null=True, blank=True)
    content = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=list, blank=True)
    importance = models.FloatField(
        default=0.5, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )
    source = models.CharField(
        max_length=20, choices=ArchivalSource.choices, default=ArchivalSource.AGENT
    )
    source_conversation = models.ForeignKey(
        "Conversation",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="archival_entries",
        help_text="The conversation this entry was learned in.",
    )
    tier = models.CharField(
        max_length=16, choices=ArchivalTier.choices, default=ArchivalTier.AGENT
    )
    lifetime = models.CharField(
        max_length=16,
        choices=ArchivalLifetime.choices,
        default=ArchivalLifetime.SHORT_TERM,
    )
    # Set when consolidation merges or prunes the entry: it is kept (and can
    # be restored) but left out of default lists and searches.
    superseded_at = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="supersedes",
    )
    superseded_reason = models.CharField(
        max_length=16, choices=SupersededReason.choices, blank=True
    )
    # Earlier texts of the entry and the entries merged into it, oldest
    # first: {"at", "event", "text", "entry_id"}.
    history = models.JSONField(default=list, blank=True)
    access_count = models.PositiveIntegerField(default=0)
    accessed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    content_hash = models.CharField(max_length=64)
    embedding_state = models.CharField(
        max_length=10, choices=EmbeddingState.choices, default=EmbeddingState.PENDING
    )
    embedded_hash = models.CharField(
        max_length=64, blank=True, help_text="content_hash the vector was made from"
    )

    class Meta:
        verbose_name_plural = "archival entries"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "label"],
                condition=models.Q(label__isnull=False),
                name="archival_label_unique_per_agent",
            ),
            models.CheckConstraint(
                condition=models.Q(importance__gte=0.0, importance__lte=1.0),
                name="archival_importance_in_unit_interval",
            ),
        ]
        indexes = [
            models.Index(fields=["agent", "-created_at"]),
            models.Index(fields=["embedding_state"]),
            models.Index(fields=["constellation", "tier", "superseded_at"]),
        ]

    def __str__(self) -> str:
        return self.label or self.content[:40]

    @property
    def superseded(self) -> bool:
        return self.superseded_at is not None


class ConversationStatus(models.TextChoices):
    ACTIVE = "active", "active"
    IDLE = "idle", "idle"
    ARCHIVED = "archived", "archived"


class Conversation(models.Model):
    """An agent's conversation: active -> idle -> archived (idle may resume)."""

    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="conversations"
    )
    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="conversations"
    )
    title = models.CharField(max_length=200, blank=True)
    status = models.CharField(
        max_length=10,
        choices=ConversationStatus.choices,
        default=ConversationStatus.ACTIVE,
    )
    started_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    message_count = models.PositiveIntegerField(default=0)
    # Recursive summarization: the summary of every message at or before
    # ``summary_through`` (a position), sent at the head of the history in
    # their stead.
    summary = models.TextField(blank=True)
    summary_through = models.PositiveBigIntegerField(default=0)
    summary_model = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["agent", "status"])]

    def __str__(self) -> str:
        return self.title or f"conversation {self.pk}"


class MessageRole(models.TextChoices):
    USER = "user", "user"
    ASSISTANT = "assistant", "assistant"
    TOOL = "tool", "tool"
    SYSTEM = "system", "system"


class Message(models.Model):
    """One message of a conversation, at a monotonic position within it."""

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    # Denormalised from the conversation so search can scope by them directly.
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="+"
    )
    role = models.CharField(max_length=10, choices=MessageRole.choices)
    author = models.CharField(max_length=200, blank=True)
    # Empty for an assistant message that only calls tools.
    content = models.TextField(blank=True)
    # An assistant message's tool calls: [{"id", "name", "arguments"}], the
    # arguments as the JSON text the model wrote.
    tool_calls = models.JSONField(default=list, blank=True)
    # A tool message answers the assistant's call with this id.
    tool_call_id = models.CharField(max_length=100, blank=True)
    position = models.PositiveBigIntegerField()
    # One incoming message and everything it caused (the agent's tool calls,
    # their results, its answers) share a batch id.
    batch_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    content_hash = models.CharField(max_length=64)
    embedding_state = models.CharField(
        max_length=10, choices=EmbeddingState.choices, default=EmbeddingState.PENDING
    )
    embedded_hash = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["conversation_id", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "position"],
                name="message_position_unique_per_conversation",
            )
        ]
        indexes = [
            models.Index(fields=["embedding_state"]),
            models.Index(fields=["conversation", "batch_id"]),
        ]

    def __str__(self) -> str:
        return f"{self.role}@{self.position}"


class RetrievalFusion(models.TextChoices):
    WEIGHTED = "weighted", "weighted scores"
    RRF = "rrf", "reciprocal rank"


class RetrievalReranker(models.TextChoices):
    OFF = "off", "off"
    ONNX = "onnx", "local cross-encoder (ONNX)"
    HTTP = "http", "re-rank endpoint (HTTP)"
    LLM = "llm", "the configured LLM"


class RetrievalConfig(models.Model):
    """Per-constellation search tuning: how hybrid search fuses its keyword
    and vector lists, the weight of a row's context, and the optional
    relevance re-rank.  The defaults are the settings that score best on
    the retrieval eval (bench/retrieval_eval.py)."""

    constellation = models.OneToOneField(
        Constellation, on_delete=models.CASCADE, related_name="retrieval_config"
    )
    rerank_enabled = models.BooleanField(
        default=False,
        help_text="Re-rank results by importance, recency decay and access count.",
    )
    decay_rate = models.FloatField(
        default=0.995,
        validators=[MinValueValidator(0.5), MaxValueValidator(1.0)],
        help_text="Hourly decay of agent-tier entries (0.995/h keeps ~43% after 7 d).",
    )
    conversation_decay_rate = models.FloatField(
        default=0.99,
        validators=[MinValueValidator(0.5), MaxValueValidator(1.0)],
        help_text="Hourly decay of conversation-tier entries (fast).",
    )
    constellation_decay_rate = models.FloatField(
        default=0.998,
        validators=[MinValueValidator(0.5), MaxValueValidator(1.0)],
        help_text="Hourly decay of constellation-tier entries (slow).",
    )
    archival_cap = models.PositiveIntegerField(
        default=10_000,
        validators=[MinValueValidator(1)],
        help_text="Live archival entries a scope keeps; consolidation supersedes"
        " the least relevant beyond it.",
    )
    fusion = models.CharField(
        max_length=16,
        choices=RetrievalFusion.choices,
        default=RetrievalFusion.WEIGHTED,
        help_text="How hybrid search merges its keyword and vector lists.",
    )
    keyword_weight = models.FloatField(
        default=0.6,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of the keyword list in hybrid fusion (the rest: vectors).",
    )
    context_weight = models.FloatField(
        default=0.2,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="BM25 weight of a match in the entries just before an entry.",
    )
    date_weight = models.FloatField(
        default=0.2,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="BM25 weight of a match in an entry's date in words.",
    )
    candidate_depth = models.PositiveSmallIntegerField(
        default=40,
        validators=[MinValueValidator(10), MaxValueValidator(400)],
        help_text="Candidates each list brings to the fusion, at least.",
    )
    reranker = models.CharField(
        max_length=8,
        choices=RetrievalReranker.choices,
        default=RetrievalReranker.OFF,
        help_text="Model that re-orders the best fused candidates (see"
        " PATTERN_RERANKER_* for where each backend is).",
    )
    reranker_depth = models.PositiveSmallIntegerField(
        default=50,
        validators=[MinValueValidator(5), MaxValueValidator(200)],
        help_text="Fused candidates the re-rank model orders.",
    )
    time_weight = models.FloatField(
        default=0.5,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of the best score added to an entry dated within the"
        " dates a query names (0: off).",
    )
    when_weight = models.FloatField(
        default=0.1,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of the best score added to an entry that tells the"
        " kind of time a query asks for: when (yesterday, last week, a date)"
        " or how long (three years) (0: off).",
    )
    late_weight = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of the MaxSim of the embedding model's token vectors"
        " in the score of the best fused candidates (0: off).",
    )

    def __str__(self) -> str:
        return f"retrieval config of {self.constellation_id}"


class ConsolidationRun(models.Model):
    """One consolidation of a scope: an agent's own entries, or the
    constellation-tier entries of a constellation (``agent`` empty)."""

    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="consolidation_runs"
    )
    agent = models.ForeignKey(
        Agent,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="consolidation_runs",
    )
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    decided_by = models.CharField(
        max_length=8, help_text='"llm" or "rules": who decided merges'
    )
    scored = models.PositiveIntegerField(default=0)
    promoted = models.PositiveIntegerField(default=0)
    merged = models.PositiveIntegerField(default=0)
    contradicted = models.PositiveIntegerField(default=0)
    pruned = models.PositiveIntegerField(default=0)
    capped = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-finished_at", "-id"]
        indexes = [models.Index(fields=["constellation", "agent", "-finished_at"])]

    def __str__(self) -> str:
        scope = f"agent {self.agent_id}" if self.agent_id else "constellation"
        return f"consolidation of {scope} at {self.finished_at:%Y-%m-%d %H:%M}"


class CompressionKind(models.TextChoices):
    TRUNCATE = "truncate", "truncate (drop the oldest batches)"
    SUMMARIZE = "summarize", "recursive summarization"


class ContextConfig(models.Model):
    """Per-constellation limits of the requests sent to agents' models: the
    token limits of a model family (``model_overrides``, by model-name
    prefix, over the built-in ones), how history that does not fit is
    compressed, and a hard cap on the messages sent."""

    constellation = models.OneToOneField(
        Constellation, on_delete=models.CASCADE, related_name="context_config"
    )
    model_overrides = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"model prefix": {"max_tokens", "memory_tokens",'
        ' "history_tokens", "reserved_response_tokens"}}',
    )
    compression = models.CharField(
        max_length=10, choices=CompressionKind.choices, default=CompressionKind.TRUNCATE
    )
    keep_recent = models.PositiveIntegerField(
        default=200,
        validators=[MinValueValidator(1)],
        help_text="Truncate: the most recent messages kept (whole batches).",
    )
    chunk_size = models.PositiveIntegerField(
        default=40,
        validators=[MinValueValidator(1)],
        help_text="Summarize: evicted messages that make a new summary.",
    )
    summarization_model = models.CharField(
        max_length=100,
        blank=True,
        help_text="Summarize: the model writing summaries (blank: LLM_MODEL).",
    )
    max_messages_cap = models.PositiveIntegerField(
        default=500, validators=[MinValueValidator(1)]
    )

    def __str__(self) -> str:
        return f"context config of {self.constellation_id}"


class ArchivalRoleKind(models.TextChoices):
    CONSOLIDATOR = "consolidator", "Consolidator"


class ArchivalRole(models.Model):
    """A right over archival memory beyond the agent's own, granted by the
    partner (``memory.longterm.permissions`` decides what it allows).

    ``consolidator``: the agent reads the archival entries of every agent
    of its constellation, to consolidate their observations into patterns.
    """

    agent = models.OneToOneField(
        Agent, on_delete=models.CASCADE, related_name="archival_role"
    )
    role = models.CharField(
        max_length=20,
        choices=ArchivalRoleKind.choices,
        default=ArchivalRoleKind.CONSOLIDATOR,
    )
    granted_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.agent_id}:{self.role}"
