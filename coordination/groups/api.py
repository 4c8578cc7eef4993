"""Agent group endpoints: groups, members, routing, runs, inboxes, tools.

A run's events stream as Server-Sent Events from ``GET /runs/{id}/events``
(or from ``POST /groups/{id}/messages`` itself when the request accepts
``text/event-stream``).  Agents take their work from ``GET /inbox``
(long-poll with ``wait``) and answer through ``/deliveries/{id}/...``.
"""

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja import Router, Status

from coordination.groups import permissions, selectors, services, streams
from coordination.groups.schemas import (
    AnswerIn,
    CallId,
    ChunkIn,
    DelegateIn,
    DeliveryOut,
    EventOut,
    FailureIn,
    GroupCreateIn,
    GroupOut,
    GroupUpdateIn,
    MemberIn,
    MemberOut,
    MetricIn,
    RouteIn,
    RunDetailOut,
    RunOut,
    ToolCallIn,
    ToolResultIn,
)
from pattern_site.kernel.agents.selectors import (
    agent_get_for_actor,
    constellation_get_for_actor,
)
from pattern_site.kernel.apitypes import Id, Offset, error_responses, number_text
from pattern_site.kernel.auth import request_actor

router = Router(tags=["groups"])


@router.get(
    "/groups", response={200: list[GroupOut], **error_responses(403, 404, body=False)}
)
def list_groups(request: HttpRequest, constellation_id: Id | None = None) -> Any:
    return selectors.group_list_for_actor(
        actor=request_actor(request), constellation_id=constellation_id
    )


@router.post(
    "/groups", response={201: GroupOut, **error_responses(403, 404, 409, body=True)}
)
def create_group(request: HttpRequest, payload: GroupCreateIn) -> Any:
    actor = request_actor(request)
    constellation = constellation_get_for_actor(
        actor=actor, constellation_id=payload.constellation_id
    )
    permissions.group_check_manage(actor=actor)
    group = services.group_create(
        constellation=constellation,
        name=payload.name,
        description=payload.description,
        pattern=payload.pattern,
        config=payload.config,
    )
    return Status(201, selectors.group_get_for_actor(actor=actor, group_id=group.pk))


@router.get(
    "/groups/{group_id}",
    response={200: GroupOut, **error_responses(403, 404, body=False)},
)
def get_group(request: HttpRequest, group_id: Id) -> Any:
    return selectors.group_get_for_actor(
        actor=request_actor(request), group_id=group_id
    )


@router.patch(
    "/groups/{group_id}",
    response={200: GroupOut, **error_responses(403, 404, 409, body=True)},
)
def update_group(request: HttpRequest, group_id: Id, payload: GroupUpdateIn) -> Any:
    actor = request_actor(request)
    group = selectors.group_get_for_change(actor=actor, group_id=group_id)
    services.group_update(group=group, **payload.dict(exclude_unset=True))
    return selectors.group_get_for_actor(actor=actor, group_id=group_id)


@router.delete(
    "/groups/{group_id}",
    response={204: None, **error_responses(403, 404, 409, body=False)},
)
def delete_group(request: HttpRequest, group_id: Id) -> Any:
    group = selectors.group_get_for_change(
        actor=request_actor(request), group_id=group_id
    )
    services.group_delete(group=group)
    return Status(204, None)


@router.post(
    "/groups/{group_id}/members",
    response={201: MemberOut, **error_responses(403, 404, 409, body=True)},
)
def add_member(request: HttpRequest, group_id: Id, payload: MemberIn) -> Any:
    actor = request_actor(request)
    group = selectors.group_get_for_change(actor=actor, group_id=group_id)
    agent = agent_get_for_actor(actor=actor, agent_id=payload.agent_id)
    membership = services.group_member_add(
        group=group,
        agent=agent,
        role=payload.role,
        domain=payload.domain,
        capabilities=payload.capabilities,
    )
    return Status(201, membership)


@router.delete(
    "/groups/{group_id}/members/{agent_id}",
    response={204: None, **error_responses(403, 404, 409, body=False)},
)
def remove_member(request: HttpRequest, group_id: Id, agent_id: Id) -> Any:
    group = selectors.group_get_for_change(
        actor=request_actor(request), group_id=group_id
    )
    services.group_member_remove(group=group, agent_id=agent_id)
    return Status(204, None)


@router.post(
    "/groups/{group_id}/metrics",
    response={204: None, **error_responses(403, 404, 409, body=True)},
)
def record_metric(request: HttpRequest, group_id: Id, payload: MetricIn) -> Any:
    group = selectors.group_get_for_route(
        actor=request_actor(request), group_id=group_id
    )
    services.group_metric_record(
        group=group, metric=payload.metric, value=payload.value
    )
    return Status(204, None)


@router.post(
    "/groups/{group_id}/messages",
    response={202: RunOut, **error_responses(403, 404, 409, body=True)},
    summary="Route a message through a group (starts a run)",
)
def route_message(request: HttpRequest, group_id: Id, payload: RouteIn) -> Any:
    actor = request_actor(request)
    group = selectors.group_get_for_route(actor=actor, group_id=group_id)
    run = services.group_message_route(
        actor=actor, group=group, message=payload.message, options=payload.options
    )
    if streams.event_stream_wanted(request):
        return streams.run_event_stream_response(run_id=run.pk, after=0)
    return Status(202, run)


