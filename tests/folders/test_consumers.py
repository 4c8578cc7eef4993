"""The folder progress socket: who may listen, and what it relays."""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from folders.files import services
from pattern_site.asgi import application
from pattern_site.kernel.actors import Actor
from tests.factories import UserFactory
from tests.pattern_site.kernel.agents.test_consumers import _session_headers

pytestmark = pytest.mark.django_db(transaction=True)


async def test_progress_reaches_the_folder_page_socket(partner, folder):
    communicator = WebsocketCommunicator(
        application,
        f"/ws/folders/{folder.pk}/",
        headers=await _session_headers(partner),
    )
    connected, _ = await communicator.connect()
    assert connected
    await sync_to_async(services.files_upload)(
        actor=Actor.for_user(partner), folder=folder, uploads=[("a.md", b"# A\n")]
    )
    seen = []
    while not seen or seen[-1]["files"][0]["percent"] < 100:
        message = await communicator.receive_json_from(timeout=30)
        assert message["type"] == "folder.progress"
        seen.append(message)
    assert seen[-1]["files"][0]["path"] == "a.md"
    assert seen[-1]["folder"]["files"] == 1
    await communicator.disconnect()


async def test_progress_socket_refuses_anonymous_and_other_constellations(folder):
    anonymous = WebsocketCommunicator(
        application,
        f"/ws/folders/{folder.pk}/",
        headers=[(b"origin", b"http://127.0.0.1")],
    )
    assert await anonymous.connect() == (False, 4401)
    nosy = await sync_to_async(UserFactory)(username="nosy")
    stranger = WebsocketCommunicator(
        application, f"/ws/folders/{folder.pk}/", headers=await _session_headers(nosy)
    )
    assert await stranger.connect() == (False, 4404)
