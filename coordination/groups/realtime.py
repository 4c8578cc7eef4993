"""Wake-ups for whoever waits on a run's events or an agent's inbox.

The database holds every event and delivery; these channel-layer messages
only say "look again", so a missed one costs a reader one poll interval,
never an event.  With Redis they reach every process; with the in-memory
layer, the readers in the process that wrote.
"""

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

RUN_WAKE = "group.run.wake"
INBOX_WAKE = "group.inbox.wake"


def run_channel_group(run_id: int) -> str:
    return f"group_run.{run_id}"


def inbox_channel_group(agent_id: int) -> str:
    return f"group_inbox.{agent_id}"


def wake(*, run_ids: list[int] = (), agent_ids: list[int] = ()) -> None:  # type: ignore[assignment]
    """Tell readers of these runs and inboxes that something was written."""
    layer = get_channel_layer()
    if layer is None:
        return
    sends = [(run_channel_group(i), RUN_WAKE, {"run_id": i}) for i in run_ids]
    sends += [(inbox_channel_group(i), INBOX_WAKE, {"agent_id": i}) for i in agent_ids]
    try:
        async_to_sync(_send_all)(layer, sends)
    except Exception:  # readers poll anyway; a lost wake-up only delays them
        logger.warning("group wake-up failed", exc_info=True)


async def _send_all(layer: object, sends: list[tuple[str, str, dict]]) -> None:
    for group, kind, body in sends:
        await layer.group_send(group, {"type": kind, **body})  # type: ignore[attr-defined]
