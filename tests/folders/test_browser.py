"""Headless Chromium: drag and drop two files, watch indexing reach 100%."""

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from coordination.actors import Actor
from folders.files import services
from pattern_site.processes import daphne_command, free_port, wait_for_port
from tests.conftest import subprocess_env
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
def eager_daphne(transactional_db: None) -> Iterator[str]:
    """Daphne running indexing in the request (eager Celery): its progress
    messages reach the page through the process's own channel layer."""
    port = free_port()
    proc = subprocess.Popen(
        daphne_command(port=port), env=subprocess_env(PATTERN_CELERY_EAGER="true")
    )
    try:
        wait_for_port(port, proc=proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_drag_and_drop_upload_reaches_100_percent(
    transactional_db: None, eager_daphne: str, browser: Any
) -> None:
    user = UserFactory(username="dropper")
    user.set_password("drop-password-1")
    user.save()
    constellation = ConstellationFactory(partner=user, name="Drops")
    folder = services.folder_create(
        actor=Actor.for_user(user), constellation_id=constellation.pk, name="inbox"
    )
    page = browser.new_page()
    page.goto(f"{eager_daphne}/login/")
    page.fill("#id_username", "dropper")
    page.fill("#id_password", "drop-password-1")
    page.click("button[type=submit]")
    page.goto(f"{eager_daphne}/folders/{folder.pk}/")
    page.wait_for_selector("[data-live=on]", timeout=10_000)
    notes = "\n".join(f"meeting note {n} about the garden" for n in range(300))
    page.evaluate(
        DROP, ["[data-dropzone]", [["notes.md", notes], ["data.csv", "a,b\n1,2\n"]]]
    )
    page.wait_for_function(
        "document.querySelectorAll('[data-file-id]').length === 2", timeout=20_000
    )
    page.wait_for_function(
        "document.querySelector('[data-folder-percent]').textContent === '100%'",
        timeout=60_000,
    )
    percents = page.locator("[data-file-percent]").all_inner_texts()
    assert percents == ["100%", "100%"]
    assert "2 created" in page.inner_text("[data-upload-status]")
    assert "2 files" in page.inner_text("[data-folder-counts]")
