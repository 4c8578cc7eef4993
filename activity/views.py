"""Dashboard pages of activity: the live feed with its timeline, flagging a
notable event, and the catch-up preview of an agent."""

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from activity.forms import ActivityFilterForm, CatchUpPreviewForm, NotableForm
from activity.stream.permissions import (
    activity_constellation_for_read,
    agents_involved_for_flag,
    catch_up_agent_for_read,
    notable_constellation_for_flag,
)
from activity.stream.selectors import activity_list
from activity.stream.services import notable_flag
from activity.stream.timeline import timeline_build
from activity.summaries.digest import catch_up_build
from activity.summaries.summarizers import summarizer_status
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.selectors import agent_list_for_actor
from pattern_site.kernel.errors import ApplicationError

FEED_EVENTS = 50


@login_required
def activity_feed_page(request: HttpRequest, constellation_id: int) -> HttpResponse:
    actor = Actor.for_user(request.user)
    constellation = activity_constellation_for_read(
        actor=actor, constellation_id=constellation_id
    )
    agents = agent_list_for_actor(actor=actor, constellation_id=constellation.pk)
    filters = ActivityFilterForm(request.GET or None, agents=agents)
    chosen = filters.cleaned_data if filters.is_valid() else {}
    agent = chosen.get("agent")
    events = activity_list(
        actor=actor,
        constellation=constellation,
        agent_id=agent.pk if agent else None,
        event_type=chosen.get("kind") or None,
        min_importance=chosen.get("importance") or None,
        limit=FEED_EVENTS,
    )
    return render(
        request,
        "activity/feed.html",
        {
            "constellation": constellation,
            "agents": agents,
            "filters": filters,
            "events": events,
            "notable_form": NotableForm(agents=agents),
            "timeline": timeline_build(
                constellation=constellation,
                agents=list(agents),
                now=timezone.now(),
                span_key=request.GET.get("span"),
            ),
            "summarizer": summarizer_status(),
        },
    )


@login_required
@require_POST
def flag_notable_form(request: HttpRequest, constellation_id: int) -> HttpResponse:
    actor = Actor.for_user(request.user)
    constellation = notable_constellation_for_flag(
        actor=actor, constellation_id=constellation_id
    )
    agents = agent_list_for_actor(actor=actor, constellation_id=constellation.pk)
    form = NotableForm(request.POST, agents=agents)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(errors)}")
        return redirect("activity:feed", constellation_id=constellation.pk)
    try:
        notable_flag(
            actor=actor,
            constellation=constellation,
            description=form.cleaned_data["description"],
            importance=form.cleaned_data["importance"],
            agents_involved=agents_involved_for_flag(
                actor=actor,
                constellation=constellation,
                agent_ids=[a.pk for a in form.cleaned_data["agents_involved"]],
            ),
        )
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Notable event flagged.")
    return redirect("activity:feed", constellation_id=constellation.pk)


@login_required
def catch_up_preview_page(request: HttpRequest, agent_id: int) -> HttpResponse:
    agent = catch_up_agent_for_read(
        actor=Actor.for_user(request.user), agent_id=agent_id
    )
    form = CatchUpPreviewForm(request.GET or None)
    away = form.cleaned_data.get("away") if form.is_valid() else ""
    since = timezone.now() - timedelta(hours=int(away)) if away else None
    return render(
        request,
        "activity/catch_up.html",
        {
            "agent": agent,
            "constellation": agent.constellation,
            "form": form,
            "catch_up": catch_up_build(agent=agent, since=since),
            "summarizer": summarizer_status(),
        },
    )
