"""Reads of groups, runs, events and inboxes; rights come from permissions."""

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet

from coordination.groups import permissions
from coordination.groups.models import (
    AgentGroup,
    DeliveryStatus,
    GroupMembership,
    GroupRun,
    GroupRunEvent,
    RunDelivery,
    RunStatus,
)
from coordination.groups.patterns.base import DeliveryView, Member
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Constellation
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.errors import InvalidInput, NotFound


def group_list_for_actor(
    *, actor: Actor, constellation_id: int | None = None
) -> QuerySet[AgentGroup]:
    qs = (
        permissions.group_queryset_for_actor(actor=actor)
        .select_related("constellation")
        .prefetch_related(
            Prefetch(
                "memberships",
                queryset=GroupMembership.objects.select_related("agent"),
            )
        )
        .annotate(running_count=Count("runs", filter=Q(runs__status=RunStatus.RUNNING)))
    )
    if constellation_id is not None:
        qs = qs.filter(constellation_id=constellation_id)
    return qs


def group_get_for_actor(*, actor: Actor, group_id: int) -> AgentGroup:
    group = group_list_for_actor(actor=actor).filter(pk=group_id).first()
    if group is None:
        raise NotFound(f"group {group_id} does not exist")
    return group


def group_get_for_change(*, actor: Actor, group_id: int) -> AgentGroup:
    group = group_get_for_actor(actor=actor, group_id=group_id)
    permissions.group_check_manage(actor=actor)
    return group


def group_get_for_route(*, actor: Actor, group_id: int) -> AgentGroup:
    group = group_get_for_actor(actor=actor, group_id=group_id)
    permissions.group_check_route(actor=actor, group=group)
    return group


def group_get_by_name(*, constellation_name: str, group_name: str) -> AgentGroup:
    """For operators (management commands): a group looked up by names."""
    group = (
        AgentGroup.objects.select_related("constellation")
        .filter(constellation__name=constellation_name, name=group_name)
        .first()
    )
    if group is None:
        raise NotFound(
            f"no group named {group_name!r} in constellation {constellation_name!r}"
        )
    return group


def constellation_get_by_name(*, name: str | None) -> Constellation:
    """For operators: the named constellation, or the only one when unnamed."""
    if name is None:
        only = list(Constellation.objects.all()[:2])
        if len(only) != 1:
            raise InvalidInput(
                f"there are {len(only) if len(only) < 2 else 'several'}"
                " constellations; name one with --constellation"
            )
        return only[0]
    constellation = Constellation.objects.filter(name=name).first()
    if constellation is None:
        raise NotFound(f"constellation {name!r} does not exist")
    return constellation


# Every routed message reads the members (compiled once, see
# pattern_site.kernel.db.compiled).
_MEMBERS = CompiledQuery(
    lambda group_id: (
        GroupMembership.objects.select_related("agent")
        .filter(group_id=group_id)
        .order_by("joined_at", "id")
    ),
    group_id=-730_201,
)


def group_members(*, group: AgentGroup) -> tuple[Member, ...]:
    """The members as the patterns see them, in joining order."""
    return tuple(
        Member(
            agent_id=m.agent_id,
            name=m.agent.name,
            role=m.role,
            domain=m.domain,
            capabilities=tuple(m.capabilities),
            available=m.agent.is_active,
            last_routed_at=m.last_routed_at,
            answered_by_llm=m.agent.answered_by_llm,
        )
        for m in _MEMBERS.all(group_id=group.pk)
    )


_GROUP_LOCKED = CompiledQuery(
    lambda group_id: (
        AgentGroup.objects.select_for_update().filter(pk=group_id).order_by()[:1]
    ),
    group_id=-730_202,
)


def group_get_locked(*, group_id: int) -> AgentGroup:
    """The group's row, locked until the transaction ends (services only)."""
    group = _GROUP_LOCKED.first(group_id=group_id)
    if group is None:
        raise NotFound(f"group {group_id} does not exist")
    return group


