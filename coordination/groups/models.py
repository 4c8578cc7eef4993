"""Agent groups, their members, and the runs that route a message through them.

A group's ``config`` is its coordination pattern's configuration, validated
by that pattern (``coordination.groups.patterns``) before any save; its
``state`` is what the pattern remembers between messages (the round-robin
index, the sleeptime clock).  A run is one routed message: its deliveries
are the inbox items of the agents it selected, and its events are the
``GroupResponseEvent`` stream, numbered per run so a reader can resume.
"""

from django.db import models

from pattern_site.kernel.agents.models import Agent, Constellation


class CoordinationPattern(models.TextChoices):
    SUPERVISOR = "supervisor", "Supervisor"
    ROUND_ROBIN = "round_robin", "Round robin"
    VOTING = "voting", "Voting"
    PIPELINE = "pipeline", "Pipeline"
    DYNAMIC = "dynamic", "Dynamic"
    SLEEPTIME = "sleeptime", "Sleeptime"


class AgentGroup(models.Model):
    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="agent_groups"
    )
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    pattern = models.CharField(max_length=20, choices=CoordinationPattern.choices)
    config = models.JSONField(default=dict, blank=True)
    state = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["constellation_id", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["constellation", "name"],
                name="group_name_unique_per_constellation",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.pattern})"


class MemberRole(models.TextChoices):
    REGULAR = "regular", "Regular"
    SUPERVISOR = "supervisor", "Supervisor"
    # Receives the group's messages but is never asked to respond.
    OBSERVER = "observer", "Observer"
    SPECIALIST = "specialist", "Specialist"


class GroupMembership(models.Model):
    group = models.ForeignKey(
        AgentGroup, on_delete=models.CASCADE, related_name="memberships"
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="group_memberships"
    )
    role = models.CharField(
        max_length=20, choices=MemberRole.choices, default=MemberRole.REGULAR
    )
    domain = models.CharField(
        max_length=100, blank=True, help_text="A specialist's domain."
    )
    capabilities = models.JSONField(default=list, blank=True)
    joined_at = models.DateTimeField(auto_now_add=True)
    # Least recently used first (load balancing); set whenever a run selects
    # the member.
    last_routed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["group_id", "joined_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["group", "agent"], name="group_member_once"
            ),
            models.CheckConstraint(
                condition=~models.Q(role="specialist") | ~models.Q(domain=""),
                name="group_specialist_has_domain",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} in {self.group_id} as {self.role}"


class RunStatus(models.TextChoices):
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"


class GroupRun(models.Model):
    group = models.ForeignKey(AgentGroup, on_delete=models.CASCADE, related_name="runs")
    pattern = models.CharField(max_length=20, choices=CoordinationPattern.choices)
    # The group's configuration when the run started: a run finishes under
    # the rules it began with, whatever the group is changed to meanwhile.
    config = models.JSONField(default=dict, blank=True)
    message = models.TextField()
    options = models.JSONField(default=list, blank=True)
    requested_by = models.CharField(max_length=100)
    status = models.CharField(
        max_length=20, choices=RunStatus.choices, default=RunStatus.RUNNING
    )
    # The pattern's bookkeeping for this run (pipeline stage, delegations).
    state = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    # When the run's vote closes, if it is a vote.
    closes_at = models.DateTimeField(null=True, blank=True)
    # Number of the last event written; events are numbered 1, 2, ...
    last_seq = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["group", "status"])]

    def __str__(self) -> str:
        return f"run {self.pk} of group {self.group_id} ({self.status})"


class DeliveryKind(models.TextChoices):
    RESPOND = "respond", "Respond"
    LEAD = "lead", "Lead (may delegate)"
    DELEGATED = "delegated", "Delegated by the leader"
    SELECT = "select", "Select who responds"
    VOTE = "vote", "Vote"
    STAGE = "stage", "Pipeline stage"
    INTERVENE = "intervene", "Sleeptime intervention"
    OBSERVE = "observe", "Observe (no answer expected)"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    TAKEN = "taken", "Taken"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    EXPIRED = "expired", "Expired"
    CANCELLED = "cancelled", "Cancelled"


OPEN_DELIVERY_STATUSES = (DeliveryStatus.PENDING, DeliveryStatus.TAKEN)


