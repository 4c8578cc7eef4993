"""The memory tool API: agent tools, block resources, approvals, export/import
and the context builder, over HTTP with agent tokens and human sessions."""

import base64
import secrets
from typing import Any

import pytest
from django.test import Client
from loro import ExportMode, LoroDoc

from memory.blocks.selectors import block_value
from memory.blocks.services import block_create, block_share
from memory.models import BlockUpdate, MemoryBlock
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue


@pytest.fixture
def human_client(partner):
    client = Client()
    client.force_login(partner)
    return client


@pytest.fixture
def other_client(other_agent):
    return Client(
        HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=other_agent).raw}"
    )


def post(client, url, body):
    return client.post(url, body, content_type="application/json")


def test_agent_lists_own_shared_and_constellation_blocks_with_access(
    agent_client, make_block, agent, other_agent, constellation
):
    make_block(label="persona", template="persona")
    theirs = make_block(label="board", owner=other_agent)
    make_block(label="secret", owner=other_agent)
    block_share(actor=Actor.system(), block=theirs, agent=agent, access="append_only")
    block_create(
        actor=Actor.system(),
        constellation=constellation,
        label="organization",
        template="organization",
        permission="read_only",
    )

    rows = {b["label"]: b for b in agent_client.get("/api/blocks").json()}

    assert set(rows) == {"persona", "board", "organization"}
    assert rows["board"]["access"] == "append"
    assert rows["board"]["shared_from"] == "Flux"
    assert rows["organization"]["access"] == "read"
    assert rows["organization"]["shared_from"] == "constellation"


def test_another_agents_block_is_404(agent_client, make_block, other_agent):
    block = make_block(label="secret", owner=other_agent)
    assert agent_client.get(f"/api/blocks/{block.pk}").status_code == 404
    response = post(
        agent_client,
        f"/api/blocks/{block.pk}/operations",
        {"operations": [{"op": "append_text", "text": "x"}]},
    )
    assert response.status_code == 404
    assert agent_client.get("/api/blocks/not-a-uuid").status_code in (404, 422)


def test_context_append_and_replace(agent_client, make_block):
    block = make_block(label="human", content="Name: Sam")
    response = post(
        agent_client,
        "/api/tools/context",
        {"operation": "append", "label": "human", "content": "Likes tea"},
    )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "applied"
    response = post(
        agent_client,
        "/api/tools/context",
        {"operation": "replace", "label": "human", "old": "tea", "new": "coffee"},
    )
    assert response.json()["status"] == "applied"
    assert block_value(block=block) == "Name: Sam\nLikes coffee"
    last = BlockUpdate.objects.filter(block=block).last()
    assert last.actor_kind == "agent" and last.actor_name == "Entropy"


def test_context_replace_of_missing_text_is_a_clear_422(agent_client, make_block):
    block = make_block(label="human", content="Name: Sam")
    response = post(
        agent_client,
        "/api/tools/context",
        {"operation": "replace", "label": "human", "old": "Bob", "new": "Al"},
    )
    assert response.status_code == 422
    assert "not found" in response.json()["detail"]
    assert block_value(block=block) == "Name: Sam"


def test_append_over_limit_reports_block_size_limit_and_change(
    agent_client, make_block
):
    make_block(label="human", content="x" * 4980)
    response = post(
        agent_client,
        "/api/tools/core_memory_append",
        {"label": "human", "content": "y" * 119},
    )
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "limit_exceeded"
    assert body["detail"] == "block 'human' is 4980/5000 chars; this change adds 120"
    assert (body["size"], body["limit"], body["change_size"]) == (4980, 5000, 120)


def test_a_block_over_its_byte_cap_refuses_growth_but_takes_cuts(
    agent_client, make_block, settings
):
    kept = secrets.token_hex(400)  # does not compress
    block = make_block(label="human", content=f"Name: Sam\n{kept}")
    settings.MEMORY_BLOCK_MAX_BYTES = 500  # less than it stores already

    def replace(old: str, new: str) -> Any:
        body = {"label": "human", "old_content": old, "new_content": new}
        return post(agent_client, "/api/tools/core_memory_replace", body)

    grow = post(
        agent_client,
        "/api/tools/core_memory_append",
        {"label": "human", "content": "more"},
    )
    assert grow.status_code == 422
    assert grow.json()["code"] == "limit_exceeded"
    # As large as before: refused too, or history would grow without end.
    assert replace("Sam", "Kim").status_code == 422
    assert replace("Name: Sam", "Sam").status_code == 200
    assert replace("Sam\n", "").status_code == 200
    assert block_value(block=block) == kept


