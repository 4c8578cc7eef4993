"""The searchable tables: which base tables the engine indexes, by kind.

Any app registers a table whose rows carry text (``search_table_register``,
from its ``AppConfig.ready``); the embedding pipeline and the search tools
find it by kind.  A searchable model has the columns ``content``,
``content_hash``, ``embedded_hash``, ``embedding_state`` (``EmbeddingState``),
and the index's scope and owner columns (``constellation_id`` and
``agent_id`` unless its ``TextIndex`` names others).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.db import models

from memory.search.index import TextIndex


class EmbeddingState(models.TextChoices):
    PENDING = "pending", "pending"
    READY = "ready", "ready"


@dataclass(frozen=True)
class SearchTable:
    kind: str
    model: type[models.Model]
    index: TextIndex
    # Called with the ids of rows whose vectors were just stored, by apps
    # that follow their rows' indexing (progress, readiness).
    on_embedded: Callable[[list[int]], None] | None = None
    # Puts the keyword-index rows of these rows back (their text, and the
    # context and date the owning app indexes with them); None: the row's
    # own text only (``memory.search.pipeline.search_rows_reindex``).
    reindex: Callable[[Sequence[int]], None] | None = None


_TABLES: dict[str, SearchTable] = {}


def search_table_register(
    *,
    kind: str,
    model: type[models.Model],
    index: TextIndex | None = None,
    on_embedded: Callable[[list[int]], None] | None = None,
    reindex: Callable[[Sequence[int]], None] | None = None,
) -> SearchTable:
    """Make ``model``'s rows searchable as ``kind`` (idempotent)."""
    table = SearchTable(
        kind=kind,
        model=model,
        index=index or TextIndex(model._meta.db_table),
        on_embedded=on_embedded,
        reindex=reindex,
    )
    existing = _TABLES.get(kind)
    if existing is not None and existing.model is not model:
        raise ValueError(f"search kind {kind!r} is already {existing.model.__name__}")
    _TABLES[kind] = table
    return table


def search_table(kind: str) -> SearchTable:
    try:
        return _TABLES[kind]
    except KeyError:
        raise LookupError(f"no searchable table of kind {kind!r}") from None


def search_tables() -> tuple[SearchTable, ...]:
    return tuple(_TABLES.values())


def search_table_of(model: type[models.Model]) -> SearchTable | None:
    """The searchable table ``model`` is registered as, if any."""
    return next((t for t in _TABLES.values() if t.model is model), None)
