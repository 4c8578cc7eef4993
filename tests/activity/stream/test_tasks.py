from typing import Any

import pytest
from django.db import transaction

from activity.stream.models import ActivityEvent, ActivityTerm, EventType
from activity.stream.services import activity_flush, activity_record
from pattern_site.kernel.actors import Actor
from tests.conftest import wait_until


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_stores_the_batches_the_writer_hands_over(
    celery_worker_process: Any, agent: Any, settings: Any
) -> None:
    settings.ACTIVITY_BATCH_SIZE = 1000
    settings.ACTIVITY_FLUSH_SECONDS = 3600
    for n in range(7):
        with transaction.atomic():
            activity_record(
                actor=Actor.for_agent(agent),
                event_type=EventType.TOOL_EXECUTED,
                details={"tool": f"tool{n}"},
            )
    assert activity_flush() == 7
    wait_until(lambda: ActivityEvent.objects.count() == 7)
    assert ActivityTerm.objects.filter(term="tool6").count() == 1


def test_beat_schedules_the_summaries_and_the_retention_fold(settings: Any) -> None:
    from pattern_site.celery import app

    schedule = settings.CELERY_BEAT_SCHEDULE
    for name in (
        "activity-agent-summaries",
        "activity-constellation-summaries",
        "activity-retention-fold",
    ):
        assert schedule[name]["task"] in app.tasks
    assert schedule["activity-retention-fold"]["schedule"] == 24 * 3600
