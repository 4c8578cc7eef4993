"""The groups websocket (``/ws/groups/``): watch runs, take and answer work.

The actor is the one the websocket middleware (``kernel.auth``) put in the
scope: a human by session (a same-site page), an agent by ``Authorization:
Bearer <token>`` on the upgrade request (a client that sends no
``Origin``).  Every message is JSON with a
``type``; a client may add ``ref``, echoed in the ``ack`` or ``error``.

- ``run.watch`` {run_id, after?}: the run's stored events after ``after``,
  then each new one, as ``run.event``; ``run.unwatch`` {run_id} stops.
- ``inbox.subscribe`` (agents): pending deliveries are taken and sent as
  ``inbox.deliveries`` now and whenever new work arrives.
- ``delivery.chunk`` {delivery_id, text}, ``delivery.tool_call``
  {delivery_id, call_id, fn_name, args}, ``delivery.tool_result``
  {delivery_id, call_id, result}, ``delivery.answer`` {delivery_id, text,
  vote?}, ``delivery.failure`` {delivery_id, reason}: as the HTTP API.

Rights are the selectors' (``coordination.groups.permissions``); domain
errors come back as ``error`` with the error's code.  An agent whose token
dies while the socket is open (``pattern_site.kernel.agents.watch``) gets an
``error`` (``auth_failed``) and the socket is closed with
``CLOSE_UNAUTHENTICATED``.
"""

import asyncio
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from coordination.groups import permissions, selectors, services
from coordination.groups.schemas import DeliveryOut
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.watch import token_unwatch, token_watch
from pattern_site.kernel.errors import (
    ApplicationError,
    AuthenticationFailed,
    InvalidInput,
)
from pattern_site.kernel.realtime import (
    CLOSE_UNAUTHENTICATED,
    group_for_inbox,
    group_for_run,
)


@database_sync_to_async
def _watch(actor: Actor, run_id: int) -> None:
    selectors.run_get_for_actor(actor=actor, run_id=run_id)


@database_sync_to_async
def _events_after(run_id: int, after: int) -> list[dict[str, Any]]:
    page = selectors.run_events_after(run_id=run_id, after=after)
    return [
        {
            "type": "run.event",
            "run_id": run_id,
            "seq": e.seq,
            "event": e.type,
            "data": e.data,
        }
        for e in page.events
    ]


@database_sync_to_async
def _take(actor: Actor) -> list[dict[str, Any]]:
    assert actor.agent is not None
    if not selectors.inbox_has_work(agent_id=actor.agent.pk):
        return []
    taken = services.delivery_take(agent=actor.agent)
    return [DeliveryOut.from_orm(d).model_dump(mode="json") for d in taken]


@database_sync_to_async
def _act(actor: Actor, content: dict[str, Any]) -> None:
    kind = content["type"]
    delivery = selectors.delivery_get_for_actor(
        actor=actor, delivery_id=int(content.get("delivery_id", 0))
    )
    if kind == "delivery.chunk":
        services.delivery_chunk_add(
            delivery=delivery, text=str(content.get("text", ""))
        )
    elif kind == "delivery.tool_call":
        services.delivery_tool_call_start(
            delivery=delivery,
            call_id=str(content.get("call_id", "")),
            fn_name=str(content.get("fn_name", "")),
            args=dict(content.get("args") or {}),
        )
    elif kind == "delivery.tool_result":
        services.delivery_tool_call_complete(
            delivery=delivery,
            call_id=str(content.get("call_id", "")),
            result=content.get("result"),
        )
    elif kind == "delivery.answer":
        services.delivery_complete(
            delivery=delivery,
            text=str(content.get("text", "")),
            vote=str(content.get("vote", "")),
        )
    else:
        services.delivery_fail(delivery=delivery, reason=str(content.get("reason", "")))


DELIVERY_ACTIONS = {
    "delivery.chunk",
    "delivery.tool_call",
    "delivery.tool_result",
    "delivery.answer",
    "delivery.failure",
}


