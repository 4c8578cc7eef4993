"""Dashboard pages of memory blocks (humans only).

The block page, the approvals inbox and "what this agent sees"; the agent
and constellation pages show memory through ``memory_dashboard`` template
tags.  Form posts call one service each; a domain error comes back as a
message on the page the form was on.

Dashboard pages of the memory app.
"""

import json
from collections.abc import Callable
from functools import wraps
from typing import Any
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from coordination.actors import Actor
from coordination.errors import ApplicationError, InvalidInput
from coordination.selectors import (
    agent_get_for_actor,
    agent_list_for_actor,
    constellation_list_for_actor,
)
from memory import context, documents, selectors, services
from memory.embeddings import embedding_status
from memory.models import (
    ArchivalSource,
    BlockType,
    MessageRole,
    Permission,
    SharedAccess,
)
from memory.retrieval import SEARCH_MODES
from memory.selectors import (
    SEARCH_DOMAINS,
    SearchFilters,
    archival_entry_get_for_actor,
    archival_entry_list_for_actor,
    conversation_get_for_actor,
    conversation_list_for_actor,
    memory_search,
    message_page_for_actor,
    search_hit_payload,
)
from memory.services import (
    archival_access_record_later,
    archival_entry_create,
    archival_entry_delete,
    archival_entry_update,
)

View = Callable[..., HttpResponse]


def _actor(request: HttpRequest) -> Actor:
    return Actor.for_user(request.user)


def form_action(view: View) -> View:
    """A POST-only form handler: errors become a message, then go back."""

    @login_required
    @require_POST
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        back = request.POST.get("next") or request.headers.get("Referer") or "/"
        try:
            result = view(request, *args, **kwargs)
        except ApplicationError as exc:
            messages.error(request, exc.message)
            return redirect(back if back.startswith("/") else "/")
        return result or redirect(back if back.startswith("/") else "/")

    return wrapper


def _block_url(block_id: Any) -> str:
    return reverse("memory:block", args=[block_id])


# --- pages -------------------------------------------------------------------------


@login_required
def block_detail(request: HttpRequest, block_id: UUID) -> HttpResponse:
    actor = _actor(request)
    block = selectors.block_get_for_actor(actor=actor, block_id=block_id)
    doc = selectors.block_document_load(block=block)
    value = documents.document_value(doc, block.schema)
    history = selectors.block_history(block=block, limit=100)
    viewing = diff = None
    if request.GET.get("version"):
        viewing = selectors.block_version_view(
            block=block, version_id=_int(request.GET["version"], "version")
        )
    if request.GET.get("from"):
        to = request.GET.get("to")
        diff = selectors.block_diff(
            block=block,
            from_version=_int(request.GET["from"], "from"),
            to_version=_int(to, "to") if to else None,
        )
    agents = agent_list_for_actor(actor=actor, constellation_id=block.constellation_id)
    return render(
        request,
        "memory/block.html",
        {
            # Not "block": inside {% block %} that name is the template block.
            "memory_block": block,
            "block_access": selectors.block_access_for_actor(actor=actor, block=block),
            "constellation": block.constellation,
            "value": value,
            "value_json": json.dumps(value, indent=2, ensure_ascii=False),
            "fields": _fields(block.schema, value),
            "history": history,
            "history_total": selectors.block_history_count(block=block),
            "viewing": viewing,
            "diff": diff,
            "attachments": selectors.block_attachment_list(block=block),
            "share_agents": [a for a in agents if a.pk != block.owner_id],
            "approvals": selectors.approval_list_for_actor(
                actor=actor, block=block, status="pending"
            ),
            "permissions": Permission.choices,
            "block_types": BlockType.choices,
            "shared_access": SharedAccess.choices,
            "is_text": block.schema.get("kind") == "text",
        },
    )


def _fields(schema: dict[str, Any], value: Any) -> list[dict[str, Any]]:
    """Rows of the structured-fields table (map fields, composite sections)."""
    if schema["kind"] == "map":
        return [
            {
                "name": f["name"],
                "type": f["type"],
                "read_only": f["read_only"],
                "value": documents.render_scalar(value[f["name"]]),
            }
            for f in schema["fields"]
        ]
    if schema["kind"] == "composite":
        return [
            {
                "name": s["name"],
                "type": s["schema"]["kind"],
                "read_only": s["read_only"],
                "value": documents.render_value(s["schema"], value[s["name"]]),
            }
            for s in schema["sections"]
        ]
    return []


