"""Headless Chromium: drag and drop two files, watch indexing reach 100%;
choose a folder, its tree is kept."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from folders.files import services
from folders.models import FolderFile
from pattern_site.broker import sqlite_broker_url
from pattern_site.kernel.actors import Actor
from tests.conftest import BROWSER_WAIT_MS, daphne_process
from tests.factories import ConstellationFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DROP = """
async ([selector, files]) => {
  const transfer = new DataTransfer();
  for (const [name, text] of files) transfer.items.add(new File([text], name));
  const zone = document.querySelector(selector);
  for (const kind of ["dragover", "drop"]) {
    zone.dispatchEvent(new DragEvent(kind, { dataTransfer: transfer, bubbles: true }));
  }
}
"""


@pytest.fixture
def eager_daphne(shared_daphne_server: Callable[..., str]) -> str:
    """Daphne running indexing in the request (eager Celery): its progress
    messages reach the page through the process's own channel layer."""
    return shared_daphne_server(PATTERN_CELERY_EAGER="true")


def _folder_page(server: str, browser: Any) -> tuple[Any, Any]:
    """A logged-in partner's page of a new virtual folder, live."""
    user = UserFactory(username="dropper")
    user.set_password("drop-password-1")
    user.save()
    constellation = ConstellationFactory(partner=user, name="Drops")
    folder = services.folder_create(
        actor=Actor.for_user(user), constellation_id=constellation.pk, name="inbox"
    )
    page = browser.new_page()
    page.goto(f"{server}/login/")
    page.fill("#id_username", "dropper")
    page.fill("#id_password", "drop-password-1")
    page.click("button[type=submit]")
    page.goto(f"{server}/folders/{folder.pk}/")
    page.wait_for_selector("[data-live=on]", timeout=BROWSER_WAIT_MS)
    return folder, page


def _wait_indexed(page: Any, *, files: int) -> None:
    """Until the tree shows ``files`` files, all indexed, and the upload's
    answer is in (progress may arrive over the socket before it)."""
    page.wait_for_function(
        f"document.querySelectorAll('[data-file-id]').length === {files}",
        timeout=BROWSER_WAIT_MS,
    )
    page.wait_for_function(
        "document.querySelector('[data-folder-percent]').textContent === '100%'",
        timeout=BROWSER_WAIT_MS,
    )
    _wait_answered(page)


def _stored(folder: Any) -> list[str]:
    return sorted(
        FolderFile.objects.filter(folder=folder).values_list("path", flat=True)
    )


def _wait_answered(page: Any) -> None:
    page.wait_for_function(
        "document.querySelector('[data-upload-status]').textContent"
        ".includes('created')",
        timeout=BROWSER_WAIT_MS,
    )


def test_drag_and_drop_upload_reaches_100_percent(
    transactional_db: None, eager_daphne: str, browser: Any
) -> None:
    _folder, page = _folder_page(eager_daphne, browser)
    notes = "\n".join(f"meeting note {n} about the garden" for n in range(300))
    page.evaluate(
        DROP, ["[data-dropzone]", [["notes.md", notes], ["data.csv", "a,b\n1,2\n"]]]
    )
    _wait_indexed(page, files=2)
    percents = page.locator("[data-file-percent]").all_inner_texts()
    assert percents == ["100%", "100%"]
    assert "2 created" in page.inner_text("[data-upload-status]")
    assert "2 files" in page.inner_text("[data-folder-counts]")