class RunDelivery(models.Model):
    """One agent's part in a run: an item of its inbox until it answers."""

    run = models.ForeignKey(
        GroupRun, on_delete=models.CASCADE, related_name="deliveries"
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="group_deliveries"
    )
    role = models.CharField(max_length=20, choices=MemberRole.choices)
    kind = models.CharField(max_length=20, choices=DeliveryKind.choices)
    content = models.TextField()
    stage = models.PositiveIntegerField(null=True, blank=True)
    attempt = models.PositiveIntegerField(default=1)
    status = models.CharField(
        max_length=20, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    answer = models.TextField(blank=True)
    vote = models.CharField(max_length=200, blank=True)
    failure = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    taken_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "run deliveries"
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["agent", "status"]),
            models.Index(fields=["status", "deadline_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind} for {self.agent_id} in run {self.run_id}"


class GroupEventType(models.TextChoices):
    STARTED = "Started"
    AGENT_STARTED = "AgentStarted"
    TEXT_CHUNK = "TextChunk"
    TOOL_CALL_STARTED = "ToolCallStarted"
    TOOL_CALL_COMPLETED = "ToolCallCompleted"
    AGENT_COMPLETED = "AgentCompleted"
    COMPLETE = "Complete"
    ERROR = "Error"


class GroupRunEvent(models.Model):
    run = models.ForeignKey(GroupRun, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=20, choices=GroupEventType.choices)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="group_event_seq_once")
        ]

    def __str__(self) -> str:
        return f"{self.type} #{self.seq} of run {self.run_id}"


class AgentLoopConfig(models.Model):
    """How the site runs an agent answered by the LLM: its tool rules
    (``memory.context.ToolRule`` as JSON, rendered into its system prompt
    and enforced by the loop), the LLM provider it uses (a name in
    ``LLM_PROVIDERS``; the keys stay in the settings) and its limits."""

    agent = models.OneToOneField(
        Agent, on_delete=models.CASCADE, related_name="loop_config"
    )
    tool_rules = models.JSONField(default=list, blank=True)
    provider = models.CharField(
        max_length=100, blank=True, help_text="Blank: the default provider."
    )
    max_steps = models.PositiveSmallIntegerField(
        default=10, help_text="Model calls in one turn, at most."
    )
    timeout_seconds = models.PositiveIntegerField(
        default=300, help_text="A turn still running after this fails."
    )

    class Meta:
        app_label = "coordination"

    def __str__(self) -> str:
        return f"loop config of {self.agent_id}"


class TurnStatus(models.TextChoices):
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"


class AgentTurn(models.Model):
    """One delivery answered by the agent's model: the model called, tools
    run and their results fed back, until an exit.  Its messages are one
    batch (``batch_id``) of the agent's conversation."""

    delivery = models.OneToOneField(
        RunDelivery, on_delete=models.CASCADE, related_name="turn"
    )
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="turns")
    conversation_id = models.PositiveBigIntegerField()
    batch_id = models.CharField(max_length=64)
    status = models.CharField(
        max_length=10, choices=TurnStatus.choices, default=TurnStatus.RUNNING
    )
    steps = models.PositiveSmallIntegerField(default=0)
    exit = models.CharField(max_length=40, blank=True)
    reason = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    # Moved on at every step and call: a turn whose worker is alive is not
    # resumed by another (see AGENT_TURN_RESUME_AFTER_SECONDS).
    heartbeat_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "coordination"
        ordering = ["-started_at", "-id"]
        # A batch names the turn within its agent's conversation (a copy of
        # the constellation, imported beside it, has batches of the same
        # names for its own agents).
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "batch_id"], name="agentturn_agent_batch"
            )
        ]

    def __str__(self) -> str:
        return f"turn {self.pk} of {self.agent_id} ({self.status})"


class ToolCallStatus(models.TextChoices):
    # Recorded from the model's answer, not yet begun.
    PENDING = "pending", "Pending"
    # Begun: if the worker stops now, whether it took effect is unknown.
    STARTED = "started", "Started"
    COMPLETED = "completed", "Completed"


class AgentToolCall(models.Model):
    """A tool call of a turn, recorded before it runs and after, so that a
    turn resumed after a crash never runs a call twice."""

    turn = models.ForeignKey(
        AgentTurn, on_delete=models.CASCADE, related_name="tool_calls"
    )
    step = models.PositiveSmallIntegerField()
    call_id = models.CharField(max_length=100)
    name = models.CharField(max_length=100)
    arguments = models.TextField(blank=True)
    status = models.CharField(
        max_length=10, choices=ToolCallStatus.choices, default=ToolCallStatus.PENDING
    )
    ok = models.BooleanField(null=True)
    result = models.TextField(blank=True)

    class Meta:
        app_label = "coordination"
        ordering = ["turn_id", "step", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["turn", "step", "call_id"], name="agent_tool_call_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.call_id} ({self.status})"
