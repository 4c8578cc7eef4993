"""Dashboard pages of folders (humans only).

The folders list (with a create form), a folder's page (file tree, upload
area fed to the API by ``static/js/folders.js``, live indexing progress,
attachments, search) and a file viewer that highlights a passage.  Form
posts call one service each; a domain error comes back as a message.
"""

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from folders.files import selectors, services
from folders.files.models import FolderAccess, FolderKind
from folders.files.selectors import file_percent
from folders.permissions import Right
from folders.tools.search import folder_search, passage_hit_payload
from memory.search.engine import SEARCH_MODES
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.selectors import (
    agent_list_for_actor,
    constellation_list_for_actor,
)
from pattern_site.kernel.errors import InvalidInput
from pattern_site.kernel.web import form_action


def _actor(request: HttpRequest) -> Actor:
    return Actor.for_user(request.user)


def _int(raw: str | None, what: str) -> int:
    try:
        return int(raw or "")
    except ValueError:
        raise InvalidInput(f"{what} must be a whole number, not {raw!r}") from None


@login_required
def folder_list_page(request: HttpRequest) -> HttpResponse:
    actor = _actor(request)
    folders = list(selectors.folder_list_for_actor(actor=actor))
    rows = [(f, selectors.folder_counts(folder_id=f.pk)) for f in folders]
    return render(
        request,
        "folders/list.html",
        {
            "rows": rows,
            "constellations": constellation_list_for_actor(actor=actor),
            "kinds": FolderKind.choices,
        },
    )


@form_action
def create_folder(request: HttpRequest) -> HttpResponse:
    folder = services.folder_create(
        actor=_actor(request),
        constellation_id=_int(request.POST.get("constellation"), "constellation"),
        name=request.POST.get("name", ""),
        description=request.POST.get("description", ""),
        kind=request.POST.get("kind", FolderKind.VIRTUAL),
        root_path=request.POST.get("root_path", ""),
    )
    messages.success(request, f"Created folder {folder.name!r}.")
    return redirect("folders:folder", folder_id=folder.pk)


def _tree(files: list[Any]) -> list[dict[str, Any]]:
    """Rows of a file tree: a directory row before its first file."""
    rows: list[dict[str, Any]] = []
    shown: set[str] = set()
    for file in files:
        parts = file.path.split("/")
        for depth in range(len(parts) - 1):
            directory = "/".join(parts[: depth + 1])
            if directory not in shown:
                shown.add(directory)
                rows.append({"dir": parts[depth], "path": directory, "depth": depth})
        rows.append(
            {
                "file": file,
                "name": parts[-1],
                "depth": len(parts) - 1,
                "percent": file_percent(file),
                "state": selectors.file_state_word(file),
            }
        )
    return rows


@login_required
def folder_page(request: HttpRequest, folder_id: int) -> HttpResponse:
    actor = _actor(request)
    folder = selectors.folder_get_for_actor(actor=actor, folder_id=folder_id)
    counts = selectors.folder_counts(folder_id=folder.pk)
    query = request.GET.get("q", "").strip()
    mode = request.GET.get("mode", "auto")
    hits, degraded = [], ""
    if query:
        outcome = folder_search(folders=[folder], query=query, mode=mode, limit=20)
        hits = [passage_hit_payload(h) for h in outcome.hits]
        degraded = outcome.degraded
    return render(
        request,
        "folders/folder.html",
        {
            "folder": folder,
            "counts": counts,
            "folder_percent": counts["percent"],
            "tree": _tree(list(selectors.file_list(folder=folder))),
            "attachments": selectors.attachment_list(folder=folder),
            "agents": agent_list_for_actor(
                actor=actor, constellation_id=folder.constellation_id
            ),
            "accesses": FolderAccess.choices,
            "query": query,
            "mode": mode,
            "modes": SEARCH_MODES,
            "hits": hits,
            "degraded": degraded,
            "upload_max_files": settings.DATA_UPLOAD_MAX_NUMBER_FILES,
        },
    )


@login_required
def file_page(request: HttpRequest, folder_id: int, file_id: int) -> HttpResponse:
    folder = selectors.folder_get_for_actor(actor=_actor(request), folder_id=folder_id)
    file = selectors.file_get(folder=folder, file_id=file_id)
    start = request.GET.get("start")
    end = request.GET.get("end")
    first = _int(start, "start") if start else 0
    last = _int(end, "end") if end else first
    lines = [
        {"n": n, "text": text, "hit": first <= n <= last}
        for n, text in enumerate(file.text.split("\n"), start=1)
    ]
    if lines and lines[-1]["text"] == "" and file.text.endswith("\n"):
        lines.pop()
    return render(
        request,
        "folders/file.html",
        {"folder": folder, "file": file, "lines": lines, "first": first},
    )


@form_action
def attach_folder(request: HttpRequest, folder_id: int) -> HttpResponse:
    actor = _actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.MANAGE
    )
    attachment = services.folder_attach(
        actor=actor,
        folder=folder,
        agent_id=_int(request.POST.get("agent"), "agent"),
        access=request.POST.get("access", FolderAccess.READ),
    )
    messages.success(
        request, f"{attachment.agent.name} has {attachment.access} access."
    )
    return None  # back to the folder page


@form_action
def detach_folder(request: HttpRequest, folder_id: int, agent_id: int) -> HttpResponse:
    actor = _actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.MANAGE
    )
    services.folder_detach(actor=actor, folder=folder, agent_id=agent_id)
    messages.success(request, "Detached.")
    return None


@form_action
def delete_file(request: HttpRequest, folder_id: int, file_id: int) -> HttpResponse:
    actor = _actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.WRITE
    )
    file = selectors.file_get(folder=folder, file_id=file_id)
    services.file_delete(actor=actor, file=file)
    messages.success(request, f"Deleted {file.path}.")
    return redirect("folders:folder", folder_id=folder.pk)


@form_action
def rescan_folder(request: HttpRequest, folder_id: int) -> HttpResponse:
    actor = _actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.WRITE
    )
    report = services.folder_rescan(actor=actor, folder=folder)
    messages.success(
        request,
        f"Rescanned: {report.created} new, {report.updated} changed,"
        f" {report.deleted} deleted, {len(report.refused)} refused.",
    )
    return None


@form_action
def delete_folder(request: HttpRequest, folder_id: int) -> HttpResponse:
    actor = _actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.MANAGE
    )
    services.folder_delete(actor=actor, folder=folder)
    messages.success(request, f"Deleted folder {folder.name!r}.")
    return redirect("folders:list")
