"""The ``route_to_group`` agent tool, shared by its HTTP endpoint
(``coordination.groups.api``) and the MCP server.

``route_to_group_tool`` checks the group id the model sent (a string, as
tools send ids), finds the group through the selectors (which decide who
may route through it) and starts a run with the routing service.  The
answer is the run, shaped by ``RunOut``; its events follow on the run's
event stream.  ``ROUTE_TO_GROUP_TOOL`` is the tool's description.
"""

from coordination.groups import selectors, services
from coordination.groups.models import GroupRun
from coordination.groups.schemas import RouteToGroupIn
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.apitypes import number_text
from pattern_site.kernel.errors import InvalidInput

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