def test_core_memory_update_replaces_content(agent_client, make_block):
    block = make_block(label="persona", content="old self")
    response = post(
        agent_client,
        "/api/tools/core_memory_update",
        {"label": "persona", "content": "new self"},
    )
    assert response.json()["status"] == "applied"
    assert block_value(block=block) == "new self"


def test_context_archive_load_and_swap(agent_client, make_block):
    make_block(label="task", block_type="working", pinned=True)
    make_block(label="old", block_type="archival")
    response = post(
        agent_client,
        "/api/tools/context",
        {"operation": "swap", "label": "task", "archival_label": "old"},
    )
    assert response.status_code == 200, response.content
    types = dict(MemoryBlock.objects.values_list("label", "block_type"))
    assert types == {"task": "archival", "old": "working"}
    post(agent_client, "/api/tools/context", {"operation": "load", "label": "task"})
    post(agent_client, "/api/tools/context", {"operation": "archive", "label": "old"})
    types = dict(MemoryBlock.objects.values_list("label", "block_type"))
    assert types == {"task": "working", "old": "archival"}


def test_tools_are_for_agents(human_client):
    response = post(
        human_client,
        "/api/tools/context",
        {"operation": "append", "label": "x", "content": "y"},
    )
    assert response.status_code == 403


def test_partner_block_change_waits_for_approval_through_the_api(
    agent_client, human_client, make_block
):
    block = make_block(label="human", content="Sam", permission="partner")
    response = post(
        agent_client,
        "/api/tools/context",
        {"operation": "append", "label": "human", "content": "has a cat"},
    )
    body = response.json()
    assert body["status"] == "pending_approval"
    assert block_value(block=block) == "Sam"
    assert agent_client.get("/api/approvals").json()[0]["status"] == "pending"

    inbox = human_client.get("/api/approvals?status=pending").json()
    assert [a["id"] for a in inbox] == [body["approval_id"]]
    assert (
        post(
            agent_client,
            f"/api/approvals/{body['approval_id']}/decision",
            {"approve": True},
        ).status_code
        == 403
    )
    decided = post(
        human_client,
        f"/api/approvals/{body['approval_id']}/decision",
        {"approve": True},
    ).json()
    assert decided["status"] == "approved"
    assert block_value(block=block) == "Sam\nhas a cat"


def test_create_from_template_configure_and_delete(agent_client, agent):
    response = post(
        agent_client,
        "/api/blocks",
        {"label": "scratch", "template": "scratchpad", "permission": "admin"},
    )
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["schema"]["kind"] == "composite"
    assert created["block_type"] == "working"
    url = f"/api/blocks/{created['id']}"
    response = agent_client.patch(
        url, {"pinned": True, "description": "today"}, content_type="application/json"
    )
    assert response.json()["pinned"] is True
    assert response.json()["description"] == "today"
    response = agent_client.patch(
        url, {"char_limit": 99999}, content_type="application/json"
    )
    assert response.status_code == 403
    assert agent_client.delete(url).status_code == 204
    assert not MemoryBlock.objects.exists()


def test_delete_without_admin_is_403(agent_client, make_block):
    block = make_block(permission="read_write")
    assert agent_client.delete(f"/api/blocks/{block.pk}").status_code == 403


def test_create_with_bad_schema_or_content_is_422_and_creates_nothing(agent_client):
    bad = [
        {"label": "a", "schema": {"kind": "tree"}},
        {"label": "b", "schema": {"kind": "list"}, "content": "not a list"},
        {"label": "c", "template": "human", "content": {"height": 2}},
    ]
    for body in bad:
        assert post(agent_client, "/api/blocks", body).status_code == 422
    assert not MemoryBlock.objects.exists()


