"""The groups websocket: an agent takes and answers work, a human watches."""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from coordination.groups.services import group_message_route
from pattern_site.asgi import application
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://127.0.0.1")


async def agent_socket(agent) -> WebsocketCommunicator:
    issued = await sync_to_async(agent_token_issue)(agent=agent)
    auth = (b"authorization", f"Bearer {issued.raw}".encode())
    return WebsocketCommunicator(application, "/ws/groups/", headers=[auth])


async def human_socket(user) -> WebsocketCommunicator:
    client = Client()
    await sync_to_async(client.force_login)(user)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    return WebsocketCommunicator(application, "/ws/groups/", headers=[ORIGIN, cookie])


async def test_agent_answers_over_the_socket_while_a_human_watches(
    make_group, agents, partner
):
    group = await sync_to_async(make_group)("round_robin", [("Flux", "regular")])
    flux, watcher = await agent_socket(agents["Flux"]), await human_socket(partner)
    assert (await flux.connect())[0] and (await watcher.connect())[0]
    await flux.send_json_to({"type": "inbox.subscribe"})
    run = await sync_to_async(group_message_route)(
        actor=Actor.system(), group=group, message="plan"
    )
    await watcher.send_json_to({"type": "run.watch", "run_id": run.pk})
    pushed = await flux.receive_json_from(timeout=5)
    assert pushed["type"] == "inbox.deliveries"
    delivery = pushed["deliveries"][0]
    assert (delivery["run_id"], delivery["content"]) == (run.pk, "plan")
    for message in (
        {"type": "delivery.chunk", "text": "Mon", "ref": 1},
        {"type": "delivery.answer", "text": "Monday", "ref": 2},
    ):
        await flux.send_json_to({**message, "delivery_id": delivery["id"]})
        assert await flux.receive_json_from(timeout=5) == {
            "type": "ack",
            "ref": message["ref"],
        }
    kinds = []
    while not kinds or kinds[-1] != "Complete":
        kinds.append((await watcher.receive_json_from(timeout=5))["event"])
    assert kinds == [
        "Started",
        "AgentStarted",
        "TextChunk",
        "TextChunk",
        "AgentCompleted",
        "Complete",
    ]
    await flux.disconnect()
    await watcher.disconnect()


async def test_another_agents_delivery_and_unknown_types_are_errors(make_group, agents):
    group = await sync_to_async(make_group)("round_robin", [("Flux", "regular")])
    run = await sync_to_async(group_message_route)(
        actor=Actor.system(), group=group, message="plan"
    )
    delivery = await sync_to_async(run.deliveries.get)()
    anchor = await agent_socket(agents["Anchor"])
    assert (await anchor.connect())[0]
    await anchor.send_json_to(
        {"type": "delivery.answer", "delivery_id": delivery.pk, "text": "x", "ref": 7}
    )
    error = await anchor.receive_json_from(timeout=5)
    assert (error["type"], error["code"], error["ref"]) == ("error", "not_found", 7)
    await anchor.send_json_to({"type": "run.watch", "run_id": run.pk})
    assert (await anchor.receive_json_from(timeout=5))["code"] == "permission_denied"
    await anchor.send_json_to({"type": "dance"})
    assert "unknown message type" in (await anchor.receive_json_from())["detail"]
    await anchor.disconnect()


async def test_the_socket_refuses_a_bad_token():
    communicator = WebsocketCommunicator(
        application,
        "/ws/groups/",
        headers=[(b"authorization", b"Bearer pat_wrong")],
    )
    connected, code = await communicator.connect()
    assert (connected, code) == (False, 4401)


async def test_an_agents_socket_ends_when_its_token_is_revoked(agents, monkeypatch):
    """Revoked elsewhere: only the database tells this process."""
    from pattern_site.kernel.agents import services as agent_services

    monkeypatch.setattr(agent_services, "rights_revoke_send", lambda **kw: None)
    flux = await agent_socket(agents["Flux"])
    assert (await flux.connect())[0]
    await sync_to_async(agent_services.agent_token_revoke)(agent=agents["Flux"])
    error = await flux.receive_json_from(timeout=3)
    assert (error["type"], error["code"]) == ("error", "auth_failed")
    assert await flux.receive_output(timeout=3) == {
        "type": "websocket.close",
        "code": 4401,
    }
