"""Counting retrievals of archival entries, recorded in batches off the
search path."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import (
    transaction,
)
from django.db.models import Case, DateTimeField, F, Value, When
from django.utils import timezone

from memory.longterm.models import ArchivalEntry
from memory.longterm.tasks import archival_entries_record_access_task
from pattern_site.kernel.batching import Batcher


def archival_entries_record_access(
    *, accesses: Sequence[tuple[int, int, datetime]]
) -> int:
    """Count retrievals of entries (search hits, reads), given as
    (entry id, times retrieved, last time) in one statement; returns rows
    touched."""
    if not accesses:
        return 0
    times = Case(
        *[When(pk=entry_id, then=Value(n)) for entry_id, n, _at in accesses],
        default=Value(0),
    )
    last = Case(
        *[When(pk=entry_id, then=Value(at)) for entry_id, _n, at in accesses],
        default=F("accessed_at"),
        output_field=DateTimeField(),
    )
    return ArchivalEntry.objects.filter(pk__in=[a[0] for a in accesses]).update(
        access_count=F("access_count") + times, accessed_at=last
    )


def _merge_access(
    old: tuple[int, datetime] | None, new: tuple[int, datetime]
) -> tuple[int, datetime]:
    return (new[0] + (old[0] if old else 0), new[1])


def _send_accesses(pending: dict[int, tuple[int, datetime]]) -> None:
    archival_entries_record_access_task.delay(
        [[pk, n, at.isoformat()] for pk, (n, at) in pending.items()]
    )


# Retrievals counted in this process are recorded by one task a second (or
# as soon as 500 entries wait): a task per search would put a broker write
# on every search's path.
_ACCESSES: Batcher[int, tuple[int, datetime]] = Batcher(
    name="archival access counts",
    send=_send_accesses,
    merge=_merge_access,
    delay=1.0,
    max_items=500,
    eager=lambda: bool(archival_entries_record_access_task.app.conf.task_always_eager),
)


def archival_access_record_later(*, entry_ids: Sequence[int]) -> None:
    """Count a retrieval of each entry after commit, off the search's path."""
    if not entry_ids:
        return
    ids, at = list(entry_ids), timezone.now()
    transaction.on_commit(lambda: _ACCESSES.add((pk, (1, at)) for pk in ids))


def archival_access_flush() -> int:
    """Send this process's waiting access counts now (tests, shutdown)."""
    return _ACCESSES.flush()
