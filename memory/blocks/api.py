"""Memory block endpoints of the tool API: block resources, approvals and
export/import (the agent tools are declared in ``memory.blocks.tools``).

Thin: parse, ask a selector, call a service, shape the answer.
"""

from typing import Annotated, Any, Literal
from uuid import UUID

from django.http import HttpRequest
from ninja import Body, Query, Router, Status

from memory.blocks import tools
from memory.blocks.blame import block_blame
from memory.blocks.models import BlockApproval, MemoryBlock
from memory.blocks.permissions import block_create_check, memory_transfer_check
from memory.blocks.schemas import (
    ApprovalOut,
    BlameOut,
    BlockAttachmentOut,
    BlockCreateIn,
    BlockOut,
    BlockPatchIn,
    BlockSummaryOut,
    ChangeOut,
    ChangesIn,
    ChangesOut,
    DecisionIn,
    DiffOut,
    ImportOut,
    LabelPath,
    LabelText,
    OperationsIn,
    RollbackIn,
    ShareIn,
    VersionOut,
    VersionViewOut,
)
from memory.blocks.selectors import (
    approval_get_for_decision,
    approval_list_for_actor,
    block_attachment_list,
    block_diff,
    block_facts_for_actor,
    block_get_by_label_for_actor,
    block_get_for_actor,
    block_history_containing,
    block_history_numbered,
    block_list_for_actor,
    block_version_by_number,
    block_version_get,
    block_version_view,
)
from memory.blocks.services import (
    approval_decide,
    block_configure,
    block_create,
    block_delete,
    block_operate,
    block_rollback,
    block_share,
    block_unshare,
)
from memory.blocks.transfer import blocks_export, blocks_import
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.selectors import (
    agent_get_for_actor,
    agent_get_private,
    constellation_get_for_actor,
)
from pattern_site.kernel.apitypes import ITEMS_MAX, LINE_MAX, Id, error_responses
from pattern_site.kernel.auth import request_actor

router = Router()


IMPORT_EXAMPLE = {
    "blocks": [
        {
            "label": "garden",
            "content": "Tomatoes go in after the last frost in May.",
            "memory_type": "working",
            "pinned": False,
            "permission": "read_write",
        }
    ]
}


def _block(request: HttpRequest, block_id: UUID) -> tuple[Actor, MemoryBlock]:
    actor = request_actor(request)
    return actor, block_get_for_actor(actor=actor, block_id=block_id)


def _approval_out(approval: BlockApproval) -> dict[str, Any]:
    return {
        "id": approval.pk,
        "block_id": approval.block_id,
        "label": approval.block.label,
        "agent_id": approval.agent_id,
        "agent": approval.agent.name,
        "operations": approval.operations,
        "summary": approval.summary,
        "status": approval.status,
        "decided_by": approval.decided_by,
        "decided_at": approval.decided_at,
        "result": approval.result,
        "created_at": approval.created_at,
    }


@router.get(
    "/blocks",
    response={200: list[BlockSummaryOut], **error_responses(404, body=False)},
    tags=["blocks"],
    summary="List memory blocks",
)
def list_blocks(request: HttpRequest, agent_id: Id | None = None) -> list[Any]:
    """An agent gets its own, shared and constellation-level blocks, with its
    access to each; a human gets the blocks of their constellations (or of
    one agent's memory with ``agent_id``)."""
    actor = request_actor(request)
    if agent_id is not None:
        agent_get_for_actor(actor=actor, agent_id=agent_id)
    blocks = block_list_for_actor(actor=actor, agent_id=agent_id)
    return [block_facts_for_actor(actor=actor, block=b) for b in blocks]


@router.post(
    "/blocks",
    response={201: BlockOut, **error_responses(403, 404, 409, body=True)},
    tags=["blocks"],
    summary="Create a block",
    by_alias=True,
)
def create_block(request: HttpRequest, payload: BlockCreateIn) -> Status[Any]:
    actor = request_actor(request)
    owner, constellation = None, None
    if payload.constellation_id is not None:
        block_create_check(actor=actor, owner=None)
        constellation = constellation_get_for_actor(
            actor=actor, constellation_id=payload.constellation_id
        )
    else:
        owner = agent_get_private(actor=actor, agent_id=payload.agent_id)
    block = block_create(
        actor=actor,
        owner=owner,
        constellation=constellation,
        label=payload.label,
        template=payload.template,
        schema=payload.schema_,
        description=payload.description,
        block_type=payload.block_type,
        permission=payload.permission,
        char_limit=payload.char_limit,
        pinned=payload.pinned,
        content=payload.content,
    )
    return Status(201, tools.block_detail(actor=actor, block=block))


