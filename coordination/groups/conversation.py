"""A run as people read it: who was asked, what each one answered (the
streamed pieces joined into one reply), the tools they called, the votes
counted, a pipeline's stages in order, and whose work is waiting for a
program that is not there.

Built from the run's stored events and deliveries; the run page draws it
and draws it again whenever a new event arrives.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from coordination.groups.models import (
    DeliveryKind,
    DeliveryStatus,
    GroupEventType,
    GroupRun,
    GroupRunEvent,
    RunDelivery,
    RunStatus,
)

# An agent whose program asked for anything (its inbox, say) this recently
# counts as having one attached; the site records activity once a minute.
PROGRAM_SEEN_WITHIN = timedelta(minutes=5)

# How the kinds of delivery read next to the agent's name.
KIND_WORDS = {
    DeliveryKind.RESPOND: "",
    DeliveryKind.LEAD: "leads",
    DeliveryKind.DELEGATED: "was delegated to",
    DeliveryKind.SELECT: "chooses who answers",
    DeliveryKind.VOTE: "votes",
    DeliveryKind.STAGE: "",
    DeliveryKind.INTERVENE: "intervenes",
    DeliveryKind.OBSERVE: "observes",
}


@dataclass
class ToolCallRow:
    call_id: str
    name: str
    arguments: str
    result: str | None = None

    @property
    def done(self) -> bool:
        return self.result is not None


@dataclass
class Reply:
    """One agent's part: a delivery, from being asked to its answer."""

    delivery_id: int
    agent_name: str
    kind: str
    status: str
    stage: int | None
    text: str = ""
    final: bool = False
    vote: str = ""
    failure: str = ""
    tool_calls: list[ToolCallRow] = field(default_factory=list)

    @property
    def doing(self) -> str:
        return KIND_WORDS.get(self.kind, "")

    @property
    def waiting(self) -> bool:
        return self.status == DeliveryStatus.PENDING

    @property
    def working(self) -> bool:
        return self.status == DeliveryStatus.TAKEN


@dataclass
class Stage:
    number: int
    name: str
    replies: list[Reply]


@dataclass
class TallyRow:
    option: str
    votes: int
    voters: list[str]
    # Percent of the votes cast, for the bar.
    share: int


@dataclass
class Conversation:
    replies: list[Reply]
    stages: list[Stage]
    tally: list[TallyRow]
    notices: list[str]
    error: str
    # Agents (id, name) with work waiting and nothing to take it: no model
    # answers them and no program asked for their inbox lately.
    unattended: list[tuple[int, str]]
    finished: bool


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _unattended(deliveries: list[RunDelivery], now: datetime) -> list[tuple[int, str]]:
    names: dict[int, str] = {}
    for d in deliveries:
        agent = d.agent
        seen = agent.last_active_at
        if (
            d.status == DeliveryStatus.PENDING
            and not agent.answered_by_llm
            and (seen is None or now - seen > PROGRAM_SEEN_WITHIN)
        ):
            names[agent.pk] = agent.name
    return list(names.items())


def run_conversation(
    *,
    run: GroupRun,
    events: list[GroupRunEvent],
    deliveries: list[RunDelivery],
    now: datetime | None = None,
) -> Conversation:
    """``run`` as a conversation; ``deliveries`` with their agents."""
    now = now or timezone.now()
    replies = {
        d.pk: Reply(
            delivery_id=d.pk,
            agent_name=d.agent.name,
            kind=d.kind,
            status=d.status,
            stage=d.stage,
            vote=d.vote,
            failure=d.failure,
            text=d.answer,
            final=d.status == DeliveryStatus.COMPLETED,
        )
        for d in deliveries
        if d.kind != DeliveryKind.OBSERVE
    }
    # Output events name the agent, not the delivery: they belong to the
    # agent's delivery it started last.
    current: dict[int, Reply] = {}
    notices: list[str] = []
    error = ""
    for event in events:
        data = event.data
        reply = current.get(data.get("agent_id", -1))
        if event.type == GroupEventType.AGENT_STARTED:
            started = replies.get(data.get("delivery_id", -1))
            if started is not None:
                current[data["agent_id"]] = started
        elif event.type == GroupEventType.TEXT_CHUNK and reply is not None:
            if data.get("is_final"):
                reply.text, reply.final = data.get("text", ""), True
            elif not reply.final:
                reply.text += data.get("text", "")
        elif event.type == GroupEventType.TOOL_CALL_STARTED and reply is not None:
            reply.tool_calls.append(
                ToolCallRow(
                    call_id=str(data.get("call_id", "")),
                    name=str(data.get("fn_name", "")),
                    arguments=_json(data.get("args") or {}),
                )
            )
        elif event.type == GroupEventType.TOOL_CALL_COMPLETED and reply is not None:
            for call in reply.tool_calls:
                if call.call_id == data.get("call_id") and call.result is None:
                    call.result = _json(data.get("result"))
                    break
        elif event.type == GroupEventType.ERROR:
            if data.get("recoverable") is False:
                error = str(data.get("message", ""))
            elif data.get("agent_id") is None:
                notices.append(str(data.get("message", "")))
    ordered = list(replies.values())
    stage_names = [s.get("name", "") for s in run.config.get("stages", [])]
    stages = []
    if run.pattern == "pipeline":
        for number in sorted({r.stage for r in ordered if r.stage is not None}):
            name = stage_names[number] if number < len(stage_names) else ""
            stages.append(
                Stage(
                    number=number + 1,
                    name=name,
                    replies=[r for r in ordered if r.stage == number],
                )
            )
    votes = [r for r in ordered if r.kind == DeliveryKind.VOTE]
    tally = []
    if votes:
        counted = Counter(r.vote for r in votes if r.vote)
        cast = sum(counted.values()) or 1
        options = list(dict.fromkeys([*run.options, *counted]))
        tally = sorted(
            (
                TallyRow(
                    option=o,
                    votes=counted[o],
                    voters=[r.agent_name for r in votes if r.vote == o],
                    share=round(100 * counted[o] / cast),
                )
                for o in options
            ),
            key=lambda row: -row.votes,
        )
    running = run.status == RunStatus.RUNNING
    return Conversation(
        replies=ordered,
        stages=stages,
        tally=tally,
        notices=notices,
        error=error,
        unattended=_unattended(deliveries, now) if running else [],
        finished=not running,
    )


def run_conversation_load(*, run: GroupRun) -> Conversation:
    """The conversation of ``run`` (the caller may see it), from the database."""
    events = list(run.events.order_by("seq"))
    deliveries = list(run.deliveries.select_related("agent").order_by("id"))
    return run_conversation(run=run, events=events, deliveries=deliveries)
