"""The realtime path: channel-layer group names, close codes, and sends that
wait for the commit.

Services publish with :func:`publish_on_commit` and never import a
consumer; consumers join the same groups, named here (``<kind>.<id>``), and
close with the codes here.  A publish is advisory: the write it follows has
committed, so a send that fails is logged and a page catches up on its next
load (or a reader on its next poll).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from django.db import transaction

from pattern_site.kernel.layer_send import group_send_from_sync

logger = logging.getLogger(__name__)

# Websocket close codes (Daphne lets an application close with 1000 or
# 3000-4999 only), after their HTTP namesakes: no credential, a refused one
# or one revoked while the socket was open; an object the actor may not see
# (answered as if it did not exist); a socket that did not start its work in
# time; one socket more than an actor may hold open.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_IDLE = 4408
CLOSE_TOO_MANY = 4429

Event = Mapping[str, Any]


def group_for_constellation(constellation_id: int) -> str:
    """A constellation's dashboard pages (presence, activity, the board)."""
    return f"constellation.{constellation_id}"


def group_for_folder(folder_id: int) -> str:
    """A folder page's indexing progress."""
    return f"folder.{folder_id}"


def group_for_run(run_id: int) -> str:
    """Whoever waits on a group run's events."""
    return f"run.{run_id}"


def group_for_inbox(agent_id: int) -> str:
    """Whoever waits on an agent's group-work inbox."""
    return f"inbox.{agent_id}"


def block_hex(block_id: uuid.UUID | str) -> str:
    """A memory block's id in one spelling (32 hex digits), from its UUID
    or any string form of it."""
    if type(block_id) is uuid.UUID:
        return block_id.hex
    return uuid.UUID(str(block_id)).hex


def group_for_block(block_id: uuid.UUID | str) -> str:
    """A memory block's room in other processes (ASCII, under 100 chars)."""
    return f"block.{block_hex(block_id)}"


def publish_on_commit(group: str, event: Event | Callable[[], Event]) -> None:
    """Send ``event`` (a channel-layer message with a ``type``) to ``group``
    once the current transaction commits; nothing on a rollback.

    ``event`` may be a function that builds the message after the commit,
    for a message that reports what the commit left (counts, progress).
    """

    def publish() -> None:  # a def: Django's robust on_commit logs __qualname__
        message = dict(event() if callable(event) else event)
        try:
            group_send_from_sync(group, message)
        except Exception:
            logger.warning(
                "%s not published to %s", message.get("type"), group, exc_info=True
            )

    transaction.on_commit(publish, robust=True)
