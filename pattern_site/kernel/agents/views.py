"""Dashboard pages for constellations and agents."""

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.forms import AgentModelForm
from pattern_site.kernel.agents.permissions import (
    constellation_can_administer,
    constellation_can_export,
)
from pattern_site.kernel.agents.selectors import (
    agent_get_for_actor,
    agent_get_for_change,
    agent_get_for_partner,
    agent_list_for_actor,
    agent_token_list,
    constellation_get_for_actor,
    constellation_list_for_actor,
    demo_login_get,
)
from pattern_site.kernel.agents.services import (
    agent_token_issue,
    agent_token_revoke,
    agent_update,
)
from pattern_site.kernel.errors import InvalidInput
from pattern_site.kernel.web import form_action, form_problems, page_actor


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
        {
            "constellation": constellation,
            "agents": agents,
            "can_export": constellation_can_export(actor, constellation),
            "can_administer": constellation_can_administer(actor, constellation),
        },
    )


@login_required
def agent_detail(request: HttpRequest, agent_id: int) -> HttpResponse:
    actor = Actor.for_user(request.user)
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    partner = constellation_can_administer(actor, agent.constellation)
    model_form = AgentModelForm(
        initial={
            "model_name": agent.model_name,
            "answered_by_llm": agent.answered_by_llm,
        }
    )
    return render(
        request,
        "dashboard/agent.html",
        {
            "agent": agent,
            "constellation": agent.constellation,
            "model_form": model_form,
            "is_partner": partner,
            "tokens": agent_token_list(agent=agent) if partner else [],
        },
    )


@form_action
def issue_agent_token(request: HttpRequest, agent_id: int) -> HttpResponse:
    """A new token (the earlier ones revoked), shown on this response only."""
    agent = agent_get_for_partner(actor=page_actor(request), agent_id=agent_id)
    issued = agent_token_issue(agent=agent)
    response = render(
        request,
        "dashboard/agent_token.html",
        {"agent": agent, "constellation": agent.constellation, "raw": issued.raw},
    )
    response["Cache-Control"] = "no-store"
    return response


@form_action
def revoke_agent_tokens(request: HttpRequest, agent_id: int) -> HttpResponse:
    agent = agent_get_for_partner(actor=page_actor(request), agent_id=agent_id)
    revoked = agent_token_revoke(agent=agent)
    messages.success(
        request,
        f"Revoked {revoked} token(s) of {agent.name}; its program can no longer"
        " sign in until you issue a new one."
        if revoked
        else f"{agent.name} had no active token.",
    )
    return redirect("dashboard:agent", agent_id=agent.pk)


@form_action
def configure_agent_model(request: HttpRequest, agent_id: int) -> HttpResponse:
    actor = page_actor(request)
    agent = agent_get_for_change(actor=actor, agent_id=agent_id)
    form = AgentModelForm(request.POST)
    if not form.is_valid():
        raise InvalidInput(f"could not save the model: {form_problems(form)}")
    agent = agent_update(agent=agent, actor=actor, **form.cleaned_data)
    messages.success(
        request,
        f"{agent.name} is answered by {agent.model_name} through the LLM provider."
        if agent.answered_by_llm
        else f"{agent.name}'s own program answers its group deliveries.",
    )
    return redirect("dashboard:agent", agent_id=agent.pk)


class PartnerLoginView(LoginView):
    """Django's login page, which on the demo site says whom to log in as
    and where the password is kept (never the password itself: anyone who
    can reach the page would read it)."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["demo_login"] = demo_login_get()
        return context
