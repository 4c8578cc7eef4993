import asyncio
import sys

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from pattern_site.asgi import application
from tests.factories import ConstellationFactory

pytestmark = pytest.mark.django_db(transaction=True)


async def _session_headers(user) -> list[tuple[bytes, bytes]]:
    client = Client()
    await sync_to_async(client.force_login)(user)
    session = client.cookies["sessionid"].value
    return [
        (b"origin", b"http://127.0.0.1"),
        (b"cookie", f"sessionid={session}".encode()),
    ]


async def test_websocket_connects_with_session_auth(partner, constellation):
    communicator = WebsocketCommunicator(
        application,
        f"/ws/constellations/{constellation.pk}/",
        headers=await _session_headers(partner),
    )
    connected, _ = await communicator.connect()
    assert connected
    assert await communicator.receive_json_from() == {
        "type": "presence.joined",
        "user": "partner",
    }
    await communicator.disconnect()


async def test_websocket_is_refused_without_a_session(constellation):
    communicator = WebsocketCommunicator(
        application,
        f"/ws/constellations/{constellation.pk}/",
        headers=[(b"origin", b"http://127.0.0.1")],
    )
    connected, code = await communicator.connect()
    assert not connected
    assert code == 4401


async def test_websocket_is_refused_for_another_constellation(partner, constellation):
    other = await sync_to_async(ConstellationFactory)(name="Other")
    communicator = WebsocketCommunicator(
        application,
        f"/ws/constellations/{other.pk}/",
        headers=await _session_headers(partner),
    )
    connected, code = await communicator.connect()
    assert not connected
    assert code == 4404


async def test_websocket_from_a_foreign_origin_is_refused(partner, constellation):
    headers = await _session_headers(partner)
    headers[0] = (b"origin", b"http://evil.example")
    communicator = WebsocketCommunicator(
        application, f"/ws/constellations/{constellation.pk}/", headers=headers
    )
    connected, _ = await communicator.connect()
    assert not connected


SEND_FROM_OTHER_PROCESS = """
import asyncio, sys
from channels_redis.core import RedisChannelLayer
layer = RedisChannelLayer(hosts=[{"address": sys.argv[1], "socket_timeout": None}])
asyncio.run(layer.group_send(sys.argv[2], {
    "type": "constellation.event",
    "event": {"type": "activity.event", "summary": "from another process"},
}))
"""


@pytest.mark.redis
async def test_message_crosses_two_processes_through_redis(
    redis_channel_layer, redis_url, partner, constellation
):
    communicator = WebsocketCommunicator(
        application,
        f"/ws/constellations/{constellation.pk}/",
        headers=await _session_headers(partner),
    )
    connected, _ = await communicator.connect()
    assert connected
    await communicator.receive_json_from()  # our own presence.joined
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SEND_FROM_OTHER_PROCESS,
        redis_url,
        f"constellation.{constellation.pk}",
    )
    assert await proc.wait() == 0
    message = await communicator.receive_json_from(timeout=20)
    assert message == {"type": "activity.event", "summary": "from another process"}
    await communicator.disconnect()


async def test_presence_consumer_answers_unknown_message_types_with_an_error(
    partner, constellation
):
    communicator = WebsocketCommunicator(
        application,
        f"/ws/constellations/{constellation.pk}/",
        headers=await _session_headers(partner),
    )
    await communicator.connect()
    await communicator.receive_json_from()
    await communicator.send_json_to({"type": "nonsense"})
    assert (await communicator.receive_json_from())["type"] == "error"
    await communicator.disconnect()
