"""Every write of the memory app: keyword-only, typed, atomic.

Side effects (embedding tasks) are scheduled after commit.
"""

import hashlib
import logging
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from coordination.errors import Conflict, InvalidInput, LimitExceeded
from coordination.models import Agent, Constellation

# --- Long-term memory: archival entries, conversations, messages -------------
# The FTS5 index is written in the same transaction as the row; vectors are
# computed by Celery after commit (``memory.tasks.embed_rows``), batched per
# transaction, and by the periodic backfill for rows still without one.
from memory.indexes import ARCHIVAL_INDEX, INDEXED, MESSAGE_INDEX
from memory.models import (
    ArchivalEntry,
    ArchivalSource,
    Conversation,
    ConversationStatus,
    EmbeddingState,
    Message,
    MessageRole,
    RetrievalConfig,
)
from memory.retrieval import index_delete, index_put_texts, index_put_vectors

logger = logging.getLogger(__name__)

ARCHIVAL_MAX_CHARS = 20_000
MESSAGE_MAX_CHARS = 100_000
MESSAGES_PER_APPEND = 200
MAX_TAGS = 20
MAX_TAG_CHARS = 50


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _clean_content(content: str, *, what: str, max_chars: int) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput(f"{what} content must not be empty")
    if len(content) > max_chars:
        raise LimitExceeded(
            f"{what} content is {len(content)} chars; at most {max_chars} allowed"
        )
    return content


def _clean_tags(tags: Iterable[str]) -> list[str]:
    cleaned: list[str] = []
    for tag in tags:
        tag = str(tag).strip().lower()
        if not tag:
            continue
        if len(tag) > MAX_TAG_CHARS or '"' in tag or "\\" in tag:
            raise InvalidInput(
                f"tag {tag[:60]!r} is invalid: at most {MAX_TAG_CHARS} chars,"
                " no quotes or backslashes"
            )
        if tag not in cleaned:
            cleaned.append(tag)
    if len(cleaned) > MAX_TAGS:
        raise LimitExceeded(f"{len(cleaned)} tags given; at most {MAX_TAGS} allowed")
    return cleaned


def _full_clean(obj: Any, **kwargs: Any) -> None:
    try:
        obj.full_clean(**kwargs)
    except ValidationError as exc:
        raise InvalidInput(
            "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
        ) from exc


class _EmbeddingBatch:
    """One after-commit callback per transaction enqueuing its rows' embeds."""

    def __init__(self) -> None:
        self.ids: dict[str, set[int]] = {}

    def __call__(self) -> None:
        from memory.tasks import embed_rows

        size = settings.EMBEDDING_BATCH_SIZE
        for kind, ids in self.ids.items():
            ordered = sorted(ids)
            for start in range(0, len(ordered), size):
                embed_rows.delay(kind, ordered[start : start + size])


def embedding_schedule(*, kind: str, row_ids: Iterable[int]) -> None:
    """Embed these rows after the current transaction commits (batched).

    The transaction's pending callbacks (Django's ``run_on_commit``) are
    searched for its batch, so a callback rolled back with a savepoint
    takes its rows with it and a new transaction starts a new batch.
    """
    batch = next(
        (
            func
            for _sids, func, _robust in connection.run_on_commit
            if isinstance(func, _EmbeddingBatch)
        ),
        None,
    )
    if batch is None or not connection.in_atomic_block:
        batch = _EmbeddingBatch()
        batch.ids.setdefault(kind, set()).update(row_ids)
        transaction.on_commit(batch)
        return
    batch.ids.setdefault(kind, set()).update(row_ids)


@transaction.atomic
def archival_entry_create(
    *,
    agent: Agent,
    content: str,
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    importance: float = 0.5,
    source: str = ArchivalSource.AGENT,
    label: str | None = None,
) -> ArchivalEntry:
    content = _clean_content(content, what="archival", max_chars=ARCHIVAL_MAX_CHARS)
    label = label.strip() if label else None
    if label and ArchivalEntry.objects.filter(agent=agent, label=label).exists():
        raise Conflict(f"agent {agent.name} already has an archival entry {label!r}")
    entry = ArchivalEntry(
        agent=agent,
        constellation_id=agent.constellation_id,
        label=label or None,
        content=content,
        tags=_clean_tags(tags),
        metadata=metadata or {},
        importance=importance,
        source=source,
        content_hash=content_hash(content),
    )
    _full_clean(entry, validate_constraints=False)
    entry.save()
    _index_archival(entry)
    return entry


def _index_archival(entry: ArchivalEntry) -> None:
    index_put_texts(
        ARCHIVAL_INDEX,
        rows=[(entry.pk, entry.constellation_id, entry.agent_id, entry.content)],
    )
    embedding_schedule(kind="archival", row_ids=[entry.pk])


_UNSET: Any = object()