# Before /blocks/{block_id}, which would take "changes" for an id.
@router.get(
    "/blocks/changes",
    response={200: ChangesOut, **error_responses(403, body=False)},
    tags=["blocks"],
    summary="Changes since you looked",
)
def list_block_changes(
    request: HttpRequest,
    peek: bool = False,
    labels: Annotated[list[LabelText], Query(max_length=ITEMS_MAX)] = [],  # noqa: B006 (ninja reads it)
) -> dict[str, Any]:
    """What others changed in the blocks you can read since you last looked;
    your look then moves to now (``peek=true``: it stays)."""
    return tools.block_changes_tool(
        actor=request_actor(request), args=ChangesIn(peek=peek, labels=labels or None)
    )


def _block_configure(
    actor: Actor, block: MemoryBlock, payload: BlockPatchIn
) -> dict[str, Any]:
    fields = payload.dict(exclude_unset=True)
    if "schema_" in fields:
        fields["schema"] = fields.pop("schema_")
    block_configure(actor=actor, block=block, **fields)
    return tools.block_detail(actor=actor, block=block)


@router.get(
    "/blocks/{block_id}",
    response={200: BlockOut, **error_responses(404, body=False)},
    tags=["blocks"],
    summary="Get a block",
    by_alias=True,
)
def get_block(request: HttpRequest, block_id: UUID) -> dict[str, Any]:
    actor, block = _block(request, block_id)
    return tools.block_detail(actor=actor, block=block)


@router.patch(
    "/blocks/{block_id}",
    response={200: BlockOut, **error_responses(403, 404, 409, body=True)},
    tags=["blocks"],
    summary="Configure a block",
    by_alias=True,
)
def configure_block(
    request: HttpRequest, block_id: UUID, payload: BlockPatchIn
) -> dict[str, Any]:
    """Change description, schema, permission, pinned, type or limit."""
    actor, block = _block(request, block_id)
    return _block_configure(actor, block, payload)


@router.delete(
    "/blocks/{block_id}",
    response={204: None, **error_responses(403, 404, body=False)},
    tags=["blocks"],
    summary="Delete a block",
)
def delete_block(request: HttpRequest, block_id: UUID) -> Status[None]:
    actor, block = _block(request, block_id)
    block_delete(actor=actor, block=block)
    return Status(204, None)


BY_LABEL = """The block `label` names in an agent's memory, resolved as the
agent tools resolve it: the agent's own block, else one shared with it, else
the constellation's.  Agents leave out `agent_id` (their own memory); humans
give it."""


def _block_by_label(
    request: HttpRequest, label: LabelPath, agent_id: int | None
) -> tuple[Actor, MemoryBlock]:
    actor = request_actor(request)
    block = block_get_by_label_for_actor(actor=actor, label=label, agent_id=agent_id)
    return actor, block


@router.get(
    "/blocks/by-label/{label}",
    response={200: BlockOut, **error_responses(404, body=False)},
    tags=["blocks"],
    summary="Get a block by label",
    description=BY_LABEL,
    by_alias=True,
)
def get_block_by_label(
    request: HttpRequest, label: LabelPath, agent_id: Id | None = None
) -> dict[str, Any]:
    actor, block = _block_by_label(request, label, agent_id)
    return tools.block_detail(actor=actor, block=block)


@router.patch(
    "/blocks/by-label/{label}",
    response={200: BlockOut, **error_responses(403, 404, 409, body=True)},
    tags=["blocks"],
    summary="Configure a block by label",
    description=BY_LABEL,
    by_alias=True,
)
def configure_block_by_label(
    request: HttpRequest,
    label: LabelPath,
    payload: BlockPatchIn,
    agent_id: Id | None = None,
) -> dict[str, Any]:
    actor, block = _block_by_label(request, label, agent_id)
    return _block_configure(actor, block, payload)


