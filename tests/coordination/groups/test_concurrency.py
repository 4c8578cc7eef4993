"""Routing from many threads at once keeps each pattern's state consistent."""

import threading
from collections import Counter

import pytest
from django.db import connection

from coordination.groups.models import GroupRunEvent, RunDelivery
from coordination.groups.services import (
    delivery_chunk_add,
    delivery_take,
    group_message_route,
)

THREADS = 8
PER_THREAD = 6


def in_threads(work) -> list[BaseException]:
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            work(index)
        except BaseException as exc:  # collected and asserted on below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


@pytest.mark.django_db(transaction=True)
def test_concurrent_round_robin_messages_share_turns_exactly(make_group, system):
    group = make_group(
        "round_robin",
        [("Pattern", "regular"), ("Momentum", "regular"), ("Anchor", "regular")],
    )

    def route(index: int) -> None:
        for n in range(PER_THREAD):
            group_message_route(actor=system, group=group, message=f"{index}-{n}")

    assert in_threads(route) == []
    total = THREADS * PER_THREAD
    counts = Counter(RunDelivery.objects.values_list("agent__name", flat=True))
    assert counts == {
        "Pattern": total // 3,
        "Momentum": total // 3,
        "Anchor": total // 3,
    }
    group.refresh_from_db()
    assert group.state["current_index"] == total % 3


@pytest.mark.django_db(transaction=True)
def test_concurrent_chunks_get_consecutive_event_numbers(make_group, agents, system):
    group = make_group("round_robin", [("Flux", "regular")])
    run = group_message_route(actor=system, group=group, message="go")
    delivery = delivery_take(agent=agents["Flux"])[0]

    def chunk(index: int) -> None:
        for n in range(PER_THREAD):
            delivery_chunk_add(delivery=delivery, text=f"{index}-{n}")

    assert in_threads(chunk) == []
    seqs = list(
        GroupRunEvent.objects.filter(run=run)
        .order_by("seq")
        .values_list("seq", flat=True)
    )
    assert seqs == list(range(1, 3 + THREADS * PER_THREAD))


@pytest.mark.django_db(transaction=True)
def test_concurrent_inbox_takes_claim_each_delivery_once(make_group, agents, system):
    group = make_group("round_robin", [("Flux", "regular")])
    for n in range(THREADS * PER_THREAD):
        group_message_route(actor=system, group=group, message=f"m{n}")
    taken: list[int] = []

    def take(index: int) -> None:
        for _ in range(PER_THREAD):
            taken.extend(d.pk for d in delivery_take(agent=agents["Flux"], limit=1))

    assert in_threads(take) == []
    assert sorted(taken) == sorted(RunDelivery.objects.values_list("pk", flat=True))
