"""The passages' search table on PostgreSQL becomes the text and vector
tables memory's 0011 makes of the others (every table the engine reads has
the same layout; passages leave ``context`` and ``dated`` empty, as on
SQLite).  PostgreSQL only."""

import importlib

from django.db import migrations

memory_0011 = importlib.import_module(
    "memory.migrations.0011_pgsearch_text_and_vector_tables"
)

TABLE = "folders_filepassage"


def copy_text(schema_editor, old: str, new: str) -> None:
    schema_editor.execute(
        f"INSERT INTO {new} (row_id, scope_id, owner_id, content)"
        f" SELECT row_id, scope_id, owner_id, content FROM {old}"
        " WHERE content IS NOT NULL"
    )


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    memory_0011.split(schema_editor, TABLE, copy_text)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    memory_0011.join(schema_editor, TABLE)


class Migration(migrations.Migration):
    dependencies = [
        ("folders", "0003_passage_pgsearch"),
        ("memory", "0011_pgsearch_text_and_vector_tables"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