@router.get(
    "/groups/{group_id}/runs",
    response={200: list[RunOut], **error_responses(403, 404, body=False)},
)
def list_runs(request: HttpRequest, group_id: Id, limit: int = 20) -> Any:
    group = selectors.group_get_for_route(
        actor=request_actor(request), group_id=group_id
    )
    return selectors.run_list_for_group(group=group, limit=max(1, min(limit, 100)))


@router.get(
    "/runs/{run_id}",
    response={200: RunDetailOut, **error_responses(403, 404, body=False)},
)
def get_run(request: HttpRequest, run_id: Id) -> Any:
    return selectors.run_get_for_actor(actor=request_actor(request), run_id=run_id)


@router.get(
    "/runs/{run_id}/events",
    response={200: list[EventOut], **error_responses(403, 404, body=False)},
    summary="A run's GroupResponseEvents as Server-Sent Events",
)
def stream_run_events(request: HttpRequest, run_id: Id, after: Offset = 0) -> Any:
    """``text/event-stream``; resumes after ``Last-Event-ID`` or ``after``."""
    run = selectors.run_get_for_actor(actor=request_actor(request), run_id=run_id)
    last = number_text(request.headers.get("Last-Event-ID", ""))
    if last is not None:
        after = last
    return streams.run_event_stream_response(run_id=run.pk, after=after)


@router.get(
    "/inbox",
    response={200: list[DeliveryOut], **error_responses(403, 404, body=False)},
    summary="Take this agent's pending deliveries (long-poll with wait)",
)
def take_inbox(
    request: HttpRequest, wait: float = 0.0, limit: int = 10
) -> HttpResponse | Any:
    actor = request_actor(request)
    permissions.inbox_check_read(actor=actor)
    agent = actor.agent
    assert agent is not None

    def take() -> list[Any]:
        if not selectors.inbox_has_work(agent_id=agent.pk):
            return []
        return services.delivery_take(agent=agent, limit=limit)

    def take_as_json() -> list[dict[str, Any]]:
        return [DeliveryOut.from_orm(d).model_dump(mode="json") for d in take()]

    wait = max(0.0, min(wait, settings.GROUPS_INBOX_MAX_WAIT))
    if wait == 0:
        return take()
    return StreamingHttpResponse(
        streams.inbox_long_poll(
            agent_id=agent.pk, wait_seconds=wait, take=take_as_json
        ),
        content_type="application/json",
    )


def _delivery(request: HttpRequest, delivery_id: Id) -> Any:
    return selectors.delivery_get_for_actor(
        actor=request_actor(request), delivery_id=delivery_id
    )


@router.post(
    "/deliveries/{delivery_id}/chunks",
    response={201: EventOut, **error_responses(403, 404, 409, body=True)},
)
def post_chunk(request: HttpRequest, delivery_id: Id, payload: ChunkIn) -> Any:
    delivery = _delivery(request, delivery_id)
    return Status(
        201, services.delivery_chunk_add(delivery=delivery, text=payload.text)
    )


@router.post(
    "/deliveries/{delivery_id}/tool-calls",
    response={201: EventOut, **error_responses(403, 404, 409, body=True)},
)
def start_tool_call(request: HttpRequest, delivery_id: Id, payload: ToolCallIn) -> Any:
    delivery = _delivery(request, delivery_id)
    return Status(
        201,
        services.delivery_tool_call_start(
            delivery=delivery,
            call_id=payload.call_id,
            fn_name=payload.fn_name,
            args=payload.args,
        ),
    )


@router.post(
    "/deliveries/{delivery_id}/tool-calls/{call_id}",
    response={201: EventOut, **error_responses(403, 404, 409, body=True)},
)
def complete_tool_call(
    request: HttpRequest, delivery_id: Id, call_id: CallId, payload: ToolResultIn
) -> Any:
    delivery = _delivery(request, delivery_id)
    return Status(
        201,
        services.delivery_tool_call_complete(
            delivery=delivery, call_id=call_id, result=payload.result
        ),
    )


@router.post(
    "/deliveries/{delivery_id}/answer",
    response={200: RunOut, **error_responses(403, 404, 409, body=True)},
)
def answer_delivery(request: HttpRequest, delivery_id: Id, payload: AnswerIn) -> Any:
    delivery = _delivery(request, delivery_id)
    done = services.delivery_complete(
        delivery=delivery, text=payload.text, vote=payload.vote
    )
    return done.run


@router.post(
    "/deliveries/{delivery_id}/failure",
    response={200: RunOut, **error_responses(403, 404, 409, body=True)},
)
def fail_delivery(request: HttpRequest, delivery_id: Id, payload: FailureIn) -> Any:
    delivery = _delivery(request, delivery_id)
    return services.delivery_fail(delivery=delivery, reason=payload.reason).run


@router.post(
    "/deliveries/{delivery_id}/delegations",
    response={
        201: DeliveryOut,
        200: RunOut,
        **error_responses(403, 404, 409, body=True),
    },
    summary="The leader delegates part of its work",
)
def delegate(request: HttpRequest, delivery_id: Id, payload: DelegateIn) -> Any:
    delivery = _delivery(request, delivery_id)
    made = services.run_delegate(
        delivery=delivery, message=payload.message, agent_id=payload.agent_id
    )
    if made is None:
        return Status(
            200,
            selectors.run_get_for_actor(
                actor=request_actor(request), run_id=delivery.run_id
            ),
        )
    return Status(201, made)
