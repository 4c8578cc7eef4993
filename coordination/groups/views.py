"""Dashboard pages of agent groups (humans only), and the parts of an
agent's page that need the group machinery: its chat, its tool rules,
and making an agent from a role template.

The groups of a constellation (with a create form), a group (members,
roles, the pattern configuration form, a message form, recent runs) and a
run viewer whose events arrive live over ``/ws/groups/``.  Each post calls
one service; a refused change comes back as a message on the page.
"""

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from activity.llm.client import llm_provider_configured
from coordination.groups import selectors, services
from coordination.groups.chat import chat_message_send
from coordination.groups.conversation import run_conversation_load
from coordination.groups.forms import (
    AgentCreateForm,
    GroupCreateForm,
    MemberAddForm,
    RouteForm,
    ToolRuleFormSet,
    pattern_forms,
    tool_rule_rows,
)
from coordination.groups.models import AgentGroup, CoordinationPattern
from coordination.groups.turns import (
    SEND_MESSAGE,
    agent_loop_config_update,
    loop_config_for,
)
from memory.roles import agent_create_from_role
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.agents.roles import ROLE_TEMPLATES
from pattern_site.kernel.agents.selectors import (
    actor_names,
    agent_get_for_actor,
    agent_get_for_change,
    agent_get_for_partner,
    agent_list_for_actor,
    constellation_get_for_actor,
    constellation_get_for_partner,
)
from pattern_site.kernel.errors import ApplicationError, InvalidInput
from pattern_site.kernel.tools import tools_all
from pattern_site.kernel.web import form_action, form_problems


def _actor(request: HttpRequest) -> Actor:
    return Actor.for_user(request.user)


@login_required
def group_list_page(request: HttpRequest, constellation_id: int) -> HttpResponse:
    actor = _actor(request)
    constellation = constellation_get_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    form = GroupCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            group = services.group_create(
                constellation=constellation,
                name=form.cleaned_data["name"],
                pattern=form.cleaned_data["pattern"],
                description=form.cleaned_data["description"],
            )
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Created group {group.name!r}.")
            return redirect("groups:group", group_id=group.pk)
    groups = selectors.group_list_for_actor(
        actor=actor, constellation_id=constellation.pk
    )
    return render(
        request,
        "groups/list.html",
        {"constellation": constellation, "groups": groups, "form": form},
    )


def _group_context(
    request: HttpRequest, group: AgentGroup, configs: Any = None
) -> dict[str, Any]:
    actor = _actor(request)
    memberships = list(group.memberships.all())
    members = [(m.agent_id, m.agent.name) for m in memberships]
    in_group = {pk for pk, _ in members}
    candidates = [
        (a.pk, a.name)
        for a in agent_list_for_actor(
            actor=actor, constellation_id=group.constellation_id
        )
        if a.pk not in in_group
    ]
    return {
        "group": group,
        "constellation": group.constellation,
        "memberships": memberships,
        "llm_missing": not llm_provider_configured()
        and any(m.agent.answered_by_llm for m in memberships),
        "member_form": MemberAddForm(agents=candidates),
        "route_form": RouteForm(),
        "configs": [
            (name, CoordinationPattern(name).label, form)
            for name, form in (configs or pattern_forms(group, members)).items()
        ],
        "runs": selectors.run_list_for_group(group=group, limit=15),
    }


@login_required
def group_page(request: HttpRequest, group_id: int) -> HttpResponse:
    group = selectors.group_get_for_actor(actor=_actor(request), group_id=group_id)
    return render(request, "groups/group.html", _group_context(request, group))


@login_required
@require_POST
def configure_group(request: HttpRequest, group_id: int) -> HttpResponse:
    group = selectors.group_get_for_change(actor=_actor(request), group_id=group_id)
    members = [(m.agent_id, m.agent.name) for m in group.memberships.all()]
    configs = pattern_forms(group, members, request.POST)
    posted = configs.get(request.POST.get("pattern", ""))
    try:
        if posted is None:
            raise InvalidInput("choose one of the six coordination patterns")
        if not posted.all_valid():
            problems = [form_problems(posted)] + [
                form_problems(f) for fs in posted.formsets() for f in fs.forms
            ]
            raise InvalidInput(
                "the configuration has errors: " + "; ".join(p for p in problems if p)
            )
        services.group_update(
            group=group,
            description=request.POST.get("description", group.description),
            pattern=posted.pattern,
            config=posted.to_config(),
        )
    except ApplicationError as exc:
        messages.error(request, exc.message)
        context = _group_context(request, group, configs)
        context["chosen_pattern"] = request.POST.get("pattern")
        return render(request, "groups/group.html", context, status=422)
    messages.success(request, f"Saved the {posted.pattern} configuration.")
    return redirect("groups:group", group_id=group.pk)


@form_action
def add_member(request: HttpRequest, group_id: int) -> HttpResponse:
    actor = _actor(request)
    group = selectors.group_get_for_change(actor=actor, group_id=group_id)
    agents = [
        (a.pk, a.name)
        for a in agent_list_for_actor(
            actor=actor, constellation_id=group.constellation_id
        )
    ]
    form = MemberAddForm(request.POST, agents=agents)
    if not form.is_valid():
        raise InvalidInput(f"could not add the member: {form_problems(form)}")
    agent = agent_get_for_actor(actor=actor, agent_id=form.cleaned_data["agent"])
    services.group_member_add(
        group=group,
        agent=agent,
        role=form.cleaned_data["role"],
        domain=form.cleaned_data["domain"],
        capabilities=form.capability_list(),
    )
    messages.success(request, f"Added {agent.name}.")
    return redirect("groups:group", group_id=group.pk)


