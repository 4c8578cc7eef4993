"""Activity panels on pages served by other apps (constellation, agent).

``coordination`` sits below ``activity`` and must not import it; its
templates load these tags instead.
"""

from typing import Any

from django import template
from django.utils import timezone

from activity.summaries.selectors import (
    agent_summary_rows,
    constellation_summary_latest,
)
from activity.summaries.summarizers import summarizer_status
from pattern_site.kernel.agents.models import Constellation

register = template.Library()


@register.inclusion_tag("activity/_constellation_activity.html")
def constellation_activity(constellation: Constellation, agents: Any) -> dict[str, Any]:
    """Each agent's summary and last-active time, the latest constellation
    summary, and links to the feed and each agent's catch-up preview."""
    return {
        "constellation": constellation,
        "rows": agent_summary_rows(agents=list(agents), now=timezone.now()),
        "latest": constellation_summary_latest(constellation=constellation),
        "summarizer": summarizer_status(),
    }
