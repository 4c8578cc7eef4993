"""What every coordination pattern is given and what it answers.

A pattern is a routing engine with no I/O of its own: given the group's
configuration and state, its members and the message, it decides which
agents get a delivery (``route``), and given how a delivery ended, what
happens next in the run (``advance``).  The services hold the row locks,
write what a pattern decides and emit the events; the patterns stay pure so
that each decision is deterministic under test (randomness comes from the
``rng`` passed in).
"""

import random
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from pattern_site.kernel.errors import Conflict, InvalidInput


class PatternConfig(BaseModel):
    """Base of each pattern's configuration: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Member:
    agent_id: int
    name: str
    role: str
    domain: str = ""
    capabilities: tuple[str, ...] = ()
    available: bool = True
    last_routed_at: datetime | None = None
    # The site answers for this member through the LLM provider; the
    # services act on it, patterns route such a member like any other.
    answered_by_llm: bool = False

    @property
    def responds(self) -> bool:
        return self.role != "observer"

    @property
    def expertise(self) -> str:
        """The words that describe what this member is good at."""
        return " ".join((self.domain, *self.capabilities)).strip()


@dataclass(frozen=True)
class Deliver:
    """Ask ``agent_id`` to act (``kind`` is a ``DeliveryKind`` value)."""

    agent_id: int
    kind: str
    content: str
    stage: int | None = None
    attempt: int = 1
    timeout: float | None = None


@dataclass
class Decision:
    deliveries: list[Deliver]
    group_state: dict[str, Any]
    run_state: dict[str, Any] = field(default_factory=dict)
    # Shown in the Complete event: what of the group's state this run changed.
    state_changes: dict[str, Any] = field(default_factory=dict)
    # Run a close-the-vote check this many seconds after routing.
    close_after: float | None = None


@dataclass(frozen=True)
class DeliveryView:
    """A delivery of the run as the patterns see it: the one that just
    ended (``advance``) and all of the run's (``RunContext``)."""

    delivery_id: int
    agent_id: int
    kind: str
    status: str
    answer: str = ""
    vote: str = ""
    stage: int | None = None
    attempt: int = 1
    finished_at: datetime | None = None
    failure: str = ""


@dataclass
class Step:
    """What happens after a delivery ended (or a deadline passed)."""

    deliveries: list[Deliver] = field(default_factory=list)
    run_state: dict[str, Any] | None = None
    done: bool = False
    result: dict[str, Any] = field(default_factory=dict)
    # A non-empty error ends the run as failed.
    error: str = ""
    # Errors worth an event that do not end the run (a stage skipped).
    notices: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RunContext:
    message: str
    members: tuple[Member, ...]
    run_state: dict[str, Any]
    deliveries: tuple[DeliveryView, ...]
    rng: random.Random


WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    """Lower-case words of ``text`` with a crude plural fold, for matching."""
    out = set()
    for word in WORD.findall(text.lower()):
        out.add(word)
        if len(word) > 3 and word.endswith("s"):
            out.add(word[:-1])
    return out


def member_named(members: tuple[Member, ...], text: str) -> Member | None:
    """The member whose name (or id) ``text`` is, ignoring case and spaces."""
    wanted = text.strip().lower()
    for member in members:
        if wanted in (member.name.lower(), str(member.agent_id)):
            return member
    return None


class Pattern(ABC):
    """One coordination pattern; subclasses set ``name`` and ``Config``."""

    name: ClassVar[str]
    Config: ClassVar[type[PatternConfig]]

    def validate(
        self, raw: dict[str, Any], members: tuple[Member, ...] | None = None
    ) -> PatternConfig:
        """The typed configuration, or ``InvalidInput`` naming what is wrong.

        With ``members``, references to agents are checked against them.
        """
        try:
            config = self.Config.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg']}"
                for err in exc.errors()
            )
            raise InvalidInput(
                f"invalid {self.name} configuration: {problems}",
                extra={"pattern": self.name},
            ) from None
        if members is not None:
            self.check_members(config, members)
        return config

    def check_members(self, config: Any, members: tuple[Member, ...]) -> None:  # noqa: B027
        """Refuse a configuration naming agents that are not members (by
        default a pattern names no agent, so nothing to check)."""

    def initial_state(self, config: Any) -> dict[str, Any]:
        return {}

    @abstractmethod
    def route(
        self,
        *,
        config: Any,
        state: dict[str, Any],
        members: tuple[Member, ...],
        message: str,
        rng: random.Random,
    ) -> Decision:
        """Who acts on ``message`` and in what order; the new ``state``."""

    def advance(self, *, config: Any, ctx: RunContext, finished: DeliveryView) -> Step:
        """Default: the run is done once every asked agent has answered."""
        return all_answered(ctx)

    def close(self, *, config: Any, ctx: RunContext) -> Step:
        """A run deadline passed (votes); most patterns have none."""
        return Step()


def observers(members: tuple[Member, ...], message: str) -> list[Deliver]:
    return [
        Deliver(agent_id=m.agent_id, kind="observe", content=message)
        for m in members
        if not m.responds and m.available
    ]


def require(members: list[Member], what: str) -> list[Member]:
    if not members:
        raise Conflict(f"no member of this group can {what}: none is available")
    return members


def all_answered(ctx: RunContext) -> Step:
    """Done when no asked delivery is open; answers make the result."""
    asked = [d for d in ctx.deliveries if d.kind != "observe"]
    if any(d.status in ("pending", "taken") for d in asked):
        return Step()
    answers = [d for d in asked if d.status == "completed" and d.kind != "select"]
    if not answers:
        return Step(error="no agent answered: every delivery failed or expired")
    return Step(
        done=True,
        result={"answers": {str(d.agent_id): d.answer for d in answers}},
    )


def least_recently_used(members: list[Member]) -> Member:
    """Never-routed members first, then the one routed longest ago."""
    return min(
        members,
        key=lambda m: (m.last_routed_at is not None, m.last_routed_at or 0),
    )