@transaction.atomic
def archival_entry_update(
    *,
    entry: ArchivalEntry,
    content: str | None = None,
    tags: Sequence[str] | None = None,
    metadata: dict[str, Any] | None = None,
    importance: float | None = None,
    label: str | None = _UNSET,
) -> ArchivalEntry:
    fields: list[str] = []
    if content is not None and content != entry.content:
        entry.content = _clean_content(
            content, what="archival", max_chars=ARCHIVAL_MAX_CHARS
        )
        entry.content_hash = content_hash(entry.content)
        entry.embedding_state = EmbeddingState.PENDING
        fields += ["content", "content_hash", "embedding_state"]
    if tags is not None:
        entry.tags = _clean_tags(tags)
        fields.append("tags")
    if metadata is not None:
        entry.metadata = metadata
        fields.append("metadata")
    if importance is not None:
        entry.importance = importance
        fields.append("importance")
    if label is not _UNSET:
        new_label = label.strip() if label else None
        if new_label and (
            ArchivalEntry.objects.filter(agent_id=entry.agent_id, label=new_label)
            .exclude(pk=entry.pk)
            .exists()
        ):
            raise Conflict(f"this agent already has an archival entry {new_label!r}")
        entry.label = new_label
        fields.append("label")
    if not fields:
        return entry
    _full_clean(entry, validate_constraints=False)
    entry.save(update_fields=[*fields, "updated_at"])
    if "content" in fields:
        _index_archival(entry)
    return entry


def archival_entry_append(*, entry: ArchivalEntry, content: str) -> ArchivalEntry:
    """The v1 ``recall append``: add text on a new line of an entry."""
    _clean_content(content, what="appended", max_chars=ARCHIVAL_MAX_CHARS)
    return archival_entry_update(entry=entry, content=f"{entry.content}\n{content}")


@transaction.atomic
def archival_entry_delete(*, entry: ArchivalEntry) -> None:
    index_delete(ARCHIVAL_INDEX, row_ids=[entry.pk])
    entry.delete()


def archival_entries_record_access(*, entry_ids: Sequence[int], at: datetime) -> int:
    """Count one retrieval of each entry (search hits); returns rows touched."""
    return ArchivalEntry.objects.filter(pk__in=list(entry_ids)).update(
        access_count=F("access_count") + 1, accessed_at=at
    )


def archival_access_record_later(*, entry_ids: Sequence[int]) -> None:
    """Schedule ``archival_entries_record_access`` off the search's path."""
    if not entry_ids:
        return
    from memory.tasks import archival_record_access

    at = timezone.now().isoformat()
    ids = list(entry_ids)
    transaction.on_commit(lambda: archival_record_access.delay(ids, at))


# --- embeddings ---------------------------------------------------------------


def embeddings_refresh(*, kind: str, row_ids: Sequence[int]) -> int:
    """Embed rows whose vector is missing or stale; returns how many got one.

    Idempotent: rows already embedded from their current content are
    skipped, and a row changed while its text was being embedded keeps the
    state pending (its own task will follow).
    """
    from memory.embeddings import embed_texts

    model, index = INDEXED[kind]
    rows = [
        row
        for row in model.objects.filter(pk__in=list(row_ids))
        if row.embedded_hash != row.content_hash
        or row.embedding_state != EmbeddingState.READY
    ]
    if not rows:
        return 0
    vectors = embed_texts([row.content for row in rows])
    if vectors is None:
        return 0
    if vectors and vectors[0].shape != (index.dim,):
        # The vec0 tables were created for index.dim; a model of another
        # size must not half-fill them.  Rows stay pending (and searchable
        # by keywords) until the configuration matches.
        logger.error(
            "embedding model gives %s-d vectors; the search index holds %s-d",
            vectors[0].shape[0],
            index.dim,
        )
        return 0
    with transaction.atomic():
        current = dict(
            model.objects.filter(pk__in=[r.pk for r in rows]).values_list(
                "pk", "content_hash"
            )
        )
        fresh = [
            (row, vec)
            for row, vec in zip(rows, vectors, strict=True)
            if current.get(row.pk) == row.content_hash
        ]
        index_put_vectors(
            index,
            rows=[
                (row.pk, row.constellation_id, row.agent_id, vec) for row, vec in fresh
            ],
        )
        # The write lock is held: content_hash cannot change under us.
        model.objects.filter(pk__in=[row.pk for row, _vec in fresh]).update(
            embedding_state=EmbeddingState.READY, embedded_hash=F("content_hash")
        )
    return len(fresh)


