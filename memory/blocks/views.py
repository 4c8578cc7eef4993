"""Dashboard pages of memory blocks (humans only).

The block page and the approvals inbox; the agent and constellation pages
show memory through ``memory_dashboard`` template tags.  Form posts call one
service each; a domain error comes back as a message on the page the form
was on.
"""

from typing import Any
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from memory.blocks import documents, forms
from memory.blocks.blame import blame_covers, block_blame
from memory.blocks.looks import block_look_record, block_since_look
from memory.blocks.models import BlockType, Permission, SharedAccess
from memory.blocks.permissions import approval_can_decide, block_access_for_actor
from memory.blocks.selectors import (
    approval_get_for_decision,
    approval_list_for_actor,
    approval_preview,
    block_attachment_list,
    block_compare,
    block_document_load,
    block_get_for_actor,
    block_history_count,
    block_history_numbered,
    block_version_by_number,
    block_version_view,
)
from memory.blocks.services import (
    approval_decide,
    block_configure,
    block_create,
    block_delete,
    block_rollback,
    block_set_content,
    block_share,
    block_unshare,
)
from pattern_site.kernel.agents.selectors import (
    agent_get_for_actor,
    agent_list_for_actor,
)
from pattern_site.kernel.errors import ApplicationError, HistoryFolded, InvalidInput
from pattern_site.kernel.web import form_action, form_retry, page_actor


def _block_url(block_id: Any) -> str:
    return reverse("memory:block", args=[block_id])


@login_required
def block_detail_page(request: HttpRequest, block_id: UUID) -> HttpResponse:
    actor = page_actor(request)
    block = block_get_for_actor(actor=actor, block_id=block_id)
    doc = block_document_load(block=block)
    value = documents.document_value(doc, block.schema)
    retry = form_retry(request)
    older = request.GET.get("older")
    history = block_history_numbered(
        block=block,
        limit=HISTORY_PAGE,
        before=_int(older, "older") if older else None,
    )
    viewing = _version_context(block, request.GET.get("version"))
    comparison = _comparison(block, request.GET.get("from"), request.GET.get("to"))
    agents = agent_list_for_actor(actor=actor, constellation_id=block.constellation_id)
    since_look = block_since_look(user=request.user, block=block)
    block_look_record(user=request.user, block=block)
    return render(
        request,
        "memory/block.html",
        {
            "since_look": since_look,
            # Not "block": inside {% block %} that name is the template block.
            "memory_block": block,
            "block_access": block_access_for_actor(actor=actor, block=block),
            "constellation": block.constellation,
            "value": value,
            "widget": forms.form_widgets(
                block.schema, value, posted=_retried(retry, "fields")
            ),
            "retry": retry,
            "history": history,
            "history_total": block_history_count(block=block),
            "history_older": (
                history[-1].number if history and history[-1].number > 1 else None
            ),
            "latest": next(iter(block_history_numbered(block=block, limit=1)), None),
            "viewing": viewing,
            "viewing_elsewhere": viewing is not None
            and all(v.number != viewing["number"] for v in history),
            "comparison": comparison,
            "attachments": block_attachment_list(block=block),
            "share_agents": [a for a in agents if a.pk != block.owner_id],
            "approvals": _with_previews(
                actor,
                approval_list_for_actor(actor=actor, block=block, status="pending"),
            ),
            "permissions": Permission.choices,
            "block_types": BlockType.choices,
            "shared_access": SharedAccess.choices,
            "is_text": block.schema.get("kind") == "text",
            "has_blame": blame_covers(block.schema),
            "blame": _blame_context(block, doc) if request.GET.get("blame") else None,
        },
    )


HISTORY_PAGE = 30


def _version_context(block: Any, raw: str | None) -> dict[str, Any] | None:
    """Version ``raw`` (a number) of the block, what it changed from the one
    before, for memory/_version.html; None without a number."""
    if not raw:
        return None
    number = _int(raw, "version")
    version = block_version_by_number(block=block, number=number)
    try:
        view = block_version_view(block=block, version_id=version.pk)
    except HistoryFolded as exc:
        # Listed, but its content is gone: the page says so in its place.
        return {"number": number, "version": version, "folded": exc.message}
    return {
        "number": number,
        "version": version,
        "view": view,
        "changes": (
            _comparison(block, str(number - 1), str(number)) if number > 1 else None
        ),
    }


