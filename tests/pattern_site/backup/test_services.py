"""Export and import of whole constellations."""

import io
import json
import zipfile
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model

from activity.models import ActivityEvent, ActivityTerm
from memory.longterm.search import memory_search
from memory.search.index import index_clear
from memory.search.registry import search_tables
from pattern_site.backup.archive import MANIFEST, InvalidArchive
from pattern_site.backup.registry import EXCLUDED, OWNED, SITE_APPS, USER
from pattern_site.backup.services import (
    constellation_export,
    constellation_import,
    constellation_rows,
    row_remap,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, AgentToken, Constellation
from pattern_site.kernel.agents.services import agent_token_issue
from pattern_site.kernel.errors import Conflict, HistoryFolded


def export_bytes(constellation: Any, **kwargs: Any) -> bytes:
    out = io.BytesIO()
    constellation_export(constellation=constellation, out=out, **kwargs)
    return out.getvalue()


def canonical(constellation: Any) -> dict[str, list]:
    """Every row of the constellation, with each id replaced by the row's
    position in its table and users by their usernames: equal on two sites
    holding the same constellation, whatever ids each gave its rows."""
    rows = constellation_rows(constellation)
    maps: dict[str, dict] = {
        USER: dict(get_user_model().objects.values_list("pk", "username"))
    }
    for owned in OWNED:
        maps[owned.label] = {r["pk"]: i for i, r in enumerate(rows[owned.label])}
    return {
        owned.label: [row_remap(owned, row, maps) for row in rows[owned.label]]
        for owned in OWNED
    }


def site_empty() -> None:
    """Empty every table a constellation lives in, users and indexes too."""
    Constellation.objects.all().delete()
    get_user_model().objects.all().delete()
    for table in search_tables():
        index_clear(table.index)
    for owned in OWNED:
        assert not owned.model.objects.exists(), owned.label


@pytest.fixture
def built(rich_constellation: Any) -> Any:
    return rich_constellation


def test_every_model_of_the_site_is_exported_or_excluded_on_purpose():
    covered = {o.model for o in OWNED} | set(EXCLUDED)
    models = {m for app in SITE_APPS for m in apps.get_app_config(app).get_models()}
    assert models - covered == set()


def test_round_trip_into_an_empty_site_reproduces_every_table(built):
    before = canonical(built)
    # Something in every table, or the comparison proves little.
    assert [label for label, rows in before.items() if not rows] == [], [
        label for label, rows in before.items() if not rows
    ]
    archive = export_bytes(built)
    old_ids = set(Agent.objects.values_list("pk", flat=True))

    site_empty()
    result = constellation_import(source=archive)

    assert canonical(result.constellation) == before
    # The ids did change, and what named them in JSON followed.
    lead = result.constellation.agents.get(name="Lead")
    assert lead.pk not in old_ids
    desk = result.constellation.agent_groups.get(name="Desk")
    assert desk.config["leader_id"] == lead.pk
    # The comparison above reads ids with the importer's own declarations:
    # each kind of declared id is also checked on its own.
    notes = result.constellation.memory_blocks.get(label="notes")
    assert (str(lead.pk), "agent") in notes.updates.values_list(
        "actor_id", "actor_kind"
    )
    assert notes.updates.filter(pk=notes.snapshot_upto).exists()
    assert lead.blocks_seen.get(block=notes).upto in set(
        notes.updates.values_list("pk", flat=True)
    )
    partner = get_user_model().objects.get(username="partner")
    report = result.constellation.tasks.get(title="Report")
    assert report.updated_by == f"human:{partner.pk}"
    # What an event is about follows its object's new id.
    about = ActivityEvent.objects.filter(object_kind="task").values_list(
        "object_id", flat=True
    )
    assert report.pk in set(about)
    assert set(about) <= set(result.constellation.tasks.values_list("pk", flat=True))
    assert set(
        ActivityTerm.objects.values_list("constellation_id_value", flat=True)
    ) == {result.constellation.pk}
    assert result.agents == ["Helper", "Lead", "Scribe"]
    # The working notes came with their conversation.
    planning = lead.conversations.get(title="planning")
    assert list(planning.scratchpad_entries.values_list("key", "value")) == [
        ("agenda", {"open": ["charts"], "n": 2})
    ]
    assert get_user_model().objects.get(username="member").has_usable_password() is (
        False
    )


def test_imported_memory_is_searchable_and_its_blocks_read_the_same(built):
    from memory.blocks.selectors import block_value
    from memory.models import MemoryBlock

    def lead_searches(mode: str) -> tuple[str, list[str]]:
        lead = Agent.objects.get(name="Lead")
        found = memory_search(actor=Actor.for_agent(lead), query="tea", mode=mode)
        return found.mode_used, [hit.row.content for _kind, hit in found.hits]

    values = {b.label: block_value(block=b) for b in MemoryBlock.objects.all()}
    found = {mode: lead_searches(mode) for mode in ("fts", "vector")}
    assert found["vector"][0] == "vector"  # the vectors travel too
    assert "The partner takes tea at five." in found["fts"][1]
    archive = export_bytes(built)
    site_empty()
    constellation_import(source=archive)

    assert {mode: lead_searches(mode) for mode in ("fts", "vector")} == found
    assert {b.label: block_value(block=b) for b in MemoryBlock.objects.all()} == values


def test_a_folded_block_keeps_its_kept_history_through_a_round_trip(built):
    from memory.blocks.selectors import (
        block_value,
        block_version_by_number,
        block_version_view,
    )
    from memory.blocks.services import block_append
    from memory.models import MemoryBlock

    def journal_versions() -> tuple[Any, list[str]]:
        journal = MemoryBlock.objects.get(label="journal")
        held = [
            block_version_view(
                block=journal,
                version_id=block_version_by_number(block=journal, number=n).pk,
            ).rendered
            for n in (4, 5, 6, 7)
        ]
        return journal, held

    journal, held = journal_versions()
    assert journal.history_from == block_version_by_number(block=journal, number=4).pk
    archive = export_bytes(built)
    site_empty()
    constellation_import(source=archive)

    journal, imported = journal_versions()
    assert imported == held
    assert journal.history_from == block_version_by_number(block=journal, number=4).pk
    with pytest.raises(HistoryFolded):
        block_version_view(
            block=journal,
            version_id=block_version_by_number(block=journal, number=3).pk,
        )
    block_append(actor=Actor.system(), block=journal, content="day 8")
    assert block_value(block=journal).endswith("day 7\nday 8")


def test_tokens_never_leave_the_site(built):
    issued = agent_token_issue(agent=Agent.objects.get(name="Lead"))
    archive = export_bytes(built)
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        text = b"".join(zf.read(n) for n in zf.namelist())
    assert issued.raw.encode() not in text
    assert issued.token.key_hash.encode() not in text
    site_empty()
    constellation_import(source=archive)
    assert not AgentToken.objects.exists()


def test_a_taken_name_is_refused_and_rename_imports_beside_it(built):
    before = canonical(built)
    archive = export_bytes(built)
    with pytest.raises(Conflict, match="'Pattern' already exists"):
        constellation_import(source=archive)
    assert Constellation.objects.count() == 1

    copy = constellation_import(source=archive, rename="Pattern moved")

    assert copy.constellation.name == "Pattern moved"
    assert copy.counts == {label: len(rows) for label, rows in before.items()}
    assert {k: len(v) for k, v in canonical(copy.constellation).items()} == (
        copy.counts
    )
    # The original is untouched, and the copy's blocks got ids of their own.
    assert canonical(built) == before
    assert not set(built.memory_blocks.values_list("pk", flat=True)) & set(
        copy.constellation.memory_blocks.values_list("pk", flat=True)
    )


def _rewrite(archive: bytes, change: Any) -> bytes:
    src = zipfile.ZipFile(io.BytesIO(archive))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, change(name, src.read(name)))
    return out.getvalue()


