"""The long-term memory tables the search engine indexes."""

from memory.longterm.models import ArchivalEntry, Message
from memory.search.registry import search_table_register

ARCHIVAL_TABLE = search_table_register(kind="archival", model=ArchivalEntry)
MESSAGE_TABLE = search_table_register(kind="message", model=Message)
ARCHIVAL_INDEX = ARCHIVAL_TABLE.index
MESSAGE_INDEX = MESSAGE_TABLE.index
