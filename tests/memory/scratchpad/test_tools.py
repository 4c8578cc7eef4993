"""The scratchpad tools: an agent's working notes per conversation, over
HTTP and through ``tool_call``; private to the agent, kept on archive,
cleared only when asked, bounded."""

from typing import Any

import pytest
from django.test import Client

from memory.longterm.services import conversation_set_status, conversation_start
from memory.models import ScratchpadEntry
from memory.scratchpad.services import (
    SCRATCHPAD_KEYS_MAX,
    SCRATCHPAD_VALUE_MAX_BYTES,
    scratchpad_write,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from pattern_site.kernel.tools import tool_call

J = "application/json"


def _post(client: Client, name: str, body: dict[str, Any]) -> Any:
    return client.post(f"/api/tools/{name}", body, content_type=J)


def test_an_agent_writes_reads_and_lists_its_notes_over_http(
    agent: Any, agent_client: Client
) -> None:
    conversation = conversation_start(agent=agent, title="research")
    written = _post(
        agent_client,
        "scratchpad_write",
        {"key": "findings", "value": {"sources": ["a", "b"], "done": False}},
    )
    assert written.status_code == 200, written.content
    assert written.json()["conversation_id"] == conversation.pk
    _post(agent_client, "scratchpad_write", {"key": "findings", "value": [1, 2]})
    _post(agent_client, "scratchpad_write", {"key": "next", "value": "ask Sam"})

    read = _post(agent_client, "scratchpad_read", {"key": "findings"})
    assert read.status_code == 200, read.content
    assert read.json()["value"] == [1, 2]
    listed = _post(agent_client, "scratchpad_list", {})
    assert listed.status_code == 200, listed.content
    assert [(e["key"], e["value"]) for e in listed.json()["entries"]] == [
        ("findings", [1, 2]),
        ("next", "ask Sam"),
    ]


def test_a_first_note_starts_the_agents_conversation(agent: Any) -> None:
    result = tool_call(
        actor=Actor.for_agent(agent),
        name="scratchpad_write",
        arguments={"key": "plan", "value": {"step": 1}},
    )
    assert result.ok, result.text
    assert agent.conversations.get().pk == result.value["conversation_id"]


def test_another_agent_cannot_read_or_touch_the_notes(
    agent: Any, other_agent: Any
) -> None:
    conversation = conversation_start(agent=agent)
    scratchpad_write(conversation=conversation, key="secret", value="the plan")
    other = Client(
        HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=other_agent).raw}"
    )

    for name, body in [
        ("scratchpad_read", {"key": "secret"}),
        ("scratchpad_list", {}),
        ("scratchpad_write", {"key": "secret", "value": "mine"}),
        ("scratchpad_clear", {}),
    ]:
        response = _post(other, name, {**body, "conversation_id": conversation.pk})
        assert response.status_code == 404, (name, response.content)
        assert b"the plan" not in response.content
    # Without a conversation id, the other agent sees its own (empty) notes.
    assert _post(other, "scratchpad_list", {}).json()["entries"] == []
    assert ScratchpadEntry.objects.get(key="secret").value == "the plan"


def test_the_partner_reads_the_notes_but_cannot_write_them(
    agent: Any, partner: Any
) -> None:
    conversation = conversation_start(agent=agent)
    scratchpad_write(conversation=conversation, key="k", value=1)
    human = Actor.for_user(partner)

    read = tool_call(
        actor=human,
        name="scratchpad_list",
        arguments={"conversation_id": conversation.pk},
    )
    assert read.ok, read.text
    assert [e["key"] for e in read.value["entries"]] == ["k"]
    write = tool_call(
        actor=human,
        name="scratchpad_write",
        arguments={"key": "k", "value": 2, "conversation_id": conversation.pk},
    )
    assert not write.ok
    assert "only the agent" in write.text
    assert ScratchpadEntry.objects.get().value == 1


def test_archiving_keeps_the_notes_readable_and_clearable(
    agent: Any, agent_client: Client
) -> None:
    conversation = conversation_start(agent=agent)
    scratchpad_write(conversation=conversation, key="trail", value=["x", "y"])
    conversation_set_status(conversation=conversation, status="archived")
    ref = {"conversation_id": conversation.pk}

    read = _post(agent_client, "scratchpad_read", {"key": "trail", **ref})
    assert read.status_code == 200, read.content
    assert read.json()["value"] == ["x", "y"]
    refused = _post(agent_client, "scratchpad_write", {"key": "t", "value": 1, **ref})
    assert refused.status_code == 409
    assert "archived" in refused.json()["detail"]

    cleared = _post(agent_client, "scratchpad_clear", ref)
    assert cleared.status_code == 200, cleared.content
    assert cleared.json()["cleared"] == 1
    assert not ScratchpadEntry.objects.exists()


def test_clear_removes_one_key_or_all(agent: Any, agent_client: Client) -> None:
    conversation = conversation_start(agent=agent)
    for key in ("a", "b", "c"):
        scratchpad_write(conversation=conversation, key=key, value=key)

    one = _post(agent_client, "scratchpad_clear", {"key": "b"})
    assert one.json()["cleared"] == 1
    assert sorted(ScratchpadEntry.objects.values_list("key", flat=True)) == ["a", "c"]
    missing = _post(agent_client, "scratchpad_read", {"key": "b"})
    assert missing.status_code == 404
    assert "scratchpad_list" in missing.json()["detail"]
    everything = _post(agent_client, "scratchpad_clear", {})
    assert everything.json()["cleared"] == 2
    assert not ScratchpadEntry.objects.exists()


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"key": "k" * 101, "value": 1}, 422, "at most 100"),
        ({"key": "", "value": 1}, 422, "at least 1"),
        ({"key": "k", "value": None}, 422, "not null"),
        ({"key": "k", "value": "x" * SCRATCHPAD_VALUE_MAX_BYTES}, 422, "bytes as JSON"),
        ({"key": "k", "value": 1, "extra": 2}, 422, "unknown field"),
    ],
)
def test_oversized_or_malformed_notes_are_refused(
    agent: Any, agent_client: Client, body: dict[str, Any], status: int, says: str
) -> None:
    conversation_start(agent=agent)
    response = _post(agent_client, "scratchpad_write", body)
    assert response.status_code == status, response.content
    assert says in response.content.decode()
    assert not ScratchpadEntry.objects.exists()


def test_a_conversation_keeps_a_bounded_number_of_keys(agent: Any) -> None:
    conversation = conversation_start(agent=agent)
    ScratchpadEntry.objects.bulk_create(
        ScratchpadEntry(
            conversation=conversation,
            agent=agent,
            constellation_id=agent.constellation_id,
            key=f"k{i}",
            value=i,
        )
        for i in range(SCRATCHPAD_KEYS_MAX)
    )
    actor = Actor.for_agent(agent)
    refused = tool_call(
        actor=actor, name="scratchpad_write", arguments={"key": "one more", "value": 1}
    )
    assert not refused.ok
    assert f"at most {SCRATCHPAD_KEYS_MAX}" in refused.text
    # An existing key may still be overwritten.
    replaced = tool_call(
        actor=actor, name="scratchpad_write", arguments={"key": "k0", "value": "new"}
    )
    assert replaced.ok, replaced.text
    assert ScratchpadEntry.objects.count() == SCRATCHPAD_KEYS_MAX
