"""Sleeptime groups: checking a group's triggers once its interval has
passed, and starting an intervention run when one fires; the sweep checks
every group that is due.

An intervention agent answered by the LLM is not woken while no provider
is configured (its turn could only fail): the check records why in the
group's state (``skipped``).  One holding the archival consolidator role
is asked to consolidate every agent's recent observations.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from activity.llm.client import llm_provider_configured
from coordination.groups.models import AgentGroup, GroupRun
from coordination.groups.patterns import pattern_get
from coordination.groups.patterns.base import Decision, Deliver
from coordination.groups.patterns.sleeptime import (
    Observed,
    fired_triggers,
    intervention_prompt,
)
from coordination.groups.selectors import group_get_locked, group_members
from coordination.groups.services.runs import _start_run
from memory.longterm.permissions import archival_is_consolidator
from pattern_site.kernel.actors import Actor

NO_PROVIDER = (
    "the intervention agent is answered by the LLM and no LLM provider is"
    " configured (PATTERN_LLM_BASE_URL)"
)
CONSOLIDATE = (
    "You hold the consolidator role: read every agent's recent observations"
    " (observations_search), store the patterns you find across them"
    " (archival_memory_insert with domain meta_patterns) and put the key"
    " insights in the block you share with the other agents."
)


@transaction.atomic
def group_sleeptime_check(
    *, group_id: int, now: datetime | None = None, force: bool = False
) -> GroupRun | None:
    """Evaluate a sleeptime group's triggers; start an intervention if any fire.

    Skipped (None) when the group's check interval has not passed since its
    last check, unless ``force``.
    """
    now = now or timezone.now()
    group = AgentGroup.objects.filter(pk=group_id, pattern="sleeptime").first()
    if group is None:
        return None
    group = group_get_locked(group_id=group_id)
    if group.pattern != "sleeptime":
        return None
    engine = pattern_get("sleeptime")
    config = engine.validate(group.config)
    state = dict(group.state)
    last_check = _parse_time(state.get("last_check_at"))
    if (
        not force
        and last_check is not None
        and (now - last_check).total_seconds() < config.check_interval
    ):
        return None
    since = _parse_time(state.get("last_intervention_at")) or group.created_at
    observed = Observed(
        now=now,
        since=since,
        messages_since=GroupRun.objects.filter(
            group__constellation_id=group.constellation_id, started_at__gt=since
        )
        .exclude(requested_by=SLEEPTIME_ACTOR)
        .count(),
        metrics={k: float(v) for k, v in state.get("metrics", {}).items()},
    )
    fired = fired_triggers(config, observed)
    state["last_check_at"] = now.isoformat()
    if not fired:
        group.state = state
        group.save(update_fields=["state", "updated_at"])
        return None
    members = group_members(group=group)
    agent = engine.intervener(config, members)  # type: ignore[attr-defined]
    if agent.answered_by_llm and not llm_provider_configured():
        state["skipped"] = NO_PROVIDER
        group.state = state
        group.save(update_fields=["state", "updated_at"])
        return None
    state.pop("skipped", None)
    prompt = intervention_prompt(fired, observed)
    if archival_is_consolidator(agent.agent_id):
        prompt = f"{prompt}\n{CONSOLIDATE}"
    state["last_intervention_at"] = now.isoformat()
    state["last_fired"] = [t.name for t in fired]
    decision = Decision(
        deliveries=[
            Deliver(
                agent_id=agent.agent_id,
                kind="intervene",
                content=prompt,
            )
        ],
        group_state=state,
        state_changes={"fired": [t.name for t in fired]},
    )
    return _start_run(
        actor=Actor.system(),
        group=group,
        message=decision.deliveries[0].content,
        options=[],
        requested_by=SLEEPTIME_ACTOR,
        decision=decision,
        members=members,
        now=now,
    )


SLEEPTIME_ACTOR = "system:sleeptime"


def group_sleeptime_sweep(*, now: datetime | None = None) -> list[GroupRun]:
    """Check every sleeptime group that is due; the interventions started."""
    now = now or timezone.now()
    ids = AgentGroup.objects.filter(pattern="sleeptime").values_list("pk", flat=True)
    started = [group_sleeptime_check(group_id=i, now=now) for i in ids]
    return [run for run in started if run is not None]


def _parse_time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None
