"""Writes of tasks, handoff notes and coordination state.

Each service runs in one transaction and re-reads the rows it changes
under a write lock (``select_for_update``; on SQLite every transaction
begins ``IMMEDIATE``), so of two agents claiming or completing the same
task at once exactly one succeeds and the other gets ``Conflict`` naming
who won.  After commit a ``task.changed`` / ``handoff.created`` event goes
to the constellation's channel-layer group, which the dashboard listens to.

Rules, besides the rights in ``coordination.work.permissions``:

- Status moves follow ``TASK_TRANSITIONS``; a move the current status does
  not allow is a ``Conflict`` (someone else may have moved it first).
- A task starts (in progress) or completes only when every task it depends
  on is done; a cancelled dependency does not count as done: remove it.
- A parent task completes only when each subtask is done or cancelled.
- Dependencies and parents stay within one constellation; dependencies
  never form a cycle.
- Coordination state writes name the version they read (0 to create a
  key); a stale version is a ``Conflict`` carrying the current value.
"""

import logging
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from coordination.work.models import (
    FINISHED_STATUSES,
    STATE_KEY_MAX_CHARS,
    TASK_TRANSITIONS,
    CoordinationState,
    HandoffNote,
    Task,
    TaskPriority,
    TaskStatus,
)
from coordination.work.permissions import (
    handoff_check_mark_read,
    handoff_check_send,
    task_check_assign,
    task_check_edit,
    task_check_status,
)
from coordination.work.selectors import HANDOFF, NOTES_KEY, TASK
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
    full_clean,
)
from pattern_site.kernel.events import EventType, Importance, event_record
from pattern_site.kernel.realtime import group_for_constellation, publish_on_commit

# Turns a model's ValidationError into InvalidInput naming each field.

logger = logging.getLogger(__name__)

# The shared notes list keeps this many of the latest notes.
NOTES_KEPT = 100
NOTE_MAX_CHARS = 2_000


def _broadcast_later(*, constellation_id: int, event: dict[str, Any]) -> None:
    """Tell the constellation's open pages once the write commits."""
    publish_on_commit(
        group_for_constellation(constellation_id),
        {"type": "constellation.event", "event": event},
    )


def _task_changed_later(task: Task) -> None:
    _broadcast_later(
        constellation_id=task.constellation_id,
        event={"type": "task.changed", "task_id": task.pk, "status": task.status},
    )


def _task_event(
    *,
    actor: Actor,
    task: Task,
    event_type: str,
    importance: str = Importance.LOW,
    **details: Any,
) -> None:
    """Record ``event_type`` about ``task`` (after commit), naming the task
    by its title as well as its ref, as a person searches for it."""
    event_record(
        actor=actor,
        agent=task.assignee if actor.agent is None else None,
        constellation_id=task.constellation_id,
        event_type=event_type,
        details={"task": task.ref, "title": task.title, **details},
        importance=importance,
        about=(TASK, task.pk),
    )


def _task_assigned_event(*, actor: Actor, task: Task) -> None:
    """Record that ``task`` went to its assignee (after commit)."""
    assert task.assignee is not None
    _task_event(
        actor=actor,
        task=task,
        event_type=EventType.TASK_ASSIGNED,
        importance=Importance.MEDIUM,
        assignee=task.assignee.name,
        assignee_id=task.assignee_id,
    )


# What a move to a status is called in the activity stream; the moves not
# listed (starting, reopening) show on the board and are not worth a line.
STATUS_EVENTS = {
    TaskStatus.DONE: EventType.TASK_COMPLETED,
    TaskStatus.BLOCKED: EventType.TASK_BLOCKED,
    TaskStatus.CANCELLED: EventType.TASK_CANCELLED,
}


def _task_save(task: Task, actor: Actor, fields: list[str]) -> None:
    """Attribute the change to ``actor``, validate the changed fields and
    save only them (the others were validated when they were written)."""
    task.updated_by = actor.ref
    task.updated_by_name = actor.display_name
    changed = {*fields, "updated_by", "updated_by_name"}
    full_clean(
        task,
        exclude=[f.name for f in Task._meta.concrete_fields if f.name not in changed],
    )
    task.save(update_fields=[*changed, "updated_at"])
    _task_changed_later(task)


def _task_locked(task: Task) -> Task:
    """``task`` re-read under this transaction's write lock."""
    # No joins: on PostgreSQL a row re-read after waiting for its lock comes
    # back fresh, but a joined row (the assignee) would be the stale one.
    locked = Task.objects.select_for_update().filter(pk=task.pk).first()
    if locked is None:
        raise NotFound(f"{task.ref} does not exist")
    return locked


