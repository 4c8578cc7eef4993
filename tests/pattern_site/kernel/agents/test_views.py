import pytest

from tests.factories import AgentFactory, ConstellationFactory

pytestmark = pytest.mark.django_db


def test_dashboard_requires_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_login_page_logs_a_partner_in(client, partner):
    response = client.post(
        "/login/",
        {"username": "partner", "password": "correct horse battery staple"},
    )
    assert response.status_code == 302
    assert client.get("/api/whoami").json()["name"] == "partner"


def test_constellation_page_lists_agents_with_roles(client, partner, constellation):
    AgentFactory(constellation=constellation, name="Flux", role="Time keeper")
    client.force_login(partner)
    response = client.get(f"/constellations/{constellation.pk}/", follow=True)
    assert b"Flux" in response.content
    assert b"Time keeper" in response.content


def test_other_constellations_pages_are_404(client, partner, constellation):
    other = ConstellationFactory(name="Not yours")
    stranger = AgentFactory(constellation=other)
    client.force_login(partner)
    assert client.get(f"/constellations/{other.pk}/").status_code == 404
    response = client.get(f"/agents/{stranger.pk}/")
    assert response.status_code == 404
    assert b"does not exist" in response.content


def test_the_agent_page_form_gives_the_agent_a_model(client, partner, agent):
    client.force_login(partner)
    page = client.get(f"/agents/{agent.pk}/").content.decode()
    assert 'data-testid="agent-model"' in page
    assert "taken by the agent's program (inbox)" in page
    response = client.post(
        f"/agents/{agent.pk}/model/",
        {"model_name": "llama-3-8b", "answered_by_llm": "on"},
        follow=True,
    )
    assert "Entropy is answered by llama-3-8b" in response.content.decode()
    assert "answered by llama-3-8b (the site's LLM provider)" in (
        response.content.decode()
    )
    agent.refresh_from_db()
    assert agent.answered_by_llm and agent.model_name == "llama-3-8b"


def test_the_agent_page_form_refuses_the_llm_without_a_model(client, partner, agent):
    client.force_login(partner)
    response = client.post(
        f"/agents/{agent.pk}/model/",
        {"model_name": "", "answered_by_llm": "on"},
        HTTP_REFERER=f"/agents/{agent.pk}/",
        follow=True,
    )
    assert "with no model: set model_name" in response.content.decode()
    agent.refresh_from_db()
    assert agent.answered_by_llm is False
