"""Activity endpoints of the tool API: the stream, its keyword search and
the catch-up digest (the ``notable`` tool is declared in ``activity.tools``)."""

from datetime import timedelta
from typing import Annotated

from django.http import HttpRequest
from django.utils import timezone
from ninja import Query, Router

from activity.schemas import ActivityEventOut, CatchUpOut
from activity.stream.permissions import (
    activity_constellation_for_read,
    catch_up_agent_for_read,
)
from activity.stream.selectors import activity_list, activity_search
from activity.summaries.digest import catch_up_build
from activity.summaries.summarizers import summarizer_status
from pattern_site.kernel.apitypes import (
    LINE_MAX,
    NAME_MAX,
    Id,
    Moment,
    error_responses,
)
from pattern_site.kernel.auth import request_actor

router = Router(tags=["activity"])


@router.get(
    "/activity",
    response={200: list[ActivityEventOut], **error_responses(403, 404, body=False)},
    summary="Recent activity",
)
def list_activity(
    request: HttpRequest,
    constellation_id: Id | None = None,
    agent_id: Id | None = None,
    event_type: Annotated[str | None, Query(max_length=NAME_MAX)] = None,
    min_importance: Annotated[str | None, Query(max_length=NAME_MAX)] = None,
    since: Moment | None = None,
    limit: int = 50,
) -> object:
    actor = request_actor(request)
    constellation = activity_constellation_for_read(
        actor=actor, constellation_id=constellation_id
    )
    return activity_list(
        actor=actor,
        constellation=constellation,
        agent_id=agent_id,
        event_type=event_type,
        min_importance=min_importance,
        since=since,
        limit=limit,
    )


@router.get(
    "/activity/search",
    response={200: list[ActivityEventOut], **error_responses(403, 404, body=False)},
    summary="Activity events holding every word of q",
)
def search_activity(
    request: HttpRequest,
    q: Annotated[str, Query(max_length=LINE_MAX)],
    constellation_id: Id | None = None,
    limit: int = 20,
) -> object:
    actor = request_actor(request)
    constellation = activity_constellation_for_read(
        actor=actor, constellation_id=constellation_id
    )
    return activity_search(
        actor=actor, constellation=constellation, query=q, limit=limit
    )


@router.get(
    "/context/catch-up",
    response={200: CatchUpOut, **error_responses(403, 404, body=False)},
    summary="The catch-up digest of an agent returning after time away",
)
def get_catch_up(
    request: HttpRequest,
    agent_id: Id | None = None,
    away_hours: float | None = Query(
        None, gt=0, le=24 * 366, description="Preview as if away this long"
    ),
) -> dict[str, object]:
    agent = catch_up_agent_for_read(actor=request_actor(request), agent_id=agent_id)
    since = (
        timezone.now() - timedelta(hours=away_hours) if away_hours is not None else None
    )
    catch_up = catch_up_build(agent=agent, since=since)
    summarizer = summarizer_status()["kind"]
    if catch_up is None:
        return {
            "agent_id": agent.pk,
            "due": False,
            "since": agent.last_active_at,
            "away_seconds": 0,
            "text": "",
            "budget_tokens": 0,
            "tokens": 0,
            "omitted_lines": 0,
            "summarizer": summarizer,
        }
    return {
        "agent_id": agent.pk,
        "due": True,
        "since": catch_up.since,
        "away_seconds": int(catch_up.away.total_seconds()),
        "text": catch_up.text,
        "budget_tokens": catch_up.budget_tokens,
        "tokens": catch_up.tokens,
        "omitted_lines": catch_up.omitted_lines,
        "summarizer": summarizer,
    }
