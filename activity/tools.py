"""The ``notable`` agent tool, registered with ``pattern_site.kernel.tools``
(which serves it over HTTP, MCP and in process).

``notable_tool`` resolves the constellation and the agents involved through
the stream's permission module and records the event with
``notable_flag``; the answer is ``NotableOut``.  ``NOTABLE_TOOL`` is the
tool's description for the model.
"""

from typing import Any

from activity.schemas import NotableIn, NotableOut
from activity.stream.permissions import (
    agents_involved_for_flag,
    notable_constellation_for_flag,
)
from activity.stream.services import notable_flag
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.tools import AgentTool, tool_register

NOTABLE_TOOL = (
    "Flag something notable that happened: a decision taken, a milestone, a"
    " risk, a change of plan. `description` says what (at most 400"
    " characters); `importance` is low, medium (the default), high or"
    " critical, and events of medium and above appear under Key Decisions"
    " in the catch-up digest; `agents_involved` lists the ids of the other"
    " agents of your constellation who took part."
)


def notable_tool(*, actor: Actor, args: NotableIn) -> dict[str, Any]:
    constellation = notable_constellation_for_flag(
        actor=actor, constellation_id=args.constellation_id
    )
    agents = agents_involved_for_flag(
        actor=actor, constellation=constellation, agent_ids=args.agents_involved
    )
    notable_flag(
        actor=actor,
        constellation=constellation,
        description=args.description,
        importance=args.importance,
        agents_involved=agents,
    )
    return {"recorded": True}


tool_register(
    AgentTool(
        name="notable",
        description=NOTABLE_TOOL,
        args=NotableIn,
        out=NotableOut,
        run=notable_tool,
        writes=True,
        status=201,
        summary="Flag a notable event (feeds Key Decisions at medium and above)",
        tags=("activity",),
    ),
)