def _same_constellation(task: Task, other: Task, what: str) -> None:
    if other.constellation_id != task.constellation_id:
        raise NotFound(f"{what} {other.ref} does not exist")


def _check_assignee(constellation_id: int, assignee: Agent | None) -> None:
    if assignee is None:
        return
    if assignee.constellation_id != constellation_id:
        raise NotFound(f"agent {assignee.pk} does not exist")
    if not assignee.is_active:
        raise InvalidInput(f"@{assignee.name} is deactivated; assign an active agent")


def _unfinished_dependencies(task: Task) -> list[Task]:
    return list(task.dependencies.exclude(status=TaskStatus.DONE).order_by("pk"))


def _check_may_progress(task: Task, status: str) -> None:
    if status not in (TaskStatus.IN_PROGRESS, TaskStatus.DONE):
        return
    waiting = _unfinished_dependencies(task)
    if waiting:
        listed = ", ".join(f"{t.ref} ({t.status})" for t in waiting)
        verb = "start" if status == TaskStatus.IN_PROGRESS else "complete"
        raise Conflict(
            f"cannot {verb} {task.ref}: it depends on {listed}, which must be "
            "done first",
            extra={"waiting_on": [t.pk for t in waiting]},
        )
    if status == TaskStatus.DONE:
        pending = list(
            task.subtasks.exclude(status__in=FINISHED_STATUSES).order_by("pk")
        )
        if pending:
            listed = ", ".join(f"{t.ref} ({t.status})" for t in pending)
            raise Conflict(
                f"cannot complete {task.ref}: its subtasks {listed} are not "
                "done or cancelled",
                extra={"waiting_on": [t.pk for t in pending]},
            )


def _check_transition(task: Task, status: str) -> None:
    if status not in TaskStatus.values:
        raise InvalidInput(
            f"unknown task status {status!r}; statuses are "
            f"{', '.join(TaskStatus.values)}"
        )
    allowed = TASK_TRANSITIONS[task.status]
    if status not in allowed:
        by = f" (by {task.updated_by_name})" if task.updated_by_name else ""
        raise Conflict(
            f"{task.ref} is {task.status}{by}; from {task.status} it can go to "
            f"{', '.join(sorted(allowed))}",
            extra={"status": task.status},
        )


@transaction.atomic
def task_create(
    *,
    actor: Actor,
    constellation: Constellation,
    title: str,
    description: str = "",
    assignee: Agent | None = None,
    priority: int = TaskPriority.NORMAL,
    parent: Task | None = None,
    dependencies: list[Task] | None = None,
    due_at: datetime | None = None,
) -> Task:
    title = title.strip()
    if not title:
        raise InvalidInput("a task needs a title")
    _check_assignee(constellation.pk, assignee)
    task = Task(
        constellation=constellation,
        title=title,
        description=description,
        assignee=assignee,
        priority=priority,
        parent=parent,
        due_at=due_at,
        created_by_agent=actor.agent,
        created_by_user=actor.user,
    )
    task.updated_by = actor.ref
    task.updated_by_name = actor.display_name
    if parent is not None:
        _same_constellation(task, parent, "parent task")
    for dependency in dependencies or []:
        _same_constellation(task, dependency, "dependency")
    full_clean(task)
    task.save()
    if dependencies:
        task.dependencies.add(*dependencies)
    _task_changed_later(task)
    _task_event(actor=actor, task=task, event_type=EventType.TASK_CREATED)
    if assignee is not None:
        _task_assigned_event(actor=actor, task=task)
    return task


@transaction.atomic
def task_assign(*, actor: Actor, task: Task, assignee: Agent | None) -> Task:
    """Give ``task`` to ``assignee`` (None: unassign).  Status is unchanged."""
    task = _task_locked(task)
    if task.status in FINISHED_STATUSES:
        raise Conflict(f"{task.ref} is {task.status}; reopen it before assigning it")
    task_check_assign(actor=actor, task=task)
    _check_assignee(task.constellation_id, assignee)
    task.assignee = assignee
    _task_save(task, actor, ["assignee"])
    if assignee is not None:
        _task_assigned_event(actor=actor, task=task)
    return task


