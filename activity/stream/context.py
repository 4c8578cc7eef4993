"""The ``<recent_activity>`` section of an agent's context.

``recent_activity_render`` is the renderer the context builder calls
(called by ``memory.context``): the ``ACTIVITY_CONTEXT_EVENTS``
newest events others caused in the agent's constellation, newest first,
one line each with a relative time.
"""

from datetime import datetime

from django.conf import settings
from django.utils import timezone

from activity.stream.models import ActivityEvent
from activity.stream.selectors import recent_activity_for_agent
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.humanize import ago


def recent_activity_lines(events: list[ActivityEvent], now: datetime) -> list[str]:
    return [f"[{ago(now - e.created_at)}] {e.text}" for e in events]


def recent_activity_render(agent: Agent) -> str:
    events = recent_activity_for_agent(
        agent=agent, limit=settings.ACTIVITY_CONTEXT_EVENTS
    )
    if not events:
        return ""
    lines = recent_activity_lines(events, timezone.now())
    return "<recent_activity>\n" + "\n".join(lines) + "\n</recent_activity>"
