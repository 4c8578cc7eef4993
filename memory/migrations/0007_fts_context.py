"""Keyword indexes get a ``context`` column: the text of the rows before
each row (memory.search.index.TextIndex.create_sql, context_text).

FTS5 tables cannot gain a column, so each ``<table>_fts`` is renamed, made
again with the column and filled from its base table: a row's context is
the content of the two rows before it (an archival entry's: its agent's
previous entries by id; a message's: its conversation's previous
positions), each cut to 1000 characters.  Only rows the old index held are
copied.  SQLite only.
"""

from django.db import migrations

CONTEXT_CHARS = 1000

# (table, partition, order) of the rows whose neighbours make the context.
TABLES = (
    ("memory_archivalentry", "agent_id", "id"),
    ("memory_message", "conversation_id", "position"),
)


def _fts_sql(table: str, *, context: bool) -> str:
    column = " context," if context else ""
    return (
        f"CREATE VIRTUAL TABLE {table}_fts USING fts5(content,"
        f" scope_id UNINDEXED, owner_id UNINDEXED,{column}"
        " tokenize='porter unicode61')"
    )


def _rebuild(schema_editor, *, context: bool) -> None:
    if schema_editor.connection.vendor != "sqlite":
        return
    for table, partition, order in TABLES:
        schema_editor.execute(f"ALTER TABLE {table}_fts RENAME TO {table}_fts_old")
        schema_editor.execute(_fts_sql(table, context=context))
        if context:
            window = f"OVER (PARTITION BY {partition} ORDER BY {order})"
            schema_editor.execute(
                f"INSERT INTO {table}_fts(rowid, content, scope_id, owner_id,"
                " context) SELECT id, content, constellation_id, agent_id,"
                f" coalesce(substr(lag(content, 2) {window}, 1, {CONTEXT_CHARS})"
                " || char(10), '')"
                f" || coalesce(substr(lag(content, 1) {window}, 1, {CONTEXT_CHARS}),"
                " '')"
                f" FROM {table} WHERE id IN (SELECT rowid FROM {table}_fts_old)"
            )
        else:
            schema_editor.execute(
                f"INSERT INTO {table}_fts(rowid, content, scope_id, owner_id)"
                f" SELECT rowid, content, scope_id, owner_id FROM {table}_fts_old"
            )
        schema_editor.execute(f"DROP TABLE {table}_fts_old")


def add_context(apps, schema_editor):
    _rebuild(schema_editor, context=True)


def drop_context(apps, schema_editor):
    _rebuild(schema_editor, context=False)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0006_vector_tables_l2"),
    ]

    operations = [
        migrations.RunPython(add_context, drop_context),
    ]
