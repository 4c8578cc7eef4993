from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from coordination.models import Constellation

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_create_agent_creates_constellation_and_prints_token_last():
    output = run("create_agent", "Home", "Flux", "--role", "Time", "--partner", "sam")
    token = output.strip().splitlines()[-1]
    assert token.startswith("pat_")
    assert Constellation.objects.get(name="Home").partner.username == "sam"
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/whoami")
    assert response.json()["name"] == "Flux"


def test_create_agent_refuses_a_duplicate_name():
    run("create_agent", "Home", "Flux", "--partner", "sam")
    with pytest.raises(CommandError, match="already has an agent named 'Flux'"):
        run("create_agent", "Home", "Flux")


def test_rotate_agent_token_prints_a_new_working_token():
    old = run("create_agent", "Home", "Flux", "--partner", "sam").split()[-1]
    new = run("rotate_agent_token", "Home", "Flux").strip().splitlines()[-1]
    assert new != old
    assert (
        Client(HTTP_AUTHORIZATION=f"Bearer {old}").get("/api/whoami").status_code == 401
    )
    assert (
        Client(HTTP_AUTHORIZATION=f"Bearer {new}").get("/api/whoami").status_code == 200
    )


def test_revoke_agent_token_locks_the_agent_out():
    token = run("create_agent", "Home", "Flux", "--partner", "sam").split()[-1]
    run("revoke_agent_token", "Home", "Flux")
    assert (
        Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/whoami").status_code
        == 401
    )