@transaction.atomic
def task_claim(*, actor: Actor, task: Task) -> Task:
    """The acting agent takes an open task and starts it."""
    if actor.agent is None:
        raise PermissionDenied(
            "tasks are claimed by agents; a human assigns them instead"
        )
    task = _task_locked(task)
    if task.assignee_id not in (None, actor.agent.pk):
        raise Conflict(
            f"{task.ref} was already claimed by @{task.assignee.name}",  # type: ignore[union-attr]
            extra={"assignee_id": task.assignee_id},
        )
    if task.status != TaskStatus.OPEN:
        raise Conflict(
            f"{task.ref} is {task.status}; only open tasks can be claimed",
            extra={"status": task.status},
        )
    _check_may_progress(task, TaskStatus.IN_PROGRESS)
    task.assignee = actor.agent
    task.status = TaskStatus.IN_PROGRESS
    _task_save(task, actor, ["assignee", "status"])
    _task_assigned_event(actor=actor, task=task)
    return task


@transaction.atomic
def task_status_set(*, actor: Actor, task: Task, status: str, reason: str = "") -> Task:
    """Move ``task`` to ``status``; ``reason`` is required for ``blocked``."""
    task = _task_locked(task)
    _check_transition(task, status)
    task_check_status(actor=actor, task=task, status=status)
    _check_may_progress(task, status)
    reason = reason.strip()
    if status == TaskStatus.BLOCKED and not reason:
        raise InvalidInput(f"say why {task.ref} is blocked (a reason is required)")
    task.status = status
    task.blocked_reason = reason if status == TaskStatus.BLOCKED else ""
    fields = ["status", "blocked_reason"]
    # Whoever finishes or starts unassigned work is the one who did it.
    if (
        actor.agent is not None
        and task.assignee_id is None
        and status in (TaskStatus.IN_PROGRESS, TaskStatus.DONE)
    ):
        task.assignee = actor.agent
        fields.append("assignee")
    _task_save(task, actor, fields)
    if "assignee" in fields:
        _task_assigned_event(actor=actor, task=task)
    if status in STATUS_EVENTS:
        _task_event(
            actor=actor,
            task=task,
            event_type=STATUS_EVENTS[status],
            importance=Importance.MEDIUM,
            reason=task.blocked_reason,
        )
    return task


def task_complete(*, actor: Actor, task: Task) -> Task:
    return task_status_set(actor=actor, task=task, status=TaskStatus.DONE)


def task_block(*, actor: Actor, task: Task, reason: str) -> Task:
    return task_status_set(
        actor=actor, task=task, status=TaskStatus.BLOCKED, reason=reason
    )


@transaction.atomic
def task_edit(
    *,
    actor: Actor,
    task: Task,
    title: str,
    description: str,
    priority: int,
    due_at: datetime | None,
) -> Task:
    """Change what ``task`` says: its title, description, priority and due
    date (its status, assignee and dependencies have services of their own)."""
    task = _task_locked(task)
    task_check_edit(actor=actor, task=task)
    title = title.strip()
    if not title:
        raise InvalidInput("a task needs a title", extra={"field": "title"})
    task.title = title
    task.description = description
    task.priority = priority
    task.due_at = due_at
    _task_save(task, actor, ["title", "description", "priority", "due_at"])
    return task


@transaction.atomic
def task_dependency_add(*, actor: Actor, task: Task, depends_on: Task) -> Task:
    """``task`` waits for ``depends_on``; refuses a cycle."""
    task = _task_locked(task)
    task_check_edit(actor=actor, task=task)
    _same_constellation(task, depends_on, "dependency")
    # Walk what depends_on waits for: reaching task would close a loop.
    frontier, seen = [depends_on.pk], set()
    while frontier:
        pk = frontier.pop()
        if pk == task.pk:
            raise InvalidInput(
                f"{task.ref} cannot depend on {depends_on.ref}: that makes a cycle"
            )
        if pk in seen:
            continue
        seen.add(pk)
        frontier.extend(
            Task.dependencies.through.objects.filter(from_task_id=pk).values_list(
                "to_task_id", flat=True
            )
        )
    task.dependencies.add(depends_on)
    _task_save(task, actor, [])
    return task


@transaction.atomic
def task_dependency_remove(*, actor: Actor, task: Task, depends_on: Task) -> Task:
    task = _task_locked(task)
    task_check_edit(actor=actor, task=task)
    task.dependencies.remove(depends_on)
    _task_save(task, actor, [])
    return task


