"""Keyword indexes get a ``context`` and a ``dated`` column
(memory.search.index.TextIndex.create_sql, context_text, date_words).

FTS5 tables cannot gain a column, so each ``<table>_fts`` is renamed, made
again with the columns and filled from its base table: a row's context is
the content of the two rows before it (an archival entry's: its agent's
previous entries by id; a message's: its conversation's previous
positions), each cut to 1000 characters; its date in words is an archival
entry's metadata ``date`` when that is an ISO date, else the day the row
was stored.  Only rows the old index held are copied.  SQLite only.
"""

import json
from datetime import date, datetime

from django.db import migrations

CONTEXT_CHARS = 1000
BATCH = 1000

MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
WEEKDAYS = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
]

# (table, partition, order, metadata column) of each indexed table.
TABLES = (
    ("memory_archivalentry", "agent_id", "id", "metadata"),
    ("memory_message", "conversation_id", "position", None),
)


def _fts_sql(table: str, *, columns: str) -> str:
    return (
        f"CREATE VIRTUAL TABLE {table}_fts USING fts5(content,"
        f" scope_id UNINDEXED, owner_id UNINDEXED,{columns}"
        " tokenize='porter unicode61')"
    )


def _day(metadata: str | None, created_at: str) -> date:
    try:
        given = json.loads(metadata).get("date") if metadata else None
        if isinstance(given, str):
            return datetime.fromisoformat(given.strip()).date()
    except (ValueError, AttributeError):
        pass
    return datetime.fromisoformat(str(created_at)).date()


def _words(day: date) -> str:
    month = MONTHS[day.month - 1]
    return f"{day.day} {month} {month[:3]} {WEEKDAYS[day.weekday()]} {day.year}"


def add_columns(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for table, partition, order, metadata in TABLES:
        schema_editor.execute(f"ALTER TABLE {table}_fts RENAME TO {table}_fts_old")
        schema_editor.execute(_fts_sql(table, columns=" context, dated,"))
        window = f"OVER (PARTITION BY {partition} ORDER BY {order})"
        with schema_editor.connection.cursor() as read:
            read.execute(
                f"SELECT id, content, constellation_id, agent_id,"
                f" lag(content, 2) {window}, lag(content, 1) {window},"
                f" {metadata or 'NULL'}, created_at FROM {table}"
                f" WHERE id IN (SELECT rowid FROM {table}_fts_old)"
            )
            while rows := read.fetchmany(BATCH):
                params = [
                    (
                        row_id,
                        content,
                        scope_id,
                        owner_id,
                        "\n".join(t[:CONTEXT_CHARS] for t in (two, one) if t),
                        _words(_day(meta, created_at)),
                    )
                    for row_id, content, scope_id, owner_id, two, one, meta, created_at in rows
                ]
                with schema_editor.connection.cursor() as write:
                    write.executemany(
                        f"INSERT INTO {table}_fts(rowid, content, scope_id,"
                        " owner_id, context, dated) VALUES (%s, %s, %s, %s, %s, %s)",
                        params,
                    )
        schema_editor.execute(f"DROP TABLE {table}_fts_old")


def drop_columns(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for table, *_rest in TABLES:
        schema_editor.execute(f"ALTER TABLE {table}_fts RENAME TO {table}_fts_old")
        schema_editor.execute(_fts_sql(table, columns=""))
        schema_editor.execute(
            f"INSERT INTO {table}_fts(rowid, content, scope_id, owner_id)"
            f" SELECT rowid, content, scope_id, owner_id FROM {table}_fts_old"
        )
        schema_editor.execute(f"DROP TABLE {table}_fts_old")


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0007_block_seen"),
    ]

    operations = [
        migrations.RunPython(add_columns, drop_columns),
    ]
