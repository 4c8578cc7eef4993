"""Every right over tasks, handoff notes and coordination state.

Reads: an actor sees the work of the constellations it sees
(``pattern_site.kernel.agents.selectors.constellation_list_for_actor``); anything else
does not exist for it.  Writes, decided here and nowhere else:

- Tasks: any agent or human of the constellation creates tasks and assigns
  unassigned ones.  An agent changes the status of an unassigned task or of
  its own; another agent's task (status or reassignment) belongs to that
  agent and the humans.  Cancelling or reopening needs the assignee, the
  creator or a human.
- Handoff notes are written by agents; the recipient (any agent for a note
  to anyone) or a human of the constellation marks one read.
- Coordination state: any agent or human of the constellation writes any
  key; the version check (compare-and-set) keeps writers from overwriting
  each other unseen.
"""

from django.db.models import Q

from coordination.work.models import HandoffNote, Task, TaskStatus
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.agents.selectors import constellation_list_for_actor
from pattern_site.kernel.errors import PermissionDenied


def work_visible(actor: Actor) -> Q:
    """Rows (with a ``constellation`` field) the actor may see."""
    if actor.agent is not None:
        # What constellation_list_for_actor gives an agent (its own), without
        # a subquery on the agents' hot path.
        return Q(constellation_id=actor.agent.constellation_id)
    return Q(constellation__in=constellation_list_for_actor(actor=actor).values("pk"))


def handoff_visible(actor: Actor) -> Q:
    """Agents see notes to them, to anyone and from them; humans see all of
    their constellations' notes."""
    visible = work_visible(actor)
    if actor.agent is None:
        return visible
    return visible & (
        Q(to_agent=actor.agent) | Q(to_agent__isnull=True) | Q(from_agent=actor.agent)
    )


def _holder(task: Task) -> str:
    assert task.assignee is not None
    return task.assignee.name


def task_check_assign(*, actor: Actor, task: Task) -> None:
    if actor.agent is None or task.assignee_id in (None, actor.agent.pk):
        return
    raise PermissionDenied(
        f"{task.ref} is assigned to {_holder(task)}; only {_holder(task)} or a "
        "human may reassign it"
    )


def task_check_status(*, actor: Actor, task: Task, status: str) -> None:
    """May ``actor`` move ``task`` to ``status``?  (Whether the move itself is
    allowed from the task's current status is the service's business.)"""
    if actor.agent is None:
        return
    me = actor.agent.pk
    if task.assignee_id not in (None, me):
        raise PermissionDenied(
            f"{task.ref} is assigned to {_holder(task)}; only {_holder(task)} or a "
            "human may change its status"
        )
    if status in (TaskStatus.CANCELLED, TaskStatus.OPEN) and me not in (
        task.assignee_id,
        task.created_by_agent_id,
    ):
        raise PermissionDenied(
            f"only the assignee, the creator or a human may cancel or reopen {task.ref}"
        )


def task_check_edit(*, actor: Actor, task: Task) -> None:
    """Changing a task's title, description, priority or due date, or what
    it depends on, is for a human or the agent holding it (anyone, while
    nobody holds it)."""
    if actor.agent is not None and task.assignee_id not in (None, actor.agent.pk):
        raise PermissionDenied(
            f"{task.ref} is assigned to {_holder(task)}; only {_holder(task)} or a "
            "human may change it"
        )


def handoff_check_send(*, actor: Actor) -> Agent:
    """The agent sending a handoff note."""
    if actor.agent is None:
        raise PermissionDenied(
            "handoff notes are written by agents; humans assign tasks or write "
            "to coordination state instead"
        )
    return actor.agent


def handoff_check_mark_read(*, actor: Actor, note: HandoffNote) -> None:
    if actor.agent is None or note.to_agent_id in (None, actor.agent.pk):
        return
    raise PermissionDenied(
        f"{note.ref} is addressed to another agent; only its recipient or a "
        "human may mark it read"
    )
