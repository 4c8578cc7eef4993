"""Meaning and keyword search over the passages of attached folders.

The same engine, modes and fusion as archival search
(``memory.search.engine.search``): the passages' FTS5 and vec0 tables are
filtered to the searched folders (the index's owner column) and the
candidates to the rows the caller may see.  A hit cites
``folder/path:start-end``.

Past ``SEARCH_QUANTISED_ABOVE`` passages in the constellation, vector
searches take the engine's quantised path (binary KNN, re-scored exactly)
like hybrid ones: an exact search scans every vector, which at 100,000
passages alone costs more than the search's latency target.  Archival
search keeps ``vector`` mode exact.
"""

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from folders.files.index import FILE_PASSAGE_INDEX
from folders.files.models import FilePassage, Folder
from folders.files.selectors import folder_list_for_actor
from memory.longterm.domains import DomainQuery
from memory.search.embedder import embed_query, embedding_status
from memory.search.engine import (
    SEARCH_MODES,
    Fusion,
    Hit,
    SearchOutcome,
    scope_is_large,
    search,
)
from pattern_site.kernel.errors import InvalidInput

MAX_QUERY_CHARS = 2000
MAX_LIMIT = 50


def folder_search(
    *,
    folders: Sequence[Folder],
    query: str,
    mode: str = "auto",
    limit: int = 10,
    path: str | None = None,
    fusion: Fusion | None = None,
    query_vector: Callable[[str], np.ndarray | None] | None = None,
    quantised: bool | None = None,
) -> SearchOutcome:
    """Passages of ``folders`` (permission-checked by the caller, all of one
    constellation) best matching ``query``; ``path``: one file, or a
    directory prefix ending in "/".  ``fusion`` and ``query_vector``: those
    of a search over several domains (default: the engine's fusion, the
    query embedded here).  ``quantised`` None: the quantised path for
    vector and hybrid searches of a large constellation (above)."""
    if not query.strip():
        raise InvalidInput("the search query is empty; give some words to look for")
    if mode not in SEARCH_MODES:
        raise InvalidInput(
            f"unknown mode {mode!r}; use one of {', '.join(SEARCH_MODES)}"
        )
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit is 1 to {MAX_LIMIT}, not {limit}")
    if not folders:
        raise InvalidInput("no folder to search; none is attached")
    scopes = {f.constellation_id for f in folders}
    if len(scopes) != 1:
        raise InvalidInput("search the folders of one constellation at a time")
    ids = [f.pk for f in folders]
    allowed = FilePassage.objects.select_related("file__folder").filter(
        folder_id__in=ids
    )
    if path:
        allowed = (
            allowed.filter(file__path__startswith=path)
            if path.endswith("/")
            else allowed.filter(file__path=path)
        )
    status = embedding_status()
    if query_vector is None and status.available:
        query_vector = embed_query
    scope_id = scopes.pop()
    if quantised is None and mode == "vector":
        quantised = scope_is_large(FILE_PASSAGE_INDEX, scope_id=scope_id)
    return search(
        FILE_PASSAGE_INDEX,
        text=query[:MAX_QUERY_CHARS],
        allowed=allowed,
        scope_id=scope_id,
        owner_ids=ids,
        mode=mode,
        limit=limit,
        query_vector=query_vector,
        fusion=fusion,
        degraded_reason=status.reason,
        quantised=quantised,
    )


def files_domain_search(query: DomainQuery) -> SearchOutcome:
    """The search tool's ``files`` domain: passages of the folders of the
    searched constellation the caller may read (an agent: those attached
    to it; a human: all of the constellation's).  Passages carry no agent,
    tag, role or time, so any filter leaves none."""
    folders = list(
        folder_list_for_actor(
            actor=query.actor, constellation_id=query.constellation.pk
        )
    )
    if not folders or query.filters.beyond(frozenset()):
        return SearchOutcome([], query.mode, "fts")
    return folder_search(
        folders=folders,
        query=query.text,
        mode=query.mode,
        limit=query.limit,
        fusion=query.fusion,
        query_vector=query.query_vector,
    )


def file_hit_payload(hit: Hit) -> dict[str, Any]:
    """A passage as a hit of the search tool (``SearchHitOut``)."""
    passage: FilePassage = hit.row
    found = passage_hit_payload(hit)
    return {
        **found,
        "id": passage.pk,
        "created_at": passage.file.updated_at,
        "provenance": {
            "store": "folder",
            "folder": found["folder"],
            "path": found["path"],
            "cite": found["cite"],
        },
    }


def passage_hit_payload(hit: Any) -> dict[str, Any]:
    passage: FilePassage = hit.row
    file = passage.file
    return {
        "folder": file.folder.name,
        "folder_id": file.folder_id,
        "file_id": file.pk,
        "path": file.path,
        "start_line": passage.start_line,
        "end_line": passage.end_line,
        "cite": (
            f"{file.folder.name}/{file.path}:{passage.start_line}-{passage.end_line}"
        ),
        "snippet_html": hit.snippet_html,
        "content": passage.content,
        "scores": {
            "score": hit.score,
            "fts_rank": hit.fts_rank,
            "bm25": hit.bm25,
            "vector_rank": hit.vector_rank,
            "vector_distance": hit.vector_distance,
        },
    }
