"""Dashboard pages of long-term memory: search, archival entries, conversations."""

from datetime import UTC, date, datetime, time
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from memory.longterm.access import archival_access_record_later
from memory.longterm.models import (
    ArchivalLifetime,
    ArchivalSource,
    ArchivalTier,
    MessageRole,
)
from memory.longterm.permissions import (
    archival_entry_delete_check,
    archival_entry_restore_check,
)
from memory.longterm.search import SearchFilters, memory_search, search_hit_payload
from memory.longterm.selectors import (
    MAX_SEARCH_LIMIT,
    archival_entry_get_for_actor,
    archival_entry_list_for_actor,
    archival_merge_history,
    consolidation_runs_for_actor,
    conversation_get_for_actor,
    conversation_list_for_actor,
    longterm_unindexed_count,
    message_page_for_actor,
)
from memory.longterm.services import (
    archival_entry_create,
    archival_entry_delete,
    archival_entry_restore,
    archival_entry_update,
)
from memory.search.embedder import embedding_status
from memory.search.engine import SEARCH_MODES
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.selectors import (
    actor_names,
    agent_get_for_actor,
    agent_list_for_actor,
    constellation_list_for_actor,
)
from pattern_site.kernel.apitypes import DB_INT_MAX
from pattern_site.kernel.errors import ApplicationError, InvalidInput

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


SEARCH_PAGE = 10
SEARCH_KINDS = {
    "all": "Everything",
    "archival_memory": "Archival entries",
    "constellation_messages": "Messages",
    "blocks": "Memory blocks",
    "files": "Files",
    "activity": "Activity",
}


