"""Voting: every available member votes; the weighted majority decides.

Each responding member gets a ``vote`` delivery.  The vote is tallied once
all voters answered, or when ``voting_timeout`` seconds passed (a Celery
task closes it) if at least ``quorum`` votes are in; below quorum the run
fails.  With ``weight_by_expertise`` a vote weighs 1 plus the number of the
message's words found in the voter's domain and capabilities.  A tie is
broken by ``tie_breaker``: ``random``, ``first_vote`` (the earliest of the
tied choices), ``supervisor`` (the supervisor member's choice, if it is
among the tied ones, else the earliest) or ``none`` (the run fails).
"""

import random
from typing import Any, Literal

from pydantic import Field

from coordination.groups.patterns.base import (
    Decision,
    Deliver,
    DeliveryView,
    Member,
    Pattern,
    PatternConfig,
    RunContext,
    Step,
    observers,
    words,
)
from pattern_site.kernel.errors import Conflict


class VotingConfig(PatternConfig):
    quorum: int = Field(default=2, ge=1)
    voting_timeout: float = Field(default=30.0, gt=0, le=86400)
    tie_breaker: Literal["random", "first_vote", "supervisor", "none"] = "random"
    weight_by_expertise: bool = False


def normalise(vote: str) -> str:
    return " ".join(vote.lower().split())


def vote_weight(
    member: Member | None, message_words: set[str], by_expertise: bool
) -> float:
    if member is None or not by_expertise:
        return 1.0
    return 1.0 + len(message_words & words(member.expertise))


class Voting(Pattern):
    name = "voting"
    Config = VotingConfig

    def route(
        self,
        *,
        config: Any,
        state: dict[str, Any],
        members: tuple[Member, ...],
        message: str,
        rng: random.Random,
    ) -> Decision:
        voters = [m for m in members if m.responds and m.available]
        if len(voters) < config.quorum:
            raise Conflict(
                f"this vote needs a quorum of {config.quorum} but only"
                f" {len(voters)} voting member(s) are available"
            )
        return Decision(
            deliveries=[
                *[
                    Deliver(agent_id=m.agent_id, kind="vote", content=message)
                    for m in voters
                ],
                *observers(members, message),
            ],
            group_state=state,
            close_after=config.voting_timeout,
        )

    def advance(self, *, config: Any, ctx: RunContext, finished: DeliveryView) -> Step:
        votes = [d for d in ctx.deliveries if d.kind == "vote"]
        if any(d.status in ("pending", "taken") for d in votes):
            return Step()
        return self.tally(config, ctx)

    def close(self, *, config: Any, ctx: RunContext) -> Step:
        return self.tally(config, ctx)

    def tally(self, config: Any, ctx: RunContext) -> Step:
        cast = sorted(
            (d for d in ctx.deliveries if d.kind == "vote" and d.status == "completed"),
            key=lambda d: (d.finished_at is None, d.finished_at, d.delivery_id),
        )
        if len(cast) < config.quorum:
            return Step(
                error=(
                    f"quorum not reached: {len(cast)} of {config.quorum} votes"
                    f" within {config.voting_timeout:g} s"
                )
            )
        by_id = {m.agent_id: m for m in ctx.members}
        message_words = words(ctx.message)
        totals: dict[str, float] = {}
        first_seen: dict[str, int] = {}
        for index, delivery in enumerate(cast):
            choice = normalise(delivery.vote or delivery.answer)
            weight = vote_weight(
                by_id.get(delivery.agent_id), message_words, config.weight_by_expertise
            )
            totals[choice] = totals.get(choice, 0.0) + weight
            first_seen.setdefault(choice, index)
        top = max(totals.values())
        tied = sorted(
            (c for c, total in totals.items() if total == top), key=first_seen.get
        )
        broken_by = ""
        if len(tied) == 1:
            winner = tied[0]
        elif config.tie_breaker == "none":
            return Step(error=f"the vote is tied between {', '.join(tied)}")
        elif config.tie_breaker == "random":
            winner, broken_by = ctx.rng.choice(tied), "random"
        else:
            winner, broken_by = tied[0], "first_vote"
            if config.tie_breaker == "supervisor":
                for delivery in cast:
                    member = by_id.get(delivery.agent_id)
                    choice = normalise(delivery.vote or delivery.answer)
                    if member and member.role == "supervisor" and choice in tied:
                        winner, broken_by = choice, "supervisor"
                        break
        return Step(
            done=True,
            result={
                "decision": winner,
                "totals": totals,
                "votes": {str(d.agent_id): normalise(d.vote or d.answer) for d in cast},
                "tie_broken_by": broken_by,
            },
        )
