"""Wake-ups for whoever waits on a run's events or an agent's inbox.

The database holds every event and delivery; these channel-layer messages
only say "look again", so a missed one costs a reader one poll interval,
never an event.  With Redis they reach every process; with the in-memory
layer, the readers in the process that wrote (and nothing is sent when
none listens).
"""

import logging

from pattern_site.kernel.layer_send import group_send_from_sync

logger = logging.getLogger(__name__)

RUN_WAKE = "group.run.wake"
INBOX_WAKE = "group.inbox.wake"


def run_channel_group(run_id: int) -> str:
    return f"group_run.{run_id}"


def inbox_channel_group(agent_id: int) -> str:
    return f"group_inbox.{agent_id}"


def wake(*, run_ids: tuple[int, ...] = (), agent_ids: tuple[int, ...] = ()) -> None:
    """Tell readers of these runs and inboxes that something was written."""
    sends = [(run_channel_group(i), {"type": RUN_WAKE, "run_id": i}) for i in run_ids]
    sends += [
        (inbox_channel_group(i), {"type": INBOX_WAKE, "agent_id": i}) for i in agent_ids
    ]
    for group, message in sends:
        try:
            group_send_from_sync(group, message)
        except Exception:  # readers poll anyway; a lost wake-up only delays them
            logger.warning("group wake-up failed", exc_info=True)
