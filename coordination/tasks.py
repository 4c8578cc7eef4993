"""Background work of coordination: tasks take ids and call one service."""

from datetime import datetime

from celery import shared_task

from coordination.services import agent_touch


@shared_task(name="coordination.agent_touch", ignore_result=True)
def agent_touch_task(agent_id: int, at: str) -> None:
    agent_touch(agent_id=agent_id, at=datetime.fromisoformat(at))


# Celery discovers ``<app>.tasks`` only; the groups package's tasks register
# with this module.
from coordination.groups import tasks as groups_tasks  # noqa: E402, F401
