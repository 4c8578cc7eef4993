"""Background work runs on a real Celery worker process."""

import pytest
from django.test import Client

from coordination.models import Agent
from tests.conftest import REDIS_URL, wait_until


def _token_request_marks_agent_active(agent, token) -> None:
    assert agent.last_active_at is None
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token.raw}").get("/api/whoami")
    assert response.status_code == 200
    wait_until(lambda: Agent.objects.get(pk=agent.pk).last_active_at is not None)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_task_runs_after_commit_on_a_real_worker_with_embedded_broker(
    celery_worker_process, agent, agent_token
):
    _token_request_marks_agent_active(agent, agent_token)


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("celery_worker_process", [REDIS_URL], indirect=True)
def test_task_runs_on_a_real_worker_through_redis(
    redis_url, celery_worker_process, agent, agent_token
):
    _token_request_marks_agent_active(agent, agent_token)
