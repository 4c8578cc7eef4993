"""publish_on_commit: a message reaches its group only once the write
commits."""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from pattern_site.kernel.realtime import group_for_folder, publish_on_commit

pytestmark = pytest.mark.django_db(transaction=True)


class Rollback(Exception):
    pass


@pytest.fixture
def listener():
    """A channel in folder 7's group; ``receive()`` is its next message or
    None when nothing arrives."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group_for_folder(7), channel)

    async def next_message():
        try:
            return await asyncio.wait_for(layer.receive(channel), timeout=0.5)
        except TimeoutError:
            return None

    yield async_to_sync(next_message)
    async_to_sync(layer.group_discard)(group_for_folder(7), channel)


def test_a_publish_is_sent_after_the_commit_not_before(listener):
    with transaction.atomic():
        publish_on_commit(group_for_folder(7), {"type": "folder.progress", "n": 1})
        assert listener() is None
    assert listener() == {"type": "folder.progress", "n": 1}


def test_a_rolled_back_write_publishes_nothing(listener):
    with pytest.raises(Rollback), transaction.atomic():
        publish_on_commit(group_for_folder(7), {"type": "folder.progress"})
        raise Rollback
    assert listener() is None


def test_a_built_event_is_built_after_the_commit(listener):
    seen = []
    with transaction.atomic():
        seen.append("write")
        publish_on_commit(
            group_for_folder(7), lambda: {"type": "folder.progress", "seen": seen[:]}
        )
        seen.append("more")
    assert listener() == {"type": "folder.progress", "seen": ["write", "more"]}
