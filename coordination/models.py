"""The coordination app's models, defined in its packages (Django and the
migrations find them here)."""

from coordination.groups.models import (
    AgentGroup,
    AgentLoopConfig,
    AgentToolCall,
    AgentTurn,
    GroupMembership,
    GroupRun,
    GroupRunEvent,
    RunDelivery,
)
from coordination.work.models import CoordinationState, HandoffNote, Task
from pattern_site.kernel.agents.models import Agent, AgentToken, Constellation

__all__ = [
    "Agent",
    "AgentGroup",
    "AgentLoopConfig",
    "AgentToken",
    "AgentToolCall",
    "AgentTurn",
    "Constellation",
    "CoordinationState",
    "GroupMembership",
    "GroupRun",
    "GroupRunEvent",
    "HandoffNote",
    "RunDelivery",
    "Task",
]
