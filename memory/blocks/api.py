"""Memory endpoints of the tool API: the agent tools, block resources,
approvals, export/import and the context builder.

Thin: parse, ask a selector, call a service, shape the answer.

Memory endpoints of the tool API (blocks, long-term memory, search).
"""

from typing import Any
from uuid import UUID

from django.http import HttpRequest
from ninja import Body, Router, Status

from coordination.actors import Actor
from coordination.auth import request_actor
from coordination.errors import InvalidInput, PermissionDenied
from coordination.models import Agent
from coordination.selectors import agent_get_for_actor, constellation_get_for_actor
from memory import context, selectors, services
from memory.models import ArchivalSource, BlockApproval, BlockType, MemoryBlock
from memory.schemas import (
    ApprovalOut,
    ArchivalEntryIn,
    ArchivalEntryOut,
    ArchivalEntryPatchIn,
    ArchivalPageOut,
    AttachmentOut,
    BlockCreateIn,
    BlockOut,
    BlockPatchIn,
    BlockSummaryOut,
    ChangeOut,
    ContextBuildIn,
    ContextOut,
    ContextToolIn,
    ConversationIn,
    ConversationOut,
    ConversationStatusIn,
    CoreMemoryIn,
    DecisionIn,
    DiffOut,
    ImportOut,
    LettaInsertIn,
    LettaSearchHitOut,
    LettaSearchIn,
    MessageOut,
    MessagePageOut,
    MessagesAppendIn,
    OperationsIn,
    RecallIn,
    RecallOut,
    RetrievalConfigIn,
    RetrievalConfigOut,
    RollbackIn,
    SearchIn,
    SearchOut,
    ShareIn,
    VersionOut,
    VersionViewOut,
)
from memory.selectors import (
    RECALL_DOMAIN,
    SearchFilters,
    SearchResult,
    archival_entry_get_by_label,
    archival_entry_get_for_actor,
    archival_entry_list_for_actor,
    conversation_get_for_actor,
    conversation_list_for_actor,
    memory_agent_for_write,
    memory_search,
    message_page_for_actor,
    retrieval_config_for,
    search_hit_payload,
)
from memory.services import (
    archival_access_record_later,
    archival_entry_append,
    archival_entry_create,
    archival_entry_delete,
    archival_entry_update,
    conversation_set_status,
    conversation_start,
    messages_append,
    retrieval_config_update,
)

router = Router(tags=["memory"])

CONTEXT_TOOL = """Manage your Core and Working memory blocks (always or usually in
your context).
- append: add `content` to block `label` (a new line of text, or a new list
  item). Use it to build up what you know incrementally.
- replace: find the exact text `old` in block `label` and put `new` in its
  place. Fails, changing nothing, when `old` is not in the block.
- archive: move working block `label` to archival memory (frees context space).
- load: bring archival block `label` into working memory.
- swap: archive working block `label` and load `archival_label` in one step.
Blocks have a character limit; an error tells you the size, the limit and how
much your change adds. Blocks with Partner or Human permission queue your
change for a human's approval."""

CORE_MEMORY_UPDATE = """Update your core memory blocks (persona, human, etc.).
Use this to modify persistent information about yourself or the person you're
talking to. Changes are immediately reflected in your context."""

CORE_MEMORY_APPEND = """Add content to an existing core memory block without
replacing it. Useful for incrementally building up information."""


def _agent_of(actor: Actor, agent_id: int | None) -> Agent:
    if agent_id is not None:
        return agent_get_for_actor(actor=actor, agent_id=agent_id)
    if actor.agent is None:
        raise InvalidInput("give the 'agent_id' this is about")
    return actor.agent


def _tool_agent(request: HttpRequest) -> tuple[Actor, Agent]:
    actor = request_actor(request)
    if actor.agent is None:
        raise PermissionDenied("memory tools are called by agents, with their token")
    return actor, actor.agent


def _block(request: HttpRequest, block_id: UUID) -> tuple[Actor, MemoryBlock]:
    actor = request_actor(request)
    return actor, selectors.block_get_for_actor(actor=actor, block_id=block_id)


