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
def test_postgres_search_splits_into_text_with_context_and_date_and_vectors():
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
    heron, lake, reeds = (e.pk for e in entries)
    c, a = constellation.pk, agent.pk
    one, two = "[" + ",".join(["1"] * 384) + "]", "[" + ",".join(["2"] * 384) + "]"
    search = "memory_archivalentry_pgsearch"
    with connection.cursor() as cur:
        # The heron with text and a vector, the lake with text only, the
        # reeds with a vector only (its text not indexed yet).
        cur.executemany(
            f"INSERT INTO {search} (row_id, scope_id, owner_id, content, embedding)"
            " VALUES (%s, %s, %s, %s, %s::vector)",
            [
                (heron, c, a, "the heron", one),
                (lake, c, a, "the lake", None),
                (reeds, c, a, None, two),
            ],
        )

    _migrate(("memory", "0011_pgsearch_text_and_vector_tables"))
    with connection.cursor() as cur:
        cur.execute(f"SELECT row_id, context, dated FROM {search} ORDER BY row_id")
        texts = cur.fetchall()
        cur.execute(
            f"SELECT row_id FROM {search} WHERE tsv @@ to_tsquery('english', 'heron:C')"
        )
        heron_in_context = [row_id for (row_id,) in cur.fetchall()]
        cur.execute(
            "SELECT row_id, embedding::text FROM memory_archivalentry_pgvector"
            " ORDER BY row_id"
        )
        vectors = cur.fetchall()
    stored = entries[1].created_at.date()
    assert [(row_id, context) for row_id, context, _d in texts] == [
        (heron, ""),
        (lake, "the heron"),
    ]
    assert texts[0][2] == "7 January Jan Sunday 2024"
    assert texts[1][2].startswith(f"{stored.day} {stored:%B} ")
    assert heron_in_context == [lake]
    assert vectors == [(heron, one), (reeds, two)]

    _migrate(("memory", "0010_postgres_search"))
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT row_id, content, embedding::text FROM {search} ORDER BY row_id"
        )
        assert cur.fetchall() == [
            (heron, "the heron", one),
            (lake, "the lake", None),
            (reeds, None, two),
        ]
    _migrate()


@pytest.mark.django_db(transaction=True)
def test_existing_archival_entries_become_long_term_and_people_become_partner():
    apps = _migrate(("memory", "0011_pgsearch_text_and_vector_tables"))
    User = apps.get_model("auth", "User")
    Constellation = apps.get_model("coordination", "Constellation")
    Agent = apps.get_model("coordination", "Agent")
    ArchivalEntry = apps.get_model("memory", "ArchivalEntry")
    constellation = Constellation.objects.create(
        name="Mig", partner=User.objects.create(username="mig")
    )
    agent = Agent.objects.create(constellation=constellation, name="Old")
    for source in ("user", "agent"):
        ArchivalEntry.objects.create(
            agent=agent,
            constellation=constellation,
            content=f"filed by {source}",
            source=source,
            content_hash=source,
        )
    apps = _migrate(("memory", "0013_archival_lifecycle_fill"))
    ArchivalEntry = apps.get_model("memory", "ArchivalEntry")
    rows = set(ArchivalEntry.objects.values_list("source", "tier", "lifetime"))
    assert rows == {
        ("partner", "agent", "long_term"),
        ("agent", "agent", "long_term"),
    }
    assert not ArchivalEntry.objects.filter(superseded_at__isnull=False).exists()
    apps = _migrate(("memory", "0011_pgsearch_text_and_vector_tables"))
    ArchivalEntry = apps.get_model("memory", "ArchivalEntry")
    assert ArchivalEntry.objects.filter(source="user").count() == 1
    _migrate()
