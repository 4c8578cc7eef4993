"""The archive file: a zip of JSON members and a manifest of their hashes.

``manifest.json`` names the format and its version, the site version that
wrote it, the row count of each model and the SHA-256 of every other
member.  Reading checks all of it before anything is imported: a truncated
or altered archive is refused whole.
"""

import hashlib
import io
import json
import zipfile
import zlib
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, BinaryIO

from pattern_site.kernel.errors import InvalidInput

FORMAT = "pattern-site-constellation"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
USERS = "users.json"


class InvalidArchive(InvalidInput):
    """An archive that is not a complete, unaltered constellation export."""


def site_version() -> str:
    try:
        return version("pattern-site")
    except PackageNotFoundError:  # pragma: no cover - run from a bare checkout
        return "unknown"


def data_member(model_label: str) -> str:
    return f"data/{model_label}.json"


@dataclass(frozen=True)
class Archive:
    manifest: dict[str, Any]
    members: dict[str, Any]

    def rows(self, model_label: str) -> list[dict[str, Any]]:
        return self.members.get(data_member(model_label), [])


def archive_write(
    out: BinaryIO, *, manifest: dict[str, Any], members: dict[str, Any]
) -> None:
    """Write ``members`` (name -> JSON value) and their manifest to ``out``."""
    hashes: dict[str, str] = {}
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, value in members.items():
            data = json.dumps(value, ensure_ascii=False, sort_keys=True).encode()
            hashes[name] = hashlib.sha256(data).hexdigest()
            zf.writestr(name, data)
        full = {
            **manifest,
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "site_version": site_version(),
            "members": hashes,
        }
        zf.writestr(MANIFEST, json.dumps(full, indent=2, sort_keys=True))


def archive_read(source: BinaryIO | bytes) -> Archive:
    """The checked content of an archive, or ``InvalidArchive`` saying why."""
    stream = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        with zipfile.ZipFile(stream) as zf:
            manifest = _manifest(zf)
            expected = manifest["members"]
            present = set(zf.namelist()) - {MANIFEST}
            if present != set(expected):
                raise InvalidArchive(
                    "the archive's members do not match its manifest"
                    f" (missing: {sorted(set(expected) - present)},"
                    f" unexpected: {sorted(present - set(expected))})"
                )
            members: dict[str, Any] = {}
            for name, digest in expected.items():
                data = zf.read(name)
                if hashlib.sha256(data).hexdigest() != digest:
                    raise InvalidArchive(
                        f"{name} does not match its SHA-256 in the manifest:"
                        " the archive was altered or damaged"
                    )
                members[name] = json.loads(data)
    except (zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise InvalidArchive(
            f"not a readable zip archive (truncated or damaged?): {exc}"
        ) from exc
    archive = Archive(manifest=manifest, members=members)
    for model_label, count in manifest.get("counts", {}).items():
        if len(archive.rows(model_label)) != count:
            raise InvalidArchive(
                f"{data_member(model_label)} holds {len(archive.rows(model_label))}"
                f" rows; the manifest counts {count}"
            )
    return archive


def _manifest(zf: zipfile.ZipFile) -> dict[str, Any]:
    try:
        manifest = json.loads(zf.read(MANIFEST))
    except KeyError:
        raise InvalidArchive(f"the archive has no {MANIFEST}") from None
    except ValueError as exc:
        raise InvalidArchive(f"{MANIFEST} is not JSON: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InvalidArchive(f"not a constellation export (format is not {FORMAT})")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise InvalidArchive(
            f"archive format version {manifest.get('format_version')!r};"
            f" this site reads version {FORMAT_VERSION}"
        )
    if not isinstance(manifest.get("members"), dict):
        raise InvalidArchive(f"{MANIFEST} lists no members")
    return manifest
