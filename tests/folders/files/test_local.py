"""Local folders: only files under an allowed root are ever read."""

import os
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from folders.files import services
from folders.files.ingest import local_read
from folders.models import FolderFile
from pattern_site.kernel.errors import InvalidInput

pytestmark = pytest.mark.django_db


@pytest.fixture
def roots(tmp_path: Path, settings: Any) -> tuple[Path, Path]:
    allowed = tmp_path / "allowed"
    outside = tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret words\n")
    settings.FOLDER_ROOTS = [str(allowed)]
    return allowed, outside


@pytest.fixture
def local(roots, human, constellation):
    allowed, _outside = roots
    tree = allowed / "project"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "main.py").write_text("print('hello')\n")
    (tree / "README.md").write_text("# Project\n")
    return services.folder_create(
        actor=human,
        constellation_id=constellation.pk,
        name="project",
        kind="local",
        root_path=str(tree),
    )


def test_local_folder_outside_the_roots_is_refused(roots, human, constellation):
    _allowed, outside = roots
    with pytest.raises(InvalidInput, match="outside the directories"):
        services.folder_create(
            actor=human,
            constellation_id=constellation.pk,
            name="x",
            kind="local",
            root_path=str(outside),
        )


def test_dotdot_root_resolving_outside_is_refused(roots, human, constellation):
    allowed, _outside = roots
    with pytest.raises(InvalidInput, match="outside the directories"):
        services.folder_create(
            actor=human,
            constellation_id=constellation.pk,
            name="x",
            kind="local",
            root_path=f"{allowed}/../outside",
        )


def test_rescan_picks_up_new_changed_and_deleted_files(
    local, human, django_capture_on_commit_callbacks
):
    from tests.folders.conftest import committed

    with committed(django_capture_on_commit_callbacks):
        first = services.folder_rescan(actor=human, folder=local)
    assert (first.created, first.updated, first.deleted) == (2, 0, 0)
    root = Path(local.root_path)
    (root / "README.md").write_text("# Project\nchanged\n")
    (root / "src" / "main.py").unlink()
    (root / "NEW.txt").write_text("new file\n")
    with committed(django_capture_on_commit_callbacks):
        second = services.folder_rescan(actor=human, folder=local)
    assert (second.created, second.updated, second.deleted) == (1, 1, 1)
    assert second.unchanged == 0
    assert sorted(FolderFile.objects.values_list("path", flat=True)) == [
        "NEW.txt",
        "README.md",
    ]
    assert FolderFile.objects.get(path="README.md").index_state == "ready"


def test_symlink_leading_outside_is_refused_and_never_read(local, human, roots):
    _allowed, outside = roots
    root = Path(local.root_path)
    os.symlink(outside / "secret.txt", root / "leak.txt")
    os.symlink(outside, root / "leakdir")
    report = services.folder_rescan(actor=human, folder=local)
    assert any(r.startswith("leak.txt: resolves outside") for r in report.refused)
    assert not FolderFile.objects.filter(text__contains="secret").exists()
    with pytest.raises(InvalidInput, match="outside"):
        local_read(str(root), "leak.txt")
    with pytest.raises(InvalidInput, match="leaves its folder"):
        local_read(str(root), "../../outside/secret.txt")


def test_symlink_inside_the_root_is_followed(local, human):
    root = Path(local.root_path)
    os.symlink(root / "README.md", root / "alias.md")
    services.folder_rescan(actor=human, folder=local)
    assert FolderFile.objects.filter(path="alias.md").exists()


def test_device_files_and_fifos_are_refused(local, human):
    root = Path(local.root_path)
    os.mkfifo(root / "pipe.txt")
    os.symlink("/dev/zero", root / "zero.txt")
    report = services.folder_rescan(actor=human, folder=local)
    refused = "\n".join(report.refused)
    assert "pipe.txt: is not a regular file" in refused
    assert "zero.txt: resolves outside" in refused
    assert not FolderFile.objects.filter(path__in=["pipe.txt", "zero.txt"]).exists()


def test_index_folder_command_shows_progress(local, capsys):
    call_command("index_folder", "project")
    out = capsys.readouterr().out
    assert "100% 2/2" in out
    assert "2 new, 0 changed" in out
    assert FolderFile.objects.filter(folder=local).count() == 2