@form_action
def remove_member(request: HttpRequest, group_id: int, agent_id: int) -> HttpResponse:
    group = selectors.group_get_for_change(actor=_actor(request), group_id=group_id)
    services.group_member_remove(group=group, agent_id=agent_id)
    messages.success(request, "Member removed.")
    return redirect("groups:group", group_id=group.pk)


@form_action
def route_group_message(request: HttpRequest, group_id: int) -> HttpResponse:
    actor = _actor(request)
    group = selectors.group_get_for_route(actor=actor, group_id=group_id)
    form = RouteForm(request.POST)
    if not form.is_valid():
        raise InvalidInput(f"could not send: {form_problems(form)}")
    run = services.group_message_route(
        actor=actor,
        group=group,
        message=form.cleaned_data["message"],
        options=form.option_list(),
    )
    return redirect("groups:run", run_id=run.pk)


@login_required
def run_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get_for_actor(actor=_actor(request), run_id=run_id)
    return render(
        request,
        "groups/run.html",
        {
            "run": run,
            "group": run.group,
            "constellation": run.group.constellation,
            "conversation": run_conversation_load(run=run),
            "last_seq": run.last_seq,
            "names": actor_names(refs=[run.requested_by]),
        },
    )


@login_required
def run_conversation_fragment(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's conversation, drawn again by the page as events arrive."""
    run = selectors.run_get_for_actor(actor=_actor(request), run_id=run_id)
    return render(
        request,
        "groups/_conversation.html",
        {"conversation": run_conversation_load(run=run)},
    )


# --- an agent's chat, loop settings and creation --------------------------


def agent_tool_names() -> list[str]:
    """The tools an agent's loop may call, for the rule rows."""
    names = sorted(t.name for t in tools_all())
    return [SEND_MESSAGE, *(n for n in names if n != SEND_MESSAGE)]


def tool_rule_formset(agent: Agent, data: Any = None) -> Any:
    rules = loop_config_for(agent).tool_rules
    return ToolRuleFormSet(
        data,
        initial=[
            {"tool": r["tool"], "kind": r["kind"], "value": r.get("value") or ""}
            for r in rules
        ],
        prefix="rules",
        form_kwargs={"tools": agent_tool_names()},
    )


def _chat_message(body: bytes) -> str:
    try:
        data = json.loads(body or b"{}")
    except ValueError as exc:
        raise InvalidInput('the body is not JSON; send {"message": "…"}') from exc
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, str):
        raise InvalidInput('send {"message": "…"}', extra={"field": "message"})
    return message


@require_POST
def agent_chat_send(request: HttpRequest, agent_id: int) -> HttpResponse:
    """The partner's chat message: starts the agent's turn; the run's id
    for the page to follow (errors as ``{"detail", "code"}``)."""
    if not request.user.is_authenticated:
        return JsonResponse(
            {"detail": "sign in to chat", "code": "not_authenticated"}, status=401
        )
    actor = _actor(request)
    try:
        agent = agent_get_for_partner(actor=actor, agent_id=agent_id)
        run = chat_message_send(
            actor=actor, agent=agent, message=_chat_message(request.body)
        )
    except ApplicationError as exc:
        return JsonResponse(
            {"detail": exc.message, "code": exc.code}, status=exc.status_code
        )
    return JsonResponse({"run_id": run.pk}, status=201)


@form_action
def agent_tool_rules_save(request: HttpRequest, agent_id: int) -> HttpResponse:
    actor = _actor(request)
    agent = agent_get_for_change(actor=actor, agent_id=agent_id)
    formset = tool_rule_formset(agent, request.POST)
    if not formset.is_valid():
        problems = [form_problems(f) for f in formset.forms]
        raise InvalidInput(
            "could not save the tool rules: " + "; ".join(p for p in problems if p)
        )
    agent_loop_config_update(agent=agent, tool_rules=tool_rule_rows(formset))
    messages.success(request, f"Saved {agent.name}'s tool rules.")
    return redirect("dashboard:agent", agent_id=agent.pk)


@login_required
def agent_create_page(request: HttpRequest, constellation_id: int) -> HttpResponse:
    """Create an agent from a role template; its first token is shown once."""
    actor = _actor(request)
    constellation = constellation_get_for_partner(
        actor=actor, constellation_id=constellation_id
    )
    templates = [t.name for t in ROLE_TEMPLATES]
    form = AgentCreateForm(request.POST or None, templates=templates)
    status = 200
    if request.method == "POST":
        try:
            if not form.is_valid():
                raise InvalidInput(f"could not create it: {form_problems(form)}")
            agent, issued = agent_create_from_role(
                actor=actor, constellation=constellation, **form.cleaned_data
            )
        except ApplicationError as exc:
            messages.error(request, exc.message)
            status = 422
        else:
            response = render(
                request,
                "dashboard/agent_token.html",
                {"agent": agent, "constellation": constellation, "raw": issued.raw},
            )
            response["Cache-Control"] = "no-store"
            return response
    return render(
        request,
        "groups/agent_new.html",
        {"constellation": constellation, "form": form, "roles": ROLE_TEMPLATES},
        status=status,
    )
