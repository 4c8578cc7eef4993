"""Supervisor: a leader receives each message and may delegate parts of it.

The leader is ``leader_id``, or without one the first member with the
supervisor role.  The leader's delivery is of kind ``lead``; it delegates
through the run (``run_delegate``), naming a member or letting ``delegation_strategy``
choose.  A member receives at most ``max_delegations_per_agent``
delegations per run; past that, or with nobody to delegate to,
``fallback_behavior`` decides: ``handle_self`` refuses the delegation and
the leader keeps the work, ``fail`` ends the run with an error.  When the
leader itself is unavailable, the message goes to the member the strategy
picks.  The run is complete once the leader and every delegate answered.
"""

import random
from typing import Any, Literal

from pydantic import Field

from coordination.groups.patterns.base import (
    Decision,
    Deliver,
    Member,
    Pattern,
    PatternConfig,
    least_recently_used,
    observers,
    require,
)
from coordination.groups.patterns.dynamic import DynamicConfig, select_by_capability
from pattern_site.kernel.errors import InvalidInput

# Delegating by capability matches words, as the dynamic pattern's default.
CAPABILITY = DynamicConfig(selector="capability")

Strategy = Literal["capability", "round_robin", "random", "load_balancing"]


class SupervisorConfig(PatternConfig):
    # None: the first member with the supervisor role leads.
    leader_id: int | None = None
    # 0: no limit.
    max_delegations_per_agent: int = Field(default=3, ge=0)
    delegation_strategy: Strategy = "capability"
    fallback_behavior: Literal["handle_self", "fail"] = "handle_self"


class Supervisor(Pattern):
    name = "supervisor"
    Config = SupervisorConfig

    def check_members(self, config: Any, members: tuple[Member, ...]) -> None:
        if config.leader_id is None:
            return
        if not any(m.agent_id == config.leader_id for m in members):
            names = ", ".join(f"{m.name} ({m.agent_id})" for m in members) or "none"
            raise InvalidInput(
                f"leader_id {config.leader_id} is not a member of this group;"
                f" members: {names}"
            )

    def route(
        self,
        *,
        config: Any,
        state: dict[str, Any],
        members: tuple[Member, ...],
        message: str,
        rng: random.Random,
    ) -> Decision:
        leader = self.leader(config, members)
        extra = observers(members, message)
        if leader is not None and leader.available:
            return Decision(
                deliveries=[
                    Deliver(agent_id=leader.agent_id, kind="lead", content=message),
                    *extra,
                ],
                group_state=state,
                run_state={"delegations": {}},
            )
        able = require(
            [m for m in members if m.responds and m.available],
            "stand in for the leader",
        )
        chosen, group_state = self.pick(config, state, able, message, rng)
        return Decision(
            deliveries=[
                Deliver(agent_id=chosen.agent_id, kind="respond", content=message),
                *extra,
            ],
            group_state=group_state,
            run_state={"delegations": {}, "leader_unavailable": True},
            state_changes={"stand_in": chosen.name},
        )

    def leader(self, config: Any, members: tuple[Member, ...]) -> Member | None:
        if config.leader_id is None:
            return next((m for m in members if m.role == "supervisor"), None)
        return next((m for m in members if m.agent_id == config.leader_id), None)

    def pick(
        self,
        config: Any,
        state: dict[str, Any],
        able: list[Member],
        message: str,
        rng: random.Random,
    ) -> tuple[Member, dict[str, Any]]:
        """A member by ``delegation_strategy``, and the group state after it."""
        strategy = config.delegation_strategy
        if strategy == "random":
            return rng.choice(able), state
        if strategy == "load_balancing":
            return least_recently_used(able), state
        if strategy == "round_robin":
            index = int(state.get("delegation_index", 0)) % len(able)
            return able[index], {**state, "delegation_index": index + 1}
        return select_by_capability(able, message, CAPABILITY), state

    def delegation_target(
        self,
        *,
        config: Any,
        state: dict[str, Any],
        members: tuple[Member, ...],
        run_state: dict[str, Any],
        message: str,
        wanted: Member | None,
        rng: random.Random,
    ) -> tuple[Member | None, str, dict[str, Any]]:
        """Whom a delegation goes to, or (None, why not, state)."""
        counts = run_state.get("delegations", {})
        leader = self.leader(config, members)
        leader_id = leader.agent_id if leader else None
        limit = config.max_delegations_per_agent

        def has_room(member: Member) -> bool:
            return not limit or counts.get(str(member.agent_id), 0) < limit

        if wanted is not None:
            if not wanted.available:
                return None, f"{wanted.name} is unavailable", state
            if not has_room(wanted):
                return (
                    None,
                    f"{wanted.name} already has {limit}/{limit} delegations"
                    " in this run",
                    state,
                )
            return wanted, "", state
        able = [
            m
            for m in members
            if m.responds and m.available and m.agent_id != leader_id and has_room(m)
        ]
        if not able:
            return None, "no member is available with room for a delegation", state
        chosen, state = self.pick(config, state, able, message, rng)
        return chosen, "", state
