"""The groups API: permissions across constellations, routing, inbox, tools."""

import pytest
from django.test import Client

from coordination.groups.models import AgentGroup, GroupRun
from pattern_site.kernel.agents.services import agent_token_issue
from tests.factories import AgentFactory, ConstellationFactory, UserFactory

pytestmark = pytest.mark.django_db


def bearer(agent) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=agent).raw}")


def human(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def crisis(make_group):
    return make_group(
        "round_robin",
        [("Pattern", "regular"), ("Momentum", "regular"), ("Archive", "observer")],
        name="Crisis Response",
    )


@pytest.fixture
def foreign():
    constellation = ConstellationFactory(name="Elsewhere")
    agent = AgentFactory(constellation=constellation, name="Stranger")
    return constellation, agent


def test_partner_creates_a_group_with_members_and_config(
    partner, constellation, agents
):
    client = human(partner)
    response = client.post(
        "/api/groups",
        {
            "constellation_id": constellation.pk,
            "name": "Planning",
            "pattern": "voting",
            "config": {"quorum": 2, "tie_breaker": "first_vote"},
        },
        content_type="application/json",
    )
    assert response.status_code == 201, response.json()
    group_id = response.json()["id"]
    assert response.json()["config"]["voting_timeout"] == 30.0
    response = client.post(
        f"/api/groups/{group_id}/members",
        {"agent_id": agents["Flux"].pk, "role": "specialist", "domain": "time"},
        content_type="application/json",
    )
    assert response.status_code == 201
    body = client.get(f"/api/groups/{group_id}").json()
    assert body["members"][0]["agent_name"] == "Flux"
    assert body["members"][0]["domain"] == "time"


def test_bad_config_gets_422_naming_the_field_and_stores_nothing(
    partner, constellation
):
    response = human(partner).post(
        "/api/groups",
        {
            "constellation_id": constellation.pk,
            "name": "Bad",
            "pattern": "voting",
            "config": {"quorum": 0, "colour": "red"},
        },
        content_type="application/json",
    )
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert "quorum" in detail and "colour" in detail
    assert not AgentGroup.objects.exists()


def test_specialist_without_domain_is_refused(partner, crisis, agents):
    response = human(partner).post(
        f"/api/groups/{crisis.pk}/members",
        {"agent_id": agents["Flux"].pk, "role": "specialist"},
        content_type="application/json",
    )
    assert response.status_code == 422
    assert "needs a domain" in response.json()["detail"]


def test_agents_cannot_manage_groups(crisis, agents, constellation):
    client = bearer(agents["Pattern"])
    response = client.patch(
        f"/api/groups/{crisis.pk}",
        {"description": "mine"},
        content_type="application/json",
    )
    assert response.status_code == 403
    response = client.post(
        "/api/groups",
        {"constellation_id": constellation.pk, "name": "X", "pattern": "dynamic"},
        content_type="application/json",
    )
    assert response.status_code == 403


def test_only_members_route_and_see_runs(crisis, agents):
    member, outsider = bearer(agents["Pattern"]), bearer(agents["Flux"])
    assert outsider.get(f"/api/groups/{crisis.pk}").status_code == 200
    response = outsider.post(
        f"/api/groups/{crisis.pk}/messages",
        {"message": "help"},
        content_type="application/json",
    )
    assert response.status_code == 403
    assert "not a member" in response.json()["detail"]
    response = member.post(
        f"/api/groups/{crisis.pk}/messages",
        {"message": "help"},
        content_type="application/json",
    )
    assert response.status_code == 202
    run_id = response.json()["id"]
    assert member.get(f"/api/runs/{run_id}").status_code == 200
    assert outsider.get(f"/api/runs/{run_id}").status_code == 403


def test_other_constellations_ids_answer_404(crisis, agents, foreign):
    constellation, stranger = foreign
    outsider_human = UserFactory(username="outsider")
    constellation.partner = outsider_human
    constellation.save()
    run = (
        bearer(agents["Pattern"])
        .post(
            f"/api/groups/{crisis.pk}/messages",
            {"message": "help"},
            content_type="application/json",
        )
        .json()
    )
    delivery_id = GroupRun.objects.get(pk=run["id"]).deliveries.first().pk
    for client in (bearer(stranger), human(outsider_human)):
        assert client.get(f"/api/groups/{crisis.pk}").status_code == 404
        assert client.get(f"/api/runs/{run['id']}").status_code == 404
        assert client.get(f"/api/runs/{run['id']}/events").status_code == 404
        response = client.post(
            f"/api/groups/{crisis.pk}/messages",
            {"message": "x"},
            content_type="application/json",
        )
        assert response.status_code == 404
        assert client.get("/api/groups").json() == []
    response = bearer(stranger).post(
        f"/api/deliveries/{delivery_id}/answer",
        {"text": "mine now"},
        content_type="application/json",
    )
    assert response.status_code == 404
    response = bearer(agents["Momentum"]).post(
        f"/api/deliveries/{delivery_id}/answer",
        {"text": "not my delivery"},
        content_type="application/json",
    )
    assert response.status_code == 404


def test_agent_takes_work_from_its_inbox_and_answers(crisis, agents):
    pattern = bearer(agents["Pattern"])
    run = pattern.post(
        f"/api/groups/{crisis.pk}/messages",
        {"message": "I'm overwhelmed"},
        content_type="application/json",
    ).json()
    inbox = pattern.get("/api/inbox").json()
    assert [(d["run_id"], d["kind"], d["content"]) for d in inbox] == [
        (run["id"], "respond", "I'm overwhelmed")
    ]
    assert pattern.get("/api/inbox").json() == []
    delivery = inbox[0]["id"]
    url = f"/api/deliveries/{delivery}"
    assert (
        pattern.post(
            f"{url}/chunks", {"text": "Breathe."}, content_type="application/json"
        ).status_code
        == 201
    )
    assert (
        pattern.post(
            f"{url}/tool-calls",
            {"call_id": "c1", "fn_name": "recall", "args": {"q": "calm"}},
            content_type="application/json",
        ).status_code
        == 201
    )
    assert (
        pattern.post(
            f"{url}/tool-calls/c1",
            {"result": ["walk"]},
            content_type="application/json",
        ).status_code
        == 201
    )
    assert (
        pattern.post(
            f"{url}/tool-calls/nope", {"result": 1}, content_type="application/json"
        ).status_code
        == 404
    )
    response = pattern.post(
        f"{url}/answer", {"text": "Take a walk."}, content_type="application/json"
    )
    assert response.json()["status"] == "completed"
    events = pattern.get(f"/api/runs/{run['id']}").json()["events"]
    assert [e["type"] for e in events] == [
        "Started",
        "AgentStarted",
        "TextChunk",
        "ToolCallStarted",
        "ToolCallCompleted",
        "TextChunk",
        "AgentCompleted",
        "Complete",
    ]
    again = pattern.post(
        f"{url}/answer", {"text": "again"}, content_type="application/json"
    )
    assert again.status_code == 409


def test_humans_have_no_inbox(partner, constellation):
    response = human(partner).get("/api/inbox")
    assert response.status_code == 403


def test_route_to_group_tool_follows_the_seed_schema(crisis, agents):
    client = bearer(agents["Pattern"])
    response = client.post(
        "/api/tools/route_to_group",
        {"group_id": str(crisis.pk), "message": "help"},
        content_type="application/json",
    )
    assert response.status_code == 202
    assert response.json()["events_url"] == f"/api/runs/{response.json()['id']}/events"
    response = client.post(
        "/api/tools/route_to_group",
        {"group_id": "Crisis", "message": "help"},
        content_type="application/json",
    )
    assert response.status_code == 422
    schema = Client().get("/api/openapi.json").json()
    tool = schema["paths"]["/api/tools/route_to_group"]["post"]
    assert tool["description"].startswith("Route a message through an agent group")
    body = tool["requestBody"]["content"]["application/json"]["schema"]
    ref = body["$ref"].split("/")[-1]
    properties = schema["components"]["schemas"][ref]["properties"]
    assert {k: v["type"] for k, v in properties.items()} == {
        "group_id": "string",
        "message": "string",
    }


def test_empty_message_is_refused_and_starts_no_run(crisis, agents):
    response = bearer(agents["Pattern"]).post(
        f"/api/groups/{crisis.pk}/messages",
        {"message": "   "},
        content_type="application/json",
    )
    assert response.status_code == 422
    assert not GroupRun.objects.exists()


# --- found by Schemathesis (tests/pattern_site/test_schemathesis.py) --------


@pytest.mark.parametrize("group_id", ["²", "٣", "99999999999999999999999", "-1"])
def test_route_to_group_refuses_a_group_id_that_is_no_id(crisis, agents, group_id):
    response = bearer(agents["Pattern"]).post(
        "/api/tools/route_to_group",
        {"group_id": group_id, "message": "help"},
        content_type="application/json",
    )
    assert response.status_code == 422, response.content
    assert "GET /api/groups" in response.json()["detail"]
    assert not GroupRun.objects.exists()


def test_route_to_group_takes_a_padded_group_id(crisis, agents):
    response = bearer(agents["Pattern"]).post(
        "/api/tools/route_to_group",
        {"group_id": f" {crisis.pk} ", "message": "help"},
        content_type="application/json",
    )
    assert response.status_code == 202, response.content


@pytest.mark.parametrize(
    "text,number",
    [("12", 12), (" 0 ", 0), ("²", None), ("9223372036854775808", None), ("", None)],
)
def test_a_last_event_id_is_read_as_ascii_digits_within_a_database_integer(
    text, number
):
    from pattern_site.kernel.apitypes import number_text

    assert number_text(text) == number


@pytest.mark.parametrize(
    "body",
    [
        {"agent_id": "2"},
        {"agent_id": 2**63},
        {"agent_id": 1, "capabilities": "bookings"},
    ],
)
def test_member_fields_of_the_wrong_type_or_range_are_refused(partner, crisis, body):
    response = human(partner).post(
        f"/api/groups/{crisis.pk}/members",
        body,
        content_type="application/json",
    )
    assert response.status_code == 422, response.content
    assert crisis.memberships.count() == 3
