"""The agent tools on long-term memory, one function per tool, registered
with ``pattern_site.kernel.tools`` (which serves them over HTTP, MCP and
in process).

Each takes the calling actor and the tool's parsed input schema, reads
through the selectors and the search, writes through the services, and
returns the tool's answer in the shape of its output schema (``SearchOut``,
``RecallOut``, ``ArchivalEntryOut``, a list of ``LettaSearchHitOut``).
Archival entries come back as model instances, which both transports
serialise through the output schema.  Domain errors propagate for the
caller's transport to present.
"""

from datetime import UTC, datetime, time, timedelta
from typing import Any

from memory.longterm.access import archival_access_record_later
from memory.longterm.models import ArchivalEntry, Message
from memory.longterm.schemas import (
    ARCHIVAL_MEMORY_INSERT,
    ARCHIVAL_MEMORY_SEARCH,
    CONVERSATION_SEARCH,
    OBSERVATIONS_SEARCH,
    RECALL_TOOL,
    SEARCH_EXAMPLES,
    SEARCH_TOOL,
    SEND_MESSAGE,
    SEND_MESSAGE_TOOL,
    ArchivalEntryOut,
    ConversationSearchIn,
    LettaInsertIn,
    LettaSearchHitOut,
    LettaSearchIn,
    MessageOut,
    ObservationOut,
    ObservationsSearchIn,
    RecallIn,
    RecallOut,
    SearchIn,
    SearchOut,
    SendMessageIn,
)
from memory.longterm.search import (
    SearchFilters,
    SearchResult,
    memory_search,
    search_hit_payload,
)
from memory.longterm.selectors import (
    RECALL_DOMAIN,
    archival_entry_get_by_label,
    archival_entry_get_for_actor,
    archival_observations_for_actor,
)
from memory.longterm.services import (
    archival_entry_append,
    archival_entry_create,
    archival_entry_delete,
    archival_source_of,
    partner_message_send,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.selectors import agent_get_private
from pattern_site.kernel.errors import InvalidInput
from pattern_site.kernel.tools import AgentTool, tool_register


def _searched(actor: Actor, **kwargs: Any) -> SearchResult:
    """Run a search and count its archival hits as retrievals, off its path."""
    result = memory_search(actor=actor, **kwargs)
    archival_access_record_later(entry_ids=result.archival_ids)
    return result


# What a hit says only when asked to explain its ranking: a model reading
# every answer pays for them in tokens and rarely needs them.
_RANKING_FIELDS = ("scores", "duplicates", "snippet_html")


def _search_out(result: SearchResult, *, explain: bool = False) -> dict[str, Any]:
    """The search tools' answer (``SearchOut``); the ranking details and
    timings only when ``explain``.  Null fields are left out as the answer
    is serialised (the tools' ``exclude_none``)."""
    hits = [search_hit_payload(kind, hit) for kind, hit in result.hits]
    for hit in hits:
        # A free-form dict, whose nulls the serialiser leaves in; an empty
        # title or author says nothing either.
        hit["provenance"] = {
            k: v for k, v in hit["provenance"].items() if v not in (None, "")
        }
    out: dict[str, Any] = {
        "query": result.query,
        "domain": result.domain,
        "mode_used": result.mode_used,
        "degraded": result.degraded,
        "pending_embeddings": result.pending_embeddings or None,
    }
    if not explain:
        for hit in hits:
            for name in _RANKING_FIELDS:
                hit.pop(name, None)
        return {**out, "results": hits}
    return {
        **out,
        "results": hits,
        "mode_requested": result.mode_requested,
        "quantised": result.quantised,
        "timings_ms": result.timings_ms,
    }


def search_tool(*, actor: Actor, args: SearchIn) -> dict[str, Any]:
    result = _searched(
        actor,
        query=args.query,
        queries=tuple(args.queries),
        domain=args.domain,
        mode=args.mode,
        limit=args.limit,
        filters=SearchFilters(
            agent_id=args.filters.agent_id,
            tags=tuple(args.filters.tags),
            metadata_keys=tuple(args.filters.metadata_keys),
            since=args.filters.since,
            until=args.filters.until,
            roles=(args.filters.role,) if args.filters.role else (),
            conversation_id=args.filters.conversation_id,
        ),
        constellation_id=args.constellation_id,
        as_of=args.as_of,
    )
    return _search_out(result, explain=args.explain)


def conversation_search_tool(
    *, actor: Actor, args: ConversationSearchIn
) -> dict[str, Any]:
    """Letta's conversation_search over the caller's own conversations."""
    if args.start_date and args.end_date and args.start_date > args.end_date:
        raise InvalidInput("start_date is after end_date")
    result = _searched(
        actor,
        query=args.query,
        domain="conversations",
        limit=args.limit,
        filters=SearchFilters(
            roles=tuple(args.roles),
            since=datetime.combine(args.start_date, time.min, UTC)
            if args.start_date
            else None,
            until=datetime.combine(args.end_date, time.max, UTC)
            if args.end_date
            else None,
        ),
    )
    return _search_out(result)


def send_message_tool(*, actor: Actor, args: SendMessageIn) -> Message:
    return partner_message_send(
        agent=agent_get_private(actor=actor, agent_id=None), content=args.message
    )


def recall_tool(*, actor: Actor, args: RecallIn) -> dict[str, Any]:
    """insert / append / read / delete an archival entry (by label or id);
    without an action, search conversations and archival memory."""
    action = args.action or ("search" if args.query else None)
    if action is None:
        raise InvalidInput("give an action (insert, append, read, delete) or a query")
    if action == "search":
        result = _searched(
            actor, query=args.query or "", domain=RECALL_DOMAIN, limit=args.limit
        )
        out = _search_out(result)
        return {
            "action": action,
            "message": f"{len(out['results'])} results",
            "results": out["results"],
            "degraded": result.degraded,
            "pending_embeddings": out["pending_embeddings"],
        }
    if action == "insert":
        entry = archival_entry_create(
            agent=agent_get_private(actor=actor, agent_id=None),
            content=args.content or "",
            tags=args.tags,
            metadata=args.metadata,
            importance=args.importance,
            source=archival_source_of(actor),
            label=args.label,
        )
        return {"action": action, "message": "stored", "entry": entry}
    if args.entry_id is not None:
        entry = archival_entry_get_for_actor(actor=actor, entry_id=args.entry_id)
    elif args.label:
        entry = archival_entry_get_by_label(actor=actor, label=args.label)
    else:
        raise InvalidInput(f"{action} needs a label or an entry_id")
    if action == "read":
        archival_access_record_later(entry_ids=[entry.pk])
        return {"action": action, "message": "found", "entry": entry}
    if action == "append":
        entry = archival_entry_append(entry=entry, content=args.content or "")
        return {"action": action, "message": "appended", "entry": entry}
    archival_entry_delete(entry=entry)
    return {"action": action, "message": f"deleted entry {args.label or ''}"}


def archival_memory_insert_tool(*, actor: Actor, args: LettaInsertIn) -> ArchivalEntry:
    return archival_entry_create(
        agent=agent_get_private(actor=actor, agent_id=None),
        content=args.content,
        tags=args.tags,
        metadata={"domain": args.domain.strip()} if args.domain else None,
        source=archival_source_of(actor),
    )


def observations_search_tool(
    *, actor: Actor, args: ObservationsSearchIn
) -> list[dict[str, Any]]:
    """Every agent's recent observations, for a consolidator (the
    permission module refuses any other agent before anything is read)."""
    since = datetime.now(UTC) - timedelta(hours=args.since_hours)
    ids = None
    if args.query:
        result = _searched(
            actor,
            query=args.query,
            domain="archival_memory",
            limit=args.limit,
            filters=SearchFilters(since=since),
            all_agents=True,
        )
        ids = [hit.row.pk for _kind, hit in result.hits]
    entries = archival_observations_for_actor(
        actor=actor, since=since, domain=args.domain, ids=ids, limit=args.limit
    )
    if ids is not None:
        rank = {pk: i for i, pk in enumerate(ids)}
        entries.sort(key=lambda e: rank[e.pk])
    return [
        {
            "id": e.pk,
            "agent_id": e.agent_id,
            "agent": e.agent.name,
            "timestamp": e.created_at,
            "domain": str(e.metadata.get("domain", "")),
            "content": e.content,
            "tags": e.tags,
        }
        for e in entries
    ]


def archival_memory_search_tool(
    *, actor: Actor, args: LettaSearchIn
) -> list[dict[str, Any]]:
    result = _searched(
        actor,
        query=args.query,
        domain="archival_memory",
        limit=args.top_k,
        filters=SearchFilters(
            tags=tuple(args.tags),
            since=args.start_datetime,
            until=args.end_datetime,
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


tool_register(
    AgentTool(
        name="recall",
        description=RECALL_TOOL,
        args=RecallIn,
        out=RecallOut,
        run=recall_tool,
        writes=True,
        errors=(403, 404, 409),
        summary="recall: store, read, append, delete or search",
        exclude_none=True,
    ),
    AgentTool(
        name="search",
        description=SEARCH_TOOL,
        args=SearchIn,
        out=SearchOut,
        run=search_tool,
        writes=False,
        summary="Search memory",
        tags=("search",),
        examples=SEARCH_EXAMPLES,
        exclude_none=True,
    ),
    AgentTool(
        name="archival_memory_insert",
        description=ARCHIVAL_MEMORY_INSERT,
        args=LettaInsertIn,
        out=ArchivalEntryOut,
        run=archival_memory_insert_tool,
        writes=True,
        status=201,
        errors=(403, 404, 409),
        summary="archival_memory_insert",
    ),
    AgentTool(
        name="archival_memory_search",
        description=ARCHIVAL_MEMORY_SEARCH,
        args=LettaSearchIn,
        out=LettaSearchHitOut,
        run=archival_memory_search_tool,
        writes=False,
        many=True,
        summary="archival_memory_search",
    ),
    AgentTool(
        name="observations_search",
        description=OBSERVATIONS_SEARCH,
        args=ObservationsSearchIn,
        out=ObservationOut,
        run=observations_search_tool,
        writes=False,
        many=True,
        errors=(403,),
        summary="observations_search: every agent's, for a consolidator",
    ),
    AgentTool(
        name="conversation_search",
        description=CONVERSATION_SEARCH,
        args=ConversationSearchIn,
        out=SearchOut,
        run=conversation_search_tool,
        writes=False,
        errors=(403,),
        summary="conversation_search",
        exclude_none=True,
    ),
    AgentTool(
        name=SEND_MESSAGE,
        description=SEND_MESSAGE_TOOL,
        args=SendMessageIn,
        out=MessageOut,
        run=send_message_tool,
        writes=True,
        status=201,
        errors=(409,),
        summary="send_message: to your partner",
    ),
)
