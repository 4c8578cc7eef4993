"""Keep long-lived objects out of the cyclic collector's reach.

A full collection walks every tracked object not frozen. In a long-running
process most of them live as long as the process (Django, the apps, the
libraries a first task or request imports: the embedding model's, the LLM
SDK's resources), and walking them in a collection that falls inside an
agent's step or a request costs it tens of milliseconds. Freezing moves
them to a generation the collector never walks; a collection just before
makes sure no garbage is frozen with them.
"""

import gc
import sys
import threading

_lock = threading.Lock()
_modules_at_freeze = 0


def heap_freeze() -> None:
    """Collect, then freeze whatever is left: call once the process has
    started (everything imported then stays)."""
    global _modules_at_freeze
    with _lock:
        gc.collect()
        gc.freeze()
        _modules_at_freeze = len(sys.modules)


def heap_freeze_if_grown() -> None:
    """Freeze again after work that imported modules since the last freeze.

    Imports are the sign of new long-lived objects (module dicts, classes,
    functions, the libraries' own caches); once a process has imported what
    its work needs, this costs a length comparison. Work that imports
    nothing new leaves garbage to the collector as usual, so nothing made
    by a task or request is frozen unless it came with an import."""
    if len(sys.modules) > _modules_at_freeze:
        heap_freeze()