def _comparison(block: Any, old: str | None, new: str | None) -> Any:
    """The comparison for memory/_comparison.html; ``{"folded": why}`` when
    either version's content was folded by history retention."""
    if not old:
        return None
    try:
        return block_compare(
            block=block,
            old_number=_int(old, "from"),
            new_number=_int(new, "to") if new else None,
        )
    except HistoryFolded as exc:
        return {"folded": exc.message}


@login_required
def block_version_fragment(
    request: HttpRequest, block_id: UUID, number: int
) -> HttpResponse:
    """One version of a block as a page fragment (the history opens it in
    place)."""
    block = block_get_for_actor(actor=page_actor(request), block_id=block_id)
    return render(
        request,
        "memory/_version.html",
        {
            "memory_block": block,
            "viewing": _version_context(block, str(number)),
        },
    )


# Author colours of the blame view (app.css ``.blame-c<n>``): one per
# author, in the order they first appear, reused past this many authors.
BLAME_COLOURS = 8


def _blame_context(block: Any, doc: Any = None) -> dict[str, Any]:
    """The blame of ``block`` for memory/_blame.html: each span with its
    version and its author's colour, and the authors as a legend."""
    blame = block_blame(block=block, doc=doc)
    versions = {v.number: v for v in blame.versions}
    colours: dict[tuple[str, str], int] = {}
    legend = []
    for version in blame.versions:
        author = (version.actor_kind, version.actor_id)
        if author not in colours:
            colours[author] = len(colours) % BLAME_COLOURS
            legend.append({"version": version, "colour": colours[author]})
    parts = [
        {
            "name": part.name,
            "kind": part.kind,
            "spans": [
                {
                    "text": span.text,
                    "folded_before": span.folded_before,
                    "version": versions.get(span.version),
                    "colour": colours[
                        (
                            versions[span.version].actor_kind,
                            versions[span.version].actor_id,
                        )
                    ]
                    if span.version
                    else None,
                }
                for span in part.spans
            ],
        }
        for part in blame.parts
    ]
    folded = [
        span.folded_before
        for part in blame.parts
        for span in part.spans
        if span.folded_before is not None
    ]
    return {
        "parts": parts,
        "legend": legend,
        "folded_before": min(folded, default=None),
    }


@login_required
def block_blame_fragment(request: HttpRequest, block_id: UUID) -> HttpResponse:
    """Who wrote each stretch of the block's text, as a page fragment."""
    block = block_get_for_actor(actor=page_actor(request), block_id=block_id)
    return render(
        request,
        "memory/_blame.html",
        {"memory_block": block, "blame": _blame_context(block)},
    )


@login_required
def block_compare_fragment(request: HttpRequest, block_id: UUID) -> HttpResponse:
    """The differences between two versions as a page fragment."""
    block = block_get_for_actor(actor=page_actor(request), block_id=block_id)
    return render(
        request,
        "memory/_comparison.html",
        {
            "memory_block": block,
            "comparison": _comparison(
                block, request.GET.get("from") or "0", request.GET.get("to")
            ),
        },
    )


def _retried(retry: dict[str, Any] | None, form: str) -> dict[str, list[str]] | None:
    """The input of ``form``'s failed post, if that is what came back."""
    return retry["data"] if retry and retry["form"] == form else None


