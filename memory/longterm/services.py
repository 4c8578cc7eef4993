"""Every write of long-term memory: archival entries, conversations, messages."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from typing import Any

from django.db import (
    IntegrityError,
    transaction,
)
from django.utils import timezone

from activity.summaries.services import (
    agent_summary_refresh,
    conversation_summary_draft,
)
from activity.summaries.summarizers import SummaryMessage
from memory.longterm.compose import (
    Batch,
    HistoryMessage,
    RecursiveSummarization,
    history_config_for,
)
from memory.longterm.indexes import ARCHIVAL_INDEX, MESSAGE_INDEX
from memory.longterm.models import (
    ArchivalEntry,
    ArchivalLifetime,
    ArchivalRole,
    ArchivalRoleKind,
    ArchivalSource,
    ArchivalTier,
    ContextConfig,
    Conversation,
    ConversationStatus,
    Message,
    MessageRole,
    RetrievalConfig,
)
from memory.longterm.permissions import archival_role_grant_check
from memory.longterm.selectors import CONVERSATION, conversation_latest
from memory.longterm.tasks import agent_summary_refresh_task
from memory.search.embedder import embed_texts
from memory.search.index import (
    CONTEXT_ROWS,
    context_text,
    index_delete,
    index_put_texts,
)
from memory.search.pipeline import embedding_schedule
from memory.search.registry import EmbeddingState
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.agents.selectors import actor_names
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.db.rows import instances_insert, row_update
from pattern_site.kernel.errors import (
    Conflict,
    InvalidInput,
    LimitExceeded,
    full_clean,
)
from pattern_site.kernel.events import EventType, event_record

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
    # Callers run inside a write transaction: the work stays linear in the
    # tags given, and stops at the first tag past the limit.
    cleaned: dict[str, None] = {}
    for tag in tags:
        tag = str(tag).strip().lower()
        if not tag:
            continue
        if len(tag) > MAX_TAG_CHARS or '"' in tag or "\\" in tag:
            raise InvalidInput(
                f"tag {tag[:60]!r} is invalid: at most {MAX_TAG_CHARS} chars,"
                " no quotes or backslashes"
            )
        cleaned[tag] = None
        if len(cleaned) > MAX_TAGS:
            raise LimitExceeded(
                f"more than {MAX_TAGS} different tags given; at most {MAX_TAGS}"
            )
    return list(cleaned)


@transaction.atomic
def _archival_event(*, entry: ArchivalEntry, tool: str) -> None:
    actor = (
        Actor.for_agent(entry.agent)
        if entry.source == ArchivalSource.AGENT
        else Actor.system()
    )
    event_record(
        actor=actor,
        agent=entry.agent,
        event_type=EventType.TOOL_EXECUTED,
        details={"tool": tool, "entry_id": entry.pk, "label": entry.label or ""},
    )


@transaction.atomic
@transaction.atomic
def archival_role_set(
    *, actor: Actor, agent: Agent, role: str | None
) -> ArchivalRole | None:
    """Give ``agent`` an archival role (``consolidator``: it reads every
    agent's archival entries of its constellation), or take it (None)."""
    archival_role_grant_check(actor=actor, agent=agent)
    if role is None:
        ArchivalRole.objects.filter(agent=agent).delete()
        return None
    if role not in ArchivalRoleKind.values:
        raise InvalidInput(
            f"unknown archival role {role!r}; the roles are:"
            f" {', '.join(ArchivalRoleKind.values)}"
        )
    granted, _ = ArchivalRole.objects.get_or_create(agent=agent)
    granted.role = role
    full_clean(granted)
    granted.save(update_fields=["role"])
    return granted


def archival_entry_create(
    *,
    agent: Agent,
    content: str,
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    importance: float = 0.5,
    source: str = ArchivalSource.AGENT,
    label: str | None = None,
    tier: str = ArchivalTier.AGENT,
    lifetime: str = ArchivalLifetime.SHORT_TERM,
    source_conversation: Conversation | None = None,
) -> ArchivalEntry:
    content = _clean_content(content, what="archival", max_chars=ARCHIVAL_MAX_CHARS)
    label = label.strip() if label else None
    if source_conversation is not None and source_conversation.agent_id != agent.pk:
        raise InvalidInput(
            f"conversation {source_conversation.pk} is not {agent.name}'s",
            extra={"field": "source_conversation_id"},
        )
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
        tier=tier,
        lifetime=lifetime,
        source_conversation=source_conversation,
        content_hash=content_hash(content),
    )
    full_clean(entry, validate_constraints=False)
    entry.save()
    _index_archival(entry)
    _archival_event(entry=entry, tool="archival_memory_insert")
    return entry


