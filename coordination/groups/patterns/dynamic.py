"""Dynamic: a selector picks the member who answers each message.

Selectors: ``random``; ``capability`` (the member whose domain and
capabilities share the most words with the message, or, with
``use_embeddings`` and a loaded model, the closest by embedding;
``preferred_domain`` wins ties); ``load_balancing`` (least recently
used); ``supervisor`` (the group's supervisor member is asked to name the
member who answers, and the run goes on with that member).
"""

import random
from typing import Any, Literal

from coordination.groups.patterns.base import (
    Decision,
    Deliver,
    DeliveryView,
    Member,
    Pattern,
    PatternConfig,
    RunContext,
    Step,
    all_answered,
    least_recently_used,
    member_named,
    observers,
    require,
    words,
)

Selector = Literal["random", "capability", "load_balancing", "supervisor"]


class DynamicConfig(PatternConfig):
    selector: Selector = "capability"
    preferred_domain: str = ""
    use_embeddings: bool = False


def capability_scores(
    members: list[Member], message: str, *, use_embeddings: bool
) -> list[float]:
    """How well each member's expertise matches ``message`` (higher: better)."""
    if use_embeddings:
        from coordination.groups.similarity import expertise_similarity

        scores = expertise_similarity(message, [m.expertise for m in members])
        if scores is not None:
            return scores
    wanted = words(message)
    return [float(len(wanted & words(m.expertise))) for m in members]


def select_by_capability(members: list[Member], message: str, config: Any) -> Member:
    scores = capability_scores(members, message, use_embeddings=config.use_embeddings)
    preferred = config.preferred_domain.strip().lower()

    def rank(index: int) -> tuple[float, bool]:
        member = members[index]
        return (scores[index], bool(preferred) and member.domain.lower() == preferred)

    best = max(rank(i) for i in range(len(members)))
    tied = [members[i] for i in range(len(members)) if rank(i) == best]
    return least_recently_used(tied)


def candidates_prompt(message: str, members: list[Member]) -> str:
    lines = [
        "Choose the member of this group who should answer the message below.",
        "Answer with the member's name only. Members:",
    ]
    for member in members:
        about = member.expertise or member.role
        lines.append(f"- {member.name}: {about}")
    return "\n".join([*lines, "", "Message:", message])


class Dynamic(Pattern):
    name = "dynamic"
    Config = DynamicConfig

    def route(
        self,
        *,
        config: Any,
        state: dict[str, Any],
        members: tuple[Member, ...],
        message: str,
        rng: random.Random,
    ) -> Decision:
        able = require([m for m in members if m.responds and m.available], "answer")
        extra = observers(members, message)
        if config.selector == "supervisor":
            supervisors = [m for m in able if m.role == "supervisor"]
            if supervisors:
                choosers = [m for m in able if m.role != "supervisor"] or able
                return Decision(
                    deliveries=[
                        Deliver(
                            agent_id=supervisors[0].agent_id,
                            kind="select",
                            content=candidates_prompt(message, choosers),
                        ),
                        *extra,
                    ],
                    group_state=state,
                )
            # No supervisor available: the fairest automatic choice.
            chosen = least_recently_used(able)
        elif config.selector == "random":
            chosen = rng.choice(able)
        elif config.selector == "load_balancing":
            chosen = least_recently_used(able)
        else:
            chosen = select_by_capability(able, message, config)
        return Decision(
            deliveries=[
                Deliver(agent_id=chosen.agent_id, kind="respond", content=message),
                *extra,
            ],
            group_state=state,
            state_changes={"selected": chosen.name, "selector": config.selector},
        )

    def advance(self, *, config: Any, ctx: RunContext, finished: DeliveryView) -> Step:
        if finished.kind != "select":
            return all_answered(ctx)
        able = [m for m in ctx.members if m.responds and m.available]
        chosen = (
            member_named(tuple(able), finished.answer)
            if finished.status == "completed"
            else None
        )
        if chosen is None:
            # The supervisor failed or named nobody we know: fall back to
            # matching capabilities rather than dropping the message.
            if not able:
                return Step(error="no member is available to answer")
            chosen = select_by_capability(able, ctx.message, config)
        return Step(
            deliveries=[
                Deliver(agent_id=chosen.agent_id, kind="respond", content=ctx.message)
            ],
            run_state={**ctx.run_state, "selected": chosen.name},
        )