def test_choosing_a_folder_uploads_its_tree(
    transactional_db: None, eager_daphne: str, browser: Any, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    (root / "docs" / "specs").mkdir(parents=True)
    (root / "docs" / "specs" / "api.md").write_text("# API\nendpoints and tokens\n")
    (root / "docs" / "guide.md").write_text("# Guide\nhow to start\n")
    (root / "notes.txt").write_text("a note\n")
    (root / ".git").mkdir()
    (root / ".git" / "index").write_bytes(b"\x00binary index")  # left out
    folder, page = _folder_page(eager_daphne, browser)
    page.set_input_files("[data-folder-input]", str(root))
    _wait_indexed(page, files=3)
    assert page.inner_text("[data-upload-status]") == "3 created, 1 hidden skipped"
    assert _stored(folder) == [
        "project/docs/guide.md",
        "project/docs/specs/api.md",
        "project/notes.txt",
    ]
    # The live tree is drawn as the server draws it on a reload.
    page.screenshot(path=str(tmp_path / "folder.png"), full_page=True)
    rows = ["0 project/", "1 docs/", "2 guide.md", "2 specs/", "3 api.md"]
    rows.append("1 notes.txt")
    assert _tree_rows(page) == rows
    page.reload()
    assert _tree_rows(page) == rows


def _tree_rows(page: Any) -> list[str]:
    """Each tree row as "depth name" (a directory's name with its '/')."""
    return page.eval_on_selector_all(
        "[data-tree] li",
        "rows => rows.map(r => r.style.getPropertyValue('--depth').trim() + ' '"
        " + (r.dataset.dir !== undefined ? r.textContent.trim()"
        " : r.querySelector('a').textContent))",
    )


# A dropped folder as Chromium hands it over: DataTransferItems whose
# webkitGetAsEntry() is a directory entry, read in batches by readEntries
# until it answers none.  A page cannot build real entries, so the drop
# event carries look-alikes with the same interface.
DROP_FOLDER = """
([selector, tree]) => {
  const entry = (path, node) => typeof node === "string"
    ? { isFile: true, isDirectory: false, fullPath: path,
        file: (ok) => ok(new File([node], path.split("/").pop())) }
    : { isFile: false, isDirectory: true, fullPath: path,
        createReader: () => {
          const children = Object.entries(node)
            .map(([n, c]) => entry(`${path}/${n}`, c));
          const batches = [children.slice(0, 2), children.slice(2), []];
          const next = (ok) => setTimeout(() => ok(batches.shift() || []), 5);
          return { readEntries: next };
        } };
  const items = Object.entries(tree).map(([name, node]) => ({
    kind: "file",
    webkitGetAsEntry: () => entry(`/${name}`, node),
    getAsFile: () => null,
  }));
  const drop = new Event("drop", { bubbles: true, cancelable: true });
  Object.defineProperty(drop, "dataTransfer", { value: { items } });
  document.querySelector(selector).dispatchEvent(drop);
}
"""


def test_dropping_a_folder_walks_its_tree(
    transactional_db: None, eager_daphne: str, browser: Any
) -> None:
    folder, page = _folder_page(eager_daphne, browser)
    tree = {
        "notes": {
            "a.md": "alpha\n",
            "b.md": "beta\n",
            "2024": {"c.md": "gamma\n", "d.md": "delta\n", "e.csv": "x,y\n"},
            ".git": {"HEAD": "ref\n"},
        },
        "loose.txt": "loose\n",
    }
    page.evaluate(DROP_FOLDER, ["[data-dropzone]", tree])
    _wait_answered(page)
    assert page.inner_text("[data-upload-status]") == "6 created, 1 hidden skipped"
    assert _stored(folder) == [
        "loose.txt",
        "notes/2024/c.md",
        "notes/2024/d.md",
        "notes/2024/e.csv",
        "notes/a.md",
        "notes/b.md",
    ]


def test_after_an_upload_the_row_and_the_header_agree_and_turn_ready_live(
    transactional_db: None,
    browser: Any,
    redis_url: str,
    redis_channel_layer: None,
    tmp_path: Path,
) -> None:
    # No worker: the upload is stored and its indexing waits in the broker,
    # as on a site whose worker is busy; this test then indexes it itself.
    with daphne_process(
        PATTERN_REDIS_URL=redis_url,
        PATTERN_CELERY_BROKER_URL=sqlite_broker_url(tmp_path / "broker.sqlite3"),
    ) as server:
        folder, page = _folder_page(server, browser)
        page.evaluate(DROP, ["[data-dropzone]", [["packing.txt", "socks\nmap\n"]]])
        _wait_answered(page)
        page.wait_for_selector("[data-file-id]", timeout=BROWSER_WAIT_MS)

        row = page.locator("[data-file-id]")
        assert row.locator("[data-file-state]").inner_text() == "waiting"
        assert row.locator("[data-file-percent]").inner_text() == "0%"
        header = page.inner_text("[data-folder-counts]")
        assert "1 not ready yet" in header, header
        assert page.inner_text("[data-folder-percent]") == "0%"

        (stored,) = FolderFile.objects.filter(folder=folder)
        services.file_index(file_id=stored.pk)

        page.wait_for_function(
            "document.querySelector('[data-folder-percent]').textContent === '100%'",
            timeout=BROWSER_WAIT_MS,
        )
        assert row.locator("[data-file-state]").inner_text() == "ready"
        assert row.locator("[data-file-percent]").inner_text() == "100%"
        assert page.inner_text("[data-folder-counts]").endswith("· ready")
