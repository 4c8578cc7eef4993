"""The passages' FTS5 table gains the engine's ``context`` and ``dated``
columns (every index the engine reads has them; passages leave them empty).

SQLite only, like the table itself: rebuilt and refilled from the passages.
"""

from django.db import migrations

TABLE = "folders_filepassage"
FTS_COLUMNS = (
    "content, scope_id UNINDEXED, owner_id UNINDEXED, context, dated, "
    "tokenize='porter unicode61'"
)


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {TABLE}_fts")
        cursor.execute(f"CREATE VIRTUAL TABLE {TABLE}_fts USING fts5({FTS_COLUMNS})")
        cursor.execute(
            f"INSERT INTO {TABLE}_fts(rowid, content, scope_id, owner_id, context,"
            f" dated) SELECT id, content, constellation_id, folder_id, '', ''"
            f" FROM {TABLE}"
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {TABLE}_fts")
        cursor.execute(
            f"CREATE VIRTUAL TABLE {TABLE}_fts USING fts5(content,"
            " scope_id UNINDEXED, owner_id UNINDEXED, tokenize='porter unicode61')"
        )
        cursor.execute(
            f"INSERT INTO {TABLE}_fts(rowid, content, scope_id, owner_id)"
            f" SELECT id, content, constellation_id, folder_id FROM {TABLE}"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("folders", "0001_initial"),
        ("memory", "0008_fts_context_and_date"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