def test_history_version_diff_and_rollback_endpoints(agent_client, make_block):
    block = make_block(label="notes", content="v1")
    post(
        agent_client,
        f"/api/blocks/{block.pk}/operations",
        {"operations": [{"op": "set_text", "text": "v2"}], "summary": "rewrite"},
    )
    history = agent_client.get(f"/api/blocks/{block.pk}/history").json()
    assert [v["summary"] for v in history] == ["rewrite", "created"]
    first = history[-1]["id"]
    view = agent_client.get(f"/api/blocks/{block.pk}/versions/{first}").json()
    assert view["rendered"] == "v1"
    diff = agent_client.get(f"/api/blocks/{block.pk}/diff?from_version={first}").json()
    assert "-v1" in diff["unified"] and "+v2" in diff["unified"]
    rolled = post(
        agent_client, f"/api/blocks/{block.pk}/rollback", {"version_id": first}
    )
    assert rolled.json()["status"] == "applied"
    assert block_value(block=block) == "v1"
    page = agent_client.get(
        f"/api/blocks/{block.pk}/history?limit=1&before={history[0]['id']}"
    ).json()
    assert [v["id"] for v in page] == [first]


def test_versions_are_numbered_per_block_and_rollback_takes_the_number(
    agent_client, make_block
):
    block = make_block(label="notes", content="v1")
    for text in ("v2", "v3"):
        post(
            agent_client,
            f"/api/blocks/{block.pk}/operations",
            {"operations": [{"op": "set_text", "text": text}]},
        )
    history = agent_client.get(f"/api/blocks/{block.pk}/history").json()
    # Every row says its number in this block (1 = its creation) and its id.
    assert [v["number"] for v in history] == [3, 2, 1]
    older = agent_client.get(
        f"/api/blocks/{block.pk}/history?limit=1&before={history[0]['id']}"
    ).json()
    assert [(v["number"], v["id"]) for v in older] == [(2, history[1]["id"])]
    url = f"/api/blocks/{block.pk}/rollback"
    assert post(agent_client, url, {"version": 1}).json()["status"] == "applied"
    assert block_value(block=block) == "v1"
    missing = post(agent_client, url, {"version": 99})
    assert missing.status_code == 404
    assert "has no version 99; its versions are 1 to 4" in missing.json()["detail"]
    wrong_id = post(agent_client, url, {"version_id": 10**9})
    assert "numbered 1 to 4" in wrong_id.json()["detail"]
    both = post(agent_client, url, {"version": 1, "version_id": history[0]["id"]})
    assert both.status_code == 422


def test_a_block_created_empty_through_the_api_has_version_1(agent_client, agent):
    made = post(agent_client, "/api/blocks", {"agent_id": agent.pk, "label": "notes"})
    assert made.status_code == 201, made.content
    url = f"/api/blocks/{made.json()['id']}"
    history = agent_client.get(f"{url}/history").json()
    assert [(v["number"], v["summary"], v["actor_id"]) for v in history] == [
        (1, "created", str(agent.pk))
    ]
    post(
        agent_client,
        f"{url}/operations",
        {"operations": [{"op": "append_text", "text": "hi"}]},
    )
    assert post(agent_client, f"{url}/rollback", {"version": 1}).status_code == 200
    assert agent_client.get(url).json()["rendered"] == ""
    assert [v["number"] for v in agent_client.get(f"{url}/history").json()] == [
        3,
        2,
        1,
    ]


def test_share_and_unshare_through_the_api(
    agent_client, other_client, make_block, other_agent
):
    block = make_block(label="board", content="plan")
    response = post(
        agent_client,
        f"/api/blocks/{block.pk}/shares",
        {"agent_id": other_agent.pk, "access": "read_only"},
    )
    assert response.status_code == 200, response.content
    assert other_client.get(f"/api/blocks/{block.pk}").json()["rendered"] == "plan"
    response = post(
        other_client,
        f"/api/blocks/{block.pk}/operations",
        {"operations": [{"op": "append_text", "text": "!"}]},
    )
    assert response.status_code == 403
    assert (
        agent_client.delete(
            f"/api/blocks/{block.pk}/shares/{other_agent.pk}"
        ).status_code
        == 204
    )
    assert other_client.get(f"/api/blocks/{block.pk}").status_code == 404


