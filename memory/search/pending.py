"""Rows still waiting for their embedding, as a search sees them.

A row gets its keyword-index text when it is written and its vector a few
seconds later, from a Celery task (``memory.search.pipeline``).  Until
then search by meaning cannot find it: the engine matches such rows by
keywords instead and says how many there are.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import connection

from memory.search.index import TextIndex, owner_sql
from memory.search.permitted import PermittedRows
from memory.search.registry import EmbeddingState

# The newest waiting rows a search looks at: a backlog larger than this
# (a bulk import) is still counted, its oldest rows wait for their vector.
PENDING_MAX = 4000


@dataclass(frozen=True)
class PendingRows:
    """How many rows the caller may see wait for their embedding, and the
    texts of the newest ``PENDING_MAX`` of them, by id."""

    count: int = 0
    texts: dict[int, str] = field(default_factory=dict)


def pending_rows(
    index: TextIndex,
    *,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    permitted_rows: PermittedRows,
) -> PendingRows:
    """The rows of the scope (and owners) without a current vector that
    ``permitted_rows`` lets the caller see.  One indexed look-up on
    ``embedding_state`` when none wait."""
    # The unary pluses keep the scope and owner columns' indexes out of the
    # plan: without statistics SQLite would walk the whole scope by its
    # index (35 ms at 100,000 rows) instead of the few waiting rows by the
    # index on ``embedding_state``.
    sql = (
        f"SELECT id FROM {index.base_table} WHERE embedding_state = %s"
        f" AND +{index.scope_column} = %s"
        f"{owner_sql(owner_ids, '+' + index.owner_column)}"
        " ORDER BY id DESC LIMIT %s"
    )
    params = [EmbeddingState.PENDING.value, scope_id, *(owner_ids or ()), PENDING_MAX]
    with connection.cursor() as cur:
        cur.execute(sql, params)
        ids = [row_id for (row_id,) in cur.fetchall()]
    if not ids:
        return PendingRows()
    texts = permitted_rows.fetch(ids)
    return PendingRows(count=len(texts), texts=texts)
