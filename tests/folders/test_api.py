"""The folders API and file tools over HTTP, with the permission cells."""

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from urllib3 import encode_multipart_formdata

from folders.files import services
from folders.models import FolderFile
from pattern_site.kernel.agents.services import agent_token_issue
from tests.factories import AgentFactory, ConstellationFactory, UserFactory
from tests.folders.conftest import committed

pytestmark = pytest.mark.django_db


def _client(agent: Any) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=agent).raw}")


def _post(client: Client, url: str, body: dict[str, Any]) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json")


@pytest.fixture
def stored(folder, upload):
    [change] = upload(folder, ("notes.md", b"alpha\nbeta\ngamma\n"))
    return change.file


@pytest.fixture
def stranger(db):
    other = ConstellationFactory(partner=UserFactory(username="other"), name="Other")
    return AgentFactory(constellation=other, name="Stranger")


@pytest.fixture
def unattached(constellation):
    return AgentFactory(constellation=constellation, name="Loner")


# Who (read / read_write / same constellation but unattached / another
# constellation) may do what: (action, expected status per caller).
CELLS = [
    ("list_files", {"read": 200, "rw": 200, "unattached": 404, "stranger": 404}),
    ("grep", {"read": 200, "rw": 200, "unattached": 404, "stranger": 404}),
    ("open", {"read": 200, "rw": 200, "unattached": 404, "stranger": 404}),
    ("upload", {"read": 403, "rw": 201, "unattached": 404, "stranger": 404}),
    ("write", {"read": 403, "rw": 200, "unattached": 404, "stranger": 404}),
    ("delete_file", {"read": 403, "rw": 204, "unattached": 404, "stranger": 404}),
    ("attach", {"read": 403, "rw": 403, "unattached": 404, "stranger": 404}),
]


def _act(action: str, client: Client, folder: Any, file: Any, agent_id: int) -> Any:
    base = f"/api/folders/{folder.pk}"
    if action == "list_files":
        return client.get(f"{base}/files")
    if action == "grep":
        return _post(
            client, "/api/tools/files/grep", {"folder": "docs", "pattern": "a"}
        )
    if action == "open":
        return _post(
            client, "/api/tools/files/open", {"folder": "docs", "path": "notes.md"}
        )
    if action == "upload":
        upload = SimpleUploadedFile("new.txt", b"new text\n")
        return client.post(f"{base}/files", {"files": [upload]})
    if action == "write":
        return _post(client, f"{base}/files/write", {"path": "w.md", "content": "hi"})
    if action == "delete_file":
        return client.delete(f"{base}/files/{file.pk}")
    return client.put(
        f"{base}/attachments/{agent_id}",
        json.dumps({"access": "read_write"}),
        content_type="application/json",
    )


@pytest.mark.parametrize(("action", "expected"), CELLS)
@pytest.mark.parametrize("who", ["read", "rw", "unattached", "stranger"])
def test_attachment_permission_cells(
    action, expected, who, folder, stored, reader, writer, unattached, stranger
):
    agent = {"read": reader, "rw": writer, "unattached": unattached}.get(who, stranger)
    response = _act(action, _client(agent), folder, stored, agent.pk)
    assert response.status_code == expected[who], response.content


def test_partner_uploads_several_files_and_sees_counts(
    folder, partner_client, django_capture_on_commit_callbacks
):
    files = [
        SimpleUploadedFile("a.md", b"# A\nfirst\n"),
        SimpleUploadedFile("b.csv", b"x,y\n1,2\n"),
    ]
    with committed(django_capture_on_commit_callbacks):
        response = partner_client.post(
            f"/api/folders/{folder.pk}/files",
            {"files": files},
            HTTP_X_CSRFTOKEN=_csrf(partner_client),
        )
    assert response.status_code == 201, response.content
    assert {c["status"] for c in response.json()["changes"]} == {"created"}
    counts = partner_client.get(f"/api/folders/{folder.pk}").json()["counts"]
    assert counts["files"] == 2
    assert counts["indexed"] == 2
    assert counts["passages"] == counts["embedded"] >= 2
    assert counts["pending"] == 0


def _csrf(client: Client) -> str:
    client.get("/", follow=True)  # a page with a form sets the cookie
    return client.cookies["csrftoken"].value


def test_binary_upload_answers_422_with_what_is_accepted(folder, partner_client):
    response = partner_client.post(
        f"/api/folders/{folder.pk}/files",
        {"files": [SimpleUploadedFile("x.bin", b"\x00\x01\x02binary")]},
        HTTP_X_CSRFTOKEN=_csrf(partner_client),
    )
    assert response.status_code == 422
    assert "PDF" in response.json()["detail"]
    assert not FolderFile.objects.exists()


def test_open_files_letta_opens_and_closes_least_recent(
    folder, upload, writer, settings
):
    settings.FOLDER_MAX_OPEN_FILES = 1
    upload(folder, ("one.md", b"1\n2\n3\n"), ("two.md", b"a\nb\n"))
    client = _client(writer)
    first = _post(
        client,
        "/api/tools/open_files",
        {"file_requests": [{"file_name": "docs/one.md", "offset": 1, "length": 1}]},
    ).json()
    assert first["windows"][0]["content"] == "2"
    second = _post(
        client,
        "/api/tools/open_files",
        {"file_requests": [{"file_name": "docs/two.md"}]},
    ).json()
    assert "closed one.md" in second["message"]
    listed = client.get("/api/tools/files/open").json()
    assert [w["path"] for w in listed] == ["two.md"]


