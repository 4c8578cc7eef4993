"""Multipart uploads that keep each file's path inside an uploaded directory.

Django keeps only the last part of an upload's file name (it drops
directories as a precaution) and skips a part whose name ends up empty or
``..``.  A directory upload (a browser's ``webkitdirectory`` input, a
dropped folder, an API client) names each part by its path below the
directory, ``docs/specs/a.md``: the parser here keeps that name as sent, as
``relative_path`` on the uploaded file, beside Django's cleaned ``name``.
It is untrusted: ``upload_path`` hands it to the services, whose
``ingest.clean_path`` refuses traversal and the rest before anything is
stored.
"""

import functools
import html
from collections.abc import Callable
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest
from django.http.multipartparser import MultiPartParser
from django.utils.datastructures import ImmutableList
from django.utils.encoding import force_str


class PathKeepingMultiPartParser(MultiPartParser):
    """Django's parser, recording each file part's name as sent."""

    _raw_name = ""

    def sanitize_file_name(self, file_name: str) -> str:
        self._raw_name = html.unescape(file_name)
        # A name Django would drop ("..", "docs/") keeps its part, so that
        # the upload is refused with its reason instead of losing a file.
        return super().sanitize_file_name(file_name) or "unnamed"

    def handle_file_complete(self, old_field_name: str, counters: list[int]) -> None:
        # Runs before the next part's name is read: ``_raw_name`` is still
        # this file's.
        field = force_str(old_field_name, self._encoding, errors="replace")
        before = len(self._files.getlist(field))
        super().handle_file_complete(old_field_name, counters)
        stored = self._files.getlist(field)
        if len(stored) > before:
            stored[-1].relative_path = self._raw_name


def _parse_keeping_paths(
    request: HttpRequest, meta: Any, post_data: Any
) -> tuple[Any, Any]:
    # HttpRequest.parse_file_upload with the parser above.
    request.upload_handlers = ImmutableList(
        request.upload_handlers,
        warning="You cannot alter upload handlers after the upload has been processed.",
    )
    parser = PathKeepingMultiPartParser(
        meta, post_data, request.upload_handlers, request.encoding
    )
    return parser.parse()  # type: ignore[no-any-return]


def keep_upload_paths(run: Callable[..., Any]) -> Callable[..., Any]:
    """A view decorator (ninja's ``decorate_view``): the request's multipart
    body is parsed by ``PathKeepingMultiPartParser``.  It wraps the whole
    operation, so it is in place before authentication (whose CSRF check
    reads the form) or the parameters parse the body."""

    @functools.wraps(run)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        request.parse_file_upload = functools.partial(  # type: ignore[method-assign]
            _parse_keeping_paths, request
        )
        return run(request, *args, **kwargs)

    return wrapper


def upload_path(file: UploadedFile) -> str:
    """The path a file was uploaded under: as sent, directories included."""
    return getattr(file, "relative_path", None) or file.name or ""
