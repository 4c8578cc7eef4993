"""Request and response shapes of the folders API and the file tools."""

from datetime import datetime
from typing import Literal

from ninja import Field, Schema

from folders.files.models import FolderFile
from folders.files.selectors import file_percent

AccessIn = Literal["read", "read_write"]
SearchModeIn = Literal["fts", "vector", "hybrid", "auto"]


class FolderIn(Schema):
    constellation_id: int
    name: str = Field(..., min_length=1, max_length=100)
    description: str = Field("", description="Shown to the agents it is attached to.")
    kind: Literal["virtual", "local"] = "virtual"
    root_path: str = Field("", description="Local folders: a directory on the server.")


class FolderPatchIn(Schema):
    description: str


class CountsOut(Schema):
    files: int
    indexed: int
    failed: int
    passages: int
    embedded: int
    pending: int


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


class AttachmentIn(Schema):
    access: AccessIn = "read"


class AttachmentOut(Schema):
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

    @staticmethod
    def resolve_percent(obj: FolderFile) -> int:
        return file_percent(obj)


class FileDetailOut(FileOut):
    text: str


class FileChangeOut(Schema):
    path: str
    status: str
    file_id: int | None


class UploadOut(Schema):
    changes: list[FileChangeOut]


class FileWriteIn(Schema):
    path: str = Field(
        ..., description="Relative path inside the folder, e.g. notes/a.md"
    )
    content: str


class RescanOut(Schema):
    created: int
    updated: int
    unchanged: int
    deleted: int
    refused: list[str]


# --- file tools -----------------------------------------------------------------


class FileRefIn(Schema):
    folder: str = Field(..., description="Name of an attached folder.")
    path: str = Field(..., description="Path of the file inside the folder.")


class FileOpenIn(FileRefIn):
    line: int = Field(1, ge=1, description="First line of the window (1-based).")
    lines: int | None = Field(
        None, ge=1, le=1000, description="Height of the window (default 100)."
    )


class FileReadIn(FileRefIn):
    start: int = Field(..., ge=1, description="First line (1-based).")
    end: int = Field(..., ge=1, description="Last line (inclusive).")


class FileCloseIn(Schema):
    folder: str | None = Field(None, description="With path: close that file only.")
    path: str | None = Field(None, description="Leave both out to close every file.")


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


class GrepIn(Schema):
    folder: str = Field(..., description="Name of an attached folder.")
    pattern: str = Field(..., description="A regular expression (or literal text).")
    path: str | None = Field(None, description="Only this file.")
    include: str | None = Field(None, description="Only paths matching this glob.")
    context: int = Field(0, ge=0, le=10, description="Lines shown each side.")
    ignore_case: bool = False
    literal: bool = Field(False, description="Match the pattern as plain text.")
    limit: int = Field(100, ge=1, le=1000, description="Most matching lines.")


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


class FileSearchIn(Schema):
    query: str = Field(..., description="What to look for, in your own words.")
    folder: str | None = Field(None, description="One attached folder; default all.")
    path: str | None = Field(
        None, description="One file, or a directory prefix ending in '/'."
    )
    mode: SearchModeIn = "auto"
    limit: int = Field(10, ge=1, le=50)


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


# --- Letta-compatible shapes ----------------------------------------------------


class LettaFileRequest(Schema):
    file_name: str = Field(..., description="'<folder>/<path>'")
    offset: int | None = Field(None, ge=0, description="Lines to skip (0-based).")
    length: int | None = Field(None, ge=1, le=1000, description="Lines to show.")


class LettaOpenFilesIn(Schema):
    file_requests: list[LettaFileRequest] = Field(..., min_length=1, max_length=10)
    close_all_others: bool = False


class LettaOpenFilesOut(Schema):
    message: str
    windows: list[WindowOut]


class LettaGrepIn(Schema):
    pattern: str
    include: str | None = Field(None, description="Glob over '<folder>/<path>'.")
    context_lines: int = Field(0, ge=0, le=10)
    offset: int = Field(0, ge=0, description="Skip this many matches (paging).")


class LettaSearchFilesIn(Schema):
    query: str
    limit: int = Field(10, ge=1, le=50)
