"""The search index of file passages: memory's engine, this app's table."""

from folders.files.models import FilePassage
from memory.search.index import TextIndex

FILE_PASSAGE_KIND = "file_passage"
FILE_PASSAGE_INDEX = TextIndex(
    FilePassage._meta.db_table,
    scope_column="constellation_id",
    owner_column="folder_id",
)
