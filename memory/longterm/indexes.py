"""The long-term memory tables the search engine indexes."""

from collections.abc import Sequence

from memory.longterm.models import ArchivalEntry, Message
from memory.search.registry import search_table_register


# The services import this module (for the indexes): they are imported when
# a rebuild runs, not when this module loads.
def _archival_reindex(row_ids: Sequence[int]) -> None:
    from memory.longterm.services import archival_entries_reindex

    archival_entries_reindex(entry_ids=row_ids)


def _messages_reindex(row_ids: Sequence[int]) -> None:
    from memory.longterm.services import messages_reindex

    messages_reindex(message_ids=row_ids)


ARCHIVAL_TABLE = search_table_register(
    kind="archival", model=ArchivalEntry, reindex=_archival_reindex
)
MESSAGE_TABLE = search_table_register(
    kind="message", model=Message, reindex=_messages_reindex
)
ARCHIVAL_INDEX = ARCHIVAL_TABLE.index
MESSAGE_INDEX = MESSAGE_TABLE.index