def _day(raw: str | None, name: str, *, end: bool) -> datetime | None:
    """A date input as the first (or, with ``end``, last) instant of that
    day in UTC."""
    if not raw:
        return None
    try:
        day = date.fromisoformat(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be a date (YYYY-MM-DD); got {raw!r}") from None
    moment = datetime.combine(day, time.max if end else time.min)
    return moment.replace(tzinfo=UTC)


def _moment(raw: str | None, name: str) -> datetime | None:
    """A datetime-local input (UTC, as the page labels it)."""
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidInput(
            f"{name} must be a date and time (YYYY-MM-DDTHH:MM); got {raw!r}"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _is_weak(hit: dict[str, Any]) -> bool:
    """A result found by meaning alone, and not close in meaning: the vector
    side always returns its nearest rows, related or not."""
    scores = hit["scores"]
    if scores["fts_rank"] is not None:
        return False
    distance = scores["vector_distance"]
    return distance is None or distance > settings.SEARCH_WEAK_DISTANCE


# The search page's decay choice: the constellation's setting, on or off.
_DECAY_CHOICES: dict[str, bool | None] = {"": None, "on": True, "off": False}


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
        "kinds": SEARCH_KINDS,
        "modes": SEARCH_MODES,
        "roles": MessageRole.values,
        "params": params,
        "embedding": embedding_status(),
        "unindexed": (
            longterm_unindexed_count(actor=actor, constellation_id=constellation_id)
            if constellation_id
            else 0
        ),
        "results": None,
        # Each hit's scores: for whoever tunes the ranking, not for reading.
        "explain": params.get("explain") == "1",
    }
    query = params.get("q", "")
    page = max(1, _int_or_none(params.get("page")) or 1)
    if "q" in params:
        try:
            result = memory_search(
                actor=actor,
                query=query,
                # Only blocks keep their past: a time asked for searches them.
                domain=params.get("kind")
                or params.get("domain")
                or ("blocks" if params.get("as_of") else "all"),
                mode=params.get("mode", "auto"),
                limit=min(page * SEARCH_PAGE + 1, MAX_SEARCH_LIMIT),
                filters=SearchFilters(
                    agent_id=_int_or_none(params.get("agent")),
                    tags=tuple(_tags(params.get("tags", ""))),
                    roles=(params["role"],) if params.get("role") else (),
                    since=_day(params.get("since"), "from", end=False),
                    until=_day(params.get("until"), "to", end=True),
                ),
                constellation_id=constellation_id,
                decay=_DECAY_CHOICES.get(params.get("decay", "")),
                as_of=_moment(params.get("as_of"), "blocks as they were at"),
            )
        except ApplicationError as exc:
            context["error"] = exc.message
        else:
            hits = [search_hit_payload(kind, hit) for kind, hit in result.hits]
            strong = [hit for hit in hits if not _is_weak(hit)]
            shown = strong[(page - 1) * SEARCH_PAGE : page * SEARCH_PAGE]
            more = len(strong) > page * SEARCH_PAGE and page * SEARCH_PAGE < (
                MAX_SEARCH_LIMIT
            )
            weak = [] if more else [hit for hit in hits if _is_weak(hit)]
            archival_access_record_later(
                entry_ids=[h["id"] for h in shown if h["kind"] == "archival"]
            )
            query_string = params.copy()
            query_string.pop("page", None)
            context.update(
                result=result,
                results=shown,
                weaker=weak,
                page=page,
                first_number=(page - 1) * SEARCH_PAGE + 1,
                last_number=(page - 1) * SEARCH_PAGE + len(shown),
                next_page=page + 1 if more else None,
                query_string=query_string.urlencode(),
            )
    return render(request, "memory/search.html", context)


@login_required
def archival_browser_page(request: HttpRequest, agent_id: int) -> HttpResponse:
    actor = Actor.for_user(request.user)
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    if request.method == "POST":
        try:
            archival_entry_create(
                agent=agent, source=ArchivalSource.PARTNER, **_archival_form(request)
            )
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, "Archival entry stored.")
        return redirect("memory:archival", agent_id=agent.pk)
    offset = max(0, _int_or_none(request.GET.get("offset")) or 0)
    filters = {
        name: request.GET.get(name, "") for name in ("source", "tier", "lifetime")
    }
    include_superseded = request.GET.get("superseded") == "1"
    try:
        entries = archival_entry_list_for_actor(
            actor=actor,
            agent_id=agent.pk,
            include_superseded=include_superseded,
            **filters,
        )
    except InvalidInput as exc:
        messages.error(request, exc.message)
        return redirect("memory:archival", agent_id=agent.pk)
    page = list(entries[offset : offset + ARCHIVAL_PAGE + 1])
    query = urlencode(
        {**filters, "superseded": "1" if include_superseded else ""}, doseq=False
    )
    return render(
        request,
        "memory/archival.html",
        {
            "agent": agent,
            "constellation": agent.constellation,
            "entries": page[:ARCHIVAL_PAGE],
            "filters": filters,
            "include_superseded": include_superseded,
            "filter_query": query,
            "filter_fields": [
                (name, choices.choices, filters[name])
                for name, choices in (
                    ("source", ArchivalSource),
                    ("tier", ArchivalTier),
                    ("lifetime", ArchivalLifetime),
                )
            ],
            "runs": consolidation_runs_for_actor(
                actor=actor,
                constellation_id=agent.constellation_id,
                agent_id=agent.pk,
                limit=5,
            ),
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
            "history": archival_merge_history(entry=entry),
        },
    )


@login_required
@require_POST
def delete_archival_entry_action(request: HttpRequest, entry_id: int) -> HttpResponse:
    actor = Actor.for_user(request.user)
    entry = archival_entry_get_for_actor(actor=actor, entry_id=entry_id)
    agent_id = entry.agent_id
    try:
        archival_entry_delete_check(actor=actor, entry=entry)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect("memory:archival", agent_id=agent_id)
    archival_entry_delete(entry=entry)
    messages.success(request, "Archival entry deleted for good.")
    return redirect("memory:archival", agent_id=agent_id)


@login_required
@require_POST
def restore_archival_entry_action(request: HttpRequest, entry_id: int) -> HttpResponse:
    actor = Actor.for_user(request.user)
    entry = archival_entry_get_for_actor(actor=actor, entry_id=entry_id)
    try:
        archival_entry_restore_check(actor=actor, entry=entry)
        archival_entry_restore(entry=entry)
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Archival entry restored.")
    return redirect("memory:archival-edit", entry_id=entry.pk)


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
            "names": actor_names(refs={m.author for m in page if m.author}),
        },
    )
