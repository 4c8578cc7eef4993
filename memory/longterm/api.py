"""Long-term memory endpoints: archival entries, conversations and the
retrieval configuration (the agent tools are declared in
``memory.longterm.tools``)."""

from typing import Any, Literal

from django.http import HttpRequest
from ninja import Router, Status

from memory.longterm.permissions import (
    archival_entry_delete_check,
    archival_entry_restore_check,
    retrieval_config_change_check,
)
from memory.longterm.schemas import (
    ArchivalEntryIn,
    ArchivalEntryOut,
    ArchivalEntryPatchIn,
    ArchivalLifetimeIn,
    ArchivalPageOut,
    ArchivalSourceIn,
    ArchivalTierIn,
    ConsolidationRunOut,
    ConversationIn,
    ConversationOut,
    ConversationStatusIn,
    MessageOut,
    MessagePageOut,
    MessagesAppendIn,
    RetrievalConfigIn,
    RetrievalConfigOut,
)
from memory.longterm.selectors import (
    archival_entry_get_for_actor,
    archival_entry_list_for_actor,
    consolidation_runs_for_actor,
    conversation_get_for_actor,
    conversation_list_for_actor,
    message_page_for_actor,
    retrieval_config_for,
)
from memory.longterm.services import (
    archival_entry_create,
    archival_entry_delete,
    archival_entry_restore,
    archival_entry_update,
    archival_source_of,
    conversation_set_status,
    conversation_start,
    messages_append,
    retrieval_config_update,
)
from pattern_site.kernel.agents.selectors import (
    agent_get_private,
    constellation_get_for_actor,
)
from pattern_site.kernel.apitypes import Id, Offset, error_responses
from pattern_site.kernel.auth import request_actor

router = Router()


def _source(request: HttpRequest) -> str:
    return archival_source_of(request_actor(request))


@router.post(
    "/archival",
    response={201: ArchivalEntryOut, **error_responses(403, 404, 409, body=True)},
    tags=["archival"],
    summary="Store a fact",
)
def create_archival_entry(request: HttpRequest, payload: ArchivalEntryIn) -> Any:
    actor = request_actor(request)
    agent = agent_get_private(actor=actor, agent_id=payload.agent_id)
    entry = archival_entry_create(
        agent=agent,
        content=payload.content,
        tags=payload.tags,
        metadata=payload.metadata,
        importance=payload.importance,
        source=_source(request),
        label=payload.label,
        tier=payload.tier,
        lifetime=payload.lifetime,
        source_conversation=(
            None
            if payload.source_conversation_id is None
            else conversation_get_for_actor(
                actor=actor, conversation_id=payload.source_conversation_id
            )
        ),
    )
    return Status(201, entry)


@router.get(
    "/archival",
    response={200: ArchivalPageOut, **error_responses(404, body=False)},
    tags=["archival"],
    summary="List archival entries",
)
def list_archival_entries(
    request: HttpRequest,
    agent_id: Id | None = None,
    limit: int = 50,
    offset: Offset = 0,
    include_superseded: bool = False,
    source: ArchivalSourceIn | None = None,
    tier: ArchivalTierIn | None = None,
    lifetime: ArchivalLifetimeIn | None = None,
) -> Any:
    qs = archival_entry_list_for_actor(
        actor=request_actor(request),
        agent_id=agent_id,
        include_superseded=include_superseded,
        source=source,
        tier=tier,
        lifetime=lifetime,
    )
    limit, offset = max(1, min(limit, 200)), max(0, offset)
    return {"count": qs.count(), "results": list(qs[offset : offset + limit])}


@router.get(
    "/archival/{entry_id}",
    response={200: ArchivalEntryOut, **error_responses(404, body=False)},
    tags=["archival"],
    summary="Get an archival entry",
)
def get_archival_entry(request: HttpRequest, entry_id: Id) -> Any:
    return archival_entry_get_for_actor(actor=request_actor(request), entry_id=entry_id)


@router.patch(
    "/archival/{entry_id}",
    response={200: ArchivalEntryOut, **error_responses(403, 404, 409, body=True)},
    tags=["archival"],
    summary="Update an archival entry",
)
def update_archival_entry(
    request: HttpRequest, entry_id: Id, payload: ArchivalEntryPatchIn
) -> Any:
    entry = archival_entry_get_for_actor(
        actor=request_actor(request), entry_id=entry_id
    )
    return archival_entry_update(entry=entry, **payload.dict(exclude_unset=True))


