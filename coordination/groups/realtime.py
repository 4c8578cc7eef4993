"""Wake-ups for whoever waits on a run's events or an agent's inbox.

The database holds every event and delivery; these channel-layer messages
only say "look again", so a missed one costs a reader one poll interval,
never an event.  With Redis they reach every process; with the in-memory
layer, the readers in the process that wrote (and nothing is sent when
none listens).
"""

from pattern_site.kernel.realtime import (
    group_for_inbox,
    group_for_run,
    publish_on_commit,
)

RUN_WAKE = "group.run.wake"
INBOX_WAKE = "group.inbox.wake"


def wake_on_commit(
    *, run_ids: tuple[int, ...] = (), agent_ids: tuple[int, ...] = ()
) -> None:
    """Once the write commits, tell readers of these runs and inboxes."""
    for run_id in run_ids:
        publish_on_commit(group_for_run(run_id), {"type": RUN_WAKE, "run_id": run_id})
    for agent_id in agent_ids:
        publish_on_commit(
            group_for_inbox(agent_id), {"type": INBOX_WAKE, "agent_id": agent_id}
        )
