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
    AGENT = "agent", "agent"
    SYSTEM = "system", "system"
    USER = "user", "user"
    CONSOLIDATION = "consolidation", "consolidation"


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
        ]

    def __str__(self) -> str:
        return self.label or self.content[:40]


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
        help_text="Hourly decay factor of the re-rank (0.995/h keeps ~43% after 7 d).",
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

    def __str__(self) -> str:
        return f"retrieval config of {self.constellation_id}"


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
