"""The PostgreSQL search index becomes two tables, and its text gets the
``context`` and ``dated`` columns the SQLite FTS5 tables got in 0008.

``<table>_pgsearch`` keeps the text: the row's ``content``, its
``context`` (the two rows before it, each cut to 1000 characters) and
``dated`` (its date in words: an archival entry's metadata ``date`` when
that is an ISO date, else the day the row was stored), filled as 0008
fills them, and a generated ``tsv`` of the three under a GIN index: the
content with ``to_tsvector``'s default label D, the context labelled C,
the date B (memory.search.postgres_index.TSV_LABELS), so that
``ts_rank_cd`` weighs them as FTS5's bm25 weighs its columns.
``<table>_pgvector`` takes the vectors, under the HNSW index.

Apart, a keyword search reads the row of each match from a table a
seventh of the size (a 384-dimension vector is 1.5 kB, the text of a
memory often less), which stays in memory; and storing a row's vector no
longer makes a new version of its text row with new GIN entries for every
word.  The GIN index has no pending list (``fastupdate = off``): with
one, every search reads the entries written since the last vacuum one by
one (up to ``gin_pending_list_limit``, 4 MB), several times the cost of
the rest of a keyword query on a table that takes writes.

PostgreSQL only; backwards makes the one table of 0010 again.
"""

import importlib

from django.db import migrations

fts_0008 = importlib.import_module("memory.migrations.0008_fts_context_and_date")

BATCH = 1000
DIM = 384

TSV = (
    "to_tsvector('english', content)"
    " || setweight(to_tsvector('english', context), 'C')"
    " || setweight(to_tsvector('english', dated), 'B')"
)


def text_table_sql(name: str) -> str:
    return (
        f"CREATE TABLE {name} (row_id bigint PRIMARY KEY,"
        " scope_id bigint NOT NULL, owner_id bigint NOT NULL,"
        " content text NOT NULL, context text NOT NULL DEFAULT '',"
        " dated text NOT NULL DEFAULT '',"
        f" tsv tsvector GENERATED ALWAYS AS ({TSV}) STORED)"
    )


def _swap_in(schema_editor, new: str, name: str) -> None:
    """Replace table ``name`` by table ``new`` (and its primary key index)."""
    schema_editor.execute(f"DROP TABLE {name}")
    schema_editor.execute(f"ALTER TABLE {new} RENAME TO {name}")
    schema_editor.execute(f"ALTER INDEX {new}_pkey RENAME TO {name}_pkey")


def split(schema_editor, table: str, fill_text) -> None:
    """Move ``table``'s one search table of 0010 into the text and vector
    tables; ``fill_text(schema_editor, old, new)`` copies the text rows."""
    text, vector = f"{table}_pgsearch", f"{table}_pgvector"
    schema_editor.execute(
        f"CREATE TABLE {vector} (row_id bigint PRIMARY KEY,"
        " scope_id bigint NOT NULL, owner_id bigint NOT NULL,"
        f" embedding vector({DIM}) NOT NULL)"
    )
    schema_editor.execute(
        f"INSERT INTO {vector} SELECT row_id, scope_id, owner_id, embedding"
        f" FROM {text} WHERE embedding IS NOT NULL"
    )
    # Indexes after the rows: one build, faster than row by row.
    schema_editor.execute(
        f"CREATE INDEX {vector}_hnsw ON {vector} USING hnsw (embedding vector_cosine_ops)"
    )
    schema_editor.execute(
        f"CREATE INDEX {vector}_scope ON {vector} (scope_id, owner_id)"
    )
    new = f"{table}_pgtext_new"
    schema_editor.execute(text_table_sql(new))
    fill_text(schema_editor, text, new)
    _swap_in(schema_editor, new, text)
    schema_editor.execute(
        f"CREATE INDEX {text}_tsv ON {text} USING gin (tsv) WITH (fastupdate = off)"
    )
    schema_editor.execute(f"CREATE INDEX {text}_scope ON {text} (scope_id, owner_id)")


def join(schema_editor, table: str) -> None:
    """Make 0010's one search table of ``table`` again from the two."""
    text, vector = f"{table}_pgsearch", f"{table}_pgvector"
    new = f"{table}_pgsearch_joined"
    schema_editor.execute(
        f"CREATE TABLE {new} (row_id bigint PRIMARY KEY,"
        " scope_id bigint NOT NULL, owner_id bigint NOT NULL, content text,"
        " tsv tsvector GENERATED ALWAYS AS"
        " (to_tsvector('english', coalesce(content, ''))) STORED,"
        f" embedding vector({DIM}))"
    )
    schema_editor.execute(
        f"INSERT INTO {new} (row_id, scope_id, owner_id, content, embedding)"
        " SELECT row_id, coalesce(t.scope_id, v.scope_id),"
        " coalesce(t.owner_id, v.owner_id), t.content, v.embedding"
        f" FROM {text} t FULL JOIN {vector} v USING (row_id)"
    )
    schema_editor.execute(f"DROP TABLE {vector}")
    _swap_in(schema_editor, new, text)
    schema_editor.execute(f"CREATE INDEX {text}_tsv ON {text} USING gin (tsv)")
    schema_editor.execute(
        f"CREATE INDEX {text}_hnsw ON {text} USING hnsw (embedding vector_cosine_ops)"
    )
    schema_editor.execute(f"CREATE INDEX {text}_scope ON {text} (scope_id, owner_id)")


def _text_with_context(table: str, partition: str, order: str, meta: str | None):
    """``fill_text`` for one of memory's tables: each row with its context
    and its date in words, worked out as 0008 works them out."""
    window = f"OVER (PARTITION BY {partition} ORDER BY {order})"

    def fill_text(schema_editor, old: str, new: str) -> None:
        connection = schema_editor.connection
        # The windows run over the whole base table, the join after them: a
        # row's context is the rows before it whether or not those are
        # indexed.
        with connection.chunked_cursor() as read:
            read.execute(
                f"SELECT o.row_id, o.scope_id, o.owner_id, o.content, w.two, w.one,"
                f" w.meta, w.created_at FROM {old} o JOIN (SELECT id,"
                f" lag(content, 2) {window} AS two, lag(content, 1) {window} AS one,"
                f" {f'{meta}::text' if meta else 'NULL'} AS meta, created_at"
                f" FROM {table}) w ON w.id = o.row_id WHERE o.content IS NOT NULL"
            )
            while batch := read.fetchmany(BATCH):
                rows = [
                    (
                        row_id,
                        scope_id,
                        owner_id,
                        content,
                        "\n".join(t[: fts_0008.CONTEXT_CHARS] for t in (two, one) if t),
                        fts_0008._words(fts_0008._day(metadata, created_at)),
                    )
                    for row_id, scope_id, owner_id, content, two, one, metadata, created_at in batch
                ]
                with connection.cursor() as write:
                    write.executemany(
                        f"INSERT INTO {new} (row_id, scope_id, owner_id, content,"
                        " context, dated) VALUES (%s, %s, %s, %s, %s, %s)",
                        rows,
                    )

    return fill_text


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, partition, order, meta in fts_0008.TABLES:
        split(schema_editor, table, _text_with_context(table, partition, order, meta))


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, *_rest in fts_0008.TABLES:
        join(schema_editor, table)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0010_postgres_search"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
