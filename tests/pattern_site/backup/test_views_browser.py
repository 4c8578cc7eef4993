"""The upload page in headless Chromium against a real Daphne process."""

import io

import pytest

from pattern_site.backup.services import constellation_export
from tests.factories import AgentFactory, ConstellationFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_partner_uploads_an_archive_and_lands_on_the_imported_constellation(
    transactional_db, daphne_server, browser, tmp_path
):
    partner = UserFactory(username="mover")
    constellation = ConstellationFactory(name="Old home", partner=partner)
    AgentFactory(constellation=constellation, name="Flux")
    out = io.BytesIO()
    constellation_export(constellation=constellation, out=out)
    archive = tmp_path / "old-home.zip"
    archive.write_bytes(out.getvalue())
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(out.getvalue()[:-64])

    page = browser.new_page()
    page.goto(f"{daphne_server}/login/")
    page.fill("#id_username", "mover")
    page.fill("#id_password", "correct horse battery staple")
    page.click("button[type=submit]")
    page.wait_for_selector("[data-testid=backup]")
    page.click("text=Import a constellation")

    page.set_input_files("#archive", str(damaged))
    page.fill("#rename", "New home")
    page.click("[data-backup-upload] button[type=submit]")
    alert = page.wait_for_selector("[data-upload-error]:not([hidden])")
    assert "not a readable zip" in alert.inner_text()

    page.set_input_files("#archive", str(archive))
    page.click("[data-backup-upload] button[type=submit]")
    page.wait_for_selector("h1:has-text('New home')")
    assert page.locator(".agent-name").all_inner_texts() == ["Flux"]
