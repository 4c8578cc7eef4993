"""Groups and their members: creating, configuring (each pattern validates
its own config against the members) and deleting a group, adding and
removing members, and recording the metrics a sleeptime group watches.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from coordination.groups.models import AgentGroup, GroupMembership, MemberRole
from coordination.groups.patterns import pattern_get
from coordination.groups.patterns.base import Member
from coordination.groups.selectors import group_get_locked, group_members
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.errors import Conflict, InvalidInput, NotFound


def _validated_config(
    *, pattern: str, config: dict[str, Any], members: tuple[Member, ...] | None
) -> dict[str, Any]:
    typed = pattern_get(pattern).validate(config, members)
    return typed.model_dump(mode="json")


@transaction.atomic
def group_create(
    *,
    constellation: Constellation,
    name: str,
    pattern: str,
    description: str = "",
    config: dict[str, Any] | None = None,
) -> AgentGroup:
    """A new group; agents named in ``config`` are checked once members join."""
    if AgentGroup.objects.filter(constellation=constellation, name=name).exists():
        raise Conflict(
            f"constellation {constellation.name!r} already has a group named {name!r}"
        )
    engine = pattern_get(pattern)
    clean = _validated_config(pattern=pattern, config=config or {}, members=None)
    group = AgentGroup(
        constellation=constellation,
        name=name,
        description=description,
        pattern=pattern,
        config=clean,
        state=engine.initial_state(engine.validate(clean)),
    )
    group.full_clean()
    group.save()
    return group


@transaction.atomic
def group_update(
    *,
    group: AgentGroup,
    description: str | None = None,
    pattern: str | None = None,
    config: dict[str, Any] | None = None,
) -> AgentGroup:
    """Change a group; a new pattern or configuration resets the pattern state."""
    group = group_get_locked(group_id=group.pk)
    fields = []
    if description is not None:
        group.description = description
        fields.append("description")
    if pattern is not None or config is not None:
        new_pattern = pattern or group.pattern
        raw = config if config is not None else group.config
        if new_pattern != group.pattern and config is None:
            raw = {}
        clean = _validated_config(
            pattern=new_pattern, config=raw, members=group_members(group=group)
        )
        engine = pattern_get(new_pattern)
        group.pattern, group.config = new_pattern, clean
        group.state = engine.initial_state(engine.validate(clean))
        fields += ["pattern", "config", "state"]
    group.full_clean()
    group.save(update_fields=[*fields, "updated_at"])
    return group


@transaction.atomic
def group_delete(*, group: AgentGroup) -> None:
    group.delete()


def _clean_capabilities(capabilities: Iterable[str]) -> list[str]:
    clean = []
    for capability in capabilities:
        text = " ".join(str(capability).split())
        if not text:
            continue
        if len(text) > 100:
            raise InvalidInput(f"capability {text[:20]!r}... exceeds 100 characters")
        if text not in clean:
            clean.append(text)
    if len(clean) > 50:
        raise InvalidInput(f"{len(clean)} capabilities given; at most 50 allowed")
    return clean


@transaction.atomic
def group_member_add(
    *,
    group: AgentGroup,
    agent: Agent,
    role: str = MemberRole.REGULAR,
    domain: str = "",
    capabilities: Iterable[str] = (),
) -> GroupMembership:
    if agent.constellation_id != group.constellation_id:
        raise NotFound(f"agent {agent.pk} does not exist")
    if role not in MemberRole.values:
        raise InvalidInput(
            f"unknown member role {role!r}; one of: {', '.join(MemberRole.values)}"
        )
    domain = domain.strip()
    if role == MemberRole.SPECIALIST and not domain:
        raise InvalidInput("a specialist needs a domain (e.g. 'task_management')")
    if role != MemberRole.SPECIALIST and domain:
        raise InvalidInput(f"only specialists have a domain; this member is {role}")
    if group.memberships.filter(agent=agent).exists():
        raise Conflict(f"{agent.name} is already a member of group {group.name!r}")
    membership = GroupMembership(
        group=group,
        agent=agent,
        role=role,
        domain=domain,
        capabilities=_clean_capabilities(capabilities),
    )
    membership.full_clean()
    membership.save()
    return membership


@transaction.atomic
def group_member_remove(*, group: AgentGroup, agent_id: int) -> None:
    membership = group.memberships.filter(agent_id=agent_id).first()
    if membership is None:
        raise NotFound(f"agent {agent_id} is not a member of group {group.name!r}")
    config = pattern_get(group.pattern).validate(group.config)
    referenced = {
        getattr(config, "leader_id", None),
        getattr(config, "intervention_agent_id", None),
        *(a for s in getattr(config, "stages", []) for a in s.agent_ids),
    }
    if agent_id in referenced:
        raise Conflict(
            f"{membership.agent.name} is named in the group's {group.pattern}"
            " configuration; change the configuration first"
        )
    membership.delete()


@transaction.atomic
def group_metric_record(*, group: AgentGroup, metric: str, value: float) -> None:
    """Record the latest value of a metric a sleeptime trigger may watch."""
    metric = metric.strip()
    if not metric or len(metric) > 100:
        raise InvalidInput("a metric name is 1 to 100 characters")
    group = group_get_locked(group_id=group.pk)
    metrics = dict(group.state.get("metrics", {}))
    metrics[metric] = float(value)
    group.state = {**group.state, "metrics": metrics}
    group.save(update_fields=["state", "updated_at"])
