"""Memory panels on pages served by other apps (agent, constellation).

``coordination`` must not import ``memory``; its templates load these tags
instead, so the one implementation of each panel lives here.
"""

import json
from typing import Any

from django import template

from memory.blocks import documents
from memory.blocks.looks import constellation_look_record, constellation_since_look
from memory.blocks.models import BlockType, Permission
from memory.blocks.selectors import (
    approval_list_for_actor,
    block_counts_by_owner,
    block_list_for_actor,
)
from memory.longterm.models import Conversation
from memory.longterm.selectors import conversation_latest
from memory.scratchpad.selectors import scratchpad_entries_for_actor
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.web import form_retry

register = template.Library()


def _actor(context: template.Context) -> Actor:
    return Actor.for_user(context["request"].user)


@register.inclusion_tag("memory/_agent_memory.html", takes_context=True)
def agent_memory(context: template.Context, agent: Agent) -> dict[str, Any]:
    """The agent's blocks (type, permission, size against limit) and the
    create-from-template form."""
    actor = _actor(context)
    blocks = block_list_for_actor(actor=actor, agent_id=agent.pk)
    pending = approval_list_for_actor(actor=actor, status="pending").filter(agent=agent)
    return {
        "agent": agent,
        "blocks": blocks,
        "pending_count": pending.count(),
        "templates": list(documents.TEMPLATES),
        "permissions": Permission.choices,
        "block_types": BlockType.choices,
        "csrf_token": context.get("csrf_token"),
        "retry": form_retry(context["request"], "create-block"),
    }


@register.simple_tag(takes_context=True)
def block_counts(context: template.Context, constellation: Constellation) -> Any:
    """``{% block_counts constellation as counts %}``: blocks per owner id."""
    return block_counts_by_owner(
        actor=_actor(context), constellation_id=constellation.pk
    )


@register.filter
def count_for(counts: dict[Any, int], owner_id: Any) -> int:
    return counts.get(owner_id, 0)


@register.inclusion_tag("memory/_constellation_memory.html", takes_context=True)
def constellation_memory(
    context: template.Context, constellation: Constellation, counts: Any
) -> dict[str, Any]:
    """Constellation-level blocks and pending approvals."""
    actor = _actor(context)
    pending = approval_list_for_actor(actor=actor, status="pending").filter(
        block__constellation=constellation
    )
    shared = block_list_for_actor(actor=actor).filter(
        constellation=constellation, owner__isnull=True
    )
    return {
        "total": sum(counts.values()),
        "shared_blocks": shared,
        "pending_count": pending.count(),
    }


@register.inclusion_tag("memory/_since_visit.html", takes_context=True)
def since_last_visit(
    context: template.Context, constellation: Constellation
) -> dict[str, Any]:
    """What others changed in the memory since the person's last visit to
    the constellation's page; drawing it counts as this visit."""
    user = context["request"].user
    since = constellation_since_look(user=user, constellation=constellation)
    constellation_look_record(user=user, constellation=constellation)
    return {"since": since}


@register.simple_tag(takes_context=True)
def changed_since_visit(context: template.Context, constellation: Constellation) -> Any:
    """``{% changed_since_visit c as since %}``: as :func:`since_last_visit`,
    for a list of constellations: it does not count as a visit."""
    return constellation_since_look(
        user=context["request"].user, constellation=constellation
    )


@register.inclusion_tag("memory/_working_notes.html", takes_context=True)
def working_notes(
    context: template.Context,
    conversation: Conversation | None = None,
    agent: Agent | None = None,
) -> dict[str, Any]:
    """The scratchpad of ``conversation`` (or of ``agent``'s current
    conversation), read-only: the agent alone writes its notes."""
    if conversation is None and agent is not None:
        conversation = conversation_latest(agent=agent)
    notes = (
        scratchpad_entries_for_actor(actor=_actor(context), conversation=conversation)
        if conversation is not None
        else []
    )
    return {"conversation": conversation, "notes": notes, "on_agent": agent is not None}


@register.filter
def note_is_text(value: Any) -> bool:
    """A note whose value is a string reads as text, the rest as JSON."""
    return isinstance(value, str)


@register.filter
def note_text(value: Any) -> str:
    """A note's structured value as indented JSON."""
    return json.dumps(value, indent=2, ensure_ascii=False)
