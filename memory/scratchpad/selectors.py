"""Reading scratchpads: one key, or every note of a conversation."""

from memory.longterm.models import Conversation
from memory.longterm.selectors import conversation_get_for_actor, conversation_latest
from memory.scratchpad.models import ScratchpadEntry
from memory.scratchpad.permissions import scratchpad_read_check
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import InvalidInput, NotFound


def scratchpad_conversation_for_actor(
    *, actor: Actor, conversation_id: int | None
) -> Conversation | None:
    """The conversation whose notes ``actor`` means: the one named, or for
    an agent its current one (None when it has none yet)."""
    if conversation_id is not None:
        conversation = conversation_get_for_actor(
            actor=actor, conversation_id=conversation_id
        )
        scratchpad_read_check(actor=actor, conversation=conversation)
        return conversation
    if actor.agent is None:
        raise InvalidInput("say whose working notes: give a conversation_id")
    return conversation_latest(agent=actor.agent)


def scratchpad_entries(*, conversation: Conversation) -> list[ScratchpadEntry]:
    """The conversation's notes, by key (the caller checked it may read)."""
    return list(ScratchpadEntry.objects.filter(conversation=conversation))


def scratchpad_entry_get(*, conversation: Conversation, key: str) -> ScratchpadEntry:
    entry = ScratchpadEntry.objects.filter(conversation=conversation, key=key).first()
    if entry is None:
        raise NotFound(
            f"no scratchpad key {key!r} in conversation {conversation.pk};"
            " scratchpad_list names the keys there are"
        )
    return entry


def scratchpad_entries_for_actor(
    *, actor: Actor, conversation: Conversation
) -> list[ScratchpadEntry]:
    """The dashboard's read-only view: the notes if ``actor`` may read them."""
    scratchpad_read_check(actor=actor, conversation=conversation)
    return scratchpad_entries(conversation=conversation)
