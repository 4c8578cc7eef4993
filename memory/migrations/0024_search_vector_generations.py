"""A token per vector index and scope, replaced by every write to its
vectors: a search process holds a scope's binary vectors in memory
(memory.search.chunks.held_hamming_knn) while the token it read them under
is current.  A plain table beside the vec0 tables; SQLite only."""

from django.db import migrations

SQL = (
    "CREATE TABLE IF NOT EXISTS memory_search_generation ("
    "table_name text NOT NULL, scope_id integer NOT NULL, token integer NOT NULL,"
    " PRIMARY KEY (table_name, scope_id))"
)


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(SQL)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute("DROP TABLE IF EXISTS memory_search_generation")


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0023_retrieval_when_weight"),
    ]

    operations = [
        migrations.RunPython(create, drop),
    ]
