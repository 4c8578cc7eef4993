"""A per-process cache of block documents that never hides another write.

Each entry is ``(version, LoroDoc)``: the block's document as of the
``MemoryBlock.version`` it was read or written at.  Every content change
bumps ``version`` on the block row in its own transaction, under the row
lock, so an entry is used only when its version equals the row's - a write
from any other process makes it a miss, and the caller reloads from the
database.

Entries are never mutated while in the cache: a writer :func:`take` s the
document out (nobody else can reach it then), changes it, and :func:`put` s
it back after its transaction commits; if anything fails it is simply not
put back.  Readers of the content get a :func:`fork` made under the cache
lock, so they never share a document with a writer.  Readers of the past
only (operations and versions the document holds) may share it
(:func:`history`): a writer only adds to a document, so the past stays as
it was, and a change rolled back adds operations past every stored version.

A block with an open co-editing room in this process is pinned
(:func:`pin`): its document stays cached beyond the size, so that a live
edit never waits for its document to be read and decoded again, however
many rooms are open.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from typing import Any

from django.conf import settings
from loro import LoroDoc

_lock = threading.Lock()
_entries: OrderedDict[Any, tuple[int, LoroDoc]] = OrderedDict()
# Block id -> how many open rooms pin it.
_pinned: dict[Any, int] = {}


def block_key(block_id: Any) -> Any:
    """The key of a block in this cache and in other per-block tables of
    the process: a UUID's integer, whose hash and equality are the
    interpreter's (a UUID's own are Python methods, run several times on
    the path of every change); any other id as it is."""
    return block_id.int if type(block_id) is uuid.UUID else block_id


def take(block_id: Any, version: int) -> LoroDoc | None:
    """Remove and return the cached document if it is at ``version``."""
    block_id = block_key(block_id)
    with _lock:
        entry = _entries.pop(block_id, None)
    if entry is None or entry[0] != version:
        return None
    return entry[1]


def fork(block_id: Any, version: int) -> LoroDoc | None:
    """A private copy of the cached document if it is at ``version``."""
    block_id = block_key(block_id)
    with _lock:
        entry = _entries.get(block_id)
        if entry is None or entry[0] != version:
            return None
        _entries.move_to_end(block_id)
        return entry[1].fork()


def history(block_id: Any) -> LoroDoc | None:
    """The cached document itself, at whatever version it is, for reading
    its past only (operations, versions it holds): the caller must neither
    change it nor read its current content, which a writer may be
    changing."""
    block_id = block_key(block_id)
    with _lock:
        entry = _entries.get(block_id)
    return None if entry is None else entry[1]


def put(block_id: Any, version: int, doc: LoroDoc) -> None:
    """Cache ``doc`` as the block at ``version`` (never over a newer one).

    The caller gives up ``doc``: it must not change it afterwards.
    """
    block_id = block_key(block_id)
    size = settings.MEMORY_DOCUMENT_CACHE_SIZE
    if size <= 0:
        return
    with _lock:
        current = _entries.get(block_id)
        if current is not None and current[0] > version:
            return
        _entries[block_id] = (version, doc)
        _entries.move_to_end(block_id)
        over = len(_entries) - size
        if over > 0:
            # Pinned documents do not count against the size; a pin whose
            # document is not cached (yet, or any more) leaves room for none.
            over -= sum(1 for key in _pinned if key in _entries)
        if over > 0:
            unpinned = (key for key in _entries if key not in _pinned)
            for key in [next(unpinned) for _ in range(over)]:
                del _entries[key]


def pin(block_id: Any) -> None:
    """Keep the block's document cached beyond the size (an open room)."""
    block_id = block_key(block_id)
    with _lock:
        _pinned[block_id] = _pinned.get(block_id, 0) + 1


def unpin(block_id: Any) -> None:
    """Undo one :func:`pin`; the document is evicted as usual again."""
    block_id = block_key(block_id)
    with _lock:
        count = _pinned.pop(block_id, 0) - 1
        if count > 0:
            _pinned[block_id] = count


def discard(block_id: Any) -> None:
    block_id = block_key(block_id)
    with _lock:
        _entries.pop(block_id, None)


def clear() -> None:
    with _lock:
        _entries.clear()
