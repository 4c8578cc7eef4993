"""Reads of summaries for the dashboard panels."""

from datetime import datetime
from typing import Any

from activity.summaries.models import AgentSummary, ConstellationSummary
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.humanize import ago_at


def constellation_summary_latest(
    *, constellation: Constellation
) -> ConstellationSummary | None:
    return ConstellationSummary.objects.filter(constellation=constellation).first()


def agent_summary_rows(*, agents: list[Agent], now: datetime) -> list[dict[str, Any]]:
    summaries = {s.agent_id: s for s in AgentSummary.objects.filter(agent__in=agents)}
    return [
        {
            "agent": agent,
            "summary": summaries.get(agent.pk),
            "last_active": ago_at(agent.last_active_at, now),
        }
        for agent in agents
    ]