def _change_out(change: services.BlockChange) -> dict[str, Any]:
    block = change.block
    messages = {
        "applied": f"block {block.label!r} updated ({block.size}/"
        f"{block.char_limit} chars)",
        "unchanged": f"block {block.label!r} already had this content",
        "pending_approval": f"block {block.label!r} needs a human's approval; "
        f"your change waits as request {change.approval.pk if change.approval else ''}",
    }
    return {
        "status": change.status,
        "message": messages[change.status],
        "block_id": block.pk,
        "label": block.label,
        "size": block.size,
        "char_limit": block.char_limit,
        "version_id": change.update.pk if change.update else None,
        "approval_id": change.approval.pk if change.approval else None,
    }


def _moved_out(block: MemoryBlock, where: str) -> dict[str, Any]:
    return {
        "status": "moved",
        "message": f"block {block.label!r} is now in {where} memory",
        "block_id": block.pk,
        "label": block.label,
        "size": block.size,
        "char_limit": block.char_limit,
    }


def _block_out(actor: Actor, block: MemoryBlock) -> dict[str, Any]:
    return {
        **selectors.block_facts_for_actor(actor=actor, block=block),
        "schema": block.schema,
        "rendered": block.rendered,
        "content": selectors.block_value(block=block),
    }


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


# --- agent tools --------------------------------------------------------------------


@router.post(
    "/tools/context",
    response=ChangeOut,
    summary="context: append, replace, archive, load, swap",
    description=CONTEXT_TOOL,
    operation_id="context",
)
def context_tool(request: HttpRequest, payload: ContextToolIn) -> dict[str, Any]:
    actor, agent = _tool_agent(request)
    block = selectors.block_get_by_label_for_agent(agent=agent, label=payload.label)
    op = payload.operation
    if op == "append":
        change = services.tool_append(
            actor=actor,
            block=block,
            content=payload.content or "",
            section=payload.section,
        )
        return _change_out(change)
    if op == "replace":
        if payload.old is None or payload.new is None:
            raise InvalidInput("replace needs 'old' and 'new'")
        change = services.tool_replace(
            actor=actor,
            block=block,
            old=payload.old,
            new=payload.new,
            section=payload.section,
        )
        return _change_out(change)
    if op == "archive":
        moved = services.block_move(
            actor=actor, block=block, to_type=BlockType.ARCHIVAL
        )
        return _moved_out(moved, "archival")
    if op == "load":
        moved = services.block_move(actor=actor, block=block, to_type=BlockType.WORKING)
        return _moved_out(moved, "working")
    if not payload.archival_label:
        raise InvalidInput("swap needs 'archival_label'")
    archival = selectors.block_get_by_label_for_agent(
        agent=agent, label=payload.archival_label
    )
    _, loaded = services.block_swap(actor=actor, working=block, archival=archival)
    out = _moved_out(loaded, "working")
    out["message"] = (
        f"block {block.label!r} archived; block {loaded.label!r} loaded into "
        "working memory"
    )
    return out


@router.post(
    "/tools/core_memory_update",
    response=ChangeOut,
    summary="core_memory_update",
    description=CORE_MEMORY_UPDATE,
    operation_id="core_memory_update",
)
def core_memory_update(request: HttpRequest, payload: CoreMemoryIn) -> dict[str, Any]:
    actor, agent = _tool_agent(request)
    block = selectors.block_get_by_label_for_agent(agent=agent, label=payload.label)
    return _change_out(
        services.tool_update(actor=actor, block=block, content=payload.content)
    )


@router.post(
    "/tools/core_memory_append",
    response=ChangeOut,
    summary="core_memory_append",
    description=CORE_MEMORY_APPEND,
    operation_id="core_memory_append",
)
def core_memory_append(request: HttpRequest, payload: CoreMemoryIn) -> dict[str, Any]:
    actor, agent = _tool_agent(request)
    block = selectors.block_get_by_label_for_agent(agent=agent, label=payload.label)
    return _change_out(
        services.tool_append(actor=actor, block=block, content=payload.content)
    )


# --- blocks ------------------------------------------------------------------------


@router.get("/blocks", response=list[BlockSummaryOut], summary="List memory blocks")
def list_blocks(request: HttpRequest, agent_id: int | None = None) -> list[Any]:
    """An agent gets its own, shared and constellation-level blocks, with its
    access to each; a human gets the blocks of their constellations (or of
    one agent's memory with ``agent_id``)."""
    actor = request_actor(request)
    if agent_id is not None:
        agent_get_for_actor(actor=actor, agent_id=agent_id)
    blocks = selectors.block_list_for_actor(actor=actor, agent_id=agent_id)
    return [selectors.block_facts_for_actor(actor=actor, block=b) for b in blocks]


