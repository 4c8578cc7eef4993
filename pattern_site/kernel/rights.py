"""Rights that take effect at once on open connections.

An open websocket was authorised when it joined; a service that takes a
right away (unsharing, a stricter permission, a revoked token, a deleted
object) calls :func:`rights_revoke_send`.  After the transaction commits,
one message goes to :data:`RIGHTS_GROUP` on the channel layer, which every
process with open rooms is in (one channel per process: the block room hubs
of ``memory.blocks.sync.broadcast``); each process asks the matching sockets
to check their rights again, and a socket that lost its right is told so in
the protocol and stops receiving.

The message names an agent, an object, or both; ``None`` is "any".
Without a channel layer nothing is open to tell.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from channels.layers import get_channel_layer
from django.db import transaction

from pattern_site.kernel.layer_send import layer_send

logger = logging.getLogger(__name__)

RIGHTS_GROUP = "rights.revoked"
MESSAGE_TYPE = "rights.revoked"


def rights_revoke_send(
    *, agent_id: int | None = None, block_id: uuid.UUID | str | None = None
) -> None:
    """After commit, have every open socket of ``agent_id`` (any agent's
    and any human's when None) on block ``block_id`` (any block when None)
    check its rights again."""
    message: dict[str, Any] = {
        "type": MESSAGE_TYPE,
        "agent_id": agent_id,
        "block_id": None if block_id is None else uuid.UUID(str(block_id)).hex,
    }

    def send() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        sending = layer.group_send(RIGHTS_GROUP, message)
        try:
            layer_send(layer, sending)
        except Exception as exc:
            # The layer is down: when it returns, every process's sockets
            # check their rights again (memory.blocks.sync.broadcast).
            sending.close()
            logger.warning("rights revocation %s not sent (%s)", message, exc)

    transaction.on_commit(send)
