"""Batcher: work handed on in batches, off the caller's path."""

from pattern_site.kernel.batching import Batcher


def _batcher(sent: list[dict], *, eager: bool = False) -> Batcher[str, int]:
    return Batcher(
        name="test",
        send=sent.append,
        merge=lambda old, new: new if old is None else max(old, new),
        delay=600.0,
        max_items=2,
        eager=lambda: eager,
    )


def test_add_nowait_merges_and_leaves_a_due_batch_to_the_caller():
    sent: list[dict] = []
    batcher = _batcher(sent)

    assert batcher.add_nowait([("a", 1), ("a", 3), ("a", 2)]) is True
    assert sent == []  # waits for the timer
    assert batcher.add_nowait([("b", 1)]) is False  # full: due now
    assert sent == []  # but not sent on the caller's thread
    assert batcher.flush() == 2
    assert sent == [{"a": 3, "b": 1}]


def test_add_nowait_leaves_every_batch_to_the_caller_when_tasks_run_inline():
    sent: list[dict] = []
    batcher = _batcher(sent, eager=True)

    assert batcher.add_nowait([("a", 1)]) is False
    assert sent == []
    batcher.flush()
    assert sent == [{"a": 1}]
