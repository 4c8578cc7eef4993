"""Background work of coordination: tasks take ids and call one service."""

from datetime import datetime

from celery import shared_task


@shared_task(name="coordination.agent_touch", ignore_result=True)
def agent_touch_task(agent_id: int, at: str) -> None:
    from pattern_site.kernel.agents.services import agent_touch

    agent_touch(agent_id=agent_id, at=datetime.fromisoformat(at))
