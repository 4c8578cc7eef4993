"""The passages' search table on PostgreSQL, as memory's 0010 makes one
for archival entries and messages: text with a generated ``tsvector`` under
GIN, the vector under HNSW (cosine), the filter columns under a B-tree.
SQLite keeps its FTS5/vec0 tables and skips this."""

from django.db import migrations

TABLE = "folders_filepassage"
INDEX = f"{TABLE}_pgsearch"
DIM = 384


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        f"CREATE TABLE {INDEX} ("
        " row_id bigint PRIMARY KEY,"
        " scope_id bigint NOT NULL,"
        " owner_id bigint NOT NULL,"
        " content text,"
        " tsv tsvector GENERATED ALWAYS AS"
        " (to_tsvector('english', coalesce(content, ''))) STORED,"
        f" embedding vector({DIM}))"
    )
    schema_editor.execute(f"CREATE INDEX {INDEX}_tsv ON {INDEX} USING gin (tsv)")
    schema_editor.execute(
        f"CREATE INDEX {INDEX}_hnsw ON {INDEX} USING hnsw (embedding vector_cosine_ops)"
    )
    schema_editor.execute(f"CREATE INDEX {INDEX}_scope ON {INDEX} (scope_id, owner_id)")
    schema_editor.execute(
        f"INSERT INTO {INDEX} (row_id, scope_id, owner_id, content)"
        f" SELECT id, constellation_id, folder_id, content FROM {TABLE}"
    )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP TABLE IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("folders", "0002_passage_fts_context"),
        ("memory", "0010_postgres_search"),
    ]

    operations = [migrations.RunPython(create, drop)]
