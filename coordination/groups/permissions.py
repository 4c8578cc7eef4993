"""Every right over agent groups, their runs and deliveries, decided here.

- Groups are seen by the humans of their constellation and by its agents;
  another constellation's groups do not exist for the caller (404).
- Only humans create, reconfigure or delete groups and their members.
- A message is routed through a group by a human of the constellation or
  by an agent that is a member of the group.
- A run (and its event stream) is seen by the humans of the constellation,
  the group's member agents and the agent that started it.
- A delivery is acted on (chunks, tool calls, answer, delegation) only by
  the agent it was delivered to; to anyone else it does not exist.  Only
  a leader's open delivery delegates (the ``delegate`` tool and
  ``POST /api/deliveries/{id}/delegations``).
- An agent answered by the LLM has no inbox: the site takes its deliveries.
"""

from django.db.models import Q, QuerySet

from coordination.groups.models import (
    OPEN_DELIVERY_STATUSES,
    AgentGroup,
    DeliveryKind,
    GroupMembership,
    GroupRun,
    RunDelivery,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.selectors import constellation_list_for_actor
from pattern_site.kernel.errors import PermissionDenied


def group_queryset_for_actor(*, actor: Actor) -> QuerySet[AgentGroup]:
    visible = constellation_list_for_actor(actor=actor).values("pk")
    return AgentGroup.objects.filter(constellation__in=visible)


def _is_member(actor: Actor, group: AgentGroup) -> bool:
    assert actor.agent is not None
    return group.memberships.filter(agent_id=actor.agent.pk).exists()


def group_check_manage(*, actor: Actor) -> None:
    if actor.kind == "agent":
        raise PermissionDenied(
            "agents cannot create or change groups; the partner or a member"
            " of the constellation can"
        )


def group_check_route(*, actor: Actor, group: AgentGroup) -> None:
    if actor.kind == "agent" and not _is_member(actor, group):
        raise PermissionDenied(
            f"agent {actor.display_name!r} is not a member of group"
            f" {group.name!r}; only its members and the constellation's humans"
            " may route messages through it"
        )


def run_check_view(*, actor: Actor, run: GroupRun) -> None:
    if actor.kind != "agent" or run.requested_by == actor.ref:
        return
    if not _is_member(actor, run.group):
        raise PermissionDenied(
            f"agent {actor.display_name!r} is not a member of group"
            f" {run.group.name!r} and did not start this run"
        )


def runs_visible(qs: QuerySet[GroupRun], *, actor: Actor) -> QuerySet[GroupRun]:
    """``qs`` narrowed to the runs ``actor`` may see (``run_check_view``'s
    rule, as one query)."""
    qs = qs.filter(group__in=group_queryset_for_actor(actor=actor).values("pk"))
    if actor.kind != "agent":
        return qs
    assert actor.agent is not None
    member_of = GroupMembership.objects.filter(agent_id=actor.agent.pk).values(
        "group_id"
    )
    return qs.filter(Q(requested_by=actor.ref) | Q(group__in=member_of))


def delivery_queryset_for_actor(*, actor: Actor) -> QuerySet[RunDelivery]:
    if actor.kind != "agent":
        return RunDelivery.objects.none()
    assert actor.agent is not None
    return RunDelivery.objects.filter(agent_id=actor.agent.pk)


def delivery_leading_for_actor(*, actor: Actor) -> QuerySet[RunDelivery]:
    """The open deliveries through which ``actor`` leads a run now: the
    only ones it may delegate from."""
    return delivery_queryset_for_actor(actor=actor).filter(
        kind=DeliveryKind.LEAD, status__in=OPEN_DELIVERY_STATUSES
    )


def inbox_check_read(*, actor: Actor) -> None:
    if actor.kind != "agent":
        raise PermissionDenied(
            "only agents have an inbox; sign in with the agent's bearer token"
        )
    assert actor.agent is not None
    if actor.agent.answered_by_llm:
        raise PermissionDenied(
            f"{actor.agent.name}'s group deliveries are answered by its model"
            f" {actor.agent.model_name} through the site's LLM provider, so it"
            " has no inbox; a human can set answered_by_llm to false"
            f" (PATCH /api/agents/{actor.agent.pk}) for a program to take them"
        )
