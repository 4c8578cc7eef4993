"""Working notes in the dashboard: read-only, on the conversation page and
the agent page, for the humans of the constellation only."""

from typing import Any

from django.test import Client

from memory.longterm.services import conversation_set_status, conversation_start
from memory.scratchpad.services import scratchpad_write
from tests.factories import UserFactory


def test_the_conversation_page_shows_its_notes_read_only(
    agent: Any, partner_client: Client
) -> None:
    conversation = conversation_start(agent=agent, title="trip")
    scratchpad_write(
        conversation=conversation, key="hotels", value={"shortlist": ["Elm <Inn>"]}
    )
    conversation_set_status(conversation=conversation, status="archived")

    page = partner_client.get(f"/memory/conversations/{conversation.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-testid="working-notes"' in html
    assert "<code>hotels</code>" in html
    assert "Elm &lt;Inn&gt;" in html
    assert (
        "<form"
        not in html.split('data-testid="working-notes"')[1].split("</section>")[0]
    )


def test_the_agent_page_shows_the_current_conversations_notes(
    agent: Any, partner_client: Client
) -> None:
    scratchpad_write(
        conversation=conversation_start(agent=agent), key="todo", value="call Sam"
    )
    html = partner_client.get(f"/agents/{agent.pk}/").content.decode()
    assert "Working notes" in html
    assert "call Sam" in html


def test_a_conversation_without_notes_says_so(
    agent: Any, partner_client: Client
) -> None:
    conversation = conversation_start(agent=agent)
    html = partner_client.get(
        f"/memory/conversations/{conversation.pk}/"
    ).content.decode()
    assert 'data-testid="working-notes-empty"' in html


def test_a_stranger_sees_no_notes(agent: Any) -> None:
    conversation = conversation_start(agent=agent)
    scratchpad_write(conversation=conversation, key="k", value="private plan")
    stranger = Client()
    stranger.force_login(UserFactory(username="stranger"))
    page = stranger.get(f"/memory/conversations/{conversation.pk}/")
    assert page.status_code == 404
    assert b"private plan" not in page.content