def _int(raw: str, name: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise InvalidInput(
            f"{name} must be a whole number; got {raw!r}", extra={"field": name}
        ) from None


def _with_previews(actor: Any, approvals: Any) -> list[Any]:
    """Pending requests with what they would change and whether ``actor``
    may decide them (``preview``, ``can_decide`` attributes)."""
    pending = list(approvals)
    for approval in pending:
        try:
            approval.preview = approval_preview(approval=approval)
            approval.preview_error = ""
        except ApplicationError as exc:
            approval.preview, approval.preview_error = [], exc.message
        approval.can_decide = approval_can_decide(actor=actor, approval=approval)
    return pending


@login_required
def approvals_inbox_page(request: HttpRequest) -> HttpResponse:
    actor = page_actor(request)
    approvals = approval_list_for_actor(actor=actor)
    return render(
        request,
        "memory/approvals.html",
        {
            "pending": _with_previews(actor, approvals.filter(status="pending")),
            "decided": approvals.exclude(status="pending")[:50],
        },
    )


@form_action
def create_block_action(request: HttpRequest, agent_id: int) -> HttpResponse:
    actor = page_actor(request)
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    post = request.POST
    block = block_create(
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
def edit_block_action(request: HttpRequest, block_id: UUID) -> HttpResponse:
    """Set the content: text as typed, structured blocks from their form
    (``memory.blocks.forms``)."""
    actor = page_actor(request)
    block = block_get_for_actor(actor=actor, block_id=block_id)
    if block.schema.get("kind") == "text":
        value: Any = request.POST.get("content", "").replace("\r\n", "\n")
    else:
        if block.schema.get("kind") == "log":
            raise InvalidInput(
                f"block {block.label!r} is a log: its entries are appended by the "
                "system, not edited"
            )
        value = forms.form_value(block.schema, request.POST)
        if value is None:
            messages.info(request, "Nothing changed.")
            return redirect(_block_url(block.pk))
    block_set_content(
        actor=actor,
        block=block,
        value=value,
        summary=request.POST.get("summary") or "edited in the dashboard",
    )
    messages.success(request, "Saved.")
    return redirect(_block_url(block.pk))


@form_action
def configure_block_action(request: HttpRequest, block_id: UUID) -> HttpResponse:
    actor = page_actor(request)
    block = block_get_for_actor(actor=actor, block_id=block_id)
    post = request.POST
    limit = post.get("char_limit")
    block_configure(
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
def rollback_block_action(request: HttpRequest, block_id: UUID) -> HttpResponse:
    actor = page_actor(request)
    block = block_get_for_actor(actor=actor, block_id=block_id)
    number = _int(request.POST.get("version", ""), "version")
    version = block_version_by_number(block=block, number=number)
    block_rollback(actor=actor, block=block, version_id=version.pk)
    messages.success(request, f"Rolled back to version {number}.")
    return redirect(_block_url(block.pk))


@form_action
def share_block_action(request: HttpRequest, block_id: UUID) -> HttpResponse:
    actor = page_actor(request)
    block = block_get_for_actor(actor=actor, block_id=block_id)
    agent = agent_get_for_actor(
        actor=actor, agent_id=_int(request.POST.get("agent_id", ""), "agent")
    )
    if request.POST.get("remove"):
        block_unshare(actor=actor, block=block, agent=agent)
        messages.success(request, f"No longer shared with {agent.name}.")
    else:
        block_share(
            actor=actor, block=block, agent=agent, access=request.POST.get("access", "")
        )
        messages.success(request, f"Shared with {agent.name}.")
    return redirect(_block_url(block.pk))


@form_action
def delete_block_action(request: HttpRequest, block_id: UUID) -> HttpResponse:
    actor = page_actor(request)
    block = block_get_for_actor(actor=actor, block_id=block_id)
    owner_id = block.owner_id
    block_delete(actor=actor, block=block)
    messages.success(request, f"Deleted block {block.label!r}.")
    if owner_id:
        return redirect("dashboard:agent", agent_id=owner_id)
    return redirect("dashboard:home")


@form_action
def decide_approval_action(request: HttpRequest, approval_id: int) -> None:
    actor = page_actor(request)
    approval = approval_get_for_decision(actor=actor, approval_id=approval_id)
    approve = request.POST.get("decision") == "approve"
    approval = approval_decide(
        actor=actor,
        approval=approval,
        approve=approve,
        reason=request.POST.get("reason", ""),
    )
    if approval.status == "failed":
        messages.error(request, f"Could not apply: {approval.result}")
    else:
        messages.success(request, f"Request {approval.status}.")
