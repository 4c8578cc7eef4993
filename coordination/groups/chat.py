"""The partner's direct chat with one agent answered by the LLM, and
agents' messages to each other.

A message from the chat is routed through the agent's chat group, a
one-member round-robin group made on first use: the run gives the agent
a delivery like any other, its turn (``coordination.groups.turns``)
streams to the run's events, and the page follows the run live.  Another
agent's message (``message_agent``) takes the same group: an agent answered
by the LLM runs its own turn on it, any other finds it in its inbox.  The
history shown is the agent's current conversation: people by name, the
agent's text, its tool calls with their results (``send_message`` shown
as what it said).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from activity.llm.client import llm_provider_configured
from coordination.groups.models import AgentGroup, GroupRun
from coordination.groups.services import (
    group_create,
    group_member_add,
    group_message_route,
)
from memory.longterm.models import Message
from memory.longterm.schemas import SEND_MESSAGE
from memory.longterm.selectors import conversation_latest
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.errors import Conflict, InvalidInput, NotFound

CHAT_HISTORY_MESSAGES = 200
RESULT_PREVIEW_CHARS = 2000


def chat_group_name(agent: Agent) -> str:
    return f"Chat with {agent.name}"


def chat_unavailable_reason(*, agent: Agent) -> str:
    """Why the chat cannot start a turn now and how to fix it; "" when it can."""
    if not agent.answered_by_llm:
        return (
            f"{agent.name} is answered by its own program, not by the site's"
            " LLM. To chat here, set its model and tick “Answered by the LLM”"
            " in the Model section."
        )
    if not llm_provider_configured():
        return (
            "No LLM provider is configured on this site. Set"
            " PATTERN_LLM_BASE_URL (and PATTERN_LLM_API_KEY) in the server's"
            " environment and restart it; see docs/configuration.md."
        )
    return ""


def _chat_group(agent: Agent) -> AgentGroup:
    """The agent's chat group, made on first use."""
    name = chat_group_name(agent)
    group = AgentGroup.objects.filter(
        constellation_id=agent.constellation_id, name=name
    ).first()
    if group is None:
        group = group_create(
            constellation=agent.constellation,
            name=name,
            pattern="round_robin",
            description=f"The partner's direct chat with {agent.name}.",
        )
        group_member_add(group=group, agent=agent)
        return group
    members = list(group.memberships.values_list("agent_id", flat=True))
    if members != [agent.pk] or group.pattern != "round_robin":
        raise Conflict(
            f"the group {name!r} is used by the chat with {agent.name} but was"
            " changed (other members or another pattern); rename or delete it"
            " and the chat makes a new one"
        )
    return group


@transaction.atomic
def chat_message_send(*, actor: Actor, agent: Agent, message: str) -> GroupRun:
    """Start the agent's turn on ``message`` (the caller checked that
    ``actor`` may chat with ``agent``); the run the page follows."""
    reason = chat_unavailable_reason(agent=agent)
    if reason:
        raise InvalidInput(reason)
    return group_message_route(actor=actor, group=_chat_group(agent), message=message)


@transaction.atomic
def agent_message_send(*, sender: Agent, to: Agent, message: str) -> GroupRun:
    """``sender``'s message to ``to`` (an agent of its constellation):
    delivered through ``to``'s chat group, answered by its model's turn or
    taken from its inbox; the run (which ``sender``, having started it,
    may follow)."""
    if to.constellation_id != sender.constellation_id:
        raise NotFound(f"no agent named {to.name!r} in your constellation")
    if to.pk == sender.pk:
        raise InvalidInput("a message to yourself goes to your memory, not here")
    return group_message_route(
        actor=Actor.for_agent(sender),
        group=_chat_group(to),
        message=f"Message from {sender.name}: {message.strip()}",
    )


@dataclass
class ToolRow:
    name: str
    arguments: str
    result: str = ""
    ok: bool | None = None


@dataclass
class ChatEntry:
    """One bubble: who speaks, its text, the tool calls it made."""

    who: str
    side: str  # "partner" or "agent"
    text: str
    tools: list[ToolRow] = field(default_factory=list)


def _names(refs: set[str]) -> dict[str, str]:
    """Display names of ``kind:id`` refs of people and agents."""
    users = {r.split(":", 1)[1] for r in refs if r.startswith("human:")}
    agents = {r.split(":", 1)[1] for r in refs if r.startswith("agent:")}
    names = {
        f"human:{pk}": username
        for pk, username in get_user_model()
        .objects.filter(pk__in=[u for u in users if u.isdigit()])
        .values_list("pk", "username")
    }
    names |= {
        f"agent:{pk}": name
        for pk, name in Agent.objects.filter(
            pk__in=[a for a in agents if a.isdigit()]
        ).values_list("pk", "name")
    }
    return names


def _preview(text: str) -> str:
    if len(text) <= RESULT_PREVIEW_CHARS:
        return text
    return text[:RESULT_PREVIEW_CHARS] + "…"


def _sent_text(arguments: str) -> str:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return ""
    message = value.get("message") if isinstance(value, dict) else None
    return message if isinstance(message, str) else ""


def chat_history(*, agent: Agent) -> list[ChatEntry]:
    """The agent's current conversation as chat bubbles, oldest first."""
    conversation = conversation_latest(agent=agent)
    if conversation is None:
        return []
    messages: list[Message] = list(
        Message.objects.filter(conversation=conversation).order_by("-position")[
            :CHAT_HISTORY_MESSAGES
        ]
    )
    messages.reverse()
    names = _names({m.author for m in messages if m.role == "user" and m.author})
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    entries: list[ChatEntry] = []
    for m in messages:
        if m.role == "user":
            who = names.get(m.author, m.author or "someone")
            entries.append(ChatEntry(who=who, side="partner", text=m.content))
        elif m.role == "assistant":
            entries.extend(_assistant_entries(agent, m, results))
    return entries


def _assistant_entries(
    agent: Agent, message: Message, results: dict[str, str]
) -> list[ChatEntry]:
    step = ChatEntry(who=agent.name, side="agent", text=message.content)
    answers: list[ChatEntry] = []
    for call in message.tool_calls:
        name, arguments = call.get("name", ""), call.get("arguments", "")
        if name == SEND_MESSAGE and _sent_text(arguments):
            answers.append(
                ChatEntry(who=agent.name, side="agent", text=_sent_text(arguments))
            )
            continue
        result: Any = results.get(call.get("id", ""))
        step.tools.append(
            ToolRow(
                name=name,
                arguments=arguments,
                result=_preview(result) if result is not None else "",
                ok=None if result is None else not result.startswith("error:"),
            )
        )
    shown = [step] if step.text or step.tools else []
    return shown + answers
