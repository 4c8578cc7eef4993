"""Who is acting: an agent (API token), a human (session) or the system.

Every selector and service that reads or changes domain data takes an
``Actor``; the permission decisions in the selectors are made on it.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from pattern_site.kernel.agents.models import Agent

ActorKind = Literal["agent", "human", "system"]


@dataclass(frozen=True)
class Actor:
    kind: ActorKind
    agent: "Agent | None" = None
    user: "AbstractBaseUser | None" = None
    # The token a long-lived connection (a sync socket) authenticated the
    # agent with: its writes check the token is still live as they are
    # stored.  None when the actor's credentials were checked just now.
    token_id: int | None = None

    @classmethod
    def for_agent(cls, agent: "Agent", *, token_id: int | None = None) -> "Actor":
        return cls(kind="agent", agent=agent, token_id=token_id)

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
