"""Panels of an agent's page served by ``pattern_site.kernel`` that need the
group machinery: the partner's chat with the agent and its tool rules.
The kernel's template loads these tags; it never imports coordination."""

from typing import Any

from django import template

from coordination.groups.chat import chat_history, chat_unavailable_reason
from coordination.groups.views import tool_rule_formset
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.agents.permissions import (
    agent_can_change,
    constellation_can_administer,
)

register = template.Library()


def _actor(context: template.Context) -> Actor:
    return Actor.for_user(context["request"].user)


@register.inclusion_tag("groups/_agent_chat.html", takes_context=True)
def agent_chat(context: template.Context, agent: Agent) -> dict[str, Any]:
    """The chat, for the constellation's partner (nothing for anyone else)."""
    actor = _actor(context)
    if not constellation_can_administer(actor, agent.constellation):
        return {"shown": False}
    return {
        "shown": True,
        "partner_name": actor.display_name,
        "agent": agent,
        "entries": chat_history(agent=agent),
        "unavailable": chat_unavailable_reason(agent=agent),
    }


@register.inclusion_tag("groups/_agent_tool_rules.html", takes_context=True)
def agent_tool_rules(context: template.Context, agent: Agent) -> dict[str, Any]:
    return {
        "shown": agent_can_change(_actor(context)),
        "agent": agent,
        "formset": tool_rule_formset(agent),
        "csrf_token": context.get("csrf_token"),
    }