def embedding_backfill(*, batch: int | None = None) -> dict[str, int]:
    """Embed up to ``batch`` rows of each kind that still have no vector."""
    from memory.embeddings import embedding_status

    if not embedding_status().available:
        return {kind: 0 for kind in INDEXED}
    size = batch or settings.EMBEDDING_BACKFILL_BATCH
    done: dict[str, int] = {}
    for kind, (model, _index) in INDEXED.items():
        ids = list(
            model.objects.filter(embedding_state=EmbeddingState.PENDING)
            .order_by("pk")
            .values_list("pk", flat=True)[:size]
        )
        done[kind] = embeddings_refresh(kind=kind, row_ids=ids) if ids else 0
    return done


# --- conversations and messages ---------------------------------------------------

CONVERSATION_TRANSITIONS: dict[str, set[str]] = {
    ConversationStatus.ACTIVE: {ConversationStatus.IDLE, ConversationStatus.ARCHIVED},
    ConversationStatus.IDLE: {ConversationStatus.ACTIVE, ConversationStatus.ARCHIVED},
    ConversationStatus.ARCHIVED: set(),
}


@transaction.atomic
def conversation_start(*, agent: Agent, title: str = "") -> Conversation:
    conversation = Conversation(
        agent=agent, constellation_id=agent.constellation_id, title=title.strip()
    )
    _full_clean(conversation)
    conversation.save()
    return conversation


@transaction.atomic
def conversation_set_status(*, conversation: Conversation, status: str) -> Conversation:
    allowed = CONVERSATION_TRANSITIONS.get(conversation.status, set())
    if status == conversation.status:
        return conversation
    if status not in allowed:
        raise Conflict(
            f"conversation {conversation.pk} is {conversation.status}; it can move"
            f" to {', '.join(sorted(allowed)) or 'nothing (archived is final)'},"
            f" not {status}"
        )
    conversation.status = status
    fields = ["status", "updated_at"]
    if status == ConversationStatus.ARCHIVED:
        conversation.ended_at = timezone.now()
        fields.append("ended_at")
    conversation.save(update_fields=fields)
    return conversation


@transaction.atomic
def messages_append(
    *,
    conversation: Conversation,
    messages: Sequence[dict[str, str]],
    author: str = "",
    batch_id: str = "",
) -> list[Message]:
    """Append messages in order; an idle conversation becomes active again."""
    if not messages:
        raise InvalidInput("give at least one message")
    if len(messages) > MESSAGES_PER_APPEND:
        raise LimitExceeded(
            f"{len(messages)} messages in one append; at most {MESSAGES_PER_APPEND}"
        )
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
    if locked.status == ConversationStatus.ARCHIVED:
        raise Conflict(f"conversation {locked.pk} is archived; start a new one")
    created: list[Message] = []
    for offset, item in enumerate(messages, start=1):
        role = item.get("role", "")
        if role not in MessageRole.values:
            raise InvalidInput(
                f"message role {role!r} is invalid; use one of"
                f" {', '.join(MessageRole.values)}"
            )
        content = _clean_content(
            item.get("content", ""), what="message", max_chars=MESSAGE_MAX_CHARS
        )
        message = Message(
            conversation=locked,
            agent_id=locked.agent_id,
            constellation_id=locked.constellation_id,
            role=role,
            author=(item.get("author") or author)[:200],
            content=content,
            position=locked.message_count + offset,
            batch_id=batch_id,
            content_hash=content_hash(content),
        )
        _full_clean(message, validate_constraints=False)
        created.append(message)
    try:
        Message.objects.bulk_create(created)
    except IntegrityError as exc:  # pragma: no cover - guarded by the lock
        raise Conflict(f"concurrent append to conversation {locked.pk}") from exc
    if not created[0].pk:  # backends without RETURNING
        created = list(
            Message.objects.filter(
                conversation=locked, position__gt=locked.message_count
            )
        )
    index_put_texts(
        MESSAGE_INDEX,
        rows=[(m.pk, m.constellation_id, m.agent_id, m.content) for m in created],
    )
    embedding_schedule(kind="message", row_ids=[m.pk for m in created])
    locked.message_count += len(created)
    fields = ["message_count", "updated_at"]
    if locked.status == ConversationStatus.IDLE:
        locked.status = ConversationStatus.ACTIVE
        fields.append("status")
    locked.save(update_fields=fields)
    conversation.message_count, conversation.status = (
        locked.message_count,
        locked.status,
    )
    return created


@transaction.atomic
def retrieval_config_update(
    *,
    constellation: Constellation,
    rerank_enabled: bool | None = None,
    decay_rate: float | None = None,
) -> RetrievalConfig:
    config, _ = RetrievalConfig.objects.get_or_create(constellation=constellation)
    fields = []
    if rerank_enabled is not None:
        config.rerank_enabled = rerank_enabled
        fields.append("rerank_enabled")
    if decay_rate is not None:
        config.decay_rate = decay_rate
        fields.append("decay_rate")
    _full_clean(config)
    if fields:
        config.save(update_fields=fields)
    return config
