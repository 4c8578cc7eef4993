"""Searching memory as a caller may see it: archival entries and messages
here, and the domains other apps register (``memory.longterm.domains``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from memory.longterm.decay import tier_decay
from memory.longterm.domains import (
    DomainQuery,
    SearchDomain,
    SearchFilters,
    search_domain,
    search_domain_of_kind,
    search_domains,
)
from memory.longterm.indexes import ARCHIVAL_INDEX, MESSAGE_INDEX
from memory.longterm.models import (
    ArchivalEntry,
    Message,
    RetrievalConfig,
    RetrievalReranker,
)
from memory.longterm.permissions import (
    archival_rows_all_agents,
    longterm_own_agent,
)
from memory.longterm.selectors import (
    MAX_QUERIES,
    MAX_QUERY_CHARS,
    MAX_SEARCH_LIMIT,
    RECALL_DOMAIN,
    SEARCH_DOMAINS,
    archival_entry_list_for_actor,
)
from memory.search.embedder import embed_query, embedding_status
from memory.search.engine import (
    RRF_K,
    SEARCH_MODES,
    Fusion,
    Hit,
    Rerank,
    SearchOutcome,
    TimeStage,
    search,
)
from memory.search.late import LateInteraction
from memory.search.permitted import PermittedQuery, PermittedRows
from memory.search.rerank import RerankStage, reranker_for
from memory.search.when import question_spans, time_asked
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.agents.selectors import (
    agent_get_for_actor,
    constellation_for_actor,
)
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.errors import InvalidInput


@dataclass
class SearchResult:
    """Results of a search over one or more domains, best first."""

    query: str
    domain: str
    mode_requested: str
    mode_used: str
    degraded: str
    hits: list[tuple[str, Hit]] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    quantised: bool = False  # vectors were searched by the quantised path
    fusion: Fusion | None = None
    rerank: Rerank | None = None
    reranker: RerankStage | None = None
    rerank_failed: str = ""  # why the re-rank model's order was not used
    # Rows found by keywords only: their vector is still being made.
    pending_embeddings: int = 0
    when: TimeStage | None = None  # the dates the query names, when any
    late: LateInteraction | None = None
    # Every phrasing searched (the query first), when more than one was.
    queries: tuple[str, ...] = ()

    @property
    def archival_ids(self) -> list[int]:
        return [hit.row.pk for kind, hit in self.hits if kind == "archival"]

    def _summed_ms(self, step: str) -> float | None:
        """``step``'s time summed over the domains searched (they run one
        after another); None when no domain timed it."""
        found = [v for k, v in self.timings_ms.items() if k.endswith(f".{step}")]
        return round(sum(found), 1) if found else None

    @property
    def total_ms(self) -> float:
        return self._summed_ms("total") or 0.0

    @property
    def stages(self) -> list[SearchStage]:
        """The stages this search ran, in order, each with its settings and
        its time (None: not timed apart)."""
        ms = self._summed_ms
        fusion = self.fusion or Fusion()
        stages: list[SearchStage] = []
        if self.mode_used != "fts":
            stages.append(
                SearchStage("query vector", "embedded in this process", ms("embed"))
            )
        if self.mode_used in ("fts", "hybrid"):
            stages.append(
                SearchStage("keywords", f"BM25: {fusion.keyword_columns()}", ms("fts"))
            )
        elif self.pending_embeddings:
            stages.append(
                SearchStage("keywords", "rows without a vector yet", ms("fts"))
            )
        if self.mode_used in ("vector", "hybrid"):
            path = "quantised, re-scored exactly" if self.quantised else "exact"
            stages.append(
                SearchStage("meaning", f"nearest vectors ({path})", ms("vector"))
            )
        if self.mode_used == "hybrid":
            stages.append(SearchStage("fusion", fusion.describe(), None))
        stages.append(
            SearchStage("permissions", "candidates you may see", ms("allowed"))
        )
        if self.when is not None:
            stages.append(SearchStage("time", self.when.describe(), ms("time")))
        if self.late is not None:
            stages.append(
                SearchStage("late interaction", self.late.describe(), ms("late"))
            )
        if self.rerank is not None:
            stages.append(SearchStage("re-rank", self.rerank.describe(), None))
        if self.reranker is not None:
            detail = self.reranker.describe()
            if self.rerank_failed:
                detail = f"{detail}; not used: {self.rerank_failed}"
            stages.append(SearchStage("re-rank model", detail, ms("rerank")))
        stages.append(
            SearchStage("duplicates", "near-identical rows folded", ms("dedup"))
        )
        stages.append(SearchStage("rows", "results read", ms("rows")))
        if len(self.queries) > 1:
            stages.append(
                SearchStage(
                    "queries",
                    f"{len(self.queries)} phrasings, reciprocal rank (k={RRF_K})",
                    None,
                )
            )
        return stages


@dataclass(frozen=True)
class SearchStage:
    name: str
    detail: str
    ms: float | None


def search_domain_names() -> tuple[str, ...]:
    """Every domain a caller may name: long-term memory's, the registered
    ones, then ``all``."""
    own = tuple(name for name in SEARCH_DOMAINS if name != "all")
    return (*own, *(d.name for d in search_domains()), "all")


def _filtered(qs: QuerySet, filters: SearchFilters, *, messages: bool) -> QuerySet:
    if filters.agent_id is not None:
        qs = qs.filter(agent_id=filters.agent_id)
    if filters.since is not None:
        qs = qs.filter(created_at__gte=filters.since)
    if filters.until is not None:
        qs = qs.filter(created_at__lte=filters.until)
    if messages:
        if filters.roles:
            qs = qs.filter(role__in=filters.roles)
        if filters.conversation_id is not None:
            qs = qs.filter(conversation_id=filters.conversation_id)
        if filters.tags or filters.metadata_keys:
            return qs.none()  # messages carry neither tags nor metadata
    else:
        if filters.roles or filters.conversation_id is not None:
            return qs.none()
        for tag in filters.tags:
            qs = qs.filter(tags__icontains=f'"{tag.strip().lower()}"')
        for key in filters.metadata_keys:
            qs = qs.filter(metadata__has_key=key)
    return qs


def memory_search(
    *,
    actor: Actor,
    query: str,
    domain: str = "archival_memory",
    mode: str = "auto",
    limit: int = 10,
    filters: SearchFilters | None = None,
    constellation_id: int | None = None,
    as_of: datetime | None = None,
    decay: bool | None = None,
    all_agents: bool = False,
    queries: Sequence[str] = (),
    now: datetime | None = None,
) -> SearchResult:
    """Search memory as ``actor`` may see it.

    Domains: ``archival_memory`` (an agent's own entries; a human's
    constellation's), ``conversations`` (an agent's own messages),
    ``constellation_messages`` (every message of the constellation the
    actor may read: a conversation is its agent's and the humans', so an
    agent reads its own and a human every agent's), each
    registered domain (``memory.longterm.domains``: files, activity,
    blocks) and ``all`` (archival_memory, constellation_messages and every
    registered domain); and ``recall`` (archival_memory plus conversations,
    the recall tool's).  ``as_of`` (domains that keep versions: blocks)
    searches the rows as they were at that time.  Hits of every domain
    merge by score.  ``decay`` re-ranks by relevance with each tier's decay
    rate (None: as the constellation's config says).  Entries consolidation
    merged or pruned are not searched.  ``all_agents`` (archival_memory
    only) searches every agent's entries, the consolidator role's right
    (``PermissionDenied`` for another agent).

    ``queries``: more phrasings of the question (at most ``MAX_QUERIES``
    in all with ``query``, which may then be empty), each searched as
    ``query`` is, their rankings fused by Reciprocal Rank Fusion.  ``now``:
    the time the dates a query names ("last week") are read from (None: the
    present).
    """
    if all_agents and domain != "archival_memory":
        raise InvalidInput("all_agents searches archival_memory only")
    phrasings = [
        q for q in dict.fromkeys([query, *queries]) if isinstance(q, str) and q.strip()
    ]
    if len(queries) > MAX_QUERIES or len(phrasings) > MAX_QUERIES:
        raise InvalidInput(
            f"{len(phrasings)} queries; give at most {MAX_QUERIES} phrasings"
        )
    if len(phrasings) > 1:
        return _fused_phrasings(
            phrasings,
            actor=actor,
            domain=domain,
            mode=mode,
            limit=limit,
            filters=filters,
            constellation_id=constellation_id,
            as_of=as_of,
            decay=decay,
            now=now,
            all_agents=all_agents,
        )
    query = phrasings[0] if phrasings else query
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("the search query is empty; give some words to look for")
    if len(query) > MAX_QUERY_CHARS:
        query = query[:MAX_QUERY_CHARS]
    registered = search_domain(domain)
    if registered is None and domain not in (*SEARCH_DOMAINS, RECALL_DOMAIN):
        raise InvalidInput(
            f"unknown domain {domain!r}; use one of {', '.join(search_domain_names())}"
        )
    if mode not in SEARCH_MODES:
        raise InvalidInput(
            f"unknown mode {mode!r}; use one of {', '.join(SEARCH_MODES)}"
        )
    if as_of is not None:
        _as_of_check(registered, domain)
        as_of = _utc(as_of)
    limit = max(1, min(int(limit), MAX_SEARCH_LIMIT))
    filters = filters or SearchFilters()
    filters = replace(filters, since=_utc(filters.since), until=_utc(filters.until))
    constellation = constellation_for_actor(
        actor=actor, constellation_id=constellation_id, what="search"
    )
    agent_pk = longterm_own_agent(actor)
    own_only = agent_pk is not None
    if filters.agent_id is not None and not own_only:
        agent_get_for_actor(actor=actor, agent_id=filters.agent_id)
    targets: list[tuple[str, Any, QuerySet | PermittedRows, list[int] | None]] = []
    if domain in ("archival_memory", "all", RECALL_DOMAIN):
        allowed, owners = _archival_allowed(
            actor=actor,
            constellation_id=constellation.pk,
            filters=filters,
            all_agents=all_agents,
        )
        targets.append(("archival", ARCHIVAL_INDEX, allowed, owners))
    if domain in ("conversations", "constellation_messages", "all", RECALL_DOMAIN):
        qs = Message.objects.select_related("agent", "conversation").filter(
            constellation_id=constellation.pk
        )
        owners = _owner(filters)
        if own_only:
            qs, owners = qs.filter(agent_id=agent_pk), [agent_pk]
        targets.append(
            ("message", MESSAGE_INDEX, _filtered(qs, filters, messages=True), owners)
        )
    others: tuple[SearchDomain, ...] = (
        search_domains() if domain == "all" else (registered,) if registered else ()
    )

    status = embedding_status()
    cache: dict[str, Any] = {}

    def query_vector(text: str) -> Any:
        if "v" not in cache:
            cache["v"] = embed_query(text) if status.available else None
        return cache["v"]

    config = _config_for(constellation)
    fusion, rerank, reranker = _stages_for(config, decay=decay)
    when, late = _query_stages(config, query=query, now=now)
    outcomes: list[tuple[str, SearchOutcome]] = []
    for kind, index, allowed, owners in targets:
        outcome = search(
            index,
            text=query,
            allowed=allowed,
            scope_id=constellation.pk,
            owner_ids=owners,
            mode=mode,
            limit=limit,
            query_vector=query_vector,
            rerank=rerank,
            fusion=fusion,
            degraded_reason=status.reason,
            reranker=reranker,
            when=when,
            late=late,
        )
        outcomes.append((kind, outcome))
    asked = DomainQuery(
        actor=actor,
        constellation=constellation,
        text=query,
        mode=mode,
        limit=limit,
        filters=filters,
        fusion=fusion,
        rerank=rerank,
        query_vector=query_vector,
        degraded_reason=status.reason,
        as_of=as_of,
    )
    outcomes += [(other.kind, other.search(asked)) for other in others]
    merged = sorted(
        ((kind, hit) for kind, outcome in outcomes for hit in outcome.hits),
        key=lambda pair: -pair[1].score,
    )[:limit]
    first = outcomes[0][1]
    degraded = first.degraded
    if degraded and degraded == status.reason:
        degraded = embedding_status().reason  # a failed load is known only now
    failures = [o.rerank_failed for _kind, o in outcomes if o.rerank_failed]
    rerank_failed = "; ".join(dict.fromkeys(failures))
    pending = sum(outcome.pending_embeddings for _kind, outcome in outcomes)
    degraded = "; ".join(
        part for part in (degraded, rerank_failed, pending_note(pending)) if part
    )
    timings: dict[str, float] = {}
    for kind, outcome in outcomes:
        for key, value in outcome.timings_ms.items():
            timings[f"{kind}.{key}"] = value
    return SearchResult(
        query=query,
        domain=domain,
        mode_requested=mode,
        mode_used=first.mode_used,
        degraded=degraded,
        hits=merged,
        timings_ms=timings,
        quantised=any(outcome.quantised for _kind, outcome in outcomes),
        fusion=fusion,
        rerank=rerank,
        reranker=reranker,
        rerank_failed=rerank_failed,
        pending_embeddings=pending,
        when=when,
        late=late,
    )


def _archival_allowed(
    *,
    actor: Actor,
    constellation_id: int,
    filters: SearchFilters,
    all_agents: bool,
) -> tuple[QuerySet | PermittedRows, list[int] | None]:
    """The archival entries of the constellation ``actor`` may search with
    ``filters``, and the owners to search (None: any)."""
    agent_pk = longterm_own_agent(actor)
    if all_agents:
        qs = archival_rows_all_agents(
            ArchivalEntry.objects.select_related("agent").filter(
                superseded_at__isnull=True
            ),
            actor=actor,
        ).filter(constellation_id=constellation_id)
        return _filtered(qs, filters, messages=False), _owner(filters)
    if agent_pk is not None and filters == SearchFilters():
        allowed = _OWN_ARCHIVAL.rows(
            agent_id=agent_pk, constellation_id=constellation_id
        )
        return allowed, [agent_pk]
    qs = archival_entry_list_for_actor(actor=actor).filter(
        constellation_id=constellation_id
    )
    owners = [agent_pk] if agent_pk is not None else _owner(filters)
    return _filtered(qs, filters, messages=False), owners


def pending_note(count: int) -> str:
    """What a search says of the rows it found by keywords only."""
    if not count:
        return ""
    if count == 1:
        rows, them, they = "entry is", "it", "it is"
    else:
        rows, them, they = "entries are", "them", "they are"
    return (
        f"{count} {rows} still waiting for an embedding (it takes a few"
        f" seconds after writing): search by meaning cannot find {them} yet,"
        f" so {they} matched by keywords only"
    )


# Each phrasing's list is this many times the limit deep before fusion, so
# a row one phrasing ranks just below the limit still counts.
PHRASING_DEPTH = 2


def _fused_phrasings(
    phrasings: list[str], *, limit: int, **kwargs: Any
) -> SearchResult:
    """One search per phrasing, their rankings fused by Reciprocal Rank
    Fusion (a hit's score: the sum of 1 / (k + rank) over the phrasings
    that found it); stages, timings and degradations of every phrasing."""
    limit = max(1, min(int(limit), MAX_SEARCH_LIMIT))
    deep = min(limit * PHRASING_DEPTH, MAX_SEARCH_LIMIT)
    results = [memory_search(query=q, limit=deep, **kwargs) for q in phrasings]
    fused: dict[tuple[str, Any], tuple[float, str, Hit]] = {}
    for result in results:
        for rank, (kind, hit) in enumerate(result.hits, start=1):
            key = (kind, getattr(hit.row, "pk", None) or id(hit.row))
            before = fused.get(key)
            total = (before[0] if before else 0.0) + 1.0 / (RRF_K + rank)
            fused[key] = (total, kind, before[2] if before else hit)
    ranked = sorted(fused.values(), key=lambda item: -item[0])[:limit]
    for total, _kind, hit in ranked:
        hit.score = total
    first = results[0]
    timings = {
        f"q{i}.{key}": value
        for i, result in enumerate(results, start=1)
        for key, value in result.timings_ms.items()
    }
    return replace(
        first,
        hits=[(kind, hit) for _total, kind, hit in ranked],
        timings_ms=timings,
        degraded="; ".join(dict.fromkeys(r.degraded for r in results if r.degraded)),
        rerank_failed="; ".join(
            dict.fromkeys(r.rerank_failed for r in results if r.rerank_failed)
        ),
        quantised=any(r.quantised for r in results),
        pending_embeddings=max(r.pending_embeddings for r in results),
        queries=tuple(phrasings),
    )


def _query_stages(
    config: RetrievalConfig, *, query: str, now: datetime | None
) -> tuple[TimeStage | None, LateInteraction | None]:
    """The time stage when the config gives it a weight and ``query``
    names dates or asks when, and the late-interaction stage when the config turns it
    on."""
    when = None
    spans = []
    if config.time_weight > 0:
        today = (_utc(now) or timezone.now()).date()
        spans = question_spans(query, today=today)
    asked = time_asked(query) if config.when_weight > 0 else ""
    if spans or asked:
        when = TimeStage(
            tuple(spans),
            config.time_weight,
            asked=asked,
            told_weight=config.when_weight,
        )
    late = LateInteraction(config.late_weight) if config.late_weight > 0 else None
    return when, late


def _as_of_check(registered: SearchDomain | None, domain: str) -> None:
    if registered is None or not registered.as_of:
        takes = " or ".join(repr(d.name) for d in search_domains() if d.as_of)
        raise InvalidInput(
            f"as_of searches rows as they were at a time, which only domain "
            f"{takes or '(none)'} can; domain {domain!r} is searched as it is "
            "now: leave as_of out",
            extra={"field": "as_of"},
        )


def _utc(moment: datetime | None) -> datetime | None:
    """A time filter as an aware datetime (naive means UTC)."""
    if moment is None or not timezone.is_naive(moment):
        return moment
    return moment.replace(tzinfo=UTC)


# Read on every search: compiled once (the ORM's compile costs ten times
# the read).
_RETRIEVAL_CONFIG = CompiledQuery(
    lambda constellation_id: RetrievalConfig.objects.filter(
        constellation_id=constellation_id
    ).order_by()[:1],
    constellation_id=-5_132_771,
)


# The archival entries an agent may search without filters: its own, of
# one constellation (``archival_entry_list_for_actor``), compiled once:
# building that queryset and its statement's key on every search cost
# about as much as reading the candidates.
_OWN_ARCHIVAL = PermittedQuery(
    lambda agent_id, constellation_id: archival_entry_list_for_actor(
        actor=Actor.for_agent(Agent(pk=agent_id))
    ).filter(constellation_id=constellation_id),
    agent_id=-5_132_773,
    constellation_id=-5_132_779,
)


def _config_for(constellation: Constellation) -> RetrievalConfig:
    """The constellation's retrieval config; the model's defaults when it
    has no saved one."""
    config = _RETRIEVAL_CONFIG.first(constellation_id=constellation.pk)
    return config or RetrievalConfig(constellation=constellation)


def _stages_for(
    config: RetrievalConfig, *, decay: bool | None = None
) -> tuple[Fusion, Rerank | None, RerankStage | None]:
    """The config's fusion settings, its tier-decay re-rank (when
    ``decay``, or when None and the config enables it) and its re-rank
    model (None: off)."""
    fusion = Fusion(
        method=config.fusion,
        keyword_weight=config.keyword_weight,
        context_weight=config.context_weight,
        date_weight=config.date_weight,
        depth=config.candidate_depth,
    )
    reranker = None
    if config.reranker != RetrievalReranker.OFF:
        reranker = RerankStage(
            reranker_for(config.reranker, constellation_id=config.constellation_id),
            depth=config.reranker_depth,
        )
    if not (config.rerank_enabled if decay is None else decay):
        return fusion, None, reranker
    return fusion, tier_decay(config, now=timezone.now()), reranker


def _owner(filters: SearchFilters) -> list[int] | None:
    return [filters.agent_id] if filters.agent_id is not None else None


def search_hit_payload(kind: str, hit: Hit) -> dict[str, Any]:
    """One result as the API and the dashboard show it, with provenance."""
    common = {
        "kind": kind,
        "snippet_html": hit.snippet_html,
        "duplicates": hit.duplicates,
        "scores": {
            "fts_rank": hit.fts_rank,
            "bm25": hit.bm25,
            "vector_rank": hit.vector_rank,
            "vector_distance": hit.vector_distance,
            "keyword_part": hit.keyword_part,
            "vector_part": hit.vector_part,
            "fused": hit.fused_score,
            "relevance": hit.relevance,
            "reranker": hit.rerank_score,
            "score": hit.score,
        },
    }
    if kind not in ("archival", "message"):
        other = search_domain_of_kind(kind)
        if other is None:
            raise LookupError(f"no search domain has hits of kind {kind!r}")
        return {**other.payload(hit), **common}
    row = hit.row
    payload: dict[str, Any] = {
        "id": row.pk,
        "agent_id": row.agent_id,
        "agent_name": row.agent.name,
        "content": row.content,
        "created_at": row.created_at,
        **common,
    }
    if kind == "archival":
        payload.update(
            label=row.label,
            tags=row.tags,
            provenance={
                "store": "archival_memory",
                "agent": row.agent.name,
                "source": row.source,
                "label": row.label,
                "entry_id": row.pk,
            },
        )
    else:
        payload.update(
            conversation_id=row.conversation_id,
            role=row.role,
            position=row.position,
            provenance={
                "store": "conversation",
                "agent": row.agent.name,
                "conversation_id": row.conversation_id,
                "conversation_title": row.conversation.title,
                "position": row.position,
                "author": row.author,
            },
        )
    return payload
