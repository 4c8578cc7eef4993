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