def test_export_import_round_trip_over_http(
    human_client, make_block, agent, other_agent
):
    make_block(label="persona", content="I plan things")
    exported = human_client.get(f"/api/agents/{agent.pk}/memory/export").json()
    response = post(
        human_client, f"/api/agents/{other_agent.pk}/memory/import", exported
    )
    assert response.status_code == 201, response.content
    copy = MemoryBlock.objects.get(owner=other_agent)
    assert block_value(block=copy) == "I plan things"


def test_import_of_garbage_is_422(human_client, agent):
    response = post(
        human_client,
        f"/api/agents/{agent.pk}/memory/import",
        {"format": "pattern-site.memory", "version": 99, "blocks": []},
    )
    assert response.status_code == 422
    assert "version" in response.json()["detail"]


def test_context_build_endpoint(agent_client, make_block):
    make_block(label="persona", template="persona")
    response = post(
        agent_client,
        "/api/context/build",
        {"tool_rules": [{"tool": "send_message", "kind": "exit_loop"}]},
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert '<block:persona permission="ReadWrite">' in body["system_prompt"]
    assert body["metadata"]["tokens_by_section"]["core_memory"] > 0


def test_an_agent_cannot_build_another_agents_context(other_client, make_block, agent):
    secret = make_block(label="secret_plans", content="only mine")
    response = post(
        other_client,
        "/api/context/build",
        {"agent_id": agent.pk, "batch_block_ids": [str(secret.pk)]},
    )
    assert response.status_code == 404
    assert "only mine" not in response.content.decode()


def test_a_human_builds_any_agents_context_of_their_constellation(
    human_client, make_block, agent
):
    make_block(label="persona", template="persona")
    response = post(human_client, "/api/context/build", {"agent_id": agent.pk})
    assert response.status_code == 200, response.content
    assert "<block:persona" in response.json()["system_prompt"]


def test_openapi_carries_tool_descriptions(client):
    schema = client.get("/api/openapi.json").json()
    update = schema["paths"]["/api/tools/core_memory_update"]["post"]
    assert update["description"].startswith("Update your core memory blocks")
    assert "swap" in schema["paths"]["/api/tools/context"]["post"]["description"]


def test_malformed_operations_body_is_rejected(agent_client, make_block):
    block = make_block(content="x")
    response = agent_client.post(
        f"/api/blocks/{block.pk}/operations", "{nope", content_type="application/json"
    )
    assert response.status_code in (400, 422)
    assert block_value(block=block) == "x"


def test_import_of_a_snapshot_with_containers_outside_the_schema_is_422(
    human_client, make_block, agent, other_agent
):
    make_block(label="persona", content="I plan things")
    exported = human_client.get(f"/api/agents/{agent.pk}/memory/export").json()
    doc = LoroDoc()
    doc.import_(base64.b64decode(exported["blocks"][0]["loro_snapshot"]))
    doc.get_text("hidden").insert(0, "h" * 10_000)
    doc.commit()
    exported["blocks"][0]["loro_snapshot"] = base64.b64encode(
        doc.export(ExportMode.Snapshot())
    ).decode()
    response = post(
        human_client, f"/api/agents/{other_agent.pk}/memory/import", exported
    )
    assert response.status_code == 422, response.content
    assert "hidden" in response.json()["detail"]
    assert not MemoryBlock.objects.filter(owner=other_agent).exists()


# --- Letta-compatible tools on every template -----------------------------

WRITABLE_TEMPLATES = ["persona", "human", "scratchpad", "custom"]


@pytest.mark.parametrize("template", WRITABLE_TEMPLATES)
def test_core_memory_append_then_replace_works_on_every_writable_template(
    agent_client, make_block, template
):
    block = make_block(label="mem", template=template)
    appended = post(
        agent_client,
        "/api/tools/core_memory_append",
        {"label": "mem", "content": "Likes green tea"},
    )
    assert appended.status_code == 200, appended.content
    block.refresh_from_db()
    assert "Likes green tea" in block.rendered
    replaced = post(
        agent_client,
        "/api/tools/core_memory_replace",
        {"label": "mem", "old_content": "green", "new_content": "jasmine"},
    )
    assert replaced.status_code == 200, replaced.content
    block.refresh_from_db()
    assert "Likes jasmine tea" in block.rendered
    assert "green" not in block.rendered


@pytest.mark.parametrize(
    "template,text,expected",
    [
        ("custom", "Sam likes tea", {"custom": "Sam likes tea"}),
        (
            "human",
            "name: Sam\npreferences: tea, walks\ncontext: Works Fridays.\nFrom home.",
            {
                "name": "Sam",
                "preferences": ["tea", "walks"],
                "context": "Works Fridays.\nFrom home.",
            },
        ),
        (
            "persona",
            "name: Entropy\ntraits [read-only]: calm\nstyle: brief",
            {"name": "Entropy", "traits": ["calm"], "style": "brief", "guidelines": ""},
        ),
        (
            "scratchpad",
            "=== current_task ===\nPlan the week\n\n=== notes ===\nAsk about Friday",
            {"current_task": "Plan the week", "notes": "Ask about Friday"},
        ),
    ],
)
def test_core_memory_update_rewrites_each_template_from_its_rendered_form(
    agent_client, make_block, template, text, expected
):
    block = make_block(label="mem", template=template)
    response = post(
        agent_client, "/api/tools/core_memory_update", {"label": "mem", "content": text}
    )
    assert response.status_code == 200, response.content
    value = block_value(block=MemoryBlock.objects.get(pk=block.pk))
    assert value == expected.get("custom", expected)


def test_core_memory_update_keeps_fields_it_does_not_mention(agent_client, make_block):
    block = make_block(
        label="human", template="human", content={"name": "Sam", "context": "Old"}
    )
    post(
        agent_client,
        "/api/tools/core_memory_update",
        {"label": "human", "content": "context: New"},
    )
    value = block_value(block=MemoryBlock.objects.get(pk=block.pk))
    assert value["name"] == "Sam" and value["context"] == "New"


def test_core_memory_append_goes_to_a_named_field_or_section(agent_client, make_block):
    block = make_block(label="human", template="human")
    response = post(
        agent_client,
        "/api/tools/core_memory_append",
        {"label": "human", "content": "oat milk", "section": "preferences"},
    )
    assert response.status_code == 200, response.content
    assert block_value(block=MemoryBlock.objects.get(pk=block.pk))["preferences"] == [
        "oat milk"
    ]
    wrong = post(
        agent_client,
        "/api/tools/core_memory_append",
        {"label": "human", "content": "x", "section": "nope"},
    )
    assert wrong.status_code == 422
    assert "name, preferences, context" in wrong.json()["detail"]


def test_core_memory_replace_asks_for_a_section_when_the_text_is_in_several(
    agent_client, make_block
):
    make_block(
        label="scratchpad",
        template="scratchpad",
        content={"current_task": "tea plan", "notes": "tea notes"},
    )
    response = post(
        agent_client,
        "/api/tools/core_memory_replace",
        {"label": "scratchpad", "old_content": "tea", "new_content": "cocoa"},
    )
    assert response.status_code == 422
    assert "current_task, notes" in response.json()["detail"]
    named = post(
        agent_client,
        "/api/tools/core_memory_replace",
        {
            "label": "scratchpad",
            "old_content": "tea",
            "new_content": "cocoa",
            "section": "notes",
        },
    )
    assert named.status_code == 200, named.content


def test_core_memory_replace_of_missing_text_changes_nothing(agent_client, make_block):
    block = make_block(label="notes", content="Sam likes tea")
    response = post(
        agent_client,
        "/api/tools/core_memory_replace",
        {"label": "notes", "old_content": "coffee", "new_content": "x"},
    )
    assert response.status_code == 422
    assert "not found" in response.json()["detail"]
    assert MemoryBlock.objects.get(pk=block.pk).version == block.version


def test_letta_tools_on_the_read_only_organization_template_say_why(
    agent_client, make_block
):
    make_block(label="org", template="organization")
    append = post(
        agent_client, "/api/tools/core_memory_append", {"label": "org", "content": "x"}
    )
    assert append.status_code == 422
    assert "no text you can change" in append.json()["detail"]
    update = post(
        agent_client,
        "/api/tools/core_memory_update",
        {"label": "org", "content": "policies: none"},
    )
    assert update.status_code == 403
    assert "read-only" in update.json()["detail"]


# --- structured operations -------------------------------------------------


@pytest.mark.parametrize(
    "op,expected",
    [
        (
            {"op": "append_to_list_field", "field": "preferences", "item": "tea"},
            "append_to_list_field(field, value)",
        ),
        ({"op": "set_field", "field": "name"}, "missing value"),
        ({"op": "increment_counter"}, "increment_counter(field, [delta])"),
    ],
)
def test_operations_with_wrong_arguments_are_refused_naming_the_expected_ones(
    agent_client, make_block, op, expected
):
    block = make_block(label="human", template="human")
    response = post(
        agent_client, f"/api/blocks/{block.pk}/operations", {"operations": [op]}
    )
    assert response.status_code == 422, response.content
    assert expected in response.json()["detail"]
    assert MemoryBlock.objects.get(pk=block.pk).version == block.version


def test_unknown_operation_is_refused_listing_the_operations(agent_client, make_block):
    block = make_block(label="notes")
    response = post(
        agent_client,
        f"/api/blocks/{block.pk}/operations",
        {"operations": [{"op": "explode"}]},
    )
    assert response.status_code == 422
    assert "append_text" in response.json()["detail"]


def test_every_operation_and_its_arguments_are_in_the_openapi(agent_client):
    from memory.blocks.documents import OPERATION_ARGS

    schema = agent_client.get("/api/openapi.json").json()
    operations_in = schema["components"]["schemas"]["OperationsIn"]
    items = operations_in["properties"]["operations"]["items"]
    mapping = items["discriminator"]["mapping"]
    assert set(mapping) == set(OPERATION_ARGS)
    append = schema["components"]["schemas"]["AppendToListFieldOp"]
    assert append["required"] == ["op", "field", "value"]
    assert append["additionalProperties"] is False


# --- blocks by label ----------------------------------------------------------


def test_blocks_are_read_configured_and_deleted_by_label(
    agent_client, human_client, make_block, agent
):
    block = make_block(label="notes", content="Sam likes tea")
    got = agent_client.get("/api/blocks/by-label/notes")
    assert got.status_code == 200, got.content
    assert got.json()["id"] == str(block.pk)
    assert got.json()["content"] == "Sam likes tea"
    patched = agent_client.patch(
        "/api/blocks/by-label/notes", {"pinned": True}, content_type="application/json"
    )
    assert patched.status_code == 200, patched.content
    assert MemoryBlock.objects.get(pk=block.pk).pinned
    deleted = human_client.delete(f"/api/blocks/by-label/notes?agent_id={agent.pk}")
    assert deleted.status_code == 204, deleted.content
    assert not MemoryBlock.objects.filter(pk=block.pk).exists()


def test_by_label_resolves_own_then_shared_then_constellation(
    agent_client, make_block, agent, other_agent, constellation
):
    def resolved():
        return agent_client.get("/api/blocks/by-label/board").json()["id"]

    shared = block_create(
        actor=Actor.system(), constellation=constellation, label="board"
    )
    assert resolved() == str(shared.pk)
    theirs = make_block(label="board", owner=other_agent)
    block_share(actor=Actor.system(), block=theirs, agent=agent, access="read_only")
    assert resolved() == str(theirs.pk)
    own = make_block(label="board")
    assert resolved() == str(own.pk)


def test_human_names_the_agent_and_other_constellations_are_404(
    human_client, make_block, agent
):
    from tests.factories import AgentFactory, ConstellationFactory

    block = make_block(label="notes")
    got = human_client.get(f"/api/blocks/by-label/notes?agent_id={agent.pk}")
    assert got.status_code == 200, got.content
    assert got.json()["id"] == str(block.pk)
    missing = human_client.get("/api/blocks/by-label/notes")
    assert missing.status_code == 422
    assert "agent_id" in missing.json()["detail"]
    stranger = AgentFactory(constellation=ConstellationFactory(name="Other"))
    make_block(label="secret", owner=stranger)
    other = human_client.get(f"/api/blocks/by-label/secret?agent_id={stranger.pk}")
    assert other.status_code == 404


def test_another_agents_private_label_is_404(agent_client, make_block, other_agent):
    make_block(label="secret", owner=other_agent)
    assert agent_client.get("/api/blocks/by-label/secret").status_code == 404
    response = agent_client.get(
        f"/api/blocks/by-label/secret?agent_id={other_agent.pk}"
    )
    assert response.status_code == 404


def test_core_memory_replace_replaces_every_occurrence_as_letta_does(
    agent_client, make_block
):
    block = make_block(label="notes", content="tea at 9, tea at 4")
    response = post(
        agent_client,
        "/api/tools/core_memory_replace",
        {"label": "notes", "old_content": "tea", "new_content": "cocoa"},
    )
    assert response.status_code == 200, response.content
    assert MemoryBlock.objects.get(pk=block.pk).rendered == "cocoa at 9, cocoa at 4"
    context = post(
        agent_client,
        "/api/tools/context",
        {"operation": "replace", "label": "notes", "old": "cocoa", "new": "tea"},
    )
    assert context.status_code == 200, context.content
    assert MemoryBlock.objects.get(pk=block.pk).rendered == "tea at 9, cocoa at 4"


def test_another_agents_memory_export_is_403(other_client, make_block):
    make_block(label="diary", content="private thoughts")
    owner = MemoryBlock.objects.get(label="diary").owner
    response = other_client.get(f"/api/agents/{owner.pk}/memory/export")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert "private thoughts" not in response.content.decode()


def test_own_memory_export_still_answers(agent_client, agent, make_block):
    make_block(label="diary", content="private thoughts")
    response = agent_client.get(f"/api/agents/{agent.pk}/memory/export")
    assert response.status_code == 200
    assert [b["label"] for b in response.json()["blocks"]] == ["diary"]


@pytest.mark.parametrize("label", [".", ".."])
def test_dot_labels_are_refused(agent_client, label):
    response = post(agent_client, "/api/blocks", {"label": label})
    assert response.status_code == 422
    assert "not only dots" in response.json()["detail"]
    assert not MemoryBlock.objects.filter(label=label).exists()


def test_a_list_schema_with_an_unknown_key_is_refused(agent_client):
    response = post(
        agent_client,
        "/api/blocks",
        {"label": "todo", "schema": {"kind": "list", "styel": "checkbox"}},
    )
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert "'styel'" in detail and "max_items, style" in detail
    assert not MemoryBlock.objects.filter(label="todo").exists()


def test_core_memory_update_refuses_a_field_the_map_block_lacks(
    agent_client, make_block
):
    block = make_block(
        label="human",
        schema={"kind": "map", "fields": [{"name": "name"}, {"name": "mood"}]},
        content={"name": "Sam", "mood": "calm"},
    )
    response = post(
        agent_client,
        "/api/tools/core_memory_update",
        {"label": "human", "content": "name: Sam\nfavourite: green"},
    )
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert "'favourite' is not a field" in detail and "name, mood" in detail
    assert block_value(block=MemoryBlock.objects.get(pk=block.pk)) == {
        "name": "Sam",
        "mood": "calm",
    }


def test_push_item_takes_value_and_still_takes_item_with_a_deprecation_notice(
    agent_client, make_block
):
    block = make_block(label="todo", schema={"kind": "list"})
    url = f"/api/blocks/{block.pk}/operations"

    named = post(agent_client, url, {"operations": [{"op": "push_item", "value": "a"}]})
    assert named.status_code == 200, named.content
    assert "deprecated" not in named.json()["message"]

    old = post(agent_client, url, {"operations": [{"op": "push_item", "item": "b"}]})
    assert old.status_code == 200, old.content
    assert "'item' is deprecated: send 'value'" in old.json()["message"]

    block.refresh_from_db()
    assert block_value(block=block) == ["a", "b"]
    missing = post(agent_client, url, {"operations": [{"op": "push_item"}]})
    assert missing.status_code == 422
    assert "value" in missing.content.decode()


@pytest.mark.parametrize("name", [{}, [None, None], 0, None])
def test_an_operation_named_by_anything_but_a_string_is_a_422(
    agent_client, make_block, name
):
    block = make_block(label="todo", schema={"kind": "list"})
    response = post(
        agent_client,
        f"/api/blocks/{block.pk}/operations",
        {"operations": [{"op": name, "value": "a"}]},
    )
    assert response.status_code == 422, response.content
    assert block_value(block=MemoryBlock.objects.get(pk=block.pk)) == []
