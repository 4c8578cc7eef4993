"""Turning uploaded bytes and files on disk into checked paths and text.

Every path is a relative POSIX path: empty parts, ``.``/``..``, absolute
paths, backslashes, NUL and other control characters, and paths too long or
too deep are refused before anything is stored or read.
Text, Markdown, source code, CSV, JSON and HTML (kept as its source text)
are decoded as UTF-8; PDF text is extracted with pypdf; anything else is a
binary file and refused with the list of what is accepted.  A zip is
expanded member by member with the count, each member's size and its
inflation ratio bounded while reading (never trusting the zip's headers),
so a zip bomb stops at the limit.  Files of local folders are opened with
``O_NOFOLLOW`` after their resolved path is checked to lie under the
folder's root, and read only if they are regular files.
"""

import hashlib
import io
import mimetypes
import os
import stat
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from django.conf import settings

from pattern_site.kernel.errors import InvalidInput, LimitExceeded

ACCEPTED = "text, Markdown, source code, CSV, JSON, HTML and PDF files"
MAX_PATH_CHARS = 1024
MAX_PATH_DEPTH = 32  # directories above a file, plus the file
_TEXT_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".json": "application/json",
    ".jsonl": "application/jsonl",
    ".html": "text/html",
    ".htm": "text/html",
    ".py": "text/x-python",
    ".js": "text/javascript",
    ".ts": "text/typescript",
    ".rs": "text/x-rust",
    ".go": "text/x-go",
    ".toml": "application/toml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
}
_BINARY_SNIFF = 8192


@dataclass(frozen=True)
class Document:
    """A checked file ready to store: its path, type, text and digest."""

    path: str
    content_type: str
    size: int
    sha256: str
    text: str


def clean_path(raw: str) -> str:
    """``raw`` as a normalised relative POSIX path, or InvalidInput."""
    shown = _shown(raw)
    if not raw or "\x00" in raw:
        raise InvalidInput(f"file path {shown} is empty or contains NUL")
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise InvalidInput(f"file path {shown} contains a control character")
    if "\\" in raw:
        raise InvalidInput(f"file path {shown} uses backslashes; use '/'")
    if raw.startswith("/"):
        raise InvalidInput(f"file path {shown} is absolute; give a relative path")
    if raw.endswith("/"):
        raise InvalidInput(f"file path {shown} ends with '/': it names a directory")
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise InvalidInput(f"file path {shown} leaves its folder ('..')")
    if not parts:
        raise InvalidInput(f"file path {shown} names no file")
    if any(not p.strip() for p in parts):
        raise InvalidInput(f"file path {shown} has a name of only spaces")
    if len(parts) > MAX_PATH_DEPTH:
        raise InvalidInput(
            f"file path {shown} is {len(parts)} levels deep; at most {MAX_PATH_DEPTH}"
        )
    path = str(PurePosixPath(*parts))
    if len(path) > MAX_PATH_CHARS:
        raise InvalidInput(
            f"file path {shown} is {len(path)} chars; at most {MAX_PATH_CHARS}"
        )
    return path


def _shown(raw: str) -> str:
    # A refused path is quoted in the error, cut short: it may be huge.
    return repr(raw) if len(raw) <= 120 else f"{raw[:120]!r}…"


def document_from_bytes(path: str, data: bytes) -> Document:
    """Check and decode one file; refuse binaries and oversized files."""
    path = clean_path(path)
    limit = settings.FOLDER_MAX_FILE_BYTES
    if len(data) > limit:
        raise LimitExceeded(
            f"{path} is {len(data):,} bytes; a file may have at most {limit:,}"
        )
    content_type, text = _extract(path, data)
    return Document(
        path=path,
        content_type=content_type,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        text=text,
    )


def _extract(path: str, data: bytes) -> tuple[str, str]:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix == ".pdf" or data.startswith(b"%PDF-"):
        return "application/pdf", _pdf_text(path, data)
    guessed = _TEXT_TYPES.get(suffix) or mimetypes.guess_type(path)[0] or ""
    if b"\x00" in data[:_BINARY_SNIFF]:
        raise InvalidInput(
            f"{path} is a binary file ({guessed or 'unknown type'}); folders"
            f" accept {ACCEPTED}"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{path} is not UTF-8 text (byte {exc.start}); folders accept {ACCEPTED}"
        ) from None
    return guessed if _is_text_type(guessed) else "text/plain", _normal_lines(text)