def _index_archival(entry: ArchivalEntry) -> None:
    _archival_texts_put(entry)
    embedding_schedule(kind="archival", row_ids=[entry.pk])


def archival_entries_reindex(*, entry_ids: Sequence[int]) -> None:
    """Put these entries' keyword-index rows (back) in place."""
    for entry in ArchivalEntry.objects.filter(pk__in=list(entry_ids)).order_by("pk"):
        _archival_texts_put(entry)


def _archival_texts_put(entry: ArchivalEntry) -> None:
    # The context: the same agent's entries just before this one.  It is
    # fixed when the entry is indexed; editing an entry leaves the context
    # of the entries after it as it was.
    before = ArchivalEntry.objects.filter(agent_id=entry.agent_id, pk__lt=entry.pk)
    previous = list(
        before.order_by("-pk").values_list("content", flat=True)[:CONTEXT_ROWS]
    )
    index_put_texts(
        ARCHIVAL_INDEX,
        rows=[(entry.pk, entry.constellation_id, entry.agent_id, entry.content)],
        contexts={entry.pk: context_text(previous[::-1])},
        dates={entry.pk: _archival_date(entry)},
    )


def _archival_date(entry: ArchivalEntry) -> date:
    """The day an entry is about: its metadata ``date`` when that is an ISO
    date (or date and time), else the day it was stored."""
    given = entry.metadata.get("date") if isinstance(entry.metadata, dict) else None
    if isinstance(given, str):
        try:
            return datetime.fromisoformat(given.strip()).date()
        except ValueError:
            pass
    return entry.created_at.date()


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
    full_clean(entry, validate_constraints=False)
    entry.save(update_fields=[*fields, "updated_at"])
    if "content" in fields:
        _index_archival(entry)
    _archival_event(entry=entry, tool="archival_memory_update")
    return entry


def archival_entry_append(*, entry: ArchivalEntry, content: str) -> ArchivalEntry:
    """The v1 ``recall append``: add text on a new line of an entry."""
    _clean_content(content, what="appended", max_chars=ARCHIVAL_MAX_CHARS)
    return archival_entry_update(entry=entry, content=f"{entry.content}\n{content}")


@transaction.atomic
def archival_entry_delete(*, entry: ArchivalEntry) -> None:
    index_delete(ARCHIVAL_INDEX, row_ids=[entry.pk])
    _archival_event(entry=entry, tool="archival_memory_delete")
    entry.delete()


def history_event(
    *, event: str, text: str, entry_id: int | None = None, at: datetime | None = None
) -> dict[str, Any]:
    """One line of an entry's history (``ArchivalEntry.history``)."""
    return {
        "at": (at or timezone.now()).isoformat(),
        "event": event,
        "text": text,
        "entry_id": entry_id,
    }


@transaction.atomic
def archival_entry_supersede(
    *,
    entry: ArchivalEntry,
    reason: str,
    by: ArchivalEntry | None = None,
    at: datetime | None = None,
) -> ArchivalEntry:
    """Mark ``entry`` merged into ``by`` or pruned: kept, restorable, but
    out of default lists and searches."""
    if by is not None and by.pk == entry.pk:
        raise InvalidInput("an entry cannot be superseded by itself")
    entry.superseded_at = at or timezone.now()
    entry.superseded_by = by
    entry.superseded_reason = reason
    full_clean(entry, validate_constraints=False)
    entry.save(update_fields=["superseded_at", "superseded_by", "superseded_reason"])
    return entry


@transaction.atomic
def archival_entry_restore(*, entry: ArchivalEntry) -> ArchivalEntry:
    """Undo a merge or prune: the entry is live again (the entry it was
    merged into keeps what it took from it, noted in its history).  The
    partner wants it kept, so it becomes long-term (never pruned), and
    consolidation does not merge it again with the entry it left."""
    if entry.superseded_at is None:
        raise Conflict(f"archival entry {entry.pk} is not superseded")
    entry.lifetime = ArchivalLifetime.LONG_TERM
    entry.history = [
        *entry.history,
        history_event(
            event="restored",
            text=entry.superseded_reason,
            entry_id=entry.superseded_by_id,
        ),
    ]
    entry.superseded_at, entry.superseded_by, entry.superseded_reason = None, None, ""
    entry.save(
        update_fields=[
            "superseded_at",
            "superseded_by",
            "superseded_reason",
            "history",
            "lifetime",
            "updated_at",
        ]
    )
    _archival_event(entry=entry, tool="archival_memory_restore")
    return entry


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
    full_clean(conversation)
    conversation.save()
    return conversation


