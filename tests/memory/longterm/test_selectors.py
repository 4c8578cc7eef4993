"""memory.longterm.selectors: entries by id and label, message pages."""

import pytest

from memory.longterm.selectors import (
    archival_entry_get_by_label,
    archival_entry_get_for_actor,
    message_page_for_actor,
    retrieval_config_for,
)
from memory.longterm.services import (
    archival_entry_create,
    conversation_start,
    messages_append,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import NotFound


def test_another_agents_entry_is_404_by_id_and_by_label(agent, other_agent):
    entry = archival_entry_create(agent=other_agent, content="x", label="secret")
    actor = Actor.for_agent(agent)
    with pytest.raises(NotFound):
        archival_entry_get_for_actor(actor=actor, entry_id=entry.pk)
    with pytest.raises(NotFound):
        archival_entry_get_by_label(actor=actor, label="secret")
    mine = Actor.for_agent(other_agent)
    assert archival_entry_get_by_label(actor=mine, label="secret") == entry


def test_message_pages_follow_the_cursor_to_the_end(agent):
    conversation = conversation_start(agent=agent)
    messages_append(
        conversation=conversation,
        messages=[{"role": "user", "content": f"m{i}"} for i in range(5)],
    )
    actor = Actor.for_agent(agent)
    seen, after = [], 0
    while True:
        _c, page, after = message_page_for_actor(
            actor=actor, conversation_id=conversation.pk, after=after, limit=2
        )
        seen += [m.content for m in page]
        if after is None:
            break
    assert seen == [f"m{i}" for i in range(5)]


def test_retrieval_config_defaults_without_a_row(constellation):
    config = retrieval_config_for(constellation=constellation)
    assert config.pk is None and not config.rerank_enabled