def group_export(*, group: AgentGroup) -> dict[str, Any]:
    """A group's configuration as a portable document (agents by name)."""
    names = {m.agent_id: m.agent.name for m in group.memberships.all()}
    return {
        "group": {
            "name": group.name,
            "description": group.description,
            "pattern": group.pattern,
        },
        "config": _ids_to_names(group.config, names),
        "members": [
            {
                "agent": m.agent.name,
                "role": m.role,
                **({"domain": m.domain} if m.domain else {}),
                "capabilities": list(m.capabilities),
            }
            for m in group.memberships.select_related("agent").order_by(
                "joined_at", "id"
            )
        ],
    }


# Configuration keys that hold agent ids; documents name the agents instead.
AGENT_ID_KEYS = ("leader_id", "intervention_agent_id")


def _ids_to_names(config: dict[str, Any], names: dict[int, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key in AGENT_ID_KEYS:
            if value is not None:
                out[key.removesuffix("_id")] = names.get(value, str(value))
        elif key == "stages":
            out[key] = [
                {
                    **{k: v for k, v in stage.items() if k != "agent_ids"},
                    "agents": [names.get(a, str(a)) for a in stage["agent_ids"]],
                }
                for stage in value
            ]
        else:
            out[key] = value
    return out


def run_list_for_group(*, group: AgentGroup, limit: int = 20) -> QuerySet[GroupRun]:
    return group.runs.order_by("-started_at", "-id")[:limit]


def run_get_for_actor(*, actor: Actor, run_id: int) -> GroupRun:
    visible = permissions.group_queryset_for_actor(actor=actor).values("pk")
    run = (
        GroupRun.objects.select_related("group__constellation")
        .filter(pk=run_id, group__in=visible)
        .first()
    )
    if run is None:
        raise NotFound(f"run {run_id} does not exist")
    permissions.run_check_view(actor=actor, run=run)
    return run


# Activity events about a run are read by whoever may see the run.
GROUP_RUN = "group_run"


def run_ids_readable(actor: Actor) -> QuerySet:
    """The runs ``actor`` may see: who reads an event about a run."""
    return permissions.runs_visible(GroupRun.objects.all(), actor=actor).values("pk")


@dataclass(frozen=True)
class EventPage:
    events: list[GroupRunEvent]
    finished: bool


def run_events_after(*, run_id: int, after: int, limit: int = 500) -> EventPage:
    """Events of a run numbered above ``after``, and whether it has ended.

    The caller has already been allowed to see the run.
    """
    # The status first: a run that had ended before the events were read
    # has all its events among them (its last ones are written with its end).
    status = GroupRun.objects.filter(pk=run_id).values_list("status", flat=True)
    ended = status.first() != RunStatus.RUNNING
    events = list(
        GroupRunEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")[
            :limit
        ]
    )
    finished = ended and len(events) < limit
    return EventPage(events=events, finished=finished)


def delivery_view(delivery: RunDelivery) -> DeliveryView:
    return DeliveryView(
        delivery_id=delivery.pk,
        agent_id=delivery.agent_id,
        kind=delivery.kind,
        status=delivery.status,
        answer=delivery.answer,
        vote=delivery.vote,
        stage=delivery.stage,
        attempt=delivery.attempt,
        finished_at=delivery.finished_at,
        failure=delivery.failure,
    )


def run_delivery_views(*, run: GroupRun) -> tuple[DeliveryView, ...]:
    return tuple(delivery_view(d) for d in run.deliveries.order_by("id"))


def delivery_get_for_actor(*, actor: Actor, delivery_id: int) -> RunDelivery:
    delivery = (
        permissions.delivery_queryset_for_actor(actor=actor)
        .select_related("run__group", "agent")
        .filter(pk=delivery_id)
        .first()
    )
    if delivery is None:
        raise NotFound(f"delivery {delivery_id} does not exist")
    return delivery


def inbox_has_work(*, agent_id: int) -> bool:
    return RunDelivery.objects.filter(
        agent_id=agent_id, status=DeliveryStatus.PENDING
    ).exists()
