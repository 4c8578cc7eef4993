"""Request and response shapes of the folders API and the file tools."""

from datetime import datetime
from typing import Annotated, Literal

from django.conf import settings
from ninja import Field, Schema

from folders.files.ingest import MAX_PATH_CHARS
from folders.files.models import FolderFile
from folders.files.selectors import file_percent, file_state_word
from folders.tools.grep import MAX_PATTERN_CHARS
from folders.tools.search import MAX_QUERY_CHARS
from pattern_site.kernel.apitypes import DB_INT_MAX, LINE_MAX, NAME_MAX, Id, InputSchema

AccessIn = Literal["read", "read_write"]
SearchModeIn = Literal["fts", "vector", "hybrid", "auto"]


# A line number: 1-based, within a database integer.
LINE = {"ge": 1, "le": DB_INT_MAX}

FolderName = Annotated[str, Field(max_length=NAME_MAX)]
FilePath = Annotated[str, Field(max_length=MAX_PATH_CHARS)]
# A glob over paths, or over '<folder>/<path>'.
PathGlob = Annotated[str, Field(max_length=NAME_MAX + 1 + MAX_PATH_CHARS)]
GrepPattern = Annotated[str, Field(max_length=MAX_PATTERN_CHARS)]
Description = Annotated[str, Field(max_length=LINE_MAX)]
# A directory on the server: Linux's PATH_MAX.
ServerPath = Annotated[str, Field(max_length=4096)]


class FolderIn(InputSchema):
    constellation_id: Id = Field(..., examples=[1])
    name: str = Field(..., min_length=1, max_length=100, examples=["trip-notes"])
    description: Description = Field(
        "",
        description="Shown to the agents it is attached to.",
        examples=["Bookings and plans for the Lisbon trip"],
    )
    kind: Literal["virtual", "local"] = Field("virtual", examples=["virtual"])
    root_path: ServerPath = Field(
        "",
        description="Local folders: a directory on the server.",
        examples=["/srv/pattern/trip-notes"],
    )


class FolderPatchIn(InputSchema):
    description: Description = Field(
        ..., examples=["Bookings and plans for the Lisbon trip"]
    )


class CountsOut(Schema):
    files: int
    indexed: int
    failed: int
    passages: int
    embedded: int
    pending: int = Field(description="Passages still waiting for their vector.")
    waiting: int = Field(description="Files not indexed yet (failed ones apart).")
    percent: int = Field(description="How far indexing has come, the files' mean.")
    summary: str = Field(examples=["2 files · 14 passages · ready"])


class FolderOut(Schema):
    id: int
    constellation_id: int
    name: str
    description: str
    kind: str
    root_path: str
    embedding_model: str
    created_at: datetime
    scanned_at: datetime | None
    counts: CountsOut


class AttachmentIn(InputSchema):
    access: AccessIn = Field("read", examples=["read_write"])


class FolderAttachmentOut(Schema):
    agent_id: int
    agent: str
    access: str
    attached_at: datetime


class FileOut(Schema):
    id: int
    path: str
    content_type: str
    size: int
    sha256: str
    line_count: int
    uploaded_at: datetime
    indexed_at: datetime | None
    index_state: str
    index_error: str
    passage_count: int
    embedded_count: int
    percent: int = Field(..., description="Indexing progress, 0-100.")
    label: str = Field(
        ...,
        description="The indexing state as the folder page words it: waiting,"
        " indexing, ready or failed.",
    )

    @staticmethod
    def resolve_percent(obj: FolderFile) -> int:
        return file_percent(obj)

    @staticmethod
    def resolve_label(obj: FolderFile) -> str:
        return file_state_word(obj)


class FileDetailOut(FileOut):
    text: str


class FileChangeOut(Schema):
    path: str
    status: str
    file_id: int | None


class UploadOut(Schema):
    changes: list[FileChangeOut]


class FileWriteIn(InputSchema):
    path: FilePath = Field(
        ...,
        description="Relative path inside the folder, e.g. notes/a.md",
        examples=["notes/hotels.md"],
    )
    # A character takes at least a byte: the file limit bounds the characters.
    content: str = Field(
        ...,
        max_length=settings.FOLDER_MAX_FILE_BYTES,
        examples=["# Hotels\n\nAvenida: booked until Sunday\n"],
    )


class RescanOut(Schema):
    created: int
    updated: int
    unchanged: int
    deleted: int
    refused: list[str]


# --- file tools -----------------------------------------------------------------


class FileRefIn(InputSchema):
    folder: FolderName = Field(
        ..., description="Name of an attached folder.", examples=["trip-notes"]
    )
    path: FilePath = Field(
        ...,
        description="Path of the file inside the folder.",
        examples=["notes/hotels.md"],
    )


