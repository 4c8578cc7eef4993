"""The partner's chat with an agent on its page: a message starts the
agent's turn through its chat group, the history shows people by name,
the agent's text and its tool calls; only the partner may chat."""

import pytest
from django.test import Client

from coordination.groups.chat import chat_group_name
from coordination.groups.models import AgentGroup, GroupRun, RunStatus
from memory.blocks.services import block_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue, agent_update
from tests.factories import AgentFactory, ConstellationFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def every_piece_a_chunk(settings):
    settings.GROUPS_LLM_CHUNK_SECONDS = 0


@pytest.fixture
def flux(constellation):
    agent = AgentFactory(constellation=constellation, name="Flux")
    return agent_update(agent=agent, model_name="gpt-4o-mini", answered_by_llm=True)


@pytest.fixture
def member(constellation):
    user = UserFactory(username="member")
    constellation.members.add(user)
    return user


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def send(client: Client, agent, message: str):
    return client.post(
        f"/groups/agents/{agent.pk}/chat/",
        {"message": message},
        content_type="application/json",
    )


def test_a_chat_message_runs_the_agents_turn_and_the_page_shows_it(
    partner, flux, llm, tools, django_capture_on_commit_callbacks
):
    block_create(actor=Actor.system(), label="human", owner=flux)
    llm.answer_tools(
        ("c1", "core_memory_append", {"label": "human", "content": "likes tea"}),
        text="Saving that.",
    )
    llm.answer_tools(("c2", "send_message", {"message": "Noted: you like tea."}))
    client = logged_in(partner)

    with django_capture_on_commit_callbacks(execute=True):
        response = send(client, flux, "note that I like tea")

    assert response.status_code == 201
    run = GroupRun.objects.get(pk=response.json()["run_id"])
    assert run.status == RunStatus.COMPLETED
    assert run.group.name == chat_group_name(flux)
    assert list(run.group.memberships.values_list("agent_id", flat=True)) == [flux.pk]
    page = client.get(f"/agents/{flux.pk}/").content.decode()
    chat = page.split('data-testid="agent-chat"')[1].split("</section>")[0]
    assert '<span class="chat-who">partner</span>' in chat
    assert "human:" not in chat
    assert "note that I like tea" in chat and "Saving that." in chat
    assert "Noted: you like tea." in chat
    # The memory tool is a row with its arguments and result; send_message
    # is shown as what it said, not as a row.
    assert chat.count('<details class="chat-tool') == 1
    assert "core_memory_append" in chat and "likes tea" in chat
    assert "send_message" not in chat


def test_the_second_message_goes_through_the_same_chat_group(
    partner, flux, llm, django_capture_on_commit_callbacks
):
    llm.answer_streamed(["Hi"])
    llm.answer_streamed(["Again"])
    client = logged_in(partner)
    with django_capture_on_commit_callbacks(execute=True):
        send(client, flux, "hello")
    with django_capture_on_commit_callbacks(execute=True):
        send(client, flux, "hello again")
    assert AgentGroup.objects.filter(name=chat_group_name(flux)).count() == 1
    assert GroupRun.objects.filter(group__name=chat_group_name(flux)).count() == 2


def test_an_agent_not_answered_by_the_llm_has_a_chat_that_says_how_to_set_it_up(
    partner, constellation, llm
):
    entropy = AgentFactory(constellation=constellation, name="Entropy")
    client = logged_in(partner)
    page = client.get(f"/agents/{entropy.pk}/").content.decode()
    assert 'data-testid="chat-unavailable"' in page
    assert "Answered by the LLM" in page
    assert "data-chat-form" not in page
    response = send(client, entropy, "hello")
    assert response.status_code == 422
    assert "own program" in response.json()["detail"]
    assert not GroupRun.objects.exists()


def test_without_an_llm_provider_the_chat_says_which_setting_is_missing(
    partner, flux, settings
):
    settings.LLM_BASE_URL = ""
    client = logged_in(partner)
    page = client.get(f"/agents/{flux.pk}/").content.decode()
    assert "PATTERN_LLM_BASE_URL" in page and "data-chat-form" not in page
    assert send(client, flux, "hello").status_code == 422


def test_only_the_partner_chats(partner, member, flux, llm, constellation):
    page = logged_in(member).get(f"/agents/{flux.pk}/").content.decode()
    assert 'data-testid="agent-chat"' not in page
    assert send(logged_in(member), flux, "hi").status_code == 403
    token = agent_token_issue(agent=flux).raw
    agent_client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert send(agent_client, flux, "hi").status_code == 401
    stranger = ConstellationFactory(name="Elsewhere").partner
    assert send(logged_in(stranger), flux, "hi").status_code == 404
    assert not GroupRun.objects.exists()


def test_an_empty_message_is_refused_with_a_reason(partner, flux, llm):
    response = send(logged_in(partner), flux, "   ")
    assert response.status_code == 422
    assert response.json()["detail"] == "the message is empty"


def test_a_body_that_is_not_json_is_refused_with_a_reason(partner, flux, llm):
    response = logged_in(partner).post(
        f"/groups/agents/{flux.pk}/chat/", "hello", content_type="text/plain"
    )
    assert response.status_code == 422
    assert "not JSON" in response.json()["detail"]
