"""The ``route_to_group``, ``message_agent`` and ``delegate`` agent tools,
registered with ``pattern_site.kernel.tools`` (which serves them over HTTP,
MCP and in process).

``route_to_group_tool`` checks the group id the model sent (a string, as
tools send ids), finds the group through the selectors (which decide who
may route through it) and starts a run with the routing service.  The
answer is the run, shaped by ``RunOut``; its events follow on the run's
event stream.  ``ROUTE_TO_GROUP_TOOL`` is the tool's description.
``message_agent`` finds the recipient by name in the caller's
constellation (another constellation's agents do not exist for it) and
sends through ``coordination.groups.chat``.  ``delegate`` is a
supervisor run's leader handing work to a member through the routing
service's ``run_delegate``; the permission module says which deliveries
the caller leads through.
"""

from django.http import HttpRequest, StreamingHttpResponse

from coordination.groups import permissions, selectors, services, streams
from coordination.groups.chat import agent_message_send
from coordination.groups.models import GroupRun
from coordination.groups.schemas import (
    DelegateToolIn,
    DelegationOut,
    MessageAgentIn,
    RouteToGroupIn,
    RunOut,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.selectors import agent_get_by_name_for_agent
from pattern_site.kernel.apitypes import number_text
from pattern_site.kernel.errors import Conflict, InvalidInput, PermissionDenied
from pattern_site.kernel.tools import AgentTool, tool_register

ROUTE_TO_GROUP_TOOL = (
    "Route a message through an agent group. The group's coordination"
    " pattern (supervisor, round robin, voting, pipeline, dynamic or"
    " sleeptime) decides which member agents act on it and in what order."
    " Use it to hand a request to the group set up for that kind of work,"
    " e.g. 'Crisis Response' or 'Planning'. Returns the run; follow"
    " events_url (Server-Sent Events) for the members' answers as they"
    " arrive, ending with a Complete or Error event."
)


def route_to_group_tool(*, actor: Actor, args: RouteToGroupIn) -> GroupRun:
    group_id = number_text(args.group_id)
    if group_id is None:
        raise InvalidInput(
            f"group_id {args.group_id!r} is not a group id; list groups with"
            " GET /api/groups"
        )
    group = selectors.group_get_for_route(actor=actor, group_id=group_id)
    return services.group_message_route(
        actor=actor, group=group, message=args.message, options=[]
    )


MESSAGE_AGENT_TOOL = (
    "Send a message to another agent of your constellation, by name. An"
    " agent answered by the model wakes and acts on it in a turn of its own;"
    " any other finds it in its inbox. Returns the run carrying it; its"
    " answer arrives on the run's events (events_url)."
)


def message_agent_tool(*, actor: Actor, args: MessageAgentIn) -> GroupRun:
    if actor.agent is None:
        raise PermissionDenied(
            "message_agent is an agent's tool, called with its token"
        )
    to = agent_get_by_name_for_agent(agent=actor.agent, name=args.agent)
    return agent_message_send(sender=actor.agent, to=to, message=args.message)


DELEGATE_TOOL = (
    "As the leader of a supervisor group's run, hand part of the work to a"
    " member of the group: name it (`agent`) or let the group's delegation"
    " strategy choose. The member acts on it in a turn of its own; its"
    " answer joins the run, which completes once you and every member you"
    " delegated to have answered. A refused delegation (the member is"
    " unavailable or has had its share) says why: then do the work yourself."
)


def delegate_tool(*, actor: Actor, args: DelegateToolIn) -> dict:
    if actor.agent is None:
        raise PermissionDenied("delegate is an agent's tool, called with its token")
    leading = permissions.delivery_leading_for_actor(actor=actor)
    if args.run_id is not None:
        run_id = number_text(args.run_id)
        if run_id is None:
            raise InvalidInput(f"run_id {args.run_id!r} is not a run id")
        leading = leading.filter(run_id=run_id)
    deliveries = list(leading.select_related("run__group")[:10])
    if not deliveries:
        raise Conflict(
            f"{actor.agent.name} leads no open run"
            + (f" {args.run_id}" if args.run_id else "")
            + "; only the leader of a supervisor group's run delegates"
        )
    if len(deliveries) > 1:
        runs = ", ".join(f"{d.run_id} ({d.run.group.name})" for d in deliveries)
        raise InvalidInput(f"you lead several runs; name one as run_id: {runs}")
    (delivery,) = deliveries
    agent_id = None
    if args.agent:
        agent_id = agent_get_by_name_for_agent(agent=actor.agent, name=args.agent).pk
    made = services.run_delegate(
        delivery=delivery, message=args.message, agent_id=agent_id
    )
    if made is None:
        return {
            "run_id": delivery.run_id,
            "delivery_id": None,
            "agent": None,
            "detail": "delegation refused; the group's fallback ended the run",
        }
    return {
        "run_id": delivery.run_id,
        "delivery_id": made.pk,
        "agent": made.agent.name,
        "detail": f"delegated to {made.agent.name}; its answer joins the run",
    }


def _run_stream_when_asked(
    request: HttpRequest, run: GroupRun
) -> StreamingHttpResponse | None:
    # An HTTP caller that accepts an event stream follows the run at once.
    if not streams.event_stream_wanted(request):
        return None
    return streams.run_event_stream_response(run_id=run.pk, after=0)


tool_register(
    AgentTool(
        name="route_to_group",
        description=ROUTE_TO_GROUP_TOOL,
        args=RouteToGroupIn,
        out=RunOut,
        run=route_to_group_tool,
        writes=True,
        status=202,
        errors=(403, 404, 409),
        summary="route_to_group",
        tags=("groups",),
        respond=_run_stream_when_asked,
    ),
    AgentTool(
        name="delegate",
        description=DELEGATE_TOOL,
        args=DelegateToolIn,
        out=DelegationOut,
        run=delegate_tool,
        writes=True,
        status=201,
        errors=(403, 404, 409),
        summary="delegate: hand part of a led run to a member",
        tags=("groups",),
    ),
    AgentTool(
        name="message_agent",
        description=MESSAGE_AGENT_TOOL,
        args=MessageAgentIn,
        out=RunOut,
        run=message_agent_tool,
        writes=True,
        status=202,
        errors=(403, 404, 409),
        summary="message_agent: to an agent of your constellation",
        tags=("groups",),
        respond=_run_stream_when_asked,
    ),
)
