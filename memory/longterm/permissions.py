"""Who may read and write long-term memory: the one place that decides.

An agent's archival entries and conversations are its own; humans see
those of the agents of their constellations; another constellation's rows
do not exist for the caller (``NotFound``).
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


def _partner_only(*, actor: Actor, entry: ArchivalEntry, what: str) -> None:
    partner_id = (
        Constellation.objects.filter(pk=entry.constellation_id)
        .values_list("partner_id", flat=True)
        .first()
    )
    if actor.kind != "human" or actor.user is None or actor.user.pk != partner_id:
        raise PermissionDenied(f"only the partner can {what} archival entries")


def archival_entry_restore_check(*, actor: Actor, entry: ArchivalEntry) -> None:
    """Bringing back a merged or pruned entry undoes consolidation: the
    partner's decision, not an agent's nor a member's."""
    _partner_only(actor=actor, entry=entry, what="restore")


def archival_entry_delete_check(*, actor: Actor, entry: ArchivalEntry) -> None:
    """A hard delete destroys the entry and its history: the partner's alone
    (consolidation only ever marks entries superseded)."""
    _partner_only(actor=actor, entry=entry, what="permanently delete")
