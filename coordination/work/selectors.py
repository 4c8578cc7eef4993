"""Reads of tasks, handoff notes and coordination state.

Every read is scoped by ``coordination.work.permissions``: another
constellation's ids raise ``NotFound``.  List selectors return querysets
with what their pages and endpoints show already joined.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Prefetch, QuerySet
from django.utils import timezone

from activity.stream.models import ActivityEvent
from activity.stream.selectors import activity_about
from coordination.work.models import (
    FINISHED_STATUSES,
    CoordinationState,
    HandoffNote,
    Task,
    TaskStatus,
)
from coordination.work.permissions import handoff_visible, work_visible
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.agents.selectors import (
    agent_list_for_actor,
    constellation_list_for_actor,
)
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.errors import InvalidInput, NotFound

NOTES_KEY = "notes"
# The kinds of objects activity events are about (``event_record(about=)``).
TASK = "task"
HANDOFF = "handoff"


def work_constellation_for_actor(
    *, actor: Actor, constellation_id: int | None = None
) -> Constellation:
    """The constellation a request works in: an agent's own; for a human the
    one named, or the only one they see."""
    visible = constellation_list_for_actor(actor=actor)
    if constellation_id is not None:
        constellation = visible.filter(pk=constellation_id).first()
        if constellation is None:
            raise NotFound(f"constellation {constellation_id} does not exist")
        return constellation
    found = list(visible[:2])
    if len(found) != 1:
        raise InvalidInput(
            "give 'constellation_id': you see "
            f"{'several' if found else 'no'} constellations"
        )
    return found[0]


def task_list_for_actor(
    *,
    actor: Actor,
    constellation_id: int | None = None,
    statuses: Iterable[str] = (),
    assignee_id: int | None = None,
) -> QuerySet[Task]:
    qs = (
        Task.objects.filter(work_visible(actor))
        .select_related("assignee", "parent", "created_by_agent", "created_by_user")
        .prefetch_related(
            Prefetch(
                "dependencies", queryset=Task.objects.only("id", "title", "status")
            ),
            Prefetch("subtasks", queryset=Task.objects.only("id", "parent", "status")),
        )
    )
    if constellation_id is not None:
        qs = qs.filter(constellation_id=constellation_id)
    statuses = list(statuses)
    if statuses:
        unknown = set(statuses) - set(TaskStatus.values)
        if unknown:
            raise InvalidInput(
                f"unknown task status {sorted(unknown)}; statuses are "
                f"{', '.join(TaskStatus.values)}"
            )
        qs = qs.filter(status__in=statuses)
    if assignee_id is not None:
        qs = qs.filter(assignee_id=assignee_id)
    return qs


def task_get_for_actor(*, actor: Actor, task_id: int) -> Task:
    task = task_list_for_actor(actor=actor).filter(pk=task_id).first()
    if task is None:
        raise NotFound(f"task-{task_id} does not exist")
    return task


def task_history(*, actor: Actor, task: Task) -> list[ActivityEvent]:
    """What happened to ``task``, newest first."""
    return activity_about(
        actor=actor,
        constellation_id=task.constellation_id,
        kind=TASK,
        object_id=task.pk,
    )


def task_dependency_candidates(*, actor: Actor, task: Task) -> list[Task]:
    """Tasks ``task`` could wait for: the unfinished ones of its
    constellation it does not wait for yet, itself and its subtasks aside
    (the service refuses cycles through longer chains with a message)."""
    return list(
        task_list_for_actor(actor=actor, constellation_id=task.constellation_id)
        .exclude(pk=task.pk)
        .exclude(parent=task)
        .exclude(pk__in=task.dependencies.values("pk"))
        .exclude(status__in=FINISHED_STATUSES)
        .order_by("pk")
    )


# Finished columns show the most recently finished tasks only.
BOARD_FINISHED_LIMIT = 50


@dataclass
class BoardColumn:
    status: str
    label: str
    tasks: list[Task]
    total: int


def task_board_for_actor(
    *, actor: Actor, constellation: Constellation
) -> list[BoardColumn]:
    """The board's columns in status order: every unfinished task, and the
    latest ``BOARD_FINISHED_LIMIT`` of each finished status."""
    tasks = task_list_for_actor(actor=actor, constellation_id=constellation.pk)
    totals = dict(
        tasks.order_by()
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    columns = []
    for status in TaskStatus:
        rows = tasks.filter(status=status)
        if status in FINISHED_STATUSES:
            rows = rows.order_by("-updated_at")[:BOARD_FINISHED_LIMIT]
        columns.append(
            BoardColumn(status.value, status.label, list(rows), totals.get(status, 0))
        )
    return columns


def agent_get_by_mention(
    *, actor: Actor, constellation: Constellation, name: str
) -> Agent:
    """The agent an ``@name`` mention means in ``constellation`` (any case)."""
    agents = agent_list_for_actor(actor=actor, constellation_id=constellation.pk)
    agent = agents.filter(name__iexact=name.lstrip("@")).first()
    if agent is None:
        names = ", ".join(f"@{a.name}" for a in agents)
        raise NotFound(f"no agent named @{name.lstrip('@')} here; agents: {names}")
    return agent


def handoff_list_for_actor(
    *,
    actor: Actor,
    constellation_id: int | None = None,
    unread_only: bool = False,
) -> QuerySet[HandoffNote]:
    qs = HandoffNote.objects.filter(handoff_visible(actor)).select_related(
        "from_agent", "to_agent"
    )
    if constellation_id is not None:
        qs = qs.filter(constellation_id=constellation_id)
    if unread_only:
        qs = qs.filter(read_at__isnull=True)
    return qs


def handoff_get_for_actor(*, actor: Actor, handoff_id: int) -> HandoffNote:
    note = handoff_list_for_actor(actor=actor).filter(pk=handoff_id).first()
    if note is None:
        raise NotFound(f"handoff-{handoff_id} does not exist")
    return note


def handoff_inbox_for_agent(*, agent: Agent) -> QuerySet[HandoffNote]:
    """Unread notes for ``agent``: addressed to it or to anyone, not its own."""
    return (
        handoff_list_for_actor(actor=Actor.for_agent(agent), unread_only=True)
        .exclude(from_agent=agent)
        .order_by("created_at")
    )


# An agent's inbox, compiled once: its context is built again after each
# writing step of a turn, and the visibility filter costs several times
# the query to put together.
_INBOX = CompiledQuery(
    lambda agent_id, constellation_id: handoff_inbox_for_agent(
        agent=Agent(pk=agent_id, constellation_id=constellation_id)
    ),
    agent_id=-7_502_101,
    constellation_id=-7_502_102,
)


def handoffs_render_for_agent(agent: Agent) -> str:
    """The ``<handoff_notes>`` section of ``agent``'s context: its unread
    handoff notes, oldest first, until they are marked read."""
    notes = _INBOX.all(agent_id=agent.pk, constellation_id=agent.constellation_id)
    if not notes:
        return ""
    lines = ["<handoff_notes>"]
    for note in notes:
        to = "you" if note.to_agent_id == agent.pk else "anyone"
        lines.append(
            f"[{note.ref} from @{note.from_agent.name} to {to}, "
            f"{note.created_at:%Y-%m-%d %H:%M} UTC] {note.content}"
        )
    lines.append(
        "Mark each one read when you have taken it in: /coord read handoff-<id>"
    )
    lines.append("</handoff_notes>")
    return "\n".join(lines)


def coordination_state_list_for_actor(
    *, actor: Actor, constellation_id: int | None = None
) -> QuerySet[CoordinationState]:
    qs = CoordinationState.objects.filter(work_visible(actor))
    if constellation_id is not None:
        qs = qs.filter(constellation_id=constellation_id)
    return qs


def coordination_state_get_for_actor(
    *, actor: Actor, constellation: Constellation, key: str
) -> CoordinationState:
    state = (
        coordination_state_list_for_actor(
            actor=actor, constellation_id=constellation.pk
        )
        .filter(key=key)
        .first()
    )
    if state is None:
        raise NotFound(
            f"coordination state has no key {key!r}; write it with version 0 "
            "to create it"
        )
    return state


def active_agents_for_constellation(*, constellation: Constellation) -> list[Agent]:
    """Agents seen recently: active and last active within the window."""
    since = timezone.now() - timedelta(
        minutes=settings.COORDINATION_ACTIVE_AGENT_MINUTES
    )
    return list(
        constellation.agents.filter(is_active=True, last_active_at__gte=since).order_by(
            "-last_active_at"
        )
    )


@dataclass
class CoordinationStatus:
    constellation: Constellation
    active_agents: list[Agent]
    counts: dict[str, int]
    mine: list[Task] = field(default_factory=list)
    open_tasks: list[Task] = field(default_factory=list)
    inbox: list[HandoffNote] = field(default_factory=list)
    notes: list[dict[str, str]] = field(default_factory=list)
    state_keys: list[str] = field(default_factory=list)


STATUS_LIST_LIMIT = 10


def coordination_status_for_actor(
    *, actor: Actor, constellation: Constellation
) -> CoordinationStatus:
    # The status lines show no dependencies or subtasks.
    tasks = task_list_for_actor(
        actor=actor, constellation_id=constellation.pk
    ).prefetch_related(None)
    counts = {status: 0 for status in TaskStatus.values}
    for row in tasks.order_by().values("status").annotate(n=Count("id")):
        counts[row["status"]] = row["n"]
    status = CoordinationStatus(
        constellation=constellation,
        active_agents=active_agents_for_constellation(constellation=constellation),
        counts=counts,
        open_tasks=list(tasks.filter(status=TaskStatus.OPEN)[:STATUS_LIST_LIMIT]),
    )
    if actor.agent is not None:
        status.mine = list(
            tasks.filter(
                assignee=actor.agent,
                status__in=[
                    TaskStatus.OPEN,
                    TaskStatus.IN_PROGRESS,
                    TaskStatus.BLOCKED,
                ],
            )[:STATUS_LIST_LIMIT]
        )
        status.inbox = list(handoff_inbox_for_agent(agent=actor.agent))
    states = list(
        coordination_state_list_for_actor(
            actor=actor, constellation_id=constellation.pk
        )
    )
    for state in states:
        if state.key == NOTES_KEY and isinstance(state.value, list):
            status.notes = state.value[-STATUS_LIST_LIMIT:]
    status.state_keys = [s.key for s in states]
    return status


def task_ids_readable(actor: Actor) -> QuerySet:
    """The tasks ``actor`` may read: who reads an event about a task."""
    return Task.objects.filter(work_visible(actor)).values("pk")


def handoff_ids_readable(actor: Actor) -> QuerySet:
    """The handoff notes ``actor`` may read (a note to one agent is its own
    and its sender's): who reads an event about a handoff."""
    return HandoffNote.objects.filter(handoff_visible(actor)).values("pk")
