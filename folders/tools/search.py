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

from collections.abc import Sequence
from typing import Any

from coordination.errors import InvalidInput
from folders.files.index import FILE_PASSAGE_INDEX
from folders.files.models import FilePassage, Folder
from memory.search.embedder import embed_query, embedding_status
from memory.search.engine import (
    SEARCH_MODES,
    SearchOutcome,
    scope_is_large,
    search,
)

MAX_QUERY_CHARS = 2000
MAX_LIMIT = 50


def folder_search(
    *,
    folders: Sequence[Folder],
    query: str,
    mode: str = "auto",
    limit: int = 10,
    path: str | None = None,
    quantised: bool | None = None,
) -> SearchOutcome:
    """Passages of ``folders`` (permission-checked by the caller, all of one
    constellation) best matching ``query``; ``path``: one file, or a
    directory prefix ending in "/".  ``quantised`` None: the quantised path
    for vector and hybrid searches of a large constellation (above)."""
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
        query_vector=embed_query if status.available else None,
        degraded_reason=status.reason,
        quantised=quantised,
    )


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
