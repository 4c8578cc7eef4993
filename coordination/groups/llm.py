"""Deliveries the site answers: agents answered by the LLM.

When a run delivers to an agent with ``answered_by_llm``, a Celery task
(queued after commit) claims the delivery (``AgentStarted``) and answers
it with the agent's tool loop (``coordination.groups.turns``): its model
is called with its context, history and tools until it answers, and the
answer completes the delivery (``delivery_complete``) while a provider
error, timeout, spent budget or refused answer fails it
(``delivery_fail``).  The run and its pattern see no difference between
this agent and one with a program of its own.  A task run again for a
delivery whose turn a stopped worker left running resumes that turn.

A vote is asked for as JSON (``{"vote", "reason"}``, checked against the
run's options; a wrong answer is asked again as ``LLM_JSON_RETRIES``
says).  A leader delegates in its turn with the ``delegate`` tool.
"""

import logging
from collections.abc import Callable
from typing import Any

from django.utils import timezone

from activity.llm.client import ChatClient, LLMUnavailable, chat_client
from coordination.groups import services
from coordination.groups.models import DeliveryKind, RunDelivery
from coordination.groups.patterns.voting import normalise
from coordination.groups.turns import delivery_turn_answer, delivery_turn_resume
from memory.context import context_build
from pattern_site.kernel.agents.services import agent_touch
from pattern_site.kernel.errors import ApplicationError, Conflict

logger = logging.getLogger(__name__)


def delivery_llm_answer(*, delivery_id: int) -> float:
    """Answer a pending delivery with its agent's model; nothing when the
    delivery was already answered or its run has ended.  A delivery whose
    turn a stopped worker left running is resumed; the seconds to wait
    before asking again are returned while that turn may still be alive."""
    delivery = services.delivery_claim(delivery_id=delivery_id)
    if delivery is None:
        return delivery_turn_resume(delivery_id=delivery_id)
    if delivery.kind == DeliveryKind.OBSERVE:
        return 0.0
    if delivery.kind == DeliveryKind.VOTE:
        _vote_delivery(delivery)
    else:
        delivery_turn_answer(delivery=delivery)
    return 0.0


def _vote_delivery(delivery: RunDelivery) -> None:
    """Complete a vote delivery with the model's vote, or fail it."""
    model = delivery.agent.model_name
    try:
        text, vote = _answer(delivery)
    except ApplicationError as exc:
        # LLMUnavailable (errors, timeouts, no provider) and LimitExceeded
        # (the day's token budget) say what went wrong.
        _post(services.delivery_fail, delivery, reason=f"model {model}: {exc.message}")
        return
    except Exception as exc:
        logger.exception("delivery %s: the model's answer failed", delivery.pk)
        _post(
            services.delivery_fail,
            delivery,
            reason=f"model {model}: the site could not get an answer"
            f" ({type(exc).__name__})",
        )
        return
    try:
        _post(services.delivery_complete, delivery, text=text, vote=vote)
    except ApplicationError as exc:
        _post(
            services.delivery_fail,
            delivery,
            reason=f"model {model}: its answer was refused: {exc.message}",
        )


def _post(service: Callable[..., Any], delivery: RunDelivery, **kwargs: Any) -> None:
    """Call a delivery service; a delivery that ended meanwhile takes nothing."""
    try:
        service(delivery=delivery, **kwargs)
    except Conflict as exc:
        logger.info("delivery %s: %s", delivery.pk, exc.message)


def _answer(delivery: RunDelivery) -> tuple[str, str]:
    """The model's vote and its reason."""
    agent = delivery.agent
    client = chat_client(model=agent.model_name)
    if client is None:
        raise LLMUnavailable("no LLM provider is configured (set PATTERN_LLM_BASE_URL)")
    system = context_build(agent=agent).system_prompt
    # Answering is the agent being active: its next context has no
    # catch-up digest for the time it was answering.
    agent_touch(agent_id=agent.pk, at=timezone.now())
    return _vote(client, delivery, system)


def vote_prompt(message: str, options: list[str]) -> str:
    choose = (
        f"Choose exactly one of: {', '.join(options)}."
        if options
        else "Name your choice in a few words."
    )
    return (
        f"Vote on this:\n\n{message}\n\n{choose} Answer with a JSON object"
        ' only: {"vote": "<your choice>", "reason": "<one or two sentences>"}'
    )


def vote_parse(value: Any, options: list[str]) -> tuple[str, str]:
    """``(vote, reason)`` from the model's JSON; ``ValueError`` (shown to
    the model when it is asked again) when it is not a vote allowed here."""
    raw = value.get("vote") if isinstance(value, dict) else None
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError('answer with a JSON object whose "vote" is your choice')
    vote = normalise(raw)
    if options and vote not in options:
        raise ValueError(f'"vote" must be one of: {", ".join(options)}; {raw!r} is not')
    reason = value.get("reason")
    return vote, reason.strip() if isinstance(reason, str) else ""


def _vote(client: ChatClient, delivery: RunDelivery, system: str) -> tuple[str, str]:
    options = list(delivery.run.options)
    (vote, reason), _ = client.complete_json(
        constellation_id=delivery.agent.constellation_id,
        messages=[
            {"role": "system", "content": system},
            {"role": "user", "content": vote_prompt(delivery.content, options)},
        ],
        validate=lambda value: vote_parse(value, options),
    )
    return reason or vote, vote
