"""Recording what happened: the one call every service makes.

``event_record`` records an event once the caller's transaction commits
(none when it rolls back).  The activity app stores events and registers
itself as the recorder when it loads; the entry point lives in the kernel
so that every layer, the agents below the activity app included, records
through the same call.
"""

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import models

from pattern_site.kernel.actors import Actor

if TYPE_CHECKING:
    from pattern_site.kernel.agents.models import Agent


class EventType(models.TextChoices):
    AGENT_ACTIVATED = "agent_activated", "agent activated"
    AGENT_DEACTIVATED = "agent_deactivated", "agent deactivated"
    MESSAGE_RECEIVED = "message_received", "message received"
    MESSAGE_SENT = "message_sent", "message sent"
    TOOL_EXECUTED = "tool_executed", "tool executed"
    MEMORY_BLOCK_UPDATED = "memory_block_updated", "memory block updated"
    FILE_ACCESSED = "file_accessed", "file accessed"
    TASK_ASSIGNED = "task_assigned", "task assigned"
    TASK_CREATED = "task_created", "task created"
    TASK_COMPLETED = "task_completed", "task completed"
    TASK_BLOCKED = "task_blocked", "task blocked"
    TASK_CANCELLED = "task_cancelled", "task cancelled"
    HANDOFF_INITIATED = "handoff_initiated", "handoff initiated"
    GROUP_RUN_STARTED = "group_run_started", "group run started"
    GROUP_RUN_COMPLETED = "group_run_completed", "group run completed"
    AGENT_TURN = "agent_turn", "agent turn"
    CONSOLIDATION_RUN = "consolidation_run", "memory consolidated"
    NOTABLE = "notable", "notable"


class Importance(models.TextChoices):
    LOW = "low", "low"
    MEDIUM = "medium", "medium"
    HIGH = "high", "high"
    CRITICAL = "critical", "critical"


Recorder = Callable[..., None]
_recorder: list[Recorder] = []


def event_recorder_set(recorder: Recorder) -> None:
    """Store events with ``recorder`` (the activity app, when it loads)."""
    _recorder[:] = [recorder]


def event_record(
    *,
    actor: Actor,
    event_type: str,
    agent: "Agent | None" = None,
    constellation_id: int | None = None,
    details: dict[str, Any] | None = None,
    importance: str = Importance.LOW,
    at: datetime | None = None,
    about: tuple[str, int] | None = None,
) -> None:
    """Record that ``actor`` did ``event_type`` once the transaction commits.

    ``agent`` is the agent concerned when a human or the system acted (an
    agent actor is its own agent); ``constellation_id`` is needed only when
    no agent is concerned.  ``about`` is the object the event is about, as
    (kind, id): the event is read by those who may read that object only.
    """
    for recorder in _recorder:
        recorder(
            actor=actor,
            event_type=event_type,
            agent=agent,
            constellation_id=constellation_id,
            details=details,
            importance=importance,
            at=at,
            about=about,
        )
