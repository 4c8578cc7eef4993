"""The passages' search table on PostgreSQL gets the ``context`` and
``dated`` columns and the three-part ``tsv`` that memory's 0011 gives the
other search tables (every table the engine reads has them; passages leave
them empty, as on SQLite).  PostgreSQL only."""

import importlib

from django.db import migrations

memory_0011 = importlib.import_module(
    "memory.migrations.0011_pgsearch_context_and_date"
)

INDEX = "folders_filepassage_pgsearch"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    memory_0011.add_text_columns(schema_editor, INDEX)
    memory_0011.make_tsv(schema_editor, INDEX, memory_0011.TSV_ALL)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    memory_0011.make_tsv(schema_editor, INDEX, memory_0011.TSV_CONTENT)
    schema_editor.execute(f"ALTER TABLE {INDEX} DROP COLUMN context, DROP COLUMN dated")


class Migration(migrations.Migration):
    dependencies = [
        ("folders", "0003_passage_pgsearch"),
        ("memory", "0011_pgsearch_context_and_date"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
