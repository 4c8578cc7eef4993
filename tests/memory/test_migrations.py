"""Data migrations move what is stored, losing nothing."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memory.blocks import documents


def _migrate(target: tuple[str, str] | None = None):
    """Migrate to ``target`` (None: back to the latest of every app)."""
    executor = MigrationExecutor(connection)
    targets = [target] if target else executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_block_snapshots_move_into_their_own_rows():
    apps = _migrate(("memory", "0004_block_version_counters"))
    User = apps.get_model("auth", "User")
    Constellation = apps.get_model("coordination", "Constellation")
    MemoryBlock = apps.get_model("memory", "MemoryBlock")
    partner = User.objects.create(username="mig")
    constellation = Constellation.objects.create(name="Mig", partner=partner)
    doc = documents.LoroDoc()
    doc.get_text("content").insert(0, "kept across the migration")
    doc.commit()
    snapshot = documents.snapshot(doc)
    full = MemoryBlock.objects.create(
        constellation=constellation, label="full", snapshot=snapshot
    )
    empty = MemoryBlock.objects.create(constellation=constellation, label="empty")

    apps = _migrate(("memory", "0005_block_snapshot_row"))
    BlockSnapshot = apps.get_model("memory", "BlockSnapshot")
    rows = dict(BlockSnapshot.objects.values_list("block_id", "data"))
    assert bytes(rows[full.pk]) == snapshot
    assert bytes(rows[empty.pk]) == b""
    loaded = documents.document_load(bytes(rows[full.pk]), [])
    assert loaded.get_text("content").to_string() == "kept across the migration"

    apps = _migrate(("memory", "0004_block_version_counters"))
    MemoryBlock = apps.get_model("memory", "MemoryBlock")
    assert bytes(MemoryBlock.objects.get(pk=full.pk).snapshot) == snapshot
    _migrate()


@pytest.mark.pgvector
@pytest.mark.django_db(transaction=True)
def test_postgres_search_rows_get_their_context_and_date_in_words():
    apps = _migrate(("memory", "0010_postgres_search"))
    User = apps.get_model("auth", "User")
    Constellation = apps.get_model("coordination", "Constellation")
    Agent = apps.get_model("coordination", "Agent")
    ArchivalEntry = apps.get_model("memory", "ArchivalEntry")
    partner = User.objects.create(username="mig")
    constellation = Constellation.objects.create(name="Mig", partner=partner)
    agent = Agent.objects.create(constellation=constellation, name="Mig")
    entries = [
        ArchivalEntry.objects.create(
            agent=agent,
            constellation=constellation,
            content=content,
            content_hash=content,
            metadata=metadata,
        )
        for content, metadata in (
            ("the heron", {"date": "2024-01-07"}),
            ("the lake", {"date": "not a date"}),
            ("the reeds", {}),
        )
    ]
    table = "memory_archivalentry_pgsearch"
    with connection.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {table} (row_id, scope_id, owner_id, content)"
            " VALUES (%s, %s, %s, %s)",
            [(e.pk, constellation.pk, agent.pk, e.content) for e in entries],
        )

    _migrate(("memory", "0011_pgsearch_context_and_date"))
    with connection.cursor() as cur:
        cur.execute(f"SELECT context, dated FROM {table} ORDER BY row_id")
        rows = cur.fetchall()
        cur.execute(
            f"SELECT row_id FROM {table} WHERE tsv @@ to_tsquery('english', 'heron:C')"
        )
        heron_in_context = sorted(row_id for (row_id,) in cur.fetchall())
    assert [context for context, _dated in rows] == [
        "",
        "the heron",
        "the heron\nthe lake",
    ]
    assert rows[0][1] == "7 January Jan Sunday 2024"
    stored = entries[1].created_at.date()
    assert rows[1][1].startswith(f"{stored.day} {stored:%B} ")
    assert heron_in_context == [entries[1].pk, entries[2].pk]
    _migrate()
