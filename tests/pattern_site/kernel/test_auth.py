"""The websocket middleware: which connections get which actor."""

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.testing import WebsocketCommunicator
from django.test import Client

from pattern_site.kernel.auth import websocket_auth

pytestmark = pytest.mark.django_db(transaction=True)
SAME_SITE = (b"origin", b"http://127.0.0.1")
FOREIGN = (b"origin", b"https://evil.example")


class WhoAmI(AsyncWebsocketConsumer):
    """Accepts every connection and says whom the middleware found."""

    async def connect(self) -> None:
        await self.accept()
        actor = self.scope["actor"]
        await self.send(text_data="anonymous" if actor is None else actor.ref)


async def _who(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The actor's ref, "anonymous", or None when the socket was refused."""
    communicator = WebsocketCommunicator(
        websocket_auth(WhoAmI.as_asgi()), "/ws/who/", headers=headers
    )
    connected, _ = await communicator.connect()
    if not connected:
        return None
    answer: str = await communicator.receive_from()
    await communicator.disconnect()
    return answer


def _bearer(raw: str) -> tuple[bytes, bytes]:
    return (b"authorization", f"Bearer {raw}".encode())


async def _cookie(user: Any) -> tuple[bytes, bytes]:
    client = Client()
    await sync_to_async(client.force_login)(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


async def test_an_agent_token_without_origin_is_the_agent(agent, agent_token):
    assert await _who([_bearer(agent_token.raw)]) == f"agent:{agent.pk}"


async def test_an_agent_token_with_a_foreign_origin_is_refused(agent_token):
    assert await _who([FOREIGN, _bearer(agent_token.raw)]) is None


async def test_an_agent_token_from_a_page_is_not_an_agent(agent_token):
    assert await _who([SAME_SITE, _bearer(agent_token.raw)]) == "anonymous"


async def test_a_wrong_or_revoked_token_is_anonymous(agent, agent_token):
    from pattern_site.kernel.agents.services import agent_token_revoke

    assert await _who([_bearer("pat_wrong")]) == "anonymous"
    await sync_to_async(agent_token_revoke)(agent=agent)
    assert await _who([_bearer(agent_token.raw)]) == "anonymous"


async def test_a_session_with_a_same_site_origin_is_the_user(partner):
    assert await _who([SAME_SITE, await _cookie(partner)]) == f"human:{partner.pk}"


async def test_a_session_from_another_site_is_refused(partner):
    assert await _who([FOREIGN, await _cookie(partner)]) is None


async def test_a_session_cookie_without_origin_is_refused(partner):
    assert await _who([await _cookie(partner)]) is None


async def test_no_credential_is_anonymous():
    assert await _who([]) == "anonymous"
