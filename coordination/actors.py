"""Who is acting: an agent (API token), a human (session) or the system.

Every selector and service that reads or changes domain data takes an
``Actor``; the permission decisions in the selectors are made on it.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from coordination.agents.models import Agent

ActorKind = Literal["agent", "human", "system"]


@dataclass(frozen=True)
class Actor:
    kind: ActorKind
    agent: "Agent | None" = None
    user: "AbstractBaseUser | None" = None

    @classmethod
    def for_agent(cls, agent: "Agent") -> "Actor":
        return cls(kind="agent", agent=agent)

    @classmethod
    def for_user(cls, user: "AbstractBaseUser") -> "Actor":
        return cls(kind="human", user=user)

    @classmethod
    def system(cls) -> "Actor":
        return cls(kind="system")

    @property
    def id(self) -> str:
        if self.agent is not None:
            return str(self.agent.pk)
        if self.user is not None:
            return str(self.user.pk)
        return "system"

    @property
    def display_name(self) -> str:
        if self.agent is not None:
            return self.agent.name
        if self.user is not None:
            return self.user.get_username()
        return "system"

    @property
    def ref(self) -> str:
        """A stable ``kind:id`` string for attribution (e.g. commit messages)."""
        return f"{self.kind}:{self.id}"
