"""The search tool's domains beyond long-term memory's own.

``memory.longterm.search.memory_search`` searches archival entries and
messages itself.  Other kinds of rows (file passages, activity events,
memory blocks) live in apps that sit above this layer or read through their
own permissions; each is a domain those apps register
(``search_domain_register``, from an ``AppConfig.ready``), as searchable
tables (``memory.search.registry``) and context sections
(``memory.context``) are registered.  A domain's ``search`` receives the
caller, the constellation already resolved for it and the query, decides
with its own permission module what the caller may read, and answers with
a ``SearchOutcome`` whose hits score on the engine's scale (so hits of
every domain merge by score); ``payload`` turns one hit into the fields of
the API's ``SearchHitOut`` that belong to that kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

import numpy as np

from memory.search.engine import Fusion, Hit, Rerank, SearchOutcome
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Constellation


@dataclass(frozen=True)
class SearchFilters:
    agent_id: int | None = None
    tags: tuple[str, ...] = ()
    metadata_keys: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    # Messages by any of these roles (none given: every role).
    roles: tuple[str, ...] = ()
    conversation_id: int | None = None

    def beyond(self, supported: frozenset[str]) -> bool:
        """Whether a filter outside ``supported`` (field names) is set: a
        domain whose rows cannot satisfy it has no hit."""
        return any(
            getattr(self, f.name) not in (None, ())
            for f in fields(self)
            if f.name not in supported
        )


@dataclass(frozen=True)
class DomainQuery:
    """One search of one domain, as ``memory_search`` hands it over."""

    actor: Actor
    constellation: Constellation
    text: str
    mode: str
    limit: int
    filters: SearchFilters
    fusion: Fusion
    rerank: Rerank | None
    # Embeds the query once for every domain of a search (None: no model).
    query_vector: Callable[[str], np.ndarray | None]
    degraded_reason: str
    as_of: datetime | None = None


@dataclass(frozen=True)
class SearchDomain:
    name: str  # what the caller passes as ``domain``
    kind: str  # what each hit says it is
    search: Callable[[DomainQuery], SearchOutcome]
    payload: Callable[[Hit], dict[str, Any]]
    as_of: bool = False  # searches the rows as they were at a time


_DOMAINS: dict[str, SearchDomain] = {}


def search_domain_register(
    *,
    name: str,
    kind: str,
    search: Callable[[DomainQuery], SearchOutcome],
    payload: Callable[[Hit], dict[str, Any]],
    as_of: bool = False,
) -> SearchDomain:
    """Make ``name`` a domain of the search tool, and of its ``all``
    (idempotent for the same kind)."""
    existing = _DOMAINS.get(name)
    if existing is not None and existing.kind != kind:
        raise ValueError(f"search domain {name!r} is already of kind {existing.kind}")
    if any(d.kind == kind and d.name != name for d in _DOMAINS.values()):
        raise ValueError(f"hit kind {kind!r} already belongs to another domain")
    domain = SearchDomain(name, kind, search, payload, as_of)
    _DOMAINS[name] = domain
    return domain


def search_domains() -> tuple[SearchDomain, ...]:
    """The registered domains, in the order they were registered."""
    return tuple(_DOMAINS.values())


def search_domain(name: str) -> SearchDomain | None:
    return _DOMAINS.get(name)


def search_domain_of_kind(kind: str) -> SearchDomain | None:
    return next((d for d in _DOMAINS.values() if d.kind == kind), None)


def word_outcome(hits: list[Hit], *, mode: str, what: str) -> SearchOutcome:
    """The outcome of a domain matched by words only (no vectors): ``what``
    names its rows in the note a meaning search gets."""
    note = f"{what} are matched by words only" if mode in ("vector", "hybrid") else ""
    return SearchOutcome(hits, mode_requested=mode, mode_used="fts", degraded=note)
