"""The app's models, defined in its packages and re-exported here so that
migrations stay in this app."""

from activity.llm.models import LLMUsage
from activity.stream.models import (
    ActivityEvent,
    ActivityHourCount,
    ActivityTerm,
    EventType,
    Importance,
)
from activity.summaries.models import AgentSummary, ConstellationSummary

__all__ = [
    "ActivityEvent",
    "ActivityHourCount",
    "ActivityTerm",
    "AgentSummary",
    "ConstellationSummary",
    "EventType",
    "Importance",
    "LLMUsage",
]
