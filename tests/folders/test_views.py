"""Dashboard pages of folders, rendered by the test client."""

import pytest

from folders.models import FolderAttachment

pytestmark = pytest.mark.django_db


def test_folder_page_shows_tree_progress_and_attachments(
    folder, upload, writer, partner_client
):
    upload(folder, ("src/app/main.py", b"print(1)\n"), ("README.md", b"# Hi\n"))
    page = partner_client.get(f"/folders/{folder.pk}/").content.decode()
    assert "app/" in page and 'title="src/app/main.py">main.py</a>' in page
    assert 'progress-bar done" data-file-bar style="width: 100%"' in page
    assert "read_write" in page and writer.name in page


def test_search_box_links_hits_to_the_highlighted_lines(folder, upload, partner_client):
    text = "".join(f"filler line {n}\n" for n in range(40)) + "the walrus said\n"
    [change] = upload(folder, ("poem.txt", text.encode()))
    page = partner_client.get(
        f"/folders/{folder.pk}/", {"q": "walrus", "mode": "fts"}
    ).content.decode()
    passage = change.file.passages.get(content__contains="walrus")
    link = (
        f"/folders/{folder.pk}/files/{change.file.pk}/?start={passage.start_line}"
        f"&amp;end={passage.end_line}#L{passage.start_line}"
    )
    assert link in page
    viewer = partner_client.get(
        f"/folders/{folder.pk}/files/{change.file.pk}/",
        {"start": 41, "end": 41},
    ).content.decode()
    assert '<tr id="L41" class="hit"><td class="ln">41</td>' in viewer
    assert '<tr id="L40"><td class="ln">40</td>' in viewer


def test_attach_form_attaches_an_agent(folder, agent, partner_client):
    partner_client.get("/", follow=True)
    token = partner_client.cookies["csrftoken"].value
    partner_client.post(
        f"/folders/{folder.pk}/attach",
        {"agent": agent.pk, "access": "read", "csrfmiddlewaretoken": token},
    )
    assert FolderAttachment.objects.get(folder=folder, agent=agent).access == "read"


def test_folder_of_another_constellation_is_a_404_page(folder, client):
    from tests.factories import UserFactory

    client.force_login(UserFactory(username="nosy"))
    assert client.get(f"/folders/{folder.pk}/").status_code == 404


def test_upload_area_offers_a_folder_and_sends_at_most_the_request_limit(
    folder, partner_client, settings
):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 7
    page = partner_client.get(f"/folders/{folder.pk}/").content.decode()
    assert 'data-max-files="7"' in page
    assert 'type="file" webkitdirectory data-folder-input' in page
