"""Fan a block's committed Loro updates out to every open editor.

Services schedule :func:`block_broadcast` with ``transaction.on_commit`` after
any change to a block; the sync consumer of each room joins
:func:`block_group` and relays ``block.updates`` messages to its peers.
"""

from __future__ import annotations

import logging
import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

MESSAGE_TYPE = "block.updates"


def block_group(block_id: uuid.UUID | str) -> str:
    """The channel-layer group of a block's room (ASCII, under 100 chars)."""
    return f"block.{uuid.UUID(str(block_id)).hex}"


def block_broadcast(
    *, block_id: uuid.UUID | str, updates: list[bytes], origin: str | None
) -> None:
    """Send committed updates to the block's group.

    ``origin`` names the sender (e.g. a consumer's channel name) so it can
    skip its own echo; None for changes made outside any room.
    """
    layer = get_channel_layer()
    if layer is None or not updates:
        return
    async_to_sync(layer.group_send)(
        block_group(block_id),
        {
            "type": MESSAGE_TYPE,
            "block_id": str(block_id),
            "updates": list(updates),
            "origin": origin,
        },
    )