def _int(raw: str, name: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be a version number") from None


@login_required
def approvals_inbox(request: HttpRequest) -> HttpResponse:
    approvals = selectors.approval_list_for_actor(actor=_actor(request))
    return render(
        request,
        "memory/approvals.html",
        {
            "pending": [a for a in approvals if a.status == "pending"],
            "decided": [a for a in approvals if a.status != "pending"][:50],
        },
    )


@login_required
def agent_context(request: HttpRequest, agent_id: int) -> HttpResponse:
    """What this agent sees: its built system prompt with token counts."""
    agent = agent_get_for_actor(actor=_actor(request), agent_id=agent_id)
    batch = [b for b in request.GET.get("batch", "").split(",") if b.strip()]
    built = context.context_build(agent=agent, batch_block_ids=batch)
    return render(
        request,
        "memory/context.html",
        {
            "agent": agent,
            "constellation": agent.constellation,
            "built": built,
            "batch": ",".join(batch),
        },
    )


# --- form actions -------------------------------------------------------------------


@form_action
def block_create(request: HttpRequest, agent_id: int) -> HttpResponse:
    actor = _actor(request)
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    post = request.POST
    block = services.block_create(
        actor=actor,
        owner=None if post.get("constellation_level") else agent,
        constellation=agent.constellation,
        label=post.get("label", ""),
        template=post.get("template") or None,
        block_type=post.get("block_type") or None,
        permission=post.get("permission") or Permission.READ_WRITE,
        pinned=bool(post.get("pinned")),
        content=post.get("content") or None,
    )
    messages.success(request, f"Created block {block.label!r}.")
    return redirect(_block_url(block.pk))


@form_action
def block_edit(request: HttpRequest, block_id: UUID) -> HttpResponse:
    """Set the content: text as typed, structured blocks as JSON."""
    actor = _actor(request)
    block = selectors.block_get_for_actor(actor=actor, block_id=block_id)
    raw = request.POST.get("content", "")
    if block.schema.get("kind") == "text":
        value: Any = raw.replace("\r\n", "\n")
    else:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"the content is not valid JSON: {exc}") from None
    services.block_set_content(
        actor=actor,
        block=block,
        value=value,
        summary=request.POST.get("summary") or "edited in the dashboard",
    )
    messages.success(request, "Saved.")
    return redirect(_block_url(block.pk))


@form_action
def block_configure(request: HttpRequest, block_id: UUID) -> HttpResponse:
    actor = _actor(request)
    block = selectors.block_get_for_actor(actor=actor, block_id=block_id)
    post = request.POST
    limit = post.get("char_limit")
    services.block_configure(
        actor=actor,
        block=block,
        description=post.get("description"),
        permission=post.get("permission") or None,
        block_type=post.get("block_type") or None,
        pinned=bool(post.get("pinned")),
        char_limit=_int(limit, "char_limit") if limit else None,
    )
    messages.success(request, "Settings saved.")
    return redirect(_block_url(block.pk))


@form_action
def block_rollback(request: HttpRequest, block_id: UUID) -> HttpResponse:
    actor = _actor(request)
    block = selectors.block_get_for_actor(actor=actor, block_id=block_id)
    version = _int(request.POST.get("version", ""), "version")
    services.block_rollback(actor=actor, block=block, version_id=version)
    messages.success(request, f"Rolled back to version {version}.")
    return redirect(_block_url(block.pk))


@form_action
def block_share(request: HttpRequest, block_id: UUID) -> HttpResponse:
    actor = _actor(request)
    block = selectors.block_get_for_actor(actor=actor, block_id=block_id)
    agent = agent_get_for_actor(
        actor=actor, agent_id=_int(request.POST.get("agent_id", ""), "agent")
    )
    if request.POST.get("remove"):
        services.block_unshare(actor=actor, block=block, agent=agent)
        messages.success(request, f"No longer shared with {agent.name}.")
    else:
        services.block_share(
            actor=actor, block=block, agent=agent, access=request.POST.get("access", "")
        )
        messages.success(request, f"Shared with {agent.name}.")
    return redirect(_block_url(block.pk))


@form_action
def block_delete(request: HttpRequest, block_id: UUID) -> HttpResponse:
    actor = _actor(request)
    block = selectors.block_get_for_actor(actor=actor, block_id=block_id)
    owner_id = block.owner_id
    services.block_delete(actor=actor, block=block)
    messages.success(request, f"Deleted block {block.label!r}.")
    if owner_id:
        return redirect("dashboard:agent", agent_id=owner_id)
    return redirect("dashboard:home")


@form_action
def approval_decide(request: HttpRequest, approval_id: int) -> None:
    actor = _actor(request)
    approval = selectors.approval_get_for_decision(actor=actor, approval_id=approval_id)
    approve = request.POST.get("decision") == "approve"
    approval = services.approval_decide(actor=actor, approval=approval, approve=approve)
    if approval.status == "failed":
        messages.error(request, f"Could not apply: {approval.result}")
    else:
        messages.success(request, f"Request {approval.status}.")


ARCHIVAL_PAGE = 50


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


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
def archival_browser(request: HttpRequest, agent_id: int) -> HttpResponse:
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
def archival_edit(request: HttpRequest, entry_id: int) -> HttpResponse:
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
def archival_delete(request: HttpRequest, entry_id: int) -> HttpResponse:
    actor = Actor.for_user(request.user)
    entry = archival_entry_get_for_actor(actor=actor, entry_id=entry_id)
    agent_id = entry.agent_id
    archival_entry_delete(entry=entry)
    messages.success(request, "Archival entry deleted.")
    return redirect("memory:archival", agent_id=agent_id)


@login_required
def conversation_list(request: HttpRequest, agent_id: int) -> HttpResponse:
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
def conversation_detail(request: HttpRequest, conversation_id: int) -> HttpResponse:
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