@transaction.atomic
def handoff_create(
    *, actor: Actor, to_agent: Agent | None, content: str
) -> HandoffNote:
    """Leave ``content`` for ``to_agent`` (None: for any agent)."""
    sender = handoff_check_send(actor=actor)
    content = content.strip()
    if not content:
        raise InvalidInput("a handoff note needs content")
    if to_agent is not None:
        if to_agent.constellation_id != sender.constellation_id:
            raise NotFound(f"agent {to_agent.pk} does not exist")
        if to_agent.pk == sender.pk:
            raise InvalidInput("a handoff goes to another agent, not to yourself")
    note = HandoffNote(
        constellation_id=sender.constellation_id,
        from_agent=sender,
        to_agent=to_agent,
        content=content,
    )
    full_clean(note)
    note.save()
    _broadcast_later(
        constellation_id=note.constellation_id,
        event={"type": "handoff.created", "handoff_id": note.pk},
    )
    event_record(
        actor=actor,
        agent=sender,
        event_type=EventType.HANDOFF_INITIATED,
        details={
            "to": to_agent.name if to_agent is not None else "anyone",
            "summary": content[:160],
            "handoff_id": note.pk,
        },
        importance=Importance.MEDIUM,
        about=(HANDOFF, note.pk),
    )
    return note


@transaction.atomic
def handoff_mark_read(*, actor: Actor, note: HandoffNote) -> HandoffNote:
    """Mark ``note`` read (once; marking it again changes nothing)."""
    handoff_check_mark_read(actor=actor, note=note)
    updated = HandoffNote.objects.filter(pk=note.pk, read_at__isnull=True).update(
        read_at=timezone.now(), read_by=actor.ref
    )
    note.refresh_from_db(fields=["read_at", "read_by"])
    if updated:
        _broadcast_later(
            constellation_id=note.constellation_id,
            event={"type": "handoff.read", "handoff_id": note.pk},
        )
    return note


def _check_state_key(key: str) -> str:
    key = key.strip()
    if not key or len(key) > STATE_KEY_MAX_CHARS:
        raise InvalidInput(
            f"a state key is 1 to {STATE_KEY_MAX_CHARS} characters; got {len(key)}"
        )
    return key


@transaction.atomic
def coordination_state_set(
    *,
    actor: Actor,
    constellation: Constellation,
    key: str,
    value: Any,
    expected_version: int,
) -> CoordinationState:
    """Write ``key`` if it is still at ``expected_version`` (0: not there)."""
    key = _check_state_key(key)
    state = (
        CoordinationState.objects.select_for_update()
        .filter(constellation=constellation, key=key)
        .first()
    )
    current = state.version if state is not None else 0
    if current != expected_version:
        if state is None:
            detail = f"state {key!r} does not exist (version 0)"
        else:
            detail = (
                f"state {key!r} is at version {state.version}, written by "
                f"{state.updated_by_name} at {state.updated_at:%Y-%m-%d %H:%M:%S}"
            )
        raise Conflict(
            f"{detail}; you sent version {expected_version}. Read it again and "
            "retry with the current version",
            extra={
                "key": key,
                "version": current,
                "value": state.value if state is not None else None,
            },
        )
    if state is None:
        state = CoordinationState(constellation=constellation, key=key, version=0)
    state.value = value
    state.version = current + 1
    state.updated_by = actor.ref
    state.updated_by_name = actor.display_name
    full_clean(state, validate_unique=False, validate_constraints=False)
    try:
        # Two creators of one key lock no row; the unique key decides.
        with transaction.atomic():
            state.save()
    except IntegrityError as exc:
        raise Conflict(
            f"state {key!r} was just created by someone else; read it and retry "
            "with its version",
            extra={"key": key},
        ) from exc
    return state


@transaction.atomic
def coordination_note_add(
    *, actor: Actor, constellation: Constellation, text: str, decision: bool = False
) -> CoordinationState:
    """Append a note to the shared ``notes`` state (the latest ``NOTES_KEPT``).

    A note flagged as a ``decision`` is a notable event of medium importance,
    which the catch-up lists under Key Decisions; a plain note is a low one.
    """
    text = text.strip()
    if not text or len(text) > NOTE_MAX_CHARS:
        raise InvalidInput(
            f"a note is 1 to {NOTE_MAX_CHARS} characters; got {len(text)}"
        )
    state = (
        CoordinationState.objects.select_for_update()
        .filter(constellation=constellation, key=NOTES_KEY)
        .first()
    )
    notes = state.value if state is not None and isinstance(state.value, list) else []
    note = {
        "text": text,
        "by": actor.display_name,
        "at": timezone.now().isoformat(timespec="seconds"),
        "decision": decision,
    }
    saved = coordination_state_set(
        actor=actor,
        constellation=constellation,
        key=NOTES_KEY,
        value=[*notes, note][-NOTES_KEPT:],
        expected_version=state.version if state is not None else 0,
    )
    event_record(
        actor=actor,
        constellation_id=constellation.pk,
        event_type=EventType.NOTABLE,
        details={"description": text, "decision": decision},
        importance=Importance.MEDIUM if decision else Importance.LOW,
    )
    return saved