def test_grep_tool_reports_a_catastrophic_pattern_as_422(folder, upload, writer):
    upload(folder, ("evil.txt", ("a" * 5000 + "!\n").encode()))
    response = _post(
        _client(writer),
        "/api/tools/grep_files",
        {"pattern": "(a|aa)+$"},
    )
    assert response.status_code == 422
    assert "grep budget" in response.json()["detail"]


def test_humans_cannot_use_the_window_tools(folder, stored, partner_client):
    response = partner_client.get("/api/tools/files/open")
    assert response.status_code == 403
    assert "agent token" in response.json()["detail"]


def test_another_constellations_human_gets_404(folder):
    stranger = UserFactory(username="nosy")
    client = Client()
    client.force_login(stranger)
    assert client.get(f"/api/folders/{folder.pk}").status_code == 404


def test_file_tools_are_in_the_openapi_with_descriptions(client):
    schema = client.get("/api/openapi.json").json()
    ops = {
        op["operationId"]: op
        for path in schema["paths"].values()
        for op in path.values()
    }
    for name in ("files_open", "open_files", "grep_files", "semantic_search_files"):
        assert len(ops[name]["description"]) > 40


def test_detach_closes_the_agents_windows(folder, stored, writer, human):
    client = _client(writer)
    _post(client, "/api/tools/files/open", {"folder": "docs", "path": "notes.md"})
    services.folder_detach(actor=human, folder=folder, agent_id=writer.pk)
    assert (
        _post(
            client, "/api/tools/files/open", {"folder": "docs", "path": "notes.md"}
        ).status_code
        == 404
    )


def _post_parts(client: Client, folder: Any, parts: list[tuple[str, bytes]]) -> Any:
    """Multipart ``files`` named as given (Django's test client would keep
    only their last part)."""
    body, content_type = encode_multipart_formdata(
        [("files", (name, data, "text/plain")) for name, data in parts]
    )
    extra = {"HTTP_X_CSRFTOKEN": _csrf(client)} if "sessionid" in client.cookies else {}
    return client.post(
        f"/api/folders/{folder.pk}/files", body, content_type=content_type, **extra
    )


@pytest.mark.parametrize("who", ["agent", "partner"])
def test_multipart_file_names_with_directories_keep_the_tree(
    who, folder, writer, partner_client
):
    client = _client(writer) if who == "agent" else partner_client
    parts = [
        ("docs/specs/a.md", b"# A\n"),
        ("docs/b.csv", b"x,y\n1,2\n"),
        ("top.txt", b"top\n"),
        ("docs/specs/a.md.bak/c.md", b"c\n"),
    ]
    response = _post_parts(client, folder, parts)
    assert response.status_code == 201, response.content
    stored = sorted(FolderFile.objects.values_list("path", flat=True))
    assert stored == sorted(name for name, _data in parts)
    assert sorted(c["path"] for c in response.json()["changes"]) == stored


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("../outside.md", "leaves its folder"),
        ("docs/../../outside.md", "leaves its folder"),
        ("..", "leaves its folder"),
        ("docs/..", "leaves its folder"),
        ("/etc/passwd", "is absolute"),
        ("docs\\evil.md", "backslashes"),
        ("docs/", "names a directory"),
        ("a\x00b.md", "NUL"),
        ("a\x01b.md", "control character"),
        ("&#46;&#46;/outside.md", "leaves its folder"),
        ("/".join(["d"] * 40) + "/a.md", "41 levels deep; at most 32"),
    ],
)
def test_multipart_paths_leaving_the_folder_refuse_the_whole_upload(
    name, reason, folder, writer
):
    response = _post_parts(
        _client(writer), folder, [("ok.md", b"ok\n"), (name, b"x\n")]
    )
    assert response.status_code == 422, response.content
    assert reason in response.json()["detail"]
    assert not FolderFile.objects.exists()


def test_a_file_name_past_the_part_header_limit_is_a_400(folder, writer):
    # Django reads at most 1,024 bytes of a part's headers, so a name near
    # the path length limit cannot arrive in a multipart body at all.
    parts = [("ok.md", b"ok\n"), ("x" * 1100 + ".md", b"x\n")]
    response = _post_parts(_client(writer), folder, parts)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "malformed_body"
    assert "header size" in response.json()["detail"]
    assert not FolderFile.objects.exists()


def test_more_files_than_a_request_may_carry_is_a_413(folder, writer, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 2
    parts = [(f"d/{n}.md", b"x\n") for n in range(3)]
    response = _post_parts(_client(writer), folder, parts)
    assert response.status_code == 413, response.content
    assert response.json()["code"] == "too_many_files"
    assert "at most 2 files" in response.json()["detail"]
    assert not FolderFile.objects.exists()


def test_a_file_path_of_spaces_is_refused(folder, writer):
    client = _client(writer)
    written = _post(
        client, f"/api/folders/{folder.pk}/files/write", {"path": " ", "content": "x"}
    )
    assert written.status_code == 422, written.content
    assert "only spaces" in written.json()["detail"]
    uploaded = _post_parts(client, folder, [("docs/ /a.md", b"x\n")])
    assert uploaded.status_code == 422, uploaded.content
    assert not FolderFile.objects.exists()


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("multipart/form-data", b"--x\r\nno headers"),
        ("multipart/form-data; boundary=x", b"--x\r\nContent-Disposition: form"),
        ("multipart/form-data; boundary=x", b"\xff\xfe garbage"),
    ],
)
def test_a_malformed_multipart_upload_is_a_json_error(
    content_type, body, folder, writer
):
    response = _client(writer).post(
        f"/api/folders/{folder.pk}/files", body, content_type=content_type
    )
    assert 400 <= response.status_code < 500, response.content
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["code"] in ("malformed_body", "validation_error")
    assert response.json()["detail"]
    assert not FolderFile.objects.exists()
