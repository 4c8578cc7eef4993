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
