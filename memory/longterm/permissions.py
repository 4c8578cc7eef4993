"""Who may read and write long-term memory: the one place that decides.

An agent's archival entries and conversations are its own; humans see
those of the agents of their constellations; another constellation's rows
do not exist for the caller (``NotFound``).  One right reaches further: an
agent the partner gave the consolidator role (``ArchivalRole``) may read,
never change, the archival entries of every agent of its constellation, to
consolidate their observations; no other agent gains it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import QuerySet

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Constellation
from pattern_site.kernel.agents.selectors import (
    constellation_list_for_actor,
)
from pattern_site.kernel.errors import PermissionDenied

if TYPE_CHECKING:
    from memory.longterm.models import ArchivalEntry
    from pattern_site.kernel.agents.models import Agent


def longterm_rows_visible(
    qs: QuerySet, *, actor: Actor, agent_id: int | None
) -> QuerySet:
    """Rows owned by an agent: an agent sees its own, a human those of the
    agents of their constellations (optionally one agent's)."""
    if actor.kind == "agent":
        assert actor.agent is not None
        if agent_id is not None and agent_id != actor.agent.pk:
            return qs.none()
        return qs.filter(agent_id=actor.agent.pk)
    visible = constellation_list_for_actor(actor=actor).values("pk")
    qs = qs.filter(constellation__in=visible)
    if agent_id is not None:
        qs = qs.filter(agent_id=agent_id)
    return qs


def longterm_own_agent(actor: Actor) -> int | None:
    """The agent whose memory alone ``actor`` may search (an agent: its
    own); None for humans, who search their constellations'."""
    if actor.kind == "agent":
        assert actor.agent is not None
        return actor.agent.pk
    return None


def retrieval_config_change_check(actor: Actor) -> None:
    """Search tuning is the partner's and members', never an agent's."""
    if actor.kind == "agent":
        raise PermissionDenied("only the partner or a member can tune search")


def _is_partner(actor: Actor, constellation_id: int) -> bool:
    partner_id = (
        Constellation.objects.filter(pk=constellation_id)
        .values_list("partner_id", flat=True)
        .first()
    )
    return (
        actor.kind == "human"
        and actor.user is not None
        and (actor.user.pk == partner_id)
    )


def _partner_only(*, actor: Actor, entry: ArchivalEntry, what: str) -> None:
    if not _is_partner(actor, entry.constellation_id):
        raise PermissionDenied(f"only the partner can {what} archival entries")


def archival_is_consolidator(agent_id: int) -> bool:
    from memory.longterm.models import ArchivalRole, ArchivalRoleKind

    return ArchivalRole.objects.filter(
        agent_id=agent_id, role=ArchivalRoleKind.CONSOLIDATOR
    ).exists()


def archival_rows_all_agents(qs: QuerySet, *, actor: Actor) -> QuerySet:
    """The archival entries of every agent ``actor`` may consolidate: a
    consolidator agent's constellation's, a human's constellations'.  Any
    other agent is refused: its own entries are all it may read."""
    if actor.kind != "agent":
        return longterm_rows_visible(qs, actor=actor, agent_id=None)
    assert actor.agent is not None
    if not archival_is_consolidator(actor.agent.pk):
        raise PermissionDenied(
            f"agent {actor.agent.name!r} may read only its own archival"
            " memory; reading every agent's is the consolidator role's,"
            " which the partner gives"
        )
    return qs.filter(constellation_id=actor.agent.constellation_id)


def archival_role_grant_check(*, actor: Actor, agent: Agent) -> None:
    """Reading every agent's memory is the partner's to give."""
    if not _is_partner(actor, agent.constellation_id) and actor.kind != "system":
        raise PermissionDenied(
            "only the partner can give or take an agent's archival role"
        )


def archival_entry_restore_check(*, actor: Actor, entry: ArchivalEntry) -> None:
    """Bringing back a merged or pruned entry undoes consolidation: the
    partner's decision, not an agent's nor a member's."""
    _partner_only(actor=actor, entry=entry, what="restore")


def archival_entry_delete_check(*, actor: Actor, entry: ArchivalEntry) -> None:
    """A hard delete destroys the entry and its history: the partner's alone
    (consolidation only ever marks entries superseded)."""
    _partner_only(actor=actor, entry=entry, what="permanently delete")
