"""Dashboard pages of memory blocks (humans only).

The block page and the approvals inbox; the agent and constellation pages
show memory through ``memory_dashboard`` template tags.  Form posts call one
service each; a domain error comes back as a message on the page the form
was on.
"""

import json
from typing import Any
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from coordination.agents.selectors import (
    agent_get_for_actor,
    agent_list_for_actor,
)
from coordination.errors import InvalidInput
from coordination.web import form_action, page_actor
from memory.blocks import documents
from memory.blocks.models import BlockType, Permission, SharedAccess
from memory.blocks.permissions import block_access_for_actor
from memory.blocks.selectors import (
    approval_get_for_decision,
    approval_list_for_actor,
    block_attachment_list,
    block_diff,
    block_document_load,
    block_get_for_actor,
    block_history,
    block_history_count,
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


def _block_url(block_id: Any) -> str:
    return reverse("memory:block", args=[block_id])


@login_required
def block_detail_page(request: HttpRequest, block_id: UUID) -> HttpResponse:
    actor = page_actor(request)
    block = block_get_for_actor(actor=actor, block_id=block_id)
    doc = block_document_load(block=block)
    value = documents.document_value(doc, block.schema)
    history = block_history(block=block, limit=100)
    viewing = diff = None
    if request.GET.get("version"):
        viewing = block_version_view(
            block=block, version_id=_int(request.GET["version"], "version")
        )
    if request.GET.get("from"):
        to = request.GET.get("to")
        diff = block_diff(
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
            "block_access": block_access_for_actor(actor=actor, block=block),
            "constellation": block.constellation,
            "value": value,
            "value_json": json.dumps(value, indent=2, ensure_ascii=False),
            "fields": _fields(block.schema, value),
            "history": history,
            "history_total": block_history_count(block=block),
            "viewing": viewing,
            "diff": diff,
            "attachments": block_attachment_list(block=block),
            "share_agents": [a for a in agents if a.pk != block.owner_id],
            "approvals": approval_list_for_actor(
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
def approvals_inbox_page(request: HttpRequest) -> HttpResponse:
    approvals = approval_list_for_actor(actor=page_actor(request))
    return render(
        request,
        "memory/approvals.html",
        {
            "pending": [a for a in approvals if a.status == "pending"],
            "decided": [a for a in approvals if a.status != "pending"][:50],
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
    """Set the content: text as typed, structured blocks as JSON."""
    actor = page_actor(request)
    block = block_get_for_actor(actor=actor, block_id=block_id)
    raw = request.POST.get("content", "")
    if block.schema.get("kind") == "text":
        value: Any = raw.replace("\r\n", "\n")
    else:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"the content is not valid JSON: {exc}") from None
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
    version = _int(request.POST.get("version", ""), "version")
    block_rollback(actor=actor, block=block, version_id=version)
    messages.success(request, f"Rolled back to version {version}.")
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
    approval = approval_decide(actor=actor, approval=approval, approve=approve)
    if approval.status == "failed":
        messages.error(request, f"Could not apply: {approval.result}")
    else:
        messages.success(request, f"Request {approval.status}.")