@transaction.atomic
def conversation_current(*, agent: Agent) -> Conversation:
    """The conversation the agent's turns go to: its newest one that is not
    archived (an idle one resumes with the next message), or a new one."""
    return conversation_latest(agent=agent) or conversation_start(agent=agent)


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
    if status in (ConversationStatus.IDLE, ConversationStatus.ARCHIVED):
        agent_summary_refresh_task.delay_on_commit(conversation.agent_id)
    return conversation


# Messages a summary reads at the most (the newest, in time order).
SUMMARY_MESSAGES = 200


def agent_summary_from_messages(*, agent_id: int) -> Any:
    """Refresh the agent's summary from its conversations' newest user and
    assistant messages (the activity app skips it when too few are new)."""
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        return None
    rows = list(
        Message.objects.filter(
            agent=agent, role__in=[MessageRole.USER, MessageRole.ASSISTANT]
        ).order_by("-created_at", "-pk")[:SUMMARY_MESSAGES]
    )
    messages = [
        SummaryMessage(speaker=m.author or m.role, text=m.content, at=m.created_at)
        for m in reversed(rows)
    ]
    return agent_summary_refresh(agent=agent, messages=messages, embed=embed_texts)


# A tool call id as providers make them ("call_abc123"), and at most this
# many calls in one assistant message.
TOOL_CALL_ID_MAX_CHARS = 100
TOOL_CALLS_PER_MESSAGE = 64


def _clean_tool_calls(raw: Any) -> list[dict[str, str]]:
    """An assistant message's tool calls as ``{"id", "name", "arguments"}``
    with the arguments kept as the JSON text the model wrote."""
    if not isinstance(raw, list):
        raise InvalidInput("tool_calls must be a list of {id, name, arguments}")
    if len(raw) > TOOL_CALLS_PER_MESSAGE:
        raise LimitExceeded(
            f"{len(raw)} tool calls in one message; at most {TOOL_CALLS_PER_MESSAGE}"
        )
    calls, seen = [], set()
    for call in raw:
        call_id = call.get("id") if isinstance(call, dict) else None
        name = call.get("name") if isinstance(call, dict) else None
        arguments = call.get("arguments", "") if isinstance(call, dict) else None
        if not (isinstance(call_id, str) and call_id.strip()) or not (
            isinstance(name, str) and name.strip()
        ):
            raise InvalidInput("each tool call needs a non-empty 'id' and 'name'")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        if len(call_id) > TOOL_CALL_ID_MAX_CHARS or call_id in seen:
            raise InvalidInput(
                f"tool call id {call_id[:40]!r} is repeated or longer than"
                f" {TOOL_CALL_ID_MAX_CHARS} chars"
            )
        seen.add(call_id)
        calls.append({"id": call_id, "name": name, "arguments": arguments})
    return calls


@transaction.atomic
def partner_message_send(*, agent: Agent, content: str) -> Message:
    """The agent's message to its partner: an assistant message of its
    current conversation, which the dashboard's chat shows."""
    content = content.strip()
    if not content:
        raise InvalidInput("the message is empty; say something")
    (message,) = messages_append(
        conversation=conversation_current(agent=agent),
        messages=[{"role": MessageRole.ASSISTANT, "content": content}],
    )
    return message


