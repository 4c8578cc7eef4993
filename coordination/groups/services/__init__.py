"""Writes of agent groups and their runs.

Routing a message locks the group's row (``select_for_update``; on SQLite
every transaction here begins IMMEDIATE, which takes the write lock at
once), asks the group's pattern whom to deliver to, stores its new state,
the run, the deliveries and the ``Started`` event, in one transaction.
Everything that changes a run afterwards (an agent taking its work,
chunks, tool calls, answers, failures, deadlines) locks the run's row,
writes its events with consecutive numbers and lets the pattern decide
what comes next.  Readers are woken after commit; timeouts are kept by
Celery sweeps booked after commit for just after each deadline.

Modules by concern, each importing only those before it: ``membership``
(groups and members), ``runs`` (what every change of a run shares),
``deliveries``, ``timeouts``, ``routing`` (messages and delegation),
``sleeptime`` and ``imports``.  The services are re-exported here.
"""

from coordination.groups.services.deliveries import (
    delivery_chunk_add,
    delivery_claim,
    delivery_complete,
    delivery_fail,
    delivery_take,
    delivery_tool_call_complete,
    delivery_tool_call_start,
    turn_tool_call_completed,
    turn_tool_call_started,
)
from coordination.groups.services.imports import group_import
from coordination.groups.services.membership import (
    group_create,
    group_delete,
    group_member_add,
    group_member_remove,
    group_metric_record,
    group_update,
)
from coordination.groups.services.routing import group_message_route, run_delegate
from coordination.groups.services.sleeptime import (
    group_sleeptime_check,
    group_sleeptime_sweep,
)
from coordination.groups.services.timeouts import (
    run_deadlines_sweep,
    run_delivery_expire,
    run_vote_close,
)

__all__ = [
    "delivery_chunk_add",
    "delivery_claim",
    "delivery_complete",
    "delivery_fail",
    "delivery_take",
    "delivery_tool_call_complete",
    "delivery_tool_call_start",
    "group_create",
    "group_delete",
    "group_import",
    "group_member_add",
    "group_member_remove",
    "group_message_route",
    "group_metric_record",
    "group_sleeptime_check",
    "group_sleeptime_sweep",
    "group_update",
    "run_deadlines_sweep",
    "run_delegate",
    "run_delivery_expire",
    "run_vote_close",
    "turn_tool_call_completed",
    "turn_tool_call_started",
]
