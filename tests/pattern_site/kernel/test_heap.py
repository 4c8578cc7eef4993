"""Freezing the long-lived heap: once at start, again only after imports."""

import gc
import sys
import types
import weakref
from collections.abc import Iterator

import pytest

from pattern_site.kernel import heap
from pattern_site.kernel.heap import heap_freeze, heap_freeze_if_grown


@pytest.fixture
def unfrozen_after() -> Iterator[None]:
    yield
    gc.unfreeze()


def frozen(obj: object) -> bool:
    """Whether ``obj`` is in the collector's permanent generation (tracked,
    yet not among the objects it walks).  Counting frozen objects would not
    do: other threads' frozen objects are freed as they like."""
    return gc.is_tracked(obj) and not any(o is obj for o in gc.get_objects())


@pytest.mark.usefixtures("unfrozen_after")
def test_freezes_again_only_after_work_that_imported_a_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The module table it watches is this test's own: other threads of the
    # test process import modules whenever they like.
    modules = dict(sys.modules)
    monkeypatch.setattr(heap, "sys", types.SimpleNamespace(modules=modules))
    heap_freeze()
    made_since = [[index] for index in range(10)]

    heap_freeze_if_grown()
    assert not frozen(made_since), "nothing was imported: nothing frozen"

    modules["pattern_test_new"] = types.ModuleType("new")
    heap_freeze_if_grown()
    assert frozen(made_since)

    made_after = [[]]
    heap_freeze_if_grown()
    assert not frozen(made_after), "that import is frozen already"


class _Node:
    def __init__(self) -> None:
        self.me = self


@pytest.mark.usefixtures("unfrozen_after")
def test_garbage_is_collected_not_frozen() -> None:
    # A cycle that is garbage at the freeze would never be freed if frozen.
    node = _Node()
    alive = weakref.ref(node)
    del node
    heap_freeze()
    assert alive() is None