def _message_fields(item: dict[str, Any]) -> tuple[str, str, list[dict[str, str]], str]:
    """``(role, content, tool_calls, tool_call_id)`` of one message to append:
    tool calls only on an assistant message (which may then have no text),
    and a tool message answers a call id."""
    role = item.get("role", "")
    if role not in MessageRole.values:
        raise InvalidInput(
            f"message role {role!r} is invalid; use one of"
            f" {', '.join(MessageRole.values)}"
        )
    tool_calls = _clean_tool_calls(item.get("tool_calls") or [])
    tool_call_id = (item.get("tool_call_id") or "").strip()
    if tool_calls and role != MessageRole.ASSISTANT:
        raise InvalidInput(f"a {role} message cannot make tool calls")
    if role == MessageRole.TOOL and not tool_call_id:
        raise InvalidInput("a tool message needs the tool_call_id it answers")
    if tool_call_id and role != MessageRole.TOOL:
        raise InvalidInput(f"a {role} message answers no tool call")
    if len(tool_call_id) > TOOL_CALL_ID_MAX_CHARS:
        raise InvalidInput(f"tool_call_id is over {TOOL_CALL_ID_MAX_CHARS} chars")
    content = item.get("content", "")
    if tool_calls and content == "":
        return role, "", tool_calls, ""
    content = _clean_content(content, what="message", max_chars=MESSAGE_MAX_CHARS)
    return role, content, tool_calls, tool_call_id


def message_index_text(message: Message) -> str:
    """What search finds a message by: its text, or the calls it made."""
    return _index_text(message.content, message.tool_calls)


def _index_text(content: str, tool_calls: list[dict[str, Any]]) -> str:
    if content:
        return content
    return " ".join(f"{c['name']}({c['arguments']})" for c in tool_calls)


# Every append locks its conversation and reads the messages before it (for
# their keyword-index context): both compiled once.
_CONVERSATION_LOCKED = CompiledQuery(
    lambda conversation_id: (
        Conversation.objects.select_for_update(of=("self",))
        .select_related("agent")
        .filter(pk=conversation_id)
        .order_by()[:1]
    ),
    conversation_id=-520_101,
)
_TEXTS_BEFORE = CompiledQuery(
    lambda conversation_id, position: (
        Message.objects.filter(conversation_id=conversation_id, position__lt=position)
        .order_by("-position")
        .values_list("content", "tool_calls")[:CONTEXT_ROWS]
    ),
    conversation_id=-520_102,
    position=2_052_010_301,
)


# Set by ``messages_append`` on the row it returns (the messages' own
# ``conversation``): the count it left and the index texts of the newest
# messages, which the keyword index takes as the next message's context.
_INDEX_TAIL = "_index_tail"


@transaction.atomic
def messages_append(
    *,
    conversation: Conversation,
    messages: Sequence[dict[str, Any]],
    author: str = "",
    batch_id: str = "",
) -> list[Message]:
    """Append messages in order; an idle conversation becomes active again.
    A message is ``{"role", "content", "author"?}``; an assistant message
    may carry ``tool_calls`` (``[{"id", "name", "arguments"}]``) and a tool
    message names the ``tool_call_id`` it answers."""
    return messages_append_in_transaction(
        conversation=conversation, messages=messages, author=author, batch_id=batch_id
    )


