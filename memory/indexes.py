"""Which text tables of the memory app are searchable, and their indexes."""

from collections.abc import Callable
from typing import Literal

from django.db.models import Model

from memory.models import ArchivalEntry, Message
from memory.retrieval import TextIndex

IndexedKind = Literal["archival", "message"]

ARCHIVAL_INDEX = TextIndex(ArchivalEntry._meta.db_table)
MESSAGE_INDEX = TextIndex(Message._meta.db_table)

INDEXED: dict[str, tuple[type[Model], TextIndex]] = {
    "archival": (ArchivalEntry, ARCHIVAL_INDEX),
    "message": (Message, MESSAGE_INDEX),
}

# Called with the ids of a kind's rows once their vectors are stored (after
# the commit), by apps that follow their rows' indexing.
EMBEDDED_HOOKS: dict[str, Callable[[list[int]], None]] = {}