class GroupSocketConsumer(AsyncJsonWebsocketConsumer):
    actor: Actor | None = None

    async def connect(self) -> None:
        self.actor = self.scope.get("actor")
        if self.actor is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.watching: dict[int, int] = {}  # run id -> last event sent
        self.subscribed = False
        await self.accept()
        if self.actor.token_id is not None:
            token_watch(token_id=self.actor.token_id, on_dead=self._token_dead)

    def _token_dead(self, token_id: int) -> None:
        """The agent's token died (revoked, rotated, agent deactivated)."""
        self._ending = asyncio.get_running_loop().create_task(self._revoked())

    async def _revoked(self) -> None:
        await self.send_json(
            {
                "type": "error",
                "code": AuthenticationFailed.code,
                "detail": "the agent token of this connection is no longer valid",
                "ref": None,
            }
        )
        await self.close(code=CLOSE_UNAUTHENTICATED)

    async def disconnect(self, code: int) -> None:
        if self.actor is not None and self.actor.token_id is not None:
            token_unwatch(token_id=self.actor.token_id, on_dead=self._token_dead)
        for run_id in list(getattr(self, "watching", {})):
            await self.channel_layer.group_discard(
                group_for_run(run_id), self.channel_name
            )
        if getattr(self, "subscribed", False) and self.actor and self.actor.agent:
            await self.channel_layer.group_discard(
                group_for_inbox(self.actor.agent.pk), self.channel_name
            )

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        ref = content.get("ref") if isinstance(content, dict) else None
        try:
            if not isinstance(content, dict) or "type" not in content:
                raise InvalidInput("each message is a JSON object with a type")
            await self.dispatch_message(content)
        except ApplicationError as exc:
            await self.send_json(
                {"type": "error", "code": exc.code, "detail": exc.message, "ref": ref}
            )
        except (TypeError, ValueError) as exc:
            await self.send_json(
                {
                    "type": "error",
                    "code": "invalid_input",
                    "detail": str(exc),
                    "ref": ref,
                }
            )
        else:
            if content["type"] in DELIVERY_ACTIONS:
                await self.send_json({"type": "ack", "ref": ref})

    async def dispatch_message(self, content: dict[str, Any]) -> None:
        assert self.actor is not None
        kind = content["type"]
        if kind == "run.watch":
            run_id = int(content.get("run_id", 0))
            await _watch(self.actor, run_id)
            self.watching[run_id] = int(content.get("after", 0))
            await self.channel_layer.group_add(group_for_run(run_id), self.channel_name)
            await self._send_events(run_id)
        elif kind == "run.unwatch":
            run_id = int(content.get("run_id", 0))
            self.watching.pop(run_id, None)
            await self.channel_layer.group_discard(
                group_for_run(run_id), self.channel_name
            )
        elif kind == "inbox.subscribe":
            permissions.inbox_check_read(actor=self.actor)
            assert self.actor.agent is not None
            self.subscribed = True
            await self.channel_layer.group_add(
                group_for_inbox(self.actor.agent.pk), self.channel_name
            )
            await self._send_inbox()
        elif kind in DELIVERY_ACTIONS:
            await _act(self.actor, content)
        else:
            raise InvalidInput(
                f"unknown message type {kind!r}; one of: run.watch, run.unwatch,"
                f" inbox.subscribe, {', '.join(sorted(DELIVERY_ACTIONS))}"
            )

    async def _send_events(self, run_id: int) -> None:
        if run_id not in self.watching:
            return
        for message in await _events_after(run_id, self.watching[run_id]):
            self.watching[run_id] = message["seq"]
            await self.send_json(message)

    async def _send_inbox(self) -> None:
        assert self.actor is not None
        deliveries = await _take(self.actor)
        if deliveries:
            await self.send_json({"type": "inbox.deliveries", "deliveries": deliveries})

    async def group_run_wake(self, message: dict[str, Any]) -> None:
        await self._send_events(int(message["run_id"]))

    async def group_inbox_wake(self, message: dict[str, Any]) -> None:
        if self.subscribed:
            await self._send_inbox()
