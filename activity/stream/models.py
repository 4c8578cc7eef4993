"""The activity stream: what happened in a constellation, who did it, when.

Events are written by ``activity.stream.services.activity_record`` only.
``ActivityTerm`` is the keyword index of the events (one row per distinct
word of an event's line), so a keyword search is an index lookup;
``ActivityHourCount`` counts events per hour, actor and kind, so counting a
week of events reads a few hundred rows.  Both are written with the events.
"""

from django.conf import settings
from django.db import models

from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.events import EventType, Importance

IMPORTANCE_RANK = {
    Importance.LOW: 0,
    Importance.MEDIUM: 1,
    Importance.HIGH: 2,
    Importance.CRITICAL: 3,
}


class ActivityEvent(models.Model):
    """One event.  ``agent`` is None for system events; ``actor_user`` is set
    when a person acted (then ``agent`` is the agent concerned, if any)."""

    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="activity_events"
    )
    agent = models.ForeignKey(
        Agent,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="activity_events",
    )
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    event_type = models.CharField(max_length=32, choices=EventType.choices)
    details = models.JSONField(default=dict, blank=True)
    importance = models.CharField(
        max_length=10, choices=Importance.choices, default=Importance.LOW
    )
    # The event's one line ("Flux sent a message to Partner: ..."), fixed at
    # record time so renaming an agent does not rewrite history.
    text = models.CharField(max_length=500)
    # What the event is about ("task", "handoff", "conversation" and its id;
    # empty: the constellation as a whole).  Who may read that object may
    # read the event: ``activity.stream.permissions.activity_visible``.
    object_kind = models.CharField(max_length=32, blank=True, default="")
    object_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(
                fields=["constellation", "object_kind", "object_id"],
                name="activity_const_object",
            ),
            models.Index(
                fields=["constellation", "created_at"], name="activity_const_time"
            ),
            models.Index(fields=["agent", "created_at"], name="activity_agent_time"),
            models.Index(
                fields=["constellation", "event_type", "created_at"],
                name="activity_const_type_time",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_type}@{self.created_at:%Y-%m-%d %H:%M}"


class ActivityTerm(models.Model):
    """A word of an event's line: the keyword index of the stream."""

    event = models.ForeignKey(
        ActivityEvent, on_delete=models.CASCADE, related_name="terms"
    )
    constellation_id_value = models.BigIntegerField()
    term = models.CharField(max_length=40)

    class Meta:
        indexes = [
            models.Index(
                fields=["constellation_id_value", "term", "event"],
                name="activity_term_lookup",
            )
        ]

    def __str__(self) -> str:
        return self.term


class ActivityHourCount(models.Model):
    """How many events of a kind an actor caused in an hour: what the
    digest's counts and the timeline read instead of the events.
    ``agent_key`` / ``user_key`` are 0 for none (a unique key cannot hold
    NULLs that compare equal)."""

    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="+"
    )
    hour = models.DateTimeField()
    agent_key = models.BigIntegerField(default=0)
    user_key = models.BigIntegerField(default=0)
    event_type = models.CharField(max_length=32, choices=EventType.choices)
    n = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["constellation", "hour", "agent_key", "user_key", "event_type"],
                name="activity_hour_count_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H}h {self.event_type}: {self.n}"
