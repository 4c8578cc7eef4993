"""The ``coord`` agent tool, registered with ``pattern_site.kernel.tools``
(which serves it over HTTP, MCP and in process).

``coord_tool`` parses the command (``InvalidInput`` with the command's
grammar when malformed), resolves the constellation the caller works in and
runs the command through the dialect, whose selectors and services decide
every right.  ``COORD_TOOL`` is the tool's description for the model.
"""

from ninja import Schema

from coordination.work import selectors
from coordination.work.dialect import (
    GRAMMAR_TEXT,
    CoordResult,
    coord_execute,
    coord_parse,
)
from coordination.work.schemas import CoordIn, CoordOut
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.apitypes import Id
from pattern_site.kernel.tools import AgentTool, tool_register

COORD_TOOL = f"""Coordinate with the other agents of your constellation: shared
tasks, handoff notes and shared notes. Send one command per call as `command`.

{GRAMMAR_TEXT}

- status: who is active, task counts, your tasks, your unread handoffs, open
  tasks and the latest shared notes. Start here.
- tasks: list your tasks (mine), open tasks (open, the default) or all.
- assign: create a task with a quoted title and give it to an agent, or give
  an existing task to an agent.
- claim: take an open task and start it. If another agent claimed it first
  you get a conflict naming them: pick another task.
- complete: mark a task done. Tasks it depends on (and its subtasks) must be
  done first; the error lists what is still waiting.
- block: say a task cannot go on, with the reason in quotes.
- handoff: leave context for another agent (or @anyone); it appears in their
  context until they read it.
- note: add an observation to the constellation's shared notes.
- read: mark a handoff note you have taken in as read.
Task ids look like task-12, handoff ids like handoff-3. Put text with spaces
in double quotes. A malformed command answers with the grammar of that
command."""


class CoordQuery(Schema):
    """Over HTTP a human names the constellation to work in."""

    constellation_id: Id | None = None


def coord_tool(
    *, actor: Actor, args: CoordIn, constellation_id: int | None = None
) -> CoordResult:
    """Run one ``/coord`` command as ``actor`` (an agent works in its own
    constellation; a human names one unless they see only one)."""
    command = coord_parse(args.command)
    constellation = selectors.work_constellation_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    return coord_execute(actor=actor, constellation=constellation, command=command)


tool_register(
    AgentTool(
        name="coord",
        description=COORD_TOOL,
        args=CoordIn,
        out=CoordOut,
        run=coord_tool,
        writes=True,
        errors=(403, 404, 409),
        summary="coord: tasks, handoffs and notes",
        tags=("tasks",),
        query=CoordQuery,
    ),
)
