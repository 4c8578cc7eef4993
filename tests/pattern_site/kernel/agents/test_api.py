import pytest
from django.test import Client

from pattern_site.kernel.agents.services import agent_token_issue, agent_token_revoke
from tests.factories import AgentFactory, ConstellationFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_agent_token_authenticates_as_that_agent(agent_client, agent):
    body = agent_client.get("/api/whoami").json()
    assert body["kind"] == "agent"
    assert body["agent"]["id"] == agent.pk


def test_missing_credentials_get_401(client):
    response = client.get("/api/whoami")
    assert response.status_code == 401


def test_wrong_token_gets_401_with_a_clear_message(agent):
    response = Client(HTTP_AUTHORIZATION="Bearer pat_not-a-real-token").get(
        "/api/whoami"
    )
    assert response.status_code == 401
    assert response.json() == {"detail": "invalid agent token", "code": "auth_failed"}


def test_revoked_token_is_rejected(agent, agent_token, agent_client):
    agent_token_revoke(agent=agent)
    response = agent_client.get("/api/whoami")
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


def test_rotation_revokes_the_old_token(agent, agent_token, agent_client):
    new = agent_token_issue(agent=agent)
    assert agent_client.get("/api/whoami").status_code == 401
    fresh = Client(HTTP_AUTHORIZATION=f"Bearer {new.raw}")
    assert fresh.get("/api/whoami").status_code == 200


def test_only_a_hash_of_the_token_is_stored(agent, agent_token):
    assert agent_token.raw not in str(agent.tokens.values_list(flat=True))
    assert agent.tokens.get().key_hash != agent_token.raw


def test_deactivated_agent_cannot_authenticate(agent, agent_client):
    agent.is_active = False
    agent.save()
    assert agent_client.get("/api/whoami").status_code == 401


def test_agent_sees_only_its_constellation(agent_client, agent):
    other = AgentFactory(name="Stranger")
    listed = {a["id"] for a in agent_client.get("/api/agents").json()}
    assert agent.pk in listed
    assert other.pk not in listed
    response = agent_client.get(f"/api/agents/{other.pk}")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_human_sees_constellations_they_partner_or_belong_to(partner, constellation):
    member = UserFactory(username="member")
    constellation.members.add(member)
    foreign = ConstellationFactory(name="Elsewhere")
    for user in (partner, member):
        client = Client()
        client.force_login(user)
        names = {c["name"] for c in client.get("/api/constellations").json()}
        assert names == {"Pattern"}
        foreign_agent = AgentFactory(constellation=foreign)
        assert client.get(f"/api/agents/{foreign_agent.pk}").status_code == 404


def test_session_auth_reaches_the_api(partner_client):
    body = partner_client.get("/api/whoami").json()
    assert body == {"kind": "human", "id": body["id"], "name": "partner", "agent": None}


def test_session_writes_require_csrf(partner_client, agent):
    url = f"/api/agents/{agent.pk}"
    response = partner_client.patch(
        url, {"role": "Planner"}, content_type="application/json"
    )
    assert response.status_code == 403
    partner_client.get("/", follow=True)  # a page with a form sets the cookie
    token = partner_client.cookies["csrftoken"].value
    response = partner_client.patch(
        url,
        {"role": "Planner"},
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert response.status_code == 200
    assert response.json()["role"] == "Planner"


def test_agents_cannot_reconfigure_agents(agent_client, agent):
    response = agent_client.patch(
        f"/api/agents/{agent.pk}", {"role": "Boss"}, content_type="application/json"
    )
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"


def test_malformed_json_gets_a_clear_error(partner, agent):
    client = Client()
    client.force_login(partner)
    response = client.patch(
        f"/api/agents/{agent.pk}", "{not json", content_type="application/json"
    )
    assert response.status_code in (400, 422)
    agent.refresh_from_db()
    assert agent.role == "Test agent"


def test_a_human_gives_an_agent_a_model_that_answers_for_it(partner, agent):
    client = Client()
    client.force_login(partner)
    response = client.patch(
        f"/api/agents/{agent.pk}",
        {"model_name": " gpt-4o-mini ", "answered_by_llm": True},
        content_type="application/json",
    )
    assert response.status_code == 200, response.json()
    assert response.json()["model_name"] == "gpt-4o-mini"
    assert response.json()["answered_by_llm"] is True
    agent.refresh_from_db()
    assert agent.answered_by_llm and agent.model_name == "gpt-4o-mini"


def test_answered_by_the_llm_without_a_model_is_refused(partner, agent):
    client = Client()
    client.force_login(partner)
    response = client.patch(
        f"/api/agents/{agent.pk}",
        {"answered_by_llm": True},
        content_type="application/json",
    )
    assert response.status_code == 422
    assert "set model_name" in response.json()["detail"]
    agent.refresh_from_db()
    assert agent.answered_by_llm is False