def _is_text_type(content_type: str) -> bool:
    return content_type.startswith("text/") or content_type in _TEXT_TYPES.values()


def _normal_lines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _pdf_text(path: str, data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, KeyError, OSError) as exc:
        raise InvalidInput(f"{path} is not a readable PDF: {exc}") from None
    return _normal_lines("\n\n".join(p.strip("\n") for p in pages))


def is_zip(name: str, data: bytes) -> bool:
    return name.lower().endswith(".zip") and data[:4] == b"PK\x03\x04"


def zip_members(data: bytes, *, budget: int) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of each file in a zip; at most ``budget`` bytes in all."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise InvalidInput(f"not a readable zip: {exc}") from None
    infos = [i for i in archive.infolist() if not i.is_dir()]
    if len(infos) > settings.FOLDER_ZIP_MAX_FILES:
        raise LimitExceeded(
            f"zip holds {len(infos):,} files; at most"
            f" {settings.FOLDER_ZIP_MAX_FILES:,} per upload"
        )
    per_file = settings.FOLDER_MAX_FILE_BYTES
    ratio = settings.FOLDER_ZIP_MAX_RATIO
    total = 0
    for info in infos:
        if stat.S_ISLNK(info.external_attr >> 16):
            raise InvalidInput(f"zip member {info.filename!r} is a symlink")
        path = clean_path(info.filename)
        cap = min(per_file, budget - total, max(info.compress_size, 1) * ratio)
        with archive.open(info) as member:
            content = member.read(cap + 1)
        if len(content) > cap:
            raise LimitExceeded(
                f"zip member {path} inflates past {cap:,} bytes (file limit"
                f" {per_file:,}, ratio {ratio}:1, upload budget {budget:,})"
            )
        total += len(content)
        yield path, content


# --- local folders ------------------------------------------------------------


def local_root_check(raw: str) -> str:
    """The real path of a local folder's directory, if under an allowed root."""
    if not raw or "\x00" in raw:
        raise InvalidInput("a local folder needs a directory path")
    real = os.path.realpath(raw)
    roots = [os.path.realpath(r) for r in settings.FOLDER_ROOTS]
    if not any(_inside(real, root) for root in roots):
        allowed = ", ".join(settings.FOLDER_ROOTS) or "none configured"
        raise InvalidInput(
            f"{raw} is outside the directories local folders may use ({allowed};"
            " set PATTERN_FOLDER_ROOTS)"
        )
    if not os.path.isdir(real):
        raise InvalidInput(f"{raw} is not a directory")
    return real


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True)
class LocalEntry:
    path: str  # relative POSIX path
    size: int
    mtime_ns: int


def local_walk(root: str) -> tuple[list[LocalEntry], list[str]]:
    """Regular files under ``root`` (symlinks followed only inside it), and
    the relative paths refused with their reason."""
    entries: list[LocalEntry] = []
    refused: list[str] = []
    real_root = os.path.realpath(root)
    for dirpath, dirnames, filenames in os.walk(real_root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, real_root).replace(os.sep, "/")
            try:
                st = _checked_stat(real_root, full)
                entries.append(LocalEntry(clean_path(rel), st.st_size, st.st_mtime_ns))
            except InvalidInput as exc:
                refused.append(f"{rel}: {exc.message}")
    return entries, refused


def _checked_stat(real_root: str, full: str) -> os.stat_result:
    real = os.path.realpath(full)
    if not _inside(real, real_root):
        raise InvalidInput("resolves outside the folder's root")
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        raise InvalidInput("is not a regular file")
    return st


def local_read(root: str, rel: str) -> bytes:
    """The bytes of ``rel`` under ``root``: checked, never through a link
    leading outside, never a device or a pipe."""
    rel = clean_path(rel)
    real_root = os.path.realpath(root)
    full = os.path.join(real_root, *rel.split("/"))
    _checked_stat(real_root, full)
    real = os.path.realpath(full)
    limit = settings.FOLDER_MAX_FILE_BYTES
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise InvalidInput(f"{rel} is not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise LimitExceeded(f"{rel} is over {limit:,} bytes, the file limit")
    return data
