"""Writing and clearing scratchpads (the caller checked the actor may)."""

import json
from typing import Any

from django.db import transaction

from memory.longterm.models import Conversation, ConversationStatus
from memory.scratchpad.models import ScratchpadEntry
from pattern_site.kernel.errors import (
    Conflict,
    InvalidInput,
    LimitExceeded,
    full_clean,
)

# A note is working state, not a document: its value as JSON text stays
# small, and a conversation keeps a bounded number of keys.
SCRATCHPAD_KEY_MAX = 100
SCRATCHPAD_VALUE_MAX_BYTES = 16 * 1024
SCRATCHPAD_KEYS_MAX = 200


def scratchpad_key_clean(key: str) -> str:
    key = key.strip()
    if not key or len(key) > SCRATCHPAD_KEY_MAX:
        raise InvalidInput(
            f"a scratchpad key has 1-{SCRATCHPAD_KEY_MAX} characters; got {len(key)}"
        )
    if any(ord(ch) < 32 for ch in key):
        raise InvalidInput("a scratchpad key has no control characters")
    return key


def _value_size(value: Any) -> int:
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"a scratchpad value must be JSON: {exc}") from None
    return len(text.encode("utf-8"))


@transaction.atomic
def scratchpad_write(
    *, conversation: Conversation, key: str, value: Any
) -> ScratchpadEntry:
    """Set ``key`` to ``value`` in the conversation's notes (a new key or a
    replaced value)."""
    key = scratchpad_key_clean(key)
    if value is None:
        raise InvalidInput(
            f"a scratchpad value is not null; scratchpad_clear removes {key!r}"
        )
    size = _value_size(value)
    if size > SCRATCHPAD_VALUE_MAX_BYTES:
        raise LimitExceeded(
            f"scratchpad value of {key!r} is {size} bytes as JSON; at most"
            f" {SCRATCHPAD_VALUE_MAX_BYTES} allowed"
        )
    # Locks the conversation so concurrent writes count keys one at a time.
    conversation = Conversation.objects.select_for_update().get(pk=conversation.pk)
    if conversation.status == ConversationStatus.ARCHIVED:
        raise Conflict(
            f"conversation {conversation.pk} is archived: its notes are kept"
            " to read and clear, not to write; write in the current conversation"
        )
    entry = ScratchpadEntry.objects.filter(conversation=conversation, key=key).first()
    if entry is not None:
        entry.value = value
        full_clean(entry)
        entry.save(update_fields=["value", "updated_at"])
        return entry
    keys = ScratchpadEntry.objects.filter(conversation=conversation).count()
    if keys >= SCRATCHPAD_KEYS_MAX:
        raise LimitExceeded(
            f"conversation {conversation.pk} has {keys} scratchpad keys; at most"
            f" {SCRATCHPAD_KEYS_MAX}: clear some or overwrite an existing key"
        )
    entry = ScratchpadEntry(
        conversation=conversation,
        agent_id=conversation.agent_id,
        constellation_id=conversation.constellation_id,
        key=key,
        value=value,
    )
    full_clean(entry)
    entry.save()
    return entry


@transaction.atomic
def scratchpad_clear(*, conversation: Conversation, key: str | None = None) -> int:
    """Remove one key, or every note of the conversation; the number removed."""
    rows = ScratchpadEntry.objects.filter(conversation=conversation)
    if key is not None:
        rows = rows.filter(key=scratchpad_key_clean(key))
    removed, _ = rows.delete()
    return removed
