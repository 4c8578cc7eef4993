"""The work endpoints and the /coord tool over HTTP: bearer tokens for
agents, sessions for humans, 404 for other constellations' ids, clear 4xx
that store nothing."""

import pytest
from django.test import Client

from coordination.work.models import CoordinationState, HandoffNote, Task
from pattern_site.kernel.agents.services import agent_token_issue

pytestmark = pytest.mark.django_db


def coord(client, command, **query):
    url = "/api/tools/coord"
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    return client.post(url, {"command": command}, content_type="application/json")


def test_coord_tool_runs_a_command_as_the_token_agent(agent_client, agent):
    response = coord(agent_client, 'assign "fix bug" to @entropy')
    assert response.status_code == 200
    body = response.json()
    task = Task.objects.get()
    assert body["command"] == "assign"
    assert body["text"] == f"created and assigned {task.ref} to @Entropy: fix bug"
    assert (task.assignee, task.created_by_agent) == (agent, agent)


def test_coord_tool_parse_error_is_422_with_the_grammar(agent_client):
    response = coord(agent_client, "assign fix bug to @entropy")
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "invalid_input"
    assert body["command"] == "assign"
    assert body["grammar"].startswith('assign "<title>" to @<agent>')
    assert Task.objects.count() == 0


def test_coord_tool_race_loser_gets_409(agent_client, make_task, flux):
    task = make_task(assignee=flux)
    response = coord(agent_client, f"claim {task.ref}")
    assert response.status_code == 409
    assert response.json()["detail"] == f"{task.ref} was already claimed by @Flux"


def test_coord_tool_for_a_human_names_the_constellation(human_client, constellation):
    response = coord(human_client, "status", constellation_id=constellation.pk)
    assert response.status_code == 200
    assert response.json()["text"].startswith("Constellation Pattern")


def test_coord_tool_description_teaches_the_grammar(agent_client):
    schema = agent_client.get("/api/openapi.json").json()
    description = schema["paths"]["/api/tools/coord"]["post"]["description"]
    assert '/coord assign "<title>" to @<agent>' in description
    assert "conflict" in description


def test_create_and_move_a_task_through_typed_endpoints(
    human_client, constellation, agent
):
    parent = human_client.post(
        "/api/tasks",
        {"constellation_id": constellation.pk, "title": "refactor"},
        content_type="application/json",
    ).json()
    response = human_client.post(
        "/api/tasks",
        {
            "constellation_id": constellation.pk,
            "title": "step 1",
            "assignee_id": agent.pk,
            "parent_id": parent["id"],
            "priority": 2,
        },
        content_type="application/json",
    )
    assert response.status_code == 201
    step = response.json()
    assert (step["assignee"], step["parent_id"], step["created_by"]) == (
        "Entropy",
        parent["id"],
        "partner",
    )
    response = human_client.post(
        f"/api/tasks/{parent['id']}/dependencies",
        {"depends_on": step["id"]},
        content_type="application/json",
    )
    assert [d["ref"] for d in response.json()["dependencies"]] == [step["ref"]]
    response = human_client.post(
        f"/api/tasks/{parent['id']}/status",
        {"status": "done"},
        content_type="application/json",
    )
    assert response.status_code == 409
    assert "depends on" in response.json()["detail"]
    listed = human_client.get(f"/api/tasks?status=open&assignee_id={agent.pk}")
    assert [t["title"] for t in listed.json()] == ["step 1"]


def test_task_create_with_bad_input_stores_nothing(agent_client, human_client):
    assert agent_client.post(
        "/api/tasks", {"title": ""}, content_type="application/json"
    ).status_code in (400, 422)
    assert agent_client.post(
        "/api/tasks", {"title": "x", "priority": 9}, content_type="application/json"
    ).status_code in (400, 422)
    response = agent_client.post(
        "/api/tasks",
        {"title": "x", "depends_on": [999]},
        content_type="application/json",
    )
    assert response.status_code == 404
    assert human_client.get("/api/tasks?status=finished").status_code == 422
    assert Task.objects.count() == 0


