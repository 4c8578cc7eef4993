"""Copy SQLite's write-ahead log into the database between a worker's tasks.

SQLite checkpoints on its own in the commit that takes the log past 1,000
pages: that commit then pays for copying the pages and for two fsyncs, 10
to 40 ms on a shared disk, inside whatever made it (an agent's step). A
worker has a moment that keeps nobody waiting, between two tasks: a passive
checkpoint there (it never blocks readers or writers) keeps the log short,
so the checkpoint inside a task becomes rare. SQLite's own stays as the
bound.
"""

from django.db import connection

# (id of the raw connection, its total_changes at the last checkpoint). A
# new connection counts from zero; one at the address of a closed one is
# told apart when its count is below the recorded one (a count only grows).
_last: tuple[int, int] = (0, 0)


def wal_checkpoint_if_written(*, min_changes: int) -> bool:
    """A passive checkpoint on this thread's connection when it has changed
    at least ``min_changes`` rows since the last one (0 turns it off); True
    if it ran. Outside a transaction only: a checkpoint cannot copy past a
    snapshot its own connection holds."""
    global _last
    raw = connection.connection
    if (
        min_changes <= 0
        or connection.vendor != "sqlite"
        or raw is None
        or connection.in_atomic_block
    ):
        return False
    changes = raw.total_changes
    same = _last[0] == id(raw) and changes >= _last[1]
    since = changes - _last[1] if same else changes
    if since < min_changes:
        return False
    with connection.cursor() as cursor:
        # Read to its end: an unread result row would hold a read snapshot.
        cursor.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    _last = (id(raw), raw.total_changes)
    return True
