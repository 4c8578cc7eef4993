"""Exact vector tables hold unit vectors under vec0's L2 metric.

Same order as cosine for unit vectors at less cost per row searched
(memory.retrieval.TextIndex.create_sql).  vec0 tables cannot be renamed or
altered, so each ``<table>_vec`` is dropped and filled again from the float
copies kept in the binary table's auxiliary column (sqlite-vec 0.1.9 names
its shadow table ``<table>_vbin_auxiliary``, first column ``value00``).
SQLite only.
"""

import numpy as np
from django.db import migrations

INDEXED_TABLES = ("memory_archivalentry", "memory_message")
DIM = 384
BATCH = 1000


def _rebuild(schema_editor, *, unit: bool) -> None:
    if schema_editor.connection.vendor != "sqlite":
        return
    metric = "" if unit else " distance_metric=cosine"
    for table in INDEXED_TABLES:
        schema_editor.execute(f"DROP TABLE IF EXISTS {table}_vec")
        schema_editor.execute(
            f"CREATE VIRTUAL TABLE {table}_vec USING vec0("
            f"embedding float[{DIM}]{metric},"
            " scope_id integer partition key, owner_id integer)"
        )
        with schema_editor.connection.cursor() as read:
            read.execute(
                f"SELECT t.id, a.value00, t.constellation_id, t.agent_id"
                f" FROM {table}_vbin_auxiliary a JOIN {table} t ON t.id = a.rowid"
            )
            while rows := read.fetchmany(BATCH):
                params = []
                for row_id, blob, scope_id, owner_id in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    norm = float(np.linalg.norm(vector))
                    if unit and norm:
                        vector = vector / norm
                    params.append((row_id, vector.tobytes(), scope_id, owner_id))
                with schema_editor.connection.cursor() as write:
                    write.executemany(
                        f"INSERT INTO {table}_vec(rowid, embedding, scope_id,"
                        " owner_id) VALUES (%s, %s, %s, %s)",
                        params,
                    )


def to_l2(apps, schema_editor):
    _rebuild(schema_editor, unit=True)


def to_cosine(apps, schema_editor):
    _rebuild(schema_editor, unit=False)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0005_block_snapshot_row"),
    ]

    operations = [
        migrations.RunPython(to_l2, to_cosine),
    ]