@router.delete(
    "/archival/{entry_id}",
    response={204: None, **error_responses(403, 404, body=False)},
    tags=["archival"],
    summary="Delete an archival entry for good (the partner only)",
)
def delete_archival_entry(request: HttpRequest, entry_id: Id) -> Any:
    actor = request_actor(request)
    entry = archival_entry_get_for_actor(actor=actor, entry_id=entry_id)
    archival_entry_delete_check(actor=actor, entry=entry)
    archival_entry_delete(entry=entry)
    return Status(204, None)


@router.post(
    "/archival/{entry_id}/restore",
    response={200: ArchivalEntryOut, **error_responses(403, 404, 409, body=False)},
    tags=["archival"],
    summary="Restore a merged or pruned archival entry (the partner only)",
)
def restore_archival_entry(request: HttpRequest, entry_id: Id) -> Any:
    actor = request_actor(request)
    entry = archival_entry_get_for_actor(actor=actor, entry_id=entry_id)
    archival_entry_restore_check(actor=actor, entry=entry)
    return archival_entry_restore(entry=entry)


@router.get(
    "/constellations/{constellation_id}/consolidation-runs",
    response={200: list[ConsolidationRunOut], **error_responses(404, body=False)},
    tags=["archival"],
    summary="Recent consolidation runs (promoted, merged, pruned counts)",
)
def list_consolidation_runs(
    request: HttpRequest, constellation_id: Id, limit: int = 10
) -> Any:
    actor = request_actor(request)
    constellation = constellation_get_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    return consolidation_runs_for_actor(
        actor=actor, constellation_id=constellation.pk, limit=limit
    )


@router.post(
    "/conversations",
    response={201: ConversationOut, **error_responses(403, 404, body=True)},
    tags=["conversations"],
    summary="Start a conversation",
)
def start_conversation(request: HttpRequest, payload: ConversationIn) -> Any:
    agent = agent_get_private(actor=request_actor(request), agent_id=payload.agent_id)
    return Status(201, conversation_start(agent=agent, title=payload.title))


@router.get(
    "/conversations",
    response={200: list[ConversationOut], **error_responses(404, body=False)},
    tags=["conversations"],
    summary="List conversations",
)
def list_conversations(
    request: HttpRequest,
    agent_id: Id | None = None,
    status: Literal["active", "idle", "archived"] | None = None,
) -> Any:
    return conversation_list_for_actor(
        actor=request_actor(request), agent_id=agent_id, status=status
    )[:200]


@router.get(
    "/conversations/{conversation_id}",
    response={200: ConversationOut, **error_responses(404, body=False)},
    tags=["conversations"],
    summary="Get a conversation",
)
def get_conversation(request: HttpRequest, conversation_id: Id) -> Any:
    return conversation_get_for_actor(
        actor=request_actor(request), conversation_id=conversation_id
    )


@router.post(
    "/conversations/{conversation_id}/status",
    response={200: ConversationOut, **error_responses(403, 404, 409, body=True)},
    tags=["conversations"],
    summary="Set a conversation's status",
)
def set_conversation_status(
    request: HttpRequest, conversation_id: Id, payload: ConversationStatusIn
) -> Any:
    conversation = conversation_get_for_actor(
        actor=request_actor(request), conversation_id=conversation_id
    )
    return conversation_set_status(conversation=conversation, status=payload.status)


@router.post(
    "/conversations/{conversation_id}/messages",
    response={201: list[MessageOut], **error_responses(403, 404, 409, body=True)},
    tags=["conversations"],
    summary="Append messages",
)
def append_messages(
    request: HttpRequest, conversation_id: Id, payload: MessagesAppendIn
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


@router.get(
    "/conversations/{conversation_id}/messages",
    response={200: MessagePageOut, **error_responses(404, body=False)},
    tags=["conversations"],
    summary="List messages",
)
def list_messages(
    request: HttpRequest, conversation_id: Id, after: Offset = 0, limit: int = 50
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
    response={200: RetrievalConfigOut, **error_responses(404, body=False)},
    tags=["search"],
    summary="Get retrieval settings",
)
def get_retrieval_config(request: HttpRequest, constellation_id: Id) -> Any:
    constellation = constellation_get_for_actor(
        actor=request_actor(request), constellation_id=constellation_id
    )
    return retrieval_config_for(constellation=constellation)


@router.put(
    "/constellations/{constellation_id}/retrieval-config",
    response={200: RetrievalConfigOut, **error_responses(403, 404, body=True)},
    tags=["search"],
    summary="Change retrieval settings",
)
def update_retrieval_config(
    request: HttpRequest, constellation_id: Id, payload: RetrievalConfigIn
) -> Any:
    actor = request_actor(request)
    constellation = constellation_get_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    retrieval_config_change_check(actor)
    return retrieval_config_update(
        constellation=constellation, **payload.dict(exclude_unset=True)
    )