def test_other_constellations_ids_are_404(
    stray_client, make_task, agent, constellation
):
    task = make_task()
    note_response = stray_client.post(
        "/api/handoffs",
        {"to_agent_id": agent.pk, "content": "hi"},
        content_type="application/json",
    )
    assert note_response.status_code == 404
    for url in [
        f"/api/tasks/{task.pk}",
        f"/api/coordination/state?constellation_id={constellation.pk}",
    ]:
        assert stray_client.get(url).status_code == 404, url
    for url, body in [
        (f"/api/tasks/{task.pk}/claim", {}),
        (f"/api/tasks/{task.pk}/status", {"status": "done"}),
        (f"/api/tasks/{task.pk}/assign", {"assignee_id": None}),
    ]:
        response = stray_client.post(url, body, content_type="application/json")
        assert response.status_code == 404, url
    listed = stray_client.get(f"/api/tasks?constellation_id={constellation.pk}")
    assert listed.json() == []
    assert coord(stray_client, f"complete {task.ref}").status_code == 404
    task.refresh_from_db()
    assert task.status == "open"
    assert HandoffNote.objects.count() == 0


def test_handoff_inbox_and_read_over_http(agent_client, agent, flux, human_client):
    flux_client = Client(
        HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=flux).raw}"
    )
    response = flux_client.post(
        "/api/handoffs",
        {"to_agent_id": agent.pk, "content": "taxes are due friday"},
        content_type="application/json",
    )
    assert response.status_code == 201
    note = response.json()
    inbox = agent_client.get("/api/handoffs?unread=true").json()
    assert [n["content"] for n in inbox] == ["taxes are due friday"]
    assert (
        human_client.post(
            "/api/handoffs", {"content": "x"}, content_type="application/json"
        ).status_code
        == 403
    )
    response = agent_client.post(f"/api/handoffs/{note['id']}/read")
    assert response.json()["read_at"] is not None
    assert agent_client.get("/api/handoffs?unread=true").json() == []


def test_state_compare_and_set_over_http(agent_client, human_client, constellation):
    url = "/api/coordination/state/focus"
    assert agent_client.get(url).status_code == 404
    response = agent_client.put(
        url, {"value": {"task": 3}, "version": 0}, content_type="application/json"
    )
    assert response.json()["version"] == 1
    stale = human_client.put(
        f"{url}?constellation_id={constellation.pk}",
        {"value": "other", "version": 0},
        content_type="application/json",
    )
    assert stale.status_code == 409
    assert stale.json()["version"] == 1
    assert stale.json()["value"] == {"task": 3}
    assert "Entropy" in stale.json()["detail"]
    state = CoordinationState.objects.get()
    assert (state.value, state.version) == ({"task": 3}, 1)
    assert agent_client.get(url).json()["updated_by"] == "Entropy"


# --- found by Schemathesis (tests/pattern_site/test_schemathesis.py) --------


def test_a_move_the_status_does_not_allow_is_a_409_naming_the_status(
    human_client, make_task
):
    task = make_task("Book the dentist")
    response = human_client.post(
        f"/api/tasks/{task.pk}/status",
        {"status": "done"},
        content_type="application/json",
    )
    response = human_client.post(
        f"/api/tasks/{task.pk}/status",
        {"status": "blocked", "reason": "waiting"},
        content_type="application/json",
    )
    assert response.status_code == 409, response.content
    body = response.json()
    assert (body["code"], body["status"]) == ("conflict", "done")
    task.refresh_from_db()
    assert (task.status, task.blocked_reason) == ("done", "")


@pytest.mark.parametrize(
    "body",
    [
        {"title": "Book the dentist", "priority": "2"},
        {"title": "Book the dentist", "priority": 7},
        {"title": "Book the dentist", "due_at": "1700000000"},
        {"title": "Book the dentist", "depends_on": [2**63]},
    ],
)
def test_task_fields_of_the_wrong_type_or_range_are_refused(human_client, body):
    response = human_client.post("/api/tasks", body, content_type="application/json")
    assert response.status_code == 422, response.content
    assert not Task.objects.exists()


def test_assign_with_an_unknown_field_is_422_naming_it_and_assigns_nobody(
    agent_client, make_task
):
    task = make_task()
    response = agent_client.post(
        f"/api/tasks/{task.pk}/assign",
        {"agent": "Flux"},
        content_type="application/json",
    )
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "validation_error"
    assert "unknown field 'agent'" in body["detail"]
    assert "assignee_id" in body["detail"]
    assert body["errors"][0]["loc"] == ["body", "agent"]
    task.refresh_from_db()
    assert task.assignee is None


def test_handoff_with_a_misnamed_recipient_is_422_and_sends_nothing(agent_client, flux):
    response = agent_client.post(
        "/api/handoffs",
        {"to": "Flux", "content": "private: the dentist moved"},
        content_type="application/json",
    )
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert "unknown field 'to'" in detail and "to_agent_id, content" in detail
    assert HandoffNote.objects.count() == 0
