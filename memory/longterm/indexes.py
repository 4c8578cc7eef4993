"""Which text tables of the memory app are searchable, and their indexes."""

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
