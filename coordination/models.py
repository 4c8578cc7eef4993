"""The coordination app's models, defined in its packages (Django and the
migrations find them here)."""

from coordination.agents.models import Agent, AgentToken, Constellation
from coordination.work.models import CoordinationState, HandoffNote, Task

__all__ = [
    "Agent",
    "AgentToken",
    "Constellation",
    "CoordinationState",
    "HandoffNote",
    "Task",
]