@router.delete(
    "/blocks/by-label/{label}",
    response={204: None, **error_responses(403, 404, body=False)},
    tags=["blocks"],
    summary="Delete a block by label",
    description=BY_LABEL,
)
def delete_block_by_label(
    request: HttpRequest, label: LabelPath, agent_id: Id | None = None
) -> Status[None]:
    actor, block = _block_by_label(request, label, agent_id)
    block_delete(actor=actor, block=block)
    return Status(204, None)


@router.post(
    "/blocks/{block_id}/operations",
    response={200: ChangeOut, **error_responses(403, 404, 409, body=True)},
    tags=["blocks"],
    summary="Apply structured operations",
)
def operate_block(
    request: HttpRequest, block_id: UUID, payload: OperationsIn
) -> dict[str, Any]:
    """Apply schema operations to a block."""
    actor, block = _block(request, block_id)
    change = block_operate(
        actor=actor,
        block=block,
        operations=payload.operation_dicts(),
        summary=payload.summary,
    )
    answer = tools.block_change_payload(change)
    notices = payload.deprecation_notices()
    if notices:
        answer["message"] += " (" + "; ".join(notices) + ")"
    return answer


@router.get(
    "/blocks/{block_id}/history",
    response={200: list[VersionOut], **error_responses(404, body=False)},
    tags=["blocks"],
    summary="List a block's versions",
)
def list_block_history(
    request: HttpRequest,
    block_id: UUID,
    limit: int = 50,
    before: Id | None = None,
    contains: Annotated[str | None, Query(max_length=LINE_MAX)] = None,
) -> list[Any]:
    """Versions, newest first, each with its ``number`` in the block's
    history (1 = its first) and its ``id``; page with ``before`` (the last
    id you got).  With ``contains``: the versions (oldest first, every one)
    in which that text appeared in the block or disappeared from it, with
    ``contains`` ("appeared" or "disappeared")."""
    _, block = _block(request, block_id)
    if contains is not None:
        return [
            {
                **p.row._asdict(),
                "number": p.number,
                "contains": "appeared" if p.appeared else "disappeared",
            }
            for p in block_history_containing(block=block, contains=contains)
        ]
    return [
        {
            **numbered.row._asdict(),
            "number": numbered.number,
            "folded": numbered.row.id < block.history_from,
        }
        for numbered in block_history_numbered(
            block=block, limit=max(1, min(limit, 500)), before_id=before
        )
    ]


@router.get(
    "/blocks/{block_id}/versions/{version_id}",
    response={200: VersionViewOut, **error_responses(404, body=False)},
    tags=["blocks"],
    summary="Get a block version",
)
def get_block_version(request: HttpRequest, block_id: UUID, version_id: Id) -> Any:
    _, block = _block(request, block_id)
    view = block_version_view(block=block, version_id=version_id)
    return {"version": view.version, "rendered": view.rendered, "content": view.value}


@router.get(
    "/blocks/{block_id}/diff",
    response={200: DiffOut, **error_responses(404, body=False)},
    tags=["blocks"],
    summary="Diff two versions",
)
def diff_block_versions(
    request: HttpRequest,
    block_id: UUID,
    from_version: Id,
    to_version: Id | None = None,
) -> dict[str, Any]:
    """From one version to another (or to the current content)."""
    _, block = _block(request, block_id)
    return block_diff(block=block, from_version=from_version, to_version=to_version)


@router.post(
    "/blocks/{block_id}/rollback",
    response={200: ChangeOut, **error_responses(403, 404, 409, body=True)},
    tags=["blocks"],
    summary="Roll back to a version",
)
def rollback_block(
    request: HttpRequest, block_id: UUID, payload: RollbackIn
) -> dict[str, Any]:
    actor, block = _block(request, block_id)
    version = (
        block_version_by_number(block=block, number=payload.version)
        if payload.version is not None
        else block_version_get(block=block, version_id=payload.version_id)
    )
    return tools.block_change_payload(
        block_rollback(actor=actor, block=block, version_id=version.pk)
    )


@router.get(
    "/blocks/{block_id}/shares",
    response={200: list[BlockAttachmentOut], **error_responses(404, body=False)},
    tags=["blocks"],
    summary="List who a block is shared with",
)
def list_shares(request: HttpRequest, block_id: UUID) -> list[dict[str, Any]]:
    _, block = _block(request, block_id)
    return [
        {
            "agent_id": a.agent_id,
            "agent": a.agent.name,
            "access": a.access,
            "attached_at": a.attached_at,
        }
        for a in block_attachment_list(block=block)
    ]


