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


def test_the_partner_issues_rotates_and_revokes_an_agents_token(partner_client, agent):
    from pattern_site.kernel.agents.models import AgentToken
    from pattern_site.kernel.agents.services import agent_token_authenticate

    page = partner_client.get(f"/agents/{agent.pk}/").content.decode()
    assert 'data-testid="agent-tokens"' in page and "No token yet" in page

    def issue() -> str:
        response = partner_client.post(
            f"/agents/{agent.pk}/tokens/issue/",
            {"csrfmiddlewaretoken": partner_client.cookies["csrftoken"].value},
        )
        html = response.content.decode()
        return html.split('id="new-token">')[1].split("<")[0]

    partner_client.get(f"/agents/{agent.pk}/")  # sets the CSRF cookie
    first = issue()
    assert agent_token_authenticate(raw=first) == agent
    second = issue()  # rotation: the first stops working
    assert agent_token_authenticate(raw=second) == agent
    assert AgentToken.objects.filter(agent=agent, revoked_at__isnull=True).count() == 1
    page = partner_client.get(f"/agents/{agent.pk}/").content.decode()
    assert second[:12] in page and second not in page and "Rotate token" in page

    partner_client.post(
        f"/agents/{agent.pk}/tokens/revoke/",
        {"csrfmiddlewaretoken": partner_client.cookies["csrftoken"].value},
    )
    assert not AgentToken.objects.filter(agent=agent, revoked_at__isnull=True).exists()


def test_members_and_other_partners_cannot_touch_an_agents_tokens(
    client, constellation, agent, agent_token
):
    from pattern_site.kernel.agents.models import AgentToken
    from tests.factories import UserFactory

    member = UserFactory(username="member")
    constellation.members.add(member)
    client.force_login(member)
    page = client.get(f"/agents/{agent.pk}/").content.decode()
    assert 'data-testid="agent-tokens"' not in page
    client.post(f"/agents/{agent.pk}/tokens/issue/")
    client.post(f"/agents/{agent.pk}/tokens/revoke/")
    client.force_login(ConstellationFactory(name="Elsewhere").partner)
    client.post(f"/agents/{agent.pk}/tokens/issue/")
    client.post(f"/agents/{agent.pk}/tokens/revoke/")
    tokens = AgentToken.objects.filter(agent=agent)
    assert [t.pk for t in tokens.filter(revoked_at__isnull=True)] == [
        agent_token.token.pk
    ]
    assert tokens.count() == 1