def _tamper(name: str, data: bytes) -> bytes:
    if name == "data/coordination.agent.json":
        return data.replace(b'"Helper"', b'"Intruder"')
    return data


def _future(name: str, data: bytes) -> bytes:
    if name == MANIFEST:
        return json.dumps({**json.loads(data), "format_version": 99}).encode()
    return data


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda a: a[: len(a) // 2], "not a readable zip"),
        (lambda a: _rewrite(a, _tamper), "does not match its SHA-256"),
        (lambda a: _rewrite(a, _future), "format version 99"),
        (lambda a: b"not a zip at all", "not a readable zip"),
    ],
    ids=["truncated", "tampered", "wrong-version", "garbage"],
)
def test_a_damaged_archive_imports_nothing(built, damage, message):
    archive = damage(export_bytes(built))
    site_empty()
    with pytest.raises(InvalidArchive, match=message):
        constellation_import(source=archive)
    for owned in OWNED:
        assert not owned.model.objects.exists(), owned.label
    assert not get_user_model().objects.exists()


def test_without_vectors_the_rows_are_embedded_again(built):
    from memory.models import ArchivalEntry

    archive = export_bytes(built, vectors=False)
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        assert json.loads(zf.read(MANIFEST))["vectors"] is False
    site_empty()
    result = constellation_import(source=archive)
    assert result.reembed >= ArchivalEntry.objects.count() > 0
