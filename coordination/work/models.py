"""Tasks, handoff notes and coordination state of a constellation.

Data and constraints only; every write goes through
``coordination.work.services``.  The status machine lives here beside the
status names so that the services, the board and the errors share one
table of allowed moves.
"""

from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.db import models

from pattern_site.kernel.agents.models import Agent, Constellation

TITLE_MAX_CHARS = 200
DESCRIPTION_MAX_CHARS = 10_000
HANDOFF_MAX_CHARS = 8_000
STATE_KEY_MAX_CHARS = 100


class TaskStatus(models.TextChoices):
    OPEN = "open", "Open"
    IN_PROGRESS = "in_progress", "In progress"
    BLOCKED = "blocked", "Blocked"
    DONE = "done", "Done"
    CANCELLED = "cancelled", "Cancelled"


# Where a task may go from each status.  Blocked work is unblocked (to open
# or in progress) before it can be finished; finished work can be reopened.
TASK_TRANSITIONS: dict[str, frozenset[str]] = {
    TaskStatus.OPEN: frozenset(
        {
            TaskStatus.IN_PROGRESS,
            TaskStatus.BLOCKED,
            TaskStatus.DONE,
            TaskStatus.CANCELLED,
        }
    ),
    TaskStatus.IN_PROGRESS: frozenset(
        {TaskStatus.OPEN, TaskStatus.BLOCKED, TaskStatus.DONE, TaskStatus.CANCELLED}
    ),
    TaskStatus.BLOCKED: frozenset(
        {TaskStatus.OPEN, TaskStatus.IN_PROGRESS, TaskStatus.CANCELLED}
    ),
    TaskStatus.DONE: frozenset({TaskStatus.OPEN}),
    TaskStatus.CANCELLED: frozenset({TaskStatus.OPEN}),
}

FINISHED_STATUSES = frozenset({TaskStatus.DONE, TaskStatus.CANCELLED})


class TaskPriority(models.IntegerChoices):
    LOW = 0, "Low"
    NORMAL = 1, "Normal"
    HIGH = 2, "High"
    URGENT = 3, "Urgent"


class Task(models.Model):
    """A piece of work in a constellation, shown to agents as ``task-<id>``."""

    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="tasks"
    )
    title = models.CharField(max_length=TITLE_MAX_CHARS)
    description = models.TextField(
        blank=True, validators=[MaxLengthValidator(DESCRIPTION_MAX_CHARS)]
    )
    assignee = models.ForeignKey(
        Agent,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="assigned_tasks",
    )
    status = models.CharField(
        max_length=20, choices=TaskStatus.choices, default=TaskStatus.OPEN
    )
    priority = models.PositiveSmallIntegerField(
        choices=TaskPriority.choices, default=TaskPriority.NORMAL
    )
    blocked_reason = models.TextField(
        blank=True, validators=[MaxLengthValidator(DESCRIPTION_MAX_CHARS)]
    )
    parent = models.ForeignKey(
        "self",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="subtasks",
    )
    dependencies = models.ManyToManyField(
        "self", symmetrical=False, blank=True, related_name="dependents"
    )
    created_by_agent = models.ForeignKey(
        Agent,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="created_tasks",
    )
    created_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="created_tasks",
    )
    # ``Actor.ref`` and display name of whoever changed the task last.
    updated_by = models.CharField(max_length=64)
    updated_by_name = models.CharField(max_length=150)
    due_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-priority", "created_at"]
        indexes = [models.Index(fields=["constellation", "status"])]

    def __str__(self) -> str:
        return f"{self.ref} {self.title}"

    @property
    def ref(self) -> str:
        return f"task-{self.pk}"


class HandoffNote(models.Model):
    """Context one agent leaves for another (or for anyone, ``to_agent`` null).

    Read once: the first reader's ``read_at`` takes it out of every inbox.
    """

    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="handoff_notes"
    )
    from_agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="handoffs_sent"
    )
    to_agent = models.ForeignKey(
        Agent,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="handoffs_received",
    )
    content = models.TextField(validators=[MaxLengthValidator(HANDOFF_MAX_CHARS)])
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)
    read_by = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["constellation", "read_at"])]

    def __str__(self) -> str:
        return f"handoff-{self.pk}"

    @property
    def ref(self) -> str:
        return f"handoff-{self.pk}"


class CoordinationState(models.Model):
    """One key of a constellation's shared state: a JSON value and a version
    that every write must name (compare-and-set)."""

    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="coordination_state"
    )
    key = models.CharField(max_length=STATE_KEY_MAX_CHARS)
    value = models.JSONField()
    version = models.PositiveIntegerField(default=1)
    updated_by = models.CharField(max_length=64)
    updated_by_name = models.CharField(max_length=150)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["key"]
        constraints = [
            models.UniqueConstraint(
                fields=["constellation", "key"],
                name="coordination_state_key_unique_per_constellation",
            )
        ]

    def __str__(self) -> str:
        return f"{self.key} v{self.version}"