def messages_append_in_transaction(
    *,
    conversation: Conversation,
    messages: Sequence[dict[str, Any]],
    author: str = "",
    batch_id: str = "",
) -> list[Message]:
    """``messages_append`` in the caller's transaction, without a savepoint:
    for a caller whose transaction an error here rolls back whole (the
    agent loop's step, where a savepoint would only cost two statements)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("messages_append_in_transaction needs a transaction")
    if not messages:
        raise InvalidInput("give at least one message")
    if len(messages) > MESSAGES_PER_APPEND:
        raise LimitExceeded(
            f"{len(messages)} messages in one append; at most {MESSAGES_PER_APPEND}"
        )
    # With its agent, whose events the messages make (the agent's row is
    # read, not locked).
    locked = _CONVERSATION_LOCKED.first(conversation_id=conversation.pk)
    if locked is None:
        raise Conversation.DoesNotExist(
            f"conversation {conversation.pk} does not exist"
        )
    if locked.status == ConversationStatus.ARCHIVED:
        raise Conflict(f"conversation {locked.pk} is archived; start a new one")
    created: list[Message] = []
    now = timezone.now()
    for offset, item in enumerate(messages, start=1):
        role, content, tool_calls, tool_call_id = _message_fields(item)
        message = Message(
            conversation=locked,
            agent_id=locked.agent_id,
            constellation_id=locked.constellation_id,
            role=role,
            author=(item.get("author") or author)[:200],
            content=content,
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
            position=locked.message_count + offset,
            batch_id=batch_id,
            content_hash=content_hash(content),
            created_at=now,
        )
        # Its conversation, agent and constellation are the locked row's:
        # they exist, and looking each up again cost every append three
        # reads.
        full_clean(
            message,
            validate_constraints=False,
            exclude=["conversation", "agent", "constellation"],
        )
        created.append(message)
    try:
        # One statement built once: the ORM's bulk insert cost an append
        # more than its own statements.
        instances_insert(created)
    except IntegrityError as exc:  # pragma: no cover - guarded by the lock
        raise Conflict(f"concurrent append to conversation {locked.pk}") from exc
    # Messages are never changed once appended: the texts an earlier append
    # left on the row it returned are still the newest ones when the
    # count it left is the count now.
    tail = getattr(conversation, _INDEX_TAIL, None)
    known = tail is not None and tail[0] == locked.message_count
    texts = _messages_texts_put(
        locked, created, new=True, before=tail[1] if known else None
    )
    embedding_schedule(kind="message", row_ids=[m.pk for m in created])
    locked.message_count += len(created)
    setattr(locked, _INDEX_TAIL, (locked.message_count, texts[-CONTEXT_ROWS:]))
    locked.updated_at = now
    fields: tuple[str, ...] = ("message_count", "updated_at")
    if locked.status == ConversationStatus.IDLE:
        locked.status = ConversationStatus.ACTIVE
        fields += ("status",)
    row_update(locked, fields)
    conversation.message_count, conversation.status = (
        locked.message_count,
        locked.status,
    )
    _message_events(conversation=locked, messages=created)
    return created


def conversation_summarize(*, conversation_id: int, through: int) -> bool:
    """Fold the messages up to position ``through`` into the conversation's
    summary (with the summary so far), in their batches' order; a batch
    whose tool calls and results do not pair up is left out, as it is of
    the history.  Nothing when the summary already reaches ``through``:
    the task can run twice.  Returns whether the summary moved."""
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None or conversation.summary_through >= through:
        return False
    rows = Message.objects.filter(
        conversation=conversation,
        position__gt=conversation.summary_through,
        position__lte=through,
    ).order_by("position")
    batch: Batch | None = None
    picked: list[Message] = []
    pending: list[Message] = []
    for row in rows:
        key = row.batch_id or f"#{row.position}"
        if batch is None or batch.key != key:
            if batch is not None and batch.complete:
                picked += pending
            batch, pending = Batch(key), []
        batch.messages.append(
            HistoryMessage(
                row.position,
                row.role,
                row.content,
                row.batch_id,
                tuple(row.tool_calls),
                row.tool_call_id,
            )
        )
        pending.append(row)
    if batch is not None and batch.complete:
        picked += pending
    strategy = history_config_for(constellation=conversation.constellation_id)
    model = (
        strategy.compression.model
        if isinstance(strategy.compression, RecursiveSummarization)
        else ""
    )
    if picked:
        draft = conversation_summary_draft(
            constellation_id=conversation.constellation_id,
            agent_name=conversation.agent.name,
            previous=conversation.summary,
            messages=[
                SummaryMessage(
                    speaker=m.author or m.role,
                    text=message_index_text(m),
                    at=m.created_at,
                )
                for m in picked
            ],
            model=model,
        )
        summary, used = draft.summary, draft.model[:100]
    else:
        summary, used = conversation.summary, conversation.summary_model
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().get(pk=conversation_id)
        if locked.summary_through >= through:
            return False
        locked.summary, locked.summary_through = summary, through
        locked.summary_model = used
        locked.save(update_fields=["summary", "summary_through", "summary_model"])
    return True


# A message the agent received, or one it sent; tool and system messages are
# the agent's own machinery and stay out of the activity stream.
_MESSAGE_EVENTS = {
    MessageRole.USER: EventType.MESSAGE_RECEIVED,
    MessageRole.ASSISTANT: EventType.MESSAGE_SENT,
}


def _messages_texts_put(
    conversation: Conversation,
    messages: list[Message],
    *,
    new: bool = False,
    before: list[str] | None = None,
) -> list[str]:
    """Index consecutive ``messages`` of ``conversation`` (position order);
    ``new``: just inserted, never indexed; ``before``: the index texts of
    the messages just before them, when known (else read).  Returns the
    texts of the messages before and of ``messages``, in order."""
    # Each message's context: the messages just before it in the
    # conversation (earlier appends, then this one's).
    if before is not None:
        texts = list(before)
    else:
        texts = [
            _index_text(content, tool_calls)
            for content, tool_calls in _TEXTS_BEFORE.rows(
                conversation_id=conversation.pk, position=messages[0].position
            )
        ][::-1]
    contexts: dict[int, str] = {}
    for message in messages:
        contexts[message.pk] = context_text(texts)
        texts.append(message_index_text(message))
    index_put_texts(
        MESSAGE_INDEX,
        rows=[
            (m.pk, m.constellation_id, m.agent_id, message_index_text(m))
            for m in messages
        ],
        contexts=contexts,
        dates={m.pk: m.created_at.date() for m in messages},
        new=new,
    )
    return texts


def messages_reindex(*, message_ids: Sequence[int]) -> None:
    """Put these messages' keyword-index rows (back) in place; each one's
    context is read from its stored conversation."""
    rows = Message.objects.filter(pk__in=list(message_ids)).select_related(
        "conversation"
    )
    for message in rows.order_by("conversation_id", "position"):
        _messages_texts_put(message.conversation, [message])


def _message_events(*, conversation: Conversation, messages: list[Message]) -> None:
    actor = Actor.for_agent(conversation.agent)
    # An author is stored as a ref ("agent:3"); the feed reads names.
    names = actor_names(refs={m.author for m in messages if m.author})
    for message in messages:
        event_type = _MESSAGE_EVENTS.get(message.role)
        if event_type is None:
            continue
        other = "source" if event_type == EventType.MESSAGE_RECEIVED else "target"
        event_record(
            actor=actor,
            event_type=event_type,
            details={
                other: names.get(message.author, message.author)
                or conversation.title
                or "partner",
                "summary": message.content[:160],
                "conversation_id": conversation.pk,
            },
            about=(CONVERSATION, conversation.pk),
        )


@transaction.atomic
def retrieval_config_update(
    *,
    constellation: Constellation,
    rerank_enabled: bool | None = None,
    decay_rate: float | None = None,
    fusion: str | None = None,
    keyword_weight: float | None = None,
    context_weight: float | None = None,
    date_weight: float | None = None,
    candidate_depth: int | None = None,
    conversation_decay_rate: float | None = None,
    constellation_decay_rate: float | None = None,
    archival_cap: int | None = None,
    reranker: str | None = None,
    reranker_depth: int | None = None,
    time_weight: float | None = None,
    when_weight: float | None = None,
    late_weight: float | None = None,
) -> RetrievalConfig:
    """Change the given settings (None: keep); invalid values store nothing."""
    config, _ = RetrievalConfig.objects.get_or_create(constellation=constellation)
    given = {
        "rerank_enabled": rerank_enabled,
        "decay_rate": decay_rate,
        "fusion": fusion,
        "keyword_weight": keyword_weight,
        "context_weight": context_weight,
        "date_weight": date_weight,
        "candidate_depth": candidate_depth,
        "conversation_decay_rate": conversation_decay_rate,
        "constellation_decay_rate": constellation_decay_rate,
        "archival_cap": archival_cap,
        "reranker": reranker,
        "reranker_depth": reranker_depth,
        "time_weight": time_weight,
        "when_weight": when_weight,
        "late_weight": late_weight,
    }
    fields = []
    for name, value in given.items():
        if value is not None:
            setattr(config, name, value)
            fields.append(name)
    full_clean(config)
    if fields:
        config.save(update_fields=fields)
    return config


@transaction.atomic
def context_config_update(
    *,
    constellation: Constellation,
    model_overrides: dict[str, dict[str, int]] | None = None,
    compression: str | None = None,
    keep_recent: int | None = None,
    chunk_size: int | None = None,
    summarization_model: str | None = None,
    max_messages_cap: int | None = None,
) -> ContextConfig:
    """Change how requests to the constellation's models are composed (None:
    keep); invalid values store nothing."""
    config, _ = ContextConfig.objects.get_or_create(constellation=constellation)
    given = {
        "model_overrides": model_overrides,
        "compression": compression,
        "keep_recent": keep_recent,
        "chunk_size": chunk_size,
        "summarization_model": summarization_model,
        "max_messages_cap": max_messages_cap,
    }
    fields = [name for name, value in given.items() if value is not None]
    for name in fields:
        setattr(config, name, given[name])
    full_clean(config)
    if fields:
        config.save(update_fields=fields)
    return config


def archival_source_of(actor: Actor) -> str:
    """Who an entry comes from: an agent itself, or a person."""
    return ArchivalSource.AGENT if actor.agent is not None else ArchivalSource.PARTNER
