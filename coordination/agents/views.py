"""Dashboard pages for constellations and agents."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from coordination.actors import Actor
from coordination.agents.selectors import (
    agent_get_for_actor,
    agent_list_for_actor,
    constellation_get_for_actor,
    constellation_list_for_actor,
)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    constellations = list(
        constellation_list_for_actor(actor=Actor.for_user(request.user))
    )
    if len(constellations) == 1:
        return redirect(
            "dashboard:constellation", constellation_id=constellations[0].pk
        )
    return render(request, "dashboard/home.html", {"constellations": constellations})


@login_required
def constellation_detail(request: HttpRequest, constellation_id: int) -> HttpResponse:
    actor = Actor.for_user(request.user)
    constellation = constellation_get_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    agents = agent_list_for_actor(actor=actor, constellation_id=constellation.pk)
    return render(
        request,
        "dashboard/constellation.html",
        {"constellation": constellation, "agents": agents},
    )


@login_required
def agent_detail(request: HttpRequest, agent_id: int) -> HttpResponse:
    agent = agent_get_for_actor(actor=Actor.for_user(request.user), agent_id=agent_id)
    return render(
        request,
        "dashboard/agent.html",
        {"agent": agent, "constellation": agent.constellation},
    )
