"""Dashboard pages of long-term memory: search, archival entries, conversations."""

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from coordination.actors import Actor
from coordination.agents.selectors import (
    agent_get_for_actor,
    agent_list_for_actor,
    constellation_list_for_actor,
)
from coordination.apitypes import DB_INT_MAX
from coordination.errors import ApplicationError, InvalidInput
from memory.longterm.access import archival_access_record_later
from memory.longterm.models import ArchivalSource, MessageRole
from memory.longterm.search import SearchFilters, memory_search, search_hit_payload
from memory.longterm.selectors import (
    SEARCH_DOMAINS,
    archival_entry_get_for_actor,
    archival_entry_list_for_actor,
    conversation_get_for_actor,
    conversation_list_for_actor,
    message_page_for_actor,
)
from memory.longterm.services import (
    archival_entry_create,
    archival_entry_delete,
    archival_entry_update,
)
from memory.search.embedder import embedding_status
from memory.search.engine import SEARCH_MODES

ARCHIVAL_PAGE = 50


def _int_or_none(value: str | None) -> int | None:
    """A query-string integer, or None when absent, not a number or past
    what the database stores."""
    try:
        number = int(value) if value else None
    except ValueError:
        return None
    if number is None or abs(number) > DB_INT_MAX:
        return None
    return number


def _tags(value: str) -> list[str]:
    return [t for t in (part.strip() for part in value.split(",")) if t]


def _archival_form(request: HttpRequest) -> dict[str, Any]:
    """The fields of the archival create/edit forms, as service arguments."""
    raw = request.POST.get("importance") or "0.5"
    try:
        importance = float(raw)
    except ValueError:
        raise InvalidInput(
            f"importance must be a number in [0, 1], not {raw!r}"
        ) from None
    return {
        "content": request.POST.get("content", ""),
        "tags": _tags(request.POST.get("tags", "")),
        "importance": importance,
        "label": request.POST.get("label") or None,
    }


@login_required
def search_page(request: HttpRequest) -> HttpResponse:
    actor = Actor.for_user(request.user)
    constellations = list(constellation_list_for_actor(actor=actor))
    params = request.GET
    constellation_id = _int_or_none(params.get("constellation")) or (
        constellations[0].pk if constellations else None
    )
    context: dict[str, Any] = {
        "constellations": constellations,
        "constellation_id": constellation_id,
        "agents": agent_list_for_actor(actor=actor, constellation_id=constellation_id),
        "domains": SEARCH_DOMAINS,
        "modes": SEARCH_MODES,
        "roles": MessageRole.values,
        "params": params,
        "embedding": embedding_status(),
        "results": None,
    }
    query = params.get("q", "")
    if "q" in params:
        try:
            result = memory_search(
                actor=actor,
                query=query,
                domain=params.get("domain", "all"),
                mode=params.get("mode", "auto"),
                limit=_int_or_none(params.get("limit")) or 20,
                filters=SearchFilters(
                    agent_id=_int_or_none(params.get("agent")),
                    tags=tuple(_tags(params.get("tags", ""))),
                    role=params.get("role") or None,
                ),
                constellation_id=constellation_id,
            )
        except ApplicationError as exc:
            context["error"] = exc.message
        else:
            archival_access_record_later(entry_ids=result.archival_ids)
            context["result"] = result
            context["results"] = [
                search_hit_payload(kind, hit) for kind, hit in result.hits
            ]
    return render(request, "memory/search.html", context)


@login_required
def archival_browser_page(request: HttpRequest, agent_id: int) -> HttpResponse:
    actor = Actor.for_user(request.user)
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    if request.method == "POST":
        try:
            archival_entry_create(
                agent=agent, source=ArchivalSource.USER, **_archival_form(request)
            )
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, "Archival entry stored.")
        return redirect("memory:archival", agent_id=agent.pk)
    offset = max(0, _int_or_none(request.GET.get("offset")) or 0)
    entries = archival_entry_list_for_actor(actor=actor, agent_id=agent.pk)
    page = list(entries[offset : offset + ARCHIVAL_PAGE + 1])
    return render(
        request,
        "memory/archival.html",
        {
            "agent": agent,
            "constellation": agent.constellation,
            "entries": page[:ARCHIVAL_PAGE],
            "next_offset": offset + ARCHIVAL_PAGE
            if len(page) > ARCHIVAL_PAGE
            else None,
            "prev_offset": max(0, offset - ARCHIVAL_PAGE) if offset else None,
            "embedding": embedding_status(),
        },
    )


@login_required
def edit_archival_entry_page(request: HttpRequest, entry_id: int) -> HttpResponse:
    actor = Actor.for_user(request.user)
    entry = archival_entry_get_for_actor(actor=actor, entry_id=entry_id)
    if request.method == "POST":
        try:
            archival_entry_update(entry=entry, **_archival_form(request))
        except ApplicationError as exc:
            messages.error(request, exc.message)
            return redirect("memory:archival-edit", entry_id=entry.pk)
        messages.success(request, "Archival entry saved.")
        return redirect("memory:archival", agent_id=entry.agent_id)
    return render(
        request,
        "memory/archival_edit.html",
        {
            "entry": entry,
            "agent": entry.agent,
            "constellation": entry.agent.constellation,
        },
    )


@login_required
@require_POST
def delete_archival_entry_action(request: HttpRequest, entry_id: int) -> HttpResponse:
    actor = Actor.for_user(request.user)
    entry = archival_entry_get_for_actor(actor=actor, entry_id=entry_id)
    agent_id = entry.agent_id
    archival_entry_delete(entry=entry)
    messages.success(request, "Archival entry deleted.")
    return redirect("memory:archival", agent_id=agent_id)


@login_required
def conversation_list_page(request: HttpRequest, agent_id: int) -> HttpResponse:
    actor = Actor.for_user(request.user)
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    return render(
        request,
        "memory/conversations.html",
        {
            "agent": agent,
            "constellation": agent.constellation,
            "conversations": conversation_list_for_actor(
                actor=actor, agent_id=agent.pk
            )[:200],
        },
    )


@login_required
def conversation_detail_page(
    request: HttpRequest, conversation_id: int
) -> HttpResponse:
    actor = Actor.for_user(request.user)
    conversation = conversation_get_for_actor(
        actor=actor, conversation_id=conversation_id
    )
    _conv, page, next_after = message_page_for_actor(
        actor=actor,
        conversation_id=conversation.pk,
        after=_int_or_none(request.GET.get("after")) or 0,
        limit=100,
    )
    return render(
        request,
        "memory/conversation.html",
        {
            "conversation": conversation,
            "agent": conversation.agent,
            "constellation": conversation.agent.constellation,
            "messages_page": page,
            "next_after": next_after,
        },
    )
