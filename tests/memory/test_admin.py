"""The admin covers every memory model and agent tokens, read-only."""

import pytest
from django.test import Client

from memory.blocks.services import block_create, block_operate, block_share
from memory.longterm.services import (
    archival_entry_create,
    conversation_start,
    messages_append,
)
from memory.models import (
    ArchivalEntry,
    BlockApproval,
    Conversation,
    MemoryBlock,
    Message,
    RetrievalConfig,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from tests.factories import UserFactory


@pytest.fixture
def admin_client(db):
    user = UserFactory(username="root", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def memory(agent, other_agent):
    block = block_create(
        actor=Actor.system(),
        label="human",
        owner=agent,
        content="Sam",
        permission="partner",
    )
    block_share(
        actor=Actor.system(), block=block, agent=other_agent, access="read_only"
    )
    block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "append_text", "text": " likes tea"}],
    )
    archival_entry_create(agent=agent, content="a heron by the lake")
    conversation = conversation_start(agent=agent, title="walk")
    messages_append(
        conversation=conversation, messages=[{"role": "user", "content": "hi"}]
    )
    agent_token_issue(agent=agent)
    return block


MODELS = [
    ("memory", "memoryblock", MemoryBlock),
    ("memory", "blockapproval", BlockApproval),
    ("memory", "archivalentry", ArchivalEntry),
    ("memory", "conversation", Conversation),
    ("memory", "message", Message),
]


@pytest.mark.parametrize(("app", "name", "model"), MODELS)
def test_every_memory_model_is_listed_and_viewable_but_not_editable(
    admin_client, memory, app, name, model
):
    obj = model.objects.first()
    base = f"/admin/{app}/{name}/"
    assert admin_client.get(base).status_code == 200
    page = admin_client.get(f"{base}{obj.pk}/change/")
    assert page.status_code == 200
    assert 'type="submit" value="Save"' not in page.content.decode()
    assert admin_client.get(f"{base}add/").status_code == 403
    assert admin_client.get(f"{base}{obj.pk}/delete/").status_code == 403


def test_block_page_in_the_admin_shows_its_history_and_sharing(admin_client, memory):
    html = admin_client.get(f"/admin/memory/memoryblock/{memory.pk}/change/")
    html = html.content.decode()
    assert "History (newest first)" in html and ">created<" in html
    assert "Flux" in html  # shared with
    assert f"/memory/blocks/{memory.pk}/" in html


def test_tokens_are_listed_without_their_hash(admin_client, memory, agent):
    html = admin_client.get("/admin/coordination/agenttoken/").content.decode()
    token = agent.tokens.get()
    assert token.prefix in html
    change = admin_client.get(f"/admin/coordination/agenttoken/{token.pk}/change/")
    assert token.key_hash not in change.content.decode()


def test_the_admin_is_branded_and_retrieval_settings_stay_editable(admin_client, db):
    assert "Pattern admin" in admin_client.get("/admin/").content.decode()
    assert admin_client.get("/admin/memory/retrievalconfig/").status_code == 200
    assert RetrievalConfig._meta.app_label == "memory"


def test_context_config_admin_refuses_limits_that_do_not_add_up(
    admin_client, constellation
):
    from memory.models import ContextConfig

    response = admin_client.post(
        "/admin/memory/contextconfig/add/",
        {
            "constellation": constellation.pk,
            "model_overrides": (
                '{"tiny": {"max_tokens": 100, "memory_tokens": 80,'
                ' "history_tokens": 80, "reserved_response_tokens": 10}}'
            ),
            "compression": "truncate",
            "keep_recent": 50,
            "chunk_size": 10,
            "summarization_model": "",
            "max_messages_cap": 100,
        },
    )
    assert response.status_code == 200
    assert "exceed max_tokens (100)" in response.content.decode()
    assert not ContextConfig.objects.exists()
