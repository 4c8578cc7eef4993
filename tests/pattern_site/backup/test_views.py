"""The dashboard's backup download and archive upload."""

import io
import zipfile

from django.test import Client
from django.urls import reverse

from pattern_site.kernel.agents.models import Constellation
from tests.factories import UserFactory


def upload(client: Client, archive: bytes, **fields: str):
    page = client.get(reverse("backup:upload"))
    assert page.status_code == 200
    token = client.cookies["csrftoken"].value
    data = {"archive": io.BytesIO(archive), **fields}
    data["archive"].name = "pattern.zip"
    return client.post(reverse("backup:upload"), data, HTTP_X_CSRFTOKEN=token)


def test_the_partner_downloads_a_backup_and_uploads_it_under_a_new_name(
    rich_constellation, partner_client, partner
):
    download_url = reverse("backup:download", args=[rich_constellation.pk])
    page = partner_client.get(
        reverse("dashboard:constellation", args=[rich_constellation.pk])
    )
    assert download_url in page.content.decode()

    response = partner_client.get(download_url)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert 'filename="Pattern-' in response["Content-Disposition"]
    archive = b"".join(response.streaming_content)
    assert "manifest.json" in zipfile.ZipFile(io.BytesIO(archive)).namelist()

    answer = upload(partner_client, archive, rename="Pattern at home")

    assert answer.status_code == 200, answer.content
    copy = Constellation.objects.get(name="Pattern at home")
    assert answer.json()["url"] == reverse("dashboard:constellation", args=[copy.pk])
    assert copy.partner == partner
    assert answer.json()["agents"] == ["Helper", "Lead", "Scribe"]


def test_a_member_who_is_not_the_partner_may_not_download(rich_constellation):
    member = Client()
    member.force_login(UserFactory(username="member"))
    url = reverse("backup:download", args=[rich_constellation.pk])

    page = member.get(reverse("dashboard:constellation", args=[rich_constellation.pk]))
    assert page.status_code == 200
    assert url not in page.content.decode()
    assert "Only the partner" in page.content.decode()

    response = member.get(url)
    assert response.status_code == 403
    assert "only the partner of Pattern" in response.content.decode()


def test_an_outsider_cannot_see_the_backup_and_strangers_must_sign_in(
    rich_constellation,
):
    outsider = Client()
    outsider.force_login(UserFactory(username="outsider"))
    url = reverse("backup:download", args=[rich_constellation.pk])
    assert outsider.get(url).status_code == 404
    anonymous = Client()
    assert anonymous.get(url).status_code == 302
    assert anonymous.get(reverse("backup:upload")).status_code == 302


def test_an_upload_of_a_taken_name_or_a_damaged_archive_is_refused_clearly(
    rich_constellation, partner_client
):
    archive = b"".join(
        partner_client.get(
            reverse("backup:download", args=[rich_constellation.pk])
        ).streaming_content
    )
    taken = upload(partner_client, archive)
    assert taken.status_code == 409
    assert "already exists here" in taken.json()["error"]

    damaged = upload(partner_client, archive[:-100], rename="Other")
    assert damaged.status_code == 422
    assert "not a readable zip" in damaged.json()["error"]
    assert list(Constellation.objects.values_list("name", flat=True)) == ["Pattern"]
