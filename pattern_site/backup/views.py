"""Dashboard: a partner downloads a constellation's archive, and uploads one."""

import re
import tempfile

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from pattern_site.backup.services import constellation_export, constellation_import
from pattern_site.kernel.agents.permissions import (
    constellation_can_export,
    constellation_can_import,
)
from pattern_site.kernel.agents.selectors import constellation_get_for_actor
from pattern_site.kernel.errors import ApplicationError, PermissionDenied
from pattern_site.kernel.web import page_actor


@login_required
@require_GET
def constellation_download(request: HttpRequest, constellation_id: int) -> HttpResponse:
    actor = page_actor(request)
    constellation = constellation_get_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    if not constellation_can_export(actor, constellation):
        raise PermissionDenied(
            f"only the partner of {constellation.name} may download its backup"
        )
    # On disk past a few megabytes: a constellation's archive can be large.
    # FileResponse closes it once sent.
    out = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)  # noqa: SIM115
    constellation_export(constellation=constellation, out=out)
    out.seek(0)
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", constellation.name).strip("-") or "backup"
    return FileResponse(
        out,
        as_attachment=True,
        filename=f"{slug}-{timezone.now():%Y%m%d-%H%M}.zip",
        content_type="application/zip",
    )


@login_required
@require_http_methods(["GET", "POST"])
def constellation_upload(request: HttpRequest) -> HttpResponse:
    """The upload page; its script posts the archive and shows the progress
    (the answer is JSON)."""
    actor = page_actor(request)
    if not constellation_can_import(actor):
        raise PermissionDenied("only a person may import a constellation")
    if request.method == "GET":
        return render(request, "dashboard/constellation_import.html")
    archive = request.FILES.get("archive")
    if archive is None:
        return JsonResponse({"error": "choose an archive to upload"}, status=422)
    try:
        result = constellation_import(
            source=archive,
            rename=request.POST.get("rename", "").strip() or None,
            partner=request.user,
        )
    except ApplicationError as exc:
        return JsonResponse({"error": exc.message}, status=exc.status_code)
    constellation = result.constellation
    return JsonResponse(
        {
            "constellation": constellation.name,
            "url": reverse("dashboard:constellation", args=[constellation.pk]),
            "rows": sum(result.counts.values()),
            "agents": result.agents,
            "reembed": result.reembed,
        }
    )
