"""Fixtures of the activity tests: events recorded through the one write
path, at chosen times."""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from activity.stream.services import activity_record
from pattern_site.kernel.actors import Actor
from tests.factories import AgentFactory


@pytest.fixture
def now() -> datetime:
    return timezone.now()


@pytest.fixture
def flux(constellation: Any) -> Any:
    return AgentFactory(constellation=constellation, name="Flux")


@pytest.fixture
def record(
    django_capture_on_commit_callbacks: Any, now: datetime
) -> Callable[..., None]:
    """Record an event ``ago`` before ``now`` and store it at once."""

    def record(
        *,
        actor: Actor,
        event_type: str,
        ago: timedelta = timedelta(0),
        **kwargs: Any,
    ) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            activity_record(actor=actor, event_type=event_type, at=now - ago, **kwargs)

    return record
