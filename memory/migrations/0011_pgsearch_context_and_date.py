"""The PostgreSQL search tables get the ``context`` and ``dated`` columns the
SQLite FTS5 tables got in 0008, inside the one GIN-indexed ``tsv``.

Each ``<table>_pgsearch`` gains the two text columns, filled as 0008 fills
them (a row's context: the two rows before it, each cut to 1000
characters; its date in words: an archival entry's metadata ``date`` when
that is an ISO date, else the day the row was stored), and its generated
``tsv`` is made again from the three: the content with ``to_tsvector``'s
default label D, the context labelled C, the date B
(memory.search.postgres_index.TSV_LABELS), so that ``ts_rank_cd`` weighs
them as FTS5's bm25 weighs its columns.  PostgreSQL only.
"""

import importlib

from django.db import migrations

fts_0008 = importlib.import_module("memory.migrations.0008_fts_context_and_date")

BATCH = 1000

TSV_ALL = (
    "to_tsvector('english', coalesce(content, ''))"
    " || setweight(to_tsvector('english', coalesce(context, '')), 'C')"
    " || setweight(to_tsvector('english', coalesce(dated, '')), 'B')"
)
TSV_CONTENT = "to_tsvector('english', coalesce(content, ''))"


def make_tsv(schema_editor, index: str, expression: str) -> None:
    """(Re)make ``index``'s generated ``tsv`` from ``expression``, GIN-indexed.

    A generated column's expression cannot be altered before PostgreSQL 17:
    the column is dropped (and its index with it) and added again.  The GIN
    index has no pending list (``fastupdate = off``): with one, every
    search reads the entries written since the last vacuum one by one
    (up to ``gin_pending_list_limit``, 4 MB), which made the keyword query
    several times slower on a table that takes writes; writing each row's
    entries into the index at once costs the writes a little instead.
    """
    schema_editor.execute(f"ALTER TABLE {index} DROP COLUMN IF EXISTS tsv")
    schema_editor.execute(
        f"ALTER TABLE {index} ADD COLUMN tsv tsvector"
        f" GENERATED ALWAYS AS ({expression}) STORED"
    )
    schema_editor.execute(
        f"CREATE INDEX {index}_tsv ON {index} USING gin (tsv) WITH (fastupdate = off)"
    )


def add_text_columns(schema_editor, index: str) -> None:
    schema_editor.execute(
        f"ALTER TABLE {index} ADD COLUMN context text NOT NULL DEFAULT '',"
        " ADD COLUMN dated text NOT NULL DEFAULT ''"
    )


def fill(schema_editor, table: str, partition: str, order: str, meta: str | None):
    index = f"{table}_pgsearch"
    window = f"OVER (PARTITION BY {partition} ORDER BY {order})"
    connection = schema_editor.connection
    # The windows run over the whole base table, the filter after them: a
    # row's context is the rows before it whether or not those are indexed.
    with connection.cursor() as read:
        read.execute(
            f"SELECT id, two, one, meta, created_at FROM (SELECT id,"
            f" lag(content, 2) {window} AS two, lag(content, 1) {window} AS one,"
            f" {f'{meta}::text' if meta else 'NULL'} AS meta, created_at"
            f" FROM {table}) rows WHERE id IN (SELECT row_id FROM {index})"
        )
        while batch := read.fetchmany(BATCH):
            params = [
                (
                    "\n".join(t[: fts_0008.CONTEXT_CHARS] for t in (two, one) if t),
                    fts_0008._words(fts_0008._day(metadata, created_at)),
                    row_id,
                )
                for row_id, two, one, metadata, created_at in batch
            ]
            with connection.cursor() as write:
                write.executemany(
                    f"UPDATE {index} SET context = %s, dated = %s WHERE row_id = %s",
                    params,
                )


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, partition, order, meta in fts_0008.TABLES:
        index = f"{table}_pgsearch"
        add_text_columns(schema_editor, index)
        fill(schema_editor, table, partition, order, meta)
        make_tsv(schema_editor, index, TSV_ALL)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, *_rest in fts_0008.TABLES:
        index = f"{table}_pgsearch"
        make_tsv(schema_editor, index, TSV_CONTENT)
        schema_editor.execute(
            f"ALTER TABLE {index} DROP COLUMN context, DROP COLUMN dated"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0010_postgres_search"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