@router.post(
    "/blocks/{block_id}/shares",
    response={200: BlockAttachmentOut, **error_responses(403, 404, 409, body=True)},
    tags=["blocks"],
    summary="Share a block with an agent",
)
def share_block(request: HttpRequest, block_id: UUID, payload: ShareIn) -> Any:
    actor, block = _block(request, block_id)
    agent = agent_get_for_actor(actor=actor, agent_id=payload.agent_id)
    attachment = block_share(
        actor=actor, block=block, agent=agent, access=payload.access
    )
    return {
        "agent_id": agent.pk,
        "agent": agent.name,
        "access": attachment.access,
        "attached_at": attachment.attached_at,
    }


@router.delete(
    "/blocks/{block_id}/shares/{agent_id}",
    response={204: None, **error_responses(403, 404, body=False)},
    tags=["blocks"],
    summary="Stop sharing a block",
)
def unshare_block(request: HttpRequest, block_id: UUID, agent_id: Id) -> Status[None]:
    actor, block = _block(request, block_id)
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    block_unshare(actor=actor, block=block, agent=agent)
    return Status(204, None)


@router.get(
    "/approvals",
    response={200: list[ApprovalOut], **error_responses(404, body=False)},
    tags=["approvals"],
    summary="List approval requests",
)
def list_approvals(
    request: HttpRequest,
    status: Literal["pending", "approved", "rejected"] | None = None,
    block_id: UUID | None = None,
) -> list[dict[str, Any]]:
    actor = request_actor(request)
    block = None
    if block_id is not None:
        block = block_get_for_actor(actor=actor, block_id=block_id)
    approvals = approval_list_for_actor(actor=actor, block=block, status=status)
    return [_approval_out(a) for a in approvals]


@router.post(
    "/approvals/{approval_id}/decision",
    response={200: ApprovalOut, **error_responses(403, 404, 409, body=True)},
    tags=["approvals"],
    summary="Approve or reject a request",
)
def decide_approval(
    request: HttpRequest, approval_id: Id, payload: DecisionIn
) -> dict[str, Any]:
    actor = request_actor(request)
    approval = approval_get_for_decision(actor=actor, approval_id=approval_id)
    return _approval_out(
        approval_decide(actor=actor, approval=approval, approve=payload.approve)
    )


@router.get(
    "/agents/{agent_id}/memory/export",
    response={200: dict[str, Any], **error_responses(403, 404, body=False)},
    tags=["blocks"],
    summary="Export an agent's memory",
)
def export_memory(request: HttpRequest, agent_id: Id) -> dict[str, Any]:
    """JSON with a schema version; each block with its Loro snapshot (base64)."""
    actor = request_actor(request)
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    memory_transfer_check(actor=actor, agent=agent)
    return blocks_export(actor=actor, agent=agent)


@router.post(
    "/agents/{agent_id}/memory/import",
    response={201: ImportOut, **error_responses(403, 404, 409, body=True)},
    tags=["blocks"],
    summary="Import blocks into an agent's memory",
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"example": IMPORT_EXAMPLE}},
        }
    },
)
def import_memory(
    request: HttpRequest, agent_id: Id, payload: Body[dict[str, Any]]
) -> Status[Any]:
    """An export of this server (``GET .../memory/export``), or plain blocks
    in the flat format of earlier Pattern releases: ``blocks`` of
    ``content``, ``label``, ``memory_type``, ``pinned``, ``permission``."""
    actor = request_actor(request)
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    memory_transfer_check(actor=actor, agent=agent)
    created = blocks_import(actor=actor, agent=agent, data=payload)
    return Status(
        201,
        {"created": [block_facts_for_actor(actor=actor, block=b) for b in created]},
    )


@router.get(
    "/blocks/{block_id}/blame",
    response={200: BlameOut, **error_responses(404, 422, body=False)},
    tags=["blocks"],
    summary="Who wrote each span of a block's text",
)
def blame_block(request: HttpRequest, block_id: UUID) -> Any:
    """The current text split into spans, each with the version (who, when,
    why) that inserted it."""
    _, block = _block(request, block_id)
    return block_blame(block=block)