class FileOpenIn(FileRefIn):
    line: int = Field(
        1, **LINE, description="First line of the window (1-based).", examples=[40]
    )
    lines: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="Height of the window (default 100).",
        examples=[50],
    )


class FileReadIn(FileRefIn):
    start: int = Field(..., **LINE, description="First line (1-based).", examples=[1])
    end: int = Field(..., **LINE, description="Last line (inclusive).", examples=[20])


class FileCloseIn(InputSchema):
    folder: FolderName | None = Field(
        None, description="With path: close that file only.", examples=["trip-notes"]
    )
    path: FilePath | None = Field(
        None,
        description="Leave both out to close every file.",
        examples=["notes/hotels.md"],
    )


class WindowOut(Schema):
    folder: str
    path: str
    start_line: int
    end_line: int
    total_lines: int
    content: str
    closed: list[str] = Field(
        [], description="Files closed to make room (least recently used)."
    )


class CloseOut(Schema):
    closed: int


class GrepIn(InputSchema):
    folder: FolderName = Field(
        ..., description="Name of an attached folder.", examples=["trip-notes"]
    )
    pattern: GrepPattern = Field(
        ...,
        description="A regular expression (or literal text).",
        examples=["check-?in"],
    )
    path: FilePath | None = Field(
        None, description="Only this file.", examples=["notes/hotels.md"]
    )
    include: PathGlob | None = Field(
        None, description="Only paths matching this glob.", examples=["*.md"]
    )
    context: int = Field(
        0, ge=0, le=10, description="Lines shown each side.", examples=[2]
    )
    ignore_case: bool = Field(False, examples=[True])
    literal: bool = Field(
        False, description="Match the pattern as plain text.", examples=[False]
    )
    limit: int = Field(
        100, ge=1, le=1000, description="Most matching lines.", examples=[50]
    )


class GrepMatchOut(Schema):
    path: str
    line: int
    text: str
    before: list[str]
    after: list[str]


class GrepOut(Schema):
    matches: list[GrepMatchOut]
    files_searched: int
    files_matched: int
    truncated: bool
    elapsed_ms: float


class FileSearchIn(InputSchema):
    query: str = Field(
        ...,
        max_length=MAX_QUERY_CHARS,
        description="What to look for, in your own words.",
        examples=["when do we check in at the hotel"],
    )
    folder: FolderName | None = Field(
        None, description="One attached folder; default all.", examples=["trip-notes"]
    )
    path: FilePath | None = Field(
        None,
        description="One file, or a directory prefix ending in '/'.",
        examples=["notes/"],
    )
    mode: SearchModeIn = Field("auto", examples=["hybrid"])
    limit: int = Field(10, ge=1, le=50, examples=[5])


class PassageScoresOut(Schema):
    score: float
    fts_rank: int | None
    bm25: float | None
    vector_rank: int | None
    vector_distance: float | None


class PassageHitOut(Schema):
    folder: str
    folder_id: int
    file_id: int
    path: str
    start_line: int
    end_line: int
    cite: str
    snippet_html: str
    content: str
    scores: PassageScoresOut


class FileSearchOut(Schema):
    results: list[PassageHitOut]
    mode_requested: str
    mode_used: str
    degraded: str
    quantised: bool = Field(
        False,
        description="Vectors were searched by the quantised path (binary KNN,"
        " re-scored exactly), as in folders of many passages.",
    )


# --- Letta-compatible shapes ----------------------------------------------------


class LettaFileRequest(InputSchema):
    file_name: PathGlob = Field(
        ..., description="'<folder>/<path>'", examples=["trip-notes/notes/hotels.md"]
    )
    offset: int | None = Field(
        None,
        ge=0,
        le=DB_INT_MAX - 1,
        description="Lines to skip (0-based).",
        examples=[39],
    )
    length: int | None = Field(
        None, ge=1, le=1000, description="Lines to show.", examples=[50]
    )


class LettaOpenFilesIn(InputSchema):
    file_requests: list[LettaFileRequest] = Field(..., min_length=1, max_length=10)
    close_all_others: bool = Field(False, examples=[False])


class LettaOpenFilesOut(Schema):
    message: str
    windows: list[WindowOut]


class LettaGrepIn(InputSchema):
    pattern: GrepPattern = Field(..., examples=["check-?in"])
    include: PathGlob | None = Field(
        None, description="Glob over '<folder>/<path>'.", examples=["trip-notes/*.md"]
    )
    context_lines: int = Field(0, ge=0, le=10, examples=[2])
    offset: int = Field(
        0,
        ge=0,
        le=DB_INT_MAX,
        description="Skip this many matches (paging).",
        examples=[50],
    )


class LettaSearchFilesIn(InputSchema):
    query: str = Field(
        ..., max_length=MAX_QUERY_CHARS, examples=["when do we check in at the hotel"]
    )
    limit: int = Field(10, ge=1, le=50, examples=[5])
