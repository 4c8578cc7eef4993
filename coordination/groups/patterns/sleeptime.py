"""Sleeptime: background checks that call an intervention agent when needed.

A Celery beat task checks every sleeptime group whose ``check_interval``
has passed.  Triggers: ``time_elapsed`` (``duration`` seconds since the
last intervention), ``constellation_activity`` (at least
``message_threshold`` messages routed in the constellation since the last
intervention, or ``time_threshold`` seconds since it, whichever first) and
``threshold_exceeded`` (the latest reported value of ``metric`` is above
``threshold``).  When any fires, the intervention agent gets one
``intervene`` delivery naming the fired triggers, highest priority first.
A message routed to the group directly goes to the intervention agent.
"""

import random
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from coordination.groups.patterns.base import (
    Decision,
    Deliver,
    Member,
    Pattern,
    PatternConfig,
    observers,
    require,
)
from pattern_site.kernel.errors import InvalidInput

PRIORITIES = ("low", "medium", "high", "critical")


class TimeElapsed(PatternConfig):
    kind: Literal["time_elapsed"] = "time_elapsed"
    duration: float = Field(gt=0)


class ConstellationActivity(PatternConfig):
    kind: Literal["constellation_activity"] = "constellation_activity"
    message_threshold: int = Field(ge=1)
    time_threshold: float = Field(gt=0)


class ThresholdExceeded(PatternConfig):
    kind: Literal["threshold_exceeded"] = "threshold_exceeded"
    metric: str = Field(min_length=1, max_length=100)
    threshold: float


Condition = Annotated[
    TimeElapsed | ConstellationActivity | ThresholdExceeded,
    Field(discriminator="kind"),
]


class SleeptimeTrigger(PatternConfig):
    name: str = Field(min_length=1, max_length=100)
    condition: Condition
    priority: Literal["low", "medium", "high", "critical"] = "medium"


class SleeptimeConfig(PatternConfig):
    check_interval: float = Field(default=20 * 60, ge=1)
    triggers: list[SleeptimeTrigger] = Field(default_factory=list)
    intervention_agent_id: int | None = None


@dataclass(frozen=True)
class Observed:
    """What a check looks at, gathered by the service."""

    now: datetime
    since: datetime  # the last intervention, or the group's creation
    messages_since: int
    metrics: dict[str, float]


def fired_triggers(config: Any, observed: Observed) -> list[Any]:
    """The triggers whose condition holds, highest priority first."""
    elapsed = (observed.now - observed.since).total_seconds()
    fired = []
    for trigger in config.triggers:
        condition = trigger.condition
        if condition.kind == "time_elapsed":
            hit = elapsed >= condition.duration
        elif condition.kind == "constellation_activity":
            hit = (
                observed.messages_since >= condition.message_threshold
                or elapsed >= condition.time_threshold
            )
        else:
            value = observed.metrics.get(condition.metric)
            hit = value is not None and value > condition.threshold
        if hit:
            fired.append(trigger)
    return sorted(fired, key=lambda t: -PRIORITIES.index(t.priority))


def intervention_prompt(fired: list[Any], observed: Observed) -> str:
    lines = ["Sleeptime check: these triggers fired, highest priority first."]
    for trigger in fired:
        lines.append(f"- {trigger.name} ({trigger.priority})")
    lines.append(
        f"{observed.messages_since} message(s) were routed in the constellation"
        f" since the last intervention at {observed.since.isoformat()}."
    )
    if observed.metrics:
        shown = ", ".join(f"{k}={v:g}" for k, v in sorted(observed.metrics.items()))
        lines.append(f"Latest metrics: {shown}.")
    return "\n".join(lines)


class Sleeptime(Pattern):
    name = "sleeptime"
    Config = SleeptimeConfig

    def check_members(self, config: Any, members: tuple[Member, ...]) -> None:
        wanted = config.intervention_agent_id
        if wanted is not None and not any(m.agent_id == wanted for m in members):
            raise InvalidInput(
                f"intervention_agent_id {wanted} is not a member of this group"
            )

    def intervener(self, config: Any, members: tuple[Member, ...]) -> Member:
        """The configured agent, else the first supervisor, else the first."""
        able = [m for m in members if m.responds and m.available]
        if config.intervention_agent_id is not None:
            able = [m for m in able if m.agent_id == config.intervention_agent_id]
        else:
            able.sort(key=lambda m: m.role != "supervisor")
        return require(able, "intervene")[0]

    def route(
        self,
        *,
        config: Any,
        state: dict[str, Any],
        members: tuple[Member, ...],
        message: str,
        rng: random.Random,
    ) -> Decision:
        agent = self.intervener(config, members)
        return Decision(
            deliveries=[
                Deliver(agent_id=agent.agent_id, kind="respond", content=message),
                *observers(members, message),
            ],
            group_state=state,
        )
