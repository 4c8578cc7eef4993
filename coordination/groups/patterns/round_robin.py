"""Round robin: members answer in turn.

State: ``current_index``, the position (in member order, observers left
out) of the next member to answer.  With ``skip_unavailable`` an
inactive member's turn passes to the next one; without it a message for
an unavailable member is refused and the turn does not move.
"""

import random
from typing import Any

from pydantic import Field

from coordination.groups.patterns.base import (
    Decision,
    Deliver,
    Member,
    Pattern,
    PatternConfig,
    observers,
    require,
)
from pattern_site.kernel.errors import Conflict


class RoundRobinConfig(PatternConfig):
    skip_unavailable: bool = True
    current_index: int = Field(default=0, ge=0)


class RoundRobin(Pattern):
    name = "round_robin"
    Config = RoundRobinConfig

    def initial_state(self, config: Any) -> dict[str, Any]:
        return {"current_index": config.current_index}

    def route(
        self,
        *,
        config: Any,
        state: dict[str, Any],
        members: tuple[Member, ...],
        message: str,
        rng: random.Random,
    ) -> Decision:
        turn = [m for m in members if m.responds]
        require(turn, "take a turn")
        start = int(state.get("current_index", 0)) % len(turn)
        chosen = None
        for offset in range(len(turn)):
            candidate = (start + offset) % len(turn)
            if turn[candidate].available:
                chosen = candidate
                break
            if not config.skip_unavailable:
                raise Conflict(
                    f"it is {turn[candidate].name}'s turn and it is unavailable;"
                    " enable skip_unavailable or reactivate the agent"
                )
        if chosen is None:
            require([], "take a turn")
        assert chosen is not None
        nxt = (chosen + 1) % len(turn)
        return Decision(
            deliveries=[
                Deliver(
                    agent_id=turn[chosen].agent_id, kind="respond", content=message
                ),
                *observers(members, message),
            ],
            group_state={**state, "current_index": nxt},
            state_changes={"current_index": [start, nxt]},
        )
