"""The search index tables on PostgreSQL: full text and pgvector.

One ``<table>_pgsearch`` table beside each indexed table (at the time of
this migration memory.search.postgres_index): the text, a generated
``tsvector`` under a GIN index, the vector under an HNSW index (cosine
distance) and the two filter columns under a B-tree.  Existing rows get
their text now and their vectors from the embedding backfill.  The
``vector`` extension must be available to the server: without it the
migration stops with an error that says how to get it.  SQLite keeps its
FTS5/vec0 tables (0003, 0006) and skips this.
"""

from django.core.exceptions import ImproperlyConfigured
from django.db import migrations

INDEXED_TABLES = ("memory_archivalentry", "memory_message")
DIM = 384

MISSING_PGVECTOR = (
    "PostgreSQL has no 'vector' extension available: search on PostgreSQL needs"
    " pgvector (0.8 or later). Install it on the database server (Debian/Ubuntu:"
    " apt-get install postgresql-<major>-pgvector; Docker: the"
    " pgvector/pgvector:pg16 image; managed services: enable the 'vector'"
    " extension), then run migrate again."
)


def create_pg_search(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cur.fetchone() is None:
            raise ImproperlyConfigured(MISSING_PGVECTOR)
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS vector")
    for table in INDEXED_TABLES:
        index = f"{table}_pgsearch"
        schema_editor.execute(
            f"CREATE TABLE {index} ("
            " row_id bigint PRIMARY KEY,"
            " scope_id bigint NOT NULL,"
            " owner_id bigint NOT NULL,"
            " content text,"
            " tsv tsvector GENERATED ALWAYS AS"
            " (to_tsvector('english', coalesce(content, ''))) STORED,"
            f" embedding vector({DIM}))"
        )
        schema_editor.execute(f"CREATE INDEX {index}_tsv ON {index} USING gin (tsv)")
        schema_editor.execute(
            f"CREATE INDEX {index}_hnsw ON {index}"
            " USING hnsw (embedding vector_cosine_ops)"
        )
        schema_editor.execute(
            f"CREATE INDEX {index}_scope ON {index} (scope_id, owner_id)"
        )
        schema_editor.execute(
            f"INSERT INTO {index} (row_id, scope_id, owner_id, content)"
            f" SELECT id, constellation_id, agent_id, content FROM {table}"
        )


def drop_pg_search(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in INDEXED_TABLES:
        schema_editor.execute(f"DROP TABLE IF EXISTS {table}_pgsearch")


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0009_retrieval_fusion"),
    ]

    operations = [
        migrations.RunPython(create_pg_search, drop_pg_search),
    ]
