"""How block changes reach the activity stream: one event per change
(recorded after commit by ``pattern_site.kernel.events``), live co-editing
throttled to one event per block and person per ``CO_EDIT_EVENT_SECONDS``.
"""

from __future__ import annotations

import time
from typing import Any

from memory.blocks.models import MemoryBlock
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.events import EventType, event_record

# Live co-editing sends an update per keystroke or so: one event per block
# and person per this many seconds says as much to the activity stream.
CO_EDIT_EVENT_SECONDS = 60.0


_co_edit_recorded: dict[tuple[Any, str], float] = {}


def _block_event(
    *, actor: Actor, block: MemoryBlock, change_type: str, summary: str
) -> None:
    """Record a change of ``block`` in the activity stream (after commit)."""
    if change_type == "co-edit":
        key, now = (block.pk, actor.ref), time.monotonic()
        if now - _co_edit_recorded.get(key, -CO_EDIT_EVENT_SECONDS) < (
            CO_EDIT_EVENT_SECONDS
        ):
            return
        if len(_co_edit_recorded) > 10_000:
            _co_edit_recorded.clear()
        _co_edit_recorded[key] = now
    details = {"label": block.label, "change_type": change_type}
    # Every agent of the constellation reads its activity, but only a
    # constellation block's content is theirs to read: an agent's own block
    # (shared or not) is named without the words of its change.
    if block.owner_id is None:
        details["summary"] = summary[:160]
    event_record(
        actor=actor,
        agent=block.owner if actor.agent is None else None,
        constellation_id=block.constellation_id,
        event_type=EventType.MEMORY_BLOCK_UPDATED,
        details=details,
    )