@router.post("/blocks", response={201: BlockOut}, by_alias=True, summary="Create")
def create_block(request: HttpRequest, payload: BlockCreateIn) -> Status[Any]:
    actor = request_actor(request)
    owner, constellation = None, None
    if payload.constellation_id is not None:
        if actor.kind == "agent":
            raise PermissionDenied("agents cannot create constellation-level blocks")
        constellation = constellation_get_for_actor(
            actor=actor, constellation_id=payload.constellation_id
        )
    else:
        owner = _agent_of(actor, payload.agent_id)
    block = services.block_create(
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
    return Status(201, _block_out(actor, block))


@router.get("/blocks/{block_id}", response=BlockOut, by_alias=True, summary="Get")
def get_block(request: HttpRequest, block_id: UUID) -> dict[str, Any]:
    actor, block = _block(request, block_id)
    return _block_out(actor, block)


@router.patch("/blocks/{block_id}", response=BlockOut, by_alias=True)
def configure_block(
    request: HttpRequest, block_id: UUID, payload: BlockPatchIn
) -> dict[str, Any]:
    """Change description, schema, permission, pinned, type or limit."""
    actor, block = _block(request, block_id)
    fields = payload.dict(exclude_unset=True)
    if "schema_" in fields:
        fields["schema"] = fields.pop("schema_")
    services.block_configure(actor=actor, block=block, **fields)
    return _block_out(actor, block)


@router.delete("/blocks/{block_id}", response={204: None})
def delete_block(request: HttpRequest, block_id: UUID) -> Status[None]:
    actor, block = _block(request, block_id)
    services.block_delete(actor=actor, block=block)
    return Status(204, None)


@router.post("/blocks/{block_id}/operations", response=ChangeOut)
def operate_block(
    request: HttpRequest, block_id: UUID, payload: OperationsIn
) -> dict[str, Any]:
    """Apply schema operations (seed 004) to a block."""
    actor, block = _block(request, block_id)
    change = services.block_operate(
        actor=actor, block=block, operations=payload.operations, summary=payload.summary
    )
    return _change_out(change)


@router.get("/blocks/{block_id}/history", response=list[VersionOut])
def block_history(
    request: HttpRequest, block_id: UUID, limit: int = 50, before: int | None = None
) -> list[Any]:
    """Versions, newest first; page with ``before`` (the last id you got)."""
    _, block = _block(request, block_id)
    return selectors.block_history(
        block=block, limit=max(1, min(limit, 500)), before=before
    )


@router.get("/blocks/{block_id}/versions/{version_id}", response=VersionViewOut)
def block_version(request: HttpRequest, block_id: UUID, version_id: int) -> Any:
    _, block = _block(request, block_id)
    view = selectors.block_version_view(block=block, version_id=version_id)
    return {"version": view.version, "rendered": view.rendered, "content": view.value}


@router.get("/blocks/{block_id}/diff", response=DiffOut)
def block_diff(
    request: HttpRequest,
    block_id: UUID,
    from_version: int,
    to_version: int | None = None,
) -> dict[str, Any]:
    """From one version to another (or to the current content)."""
    _, block = _block(request, block_id)
    return selectors.block_diff(
        block=block, from_version=from_version, to_version=to_version
    )


@router.post("/blocks/{block_id}/rollback", response=ChangeOut)
def rollback_block(
    request: HttpRequest, block_id: UUID, payload: RollbackIn
) -> dict[str, Any]:
    actor, block = _block(request, block_id)
    return _change_out(
        services.block_rollback(actor=actor, block=block, version_id=payload.version_id)
    )


@router.get("/blocks/{block_id}/shares", response=list[AttachmentOut])
def list_shares(request: HttpRequest, block_id: UUID) -> list[dict[str, Any]]:
    _, block = _block(request, block_id)
    return [
        {
            "agent_id": a.agent_id,
            "agent": a.agent.name,
            "access": a.access,
            "attached_at": a.attached_at,
        }
        for a in selectors.block_attachment_list(block=block)
    ]


@router.post("/blocks/{block_id}/shares", response=AttachmentOut)
def share_block(request: HttpRequest, block_id: UUID, payload: ShareIn) -> Any:
    actor, block = _block(request, block_id)
    agent = agent_get_for_actor(actor=actor, agent_id=payload.agent_id)
    attachment = services.block_share(
        actor=actor, block=block, agent=agent, access=payload.access
    )
    return {
        "agent_id": agent.pk,
        "agent": agent.name,
        "access": attachment.access,
        "attached_at": attachment.attached_at,
    }


@router.delete("/blocks/{block_id}/shares/{agent_id}", response={204: None})
def unshare_block(request: HttpRequest, block_id: UUID, agent_id: int) -> Status[None]:
    actor, block = _block(request, block_id)
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    services.block_unshare(actor=actor, block=block, agent=agent)
    return Status(204, None)


# --- approvals --------------------------------------------------------------------


@router.get("/approvals", response=list[ApprovalOut])
def list_approvals(
    request: HttpRequest, status: str | None = None, block_id: UUID | None = None
) -> list[dict[str, Any]]:
    actor = request_actor(request)
    block = None
    if block_id is not None:
        block = selectors.block_get_for_actor(actor=actor, block_id=block_id)
    approvals = selectors.approval_list_for_actor(
        actor=actor, block=block, status=status
    )
    return [_approval_out(a) for a in approvals]


@router.post("/approvals/{approval_id}/decision", response=ApprovalOut)
def decide_approval(
    request: HttpRequest, approval_id: int, payload: DecisionIn
) -> dict[str, Any]:
    actor = request_actor(request)
    approval = selectors.approval_get_for_decision(actor=actor, approval_id=approval_id)
    return _approval_out(
        services.approval_decide(
            actor=actor, approval=approval, approve=payload.approve
        )
    )


# --- export / import ----------------------------------------------------------------


@router.get("/agents/{agent_id}/memory/export", summary="Export an agent's memory")
def export_memory(request: HttpRequest, agent_id: int) -> dict[str, Any]:
    """JSON with a schema version; each block with its Loro snapshot (base64)."""
    actor = request_actor(request)
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    return services.blocks_export(actor=actor, agent=agent)


@router.post("/agents/{agent_id}/memory/import", response={201: ImportOut})
def import_memory(
    request: HttpRequest, agent_id: int, payload: Body[dict[str, Any]]
) -> Status[Any]:
    """An export of this server, or v1-style blocks (``content``, ``label``,
    ``memory_type``, ``pinned``, ``permission``)."""
    actor = request_actor(request)
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    if actor.agent is not None and actor.agent.pk != agent.pk:
        raise PermissionDenied("an agent may import into its own memory only")
    created = services.blocks_import(actor=actor, agent=agent, data=payload)
    return Status(
        201,
        {
            "created": [
                selectors.block_facts_for_actor(actor=actor, block=b) for b in created
            ]
        },
    )


# --- context builder -----------------------------------------------------------------


@router.post("/context/build", response=ContextOut, summary="Build a system prompt")
def build_context(request: HttpRequest, payload: ContextBuildIn) -> dict[str, Any]:
    """The agent's system prompt from its memory, with tokens per section."""
    actor = request_actor(request)
    agent = _agent_of(actor, payload.agent_id)
    built = context.context_build(
        agent=agent,
        batch_block_ids=payload.batch_block_ids,
        base_instructions=payload.base_instructions,
        tool_rules=[context.tool_rule_parse(r.dict()) for r in payload.tool_rules],
        model_name=payload.model,
        include_descriptions=payload.include_descriptions,
    )
    return built.as_dict()


# --- Long-term memory: archival entries, conversations, search ----------------


def _source(request: HttpRequest) -> str:
    kind = request_actor(request).kind
    return ArchivalSource.AGENT if kind == "agent" else ArchivalSource.USER


def _searched(request: HttpRequest, **kwargs: Any) -> SearchResult:
    """Run a search and count its archival hits as retrievals, off its path."""
    result = memory_search(actor=request_actor(request), **kwargs)
    archival_access_record_later(entry_ids=result.archival_ids)
    return result


def _search_out(result: SearchResult) -> dict[str, Any]:
    return {
        "query": result.query,
        "domain": result.domain,
        "mode_requested": result.mode_requested,
        "mode_used": result.mode_used,
        "degraded": result.degraded,
        "quantised": result.quantised,
        "results": [search_hit_payload(kind, hit) for kind, hit in result.hits],
        "timings_ms": result.timings_ms,
    }


@router.post("/archival", response={201: ArchivalEntryOut}, summary="Store a fact")
def create_archival_entry(request: HttpRequest, payload: ArchivalEntryIn) -> Any:
    actor = request_actor(request)
    agent = memory_agent_for_write(actor=actor, agent_id=payload.agent_id)
    entry = archival_entry_create(
        agent=agent,
        content=payload.content,
        tags=payload.tags,
        metadata=payload.metadata,
        importance=payload.importance,
        source=_source(request),
        label=payload.label,
    )
    return Status(201, entry)


@router.get("/archival", response=ArchivalPageOut, summary="List archival entries")
def list_archival_entries(
    request: HttpRequest, agent_id: int | None = None, limit: int = 50, offset: int = 0
) -> Any:
    qs = archival_entry_list_for_actor(actor=request_actor(request), agent_id=agent_id)
    limit, offset = max(1, min(limit, 200)), max(0, offset)
    return {"count": qs.count(), "results": list(qs[offset : offset + limit])}


@router.get("/archival/{entry_id}", response=ArchivalEntryOut)
def get_archival_entry(request: HttpRequest, entry_id: int) -> Any:
    return archival_entry_get_for_actor(actor=request_actor(request), entry_id=entry_id)


@router.patch("/archival/{entry_id}", response=ArchivalEntryOut)
def update_archival_entry(
    request: HttpRequest, entry_id: int, payload: ArchivalEntryPatchIn
) -> Any:
    entry = archival_entry_get_for_actor(
        actor=request_actor(request), entry_id=entry_id
    )
    return archival_entry_update(entry=entry, **payload.dict(exclude_unset=True))


@router.delete("/archival/{entry_id}", response={204: None})
def delete_archival_entry(request: HttpRequest, entry_id: int) -> Any:
    entry = archival_entry_get_for_actor(
        actor=request_actor(request), entry_id=entry_id
    )
    archival_entry_delete(entry=entry)
    return Status(204, None)


@router.post("/tools/search", response=SearchOut, summary="v1 search tool")
def search_tool(request: HttpRequest, payload: SearchIn) -> Any:
    result = _searched(
        request,
        query=payload.query,
        domain=payload.domain,
        mode=payload.mode,
        limit=payload.limit,
        filters=SearchFilters(
            agent_id=payload.filters.agent_id,
            tags=tuple(payload.filters.tags),
            metadata_keys=tuple(payload.filters.metadata_keys),
            since=payload.filters.since,
            until=payload.filters.until,
            role=payload.filters.role,
            conversation_id=payload.filters.conversation_id,
        ),
        constellation_id=payload.constellation_id,
    )
    return _search_out(result)


@router.post("/tools/recall", response=RecallOut, summary="v1 recall tool")
def recall_tool(request: HttpRequest, payload: RecallIn) -> Any:
    """insert / append / read / delete an archival entry (by label or id);
    without an action, search conversations and archival memory (seed 001)."""
    actor = request_actor(request)
    action = payload.action or ("search" if payload.query else None)
    if action is None:
        raise InvalidInput("give an action (insert, append, read, delete) or a query")
    if action == "search":
        result = _searched(
            request,
            query=payload.query or "",
            domain=RECALL_DOMAIN,
            limit=payload.limit,
        )
        out = _search_out(result)
        return {
            "action": action,
            "message": f"{len(out['results'])} results",
            "results": out["results"],
            "degraded": result.degraded,
        }
    if action == "insert":
        entry = archival_entry_create(
            agent=memory_agent_for_write(actor=actor, agent_id=None),
            content=payload.content or "",
            tags=payload.tags,
            metadata=payload.metadata,
            importance=payload.importance,
            source=_source(request),
            label=payload.label,
        )
        return {"action": action, "message": "stored", "entry": entry}
    if payload.entry_id is not None:
        entry = archival_entry_get_for_actor(actor=actor, entry_id=payload.entry_id)
    elif payload.label:
        entry = archival_entry_get_by_label(actor=actor, label=payload.label)
    else:
        raise InvalidInput(f"{action} needs a label or an entry_id")
    if action == "read":
        archival_access_record_later(entry_ids=[entry.pk])
        return {"action": action, "message": "found", "entry": entry}
    if action == "append":
        entry = archival_entry_append(entry=entry, content=payload.content or "")
        return {"action": action, "message": "appended", "entry": entry}
    archival_entry_delete(entry=entry)
    return {"action": action, "message": f"deleted entry {payload.label or ''}"}


@router.post(
    "/tools/archival_memory_insert",
    response={201: ArchivalEntryOut},
    summary="Letta-compatible archival insert",
)
def archival_memory_insert(request: HttpRequest, payload: LettaInsertIn) -> Any:
    actor = request_actor(request)
    entry = archival_entry_create(
        agent=memory_agent_for_write(actor=actor, agent_id=None),
        content=payload.content,
        tags=payload.tags,
        source=_source(request),
    )
    return Status(201, entry)


@router.post(
    "/tools/archival_memory_search",
    response=list[LettaSearchHitOut],
    summary="Letta-compatible archival search",
)
def archival_memory_search(request: HttpRequest, payload: LettaSearchIn) -> Any:
    result = _searched(
        request,
        query=payload.query,
        domain="archival_memory",
        limit=payload.top_k,
        filters=SearchFilters(
            tags=tuple(payload.tags),
            since=payload.start_datetime,
            until=payload.end_datetime,
        ),
    )
    return [
        {
            "id": hit.row.pk,
            "timestamp": hit.row.created_at,
            "content": hit.row.content,
            "tags": hit.row.tags,
        }
        for _kind, hit in result.hits
    ]


@router.post("/conversations", response={201: ConversationOut})
def start_conversation(request: HttpRequest, payload: ConversationIn) -> Any:
    agent = memory_agent_for_write(
        actor=request_actor(request), agent_id=payload.agent_id
    )
    return Status(201, conversation_start(agent=agent, title=payload.title))


@router.get("/conversations", response=list[ConversationOut])
def list_conversations(
    request: HttpRequest, agent_id: int | None = None, status: str | None = None
) -> Any:
    return conversation_list_for_actor(
        actor=request_actor(request), agent_id=agent_id, status=status
    )[:200]


@router.get("/conversations/{conversation_id}", response=ConversationOut)
def get_conversation(request: HttpRequest, conversation_id: int) -> Any:
    return conversation_get_for_actor(
        actor=request_actor(request), conversation_id=conversation_id
    )


@router.post("/conversations/{conversation_id}/status", response=ConversationOut)
def set_conversation_status(
    request: HttpRequest, conversation_id: int, payload: ConversationStatusIn
) -> Any:
    conversation = conversation_get_for_actor(
        actor=request_actor(request), conversation_id=conversation_id
    )
    return conversation_set_status(conversation=conversation, status=payload.status)


@router.post(
    "/conversations/{conversation_id}/messages", response={201: list[MessageOut]}
)
def append_messages(
    request: HttpRequest, conversation_id: int, payload: MessagesAppendIn
) -> Any:
    actor = request_actor(request)
    conversation = conversation_get_for_actor(
        actor=actor, conversation_id=conversation_id
    )
    created = messages_append(
        conversation=conversation,
        messages=[m.dict() for m in payload.messages],
        author=actor.ref,
        batch_id=payload.batch_id,
    )
    return Status(201, created)


@router.get("/conversations/{conversation_id}/messages", response=MessagePageOut)
def list_messages(
    request: HttpRequest, conversation_id: int, after: int = 0, limit: int = 50
) -> Any:
    conversation, messages, next_after = message_page_for_actor(
        actor=request_actor(request),
        conversation_id=conversation_id,
        after=after,
        limit=limit,
    )
    return {
        "conversation": conversation,
        "messages": messages,
        "next_after": next_after,
    }


@router.get(
    "/constellations/{constellation_id}/retrieval-config",
    response=RetrievalConfigOut,
)
def get_retrieval_config(request: HttpRequest, constellation_id: int) -> Any:
    constellation = constellation_get_for_actor(
        actor=request_actor(request), constellation_id=constellation_id
    )
    return retrieval_config_for(constellation=constellation)


@router.put(
    "/constellations/{constellation_id}/retrieval-config",
    response=RetrievalConfigOut,
)
def update_retrieval_config(
    request: HttpRequest, constellation_id: int, payload: RetrievalConfigIn
) -> Any:
    actor = request_actor(request)
    if actor.kind == "agent":
        raise PermissionDenied("only the partner or a member can tune search")
    constellation = constellation_get_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    return retrieval_config_update(
        constellation=constellation, **payload.dict(exclude_unset=True)
    )
