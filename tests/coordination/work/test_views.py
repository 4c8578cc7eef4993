"""The task board and handoff inbox pages."""

import pytest
from django.test import Client

from coordination.work.models import HandoffNote, Task
from coordination.work.selectors import BOARD_FINISHED_LIMIT
from coordination.work.services import handoff_create, task_create, task_status_set
from pattern_site.kernel.actors import Actor
from tests.factories import ConstellationFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_board_shows_each_task_in_its_status_column_with_links(
    human_client, constellation, make_task, partner, agent
):
    parent = make_task("refactor memory")
    step = make_task("step 1", parent=parent, assignee=agent, dependencies=[parent])
    task_status_set(
        actor=Actor.for_user(partner), task=parent, status="blocked", reason="waiting"
    )
    page = human_client.get(f"/constellations/{constellation.pk}/tasks/")
    assert page.status_code == 200
    html = page.content.decode()
    blocked = html.index('data-testid="column-blocked"')
    done = html.index('data-testid="column-done"')
    assert blocked < html.index(f'data-testid="task-{parent.pk}"') < done
    assert f"subtask of {parent.ref}" in html
    assert 'Depends on <span class="dep dep-blocked"' in html
    assert "Blocked: waiting" in html
    assert "@Entropy" in html
    assert f'data-testid="task-{step.pk}"' in html


def test_board_form_creates_a_task_and_bad_input_stores_nothing(
    human_client, constellation, agent
):
    url = f"/constellations/{constellation.pk}/tasks/new/"
    response = human_client.post(
        url, {"title": "call the bank", "assignee_id": agent.pk, "priority": "3"}
    )
    assert response.status_code == 302
    task = Task.objects.get()
    assert (task.title, task.assignee, task.priority) == ("call the bank", agent, 3)
    human_client.post(
        url,
        {"title": "pay", "depends_on": [task.pk], "due_at": "2026-12-01T09:30"},
    )
    pay = Task.objects.get(title="pay")
    assert list(pay.dependencies.all()) == [task]
    assert pay.due_at.isoformat() == "2026-12-01T09:30:00+00:00"
    response = human_client.post(url, {"title": "y", "due_at": "soon"}, follow=True)
    assert (
        "due date &#x27;soon&#x27; is not a date and time" in response.content.decode()
    )
    response = human_client.post(url, {"title": "  "}, follow=True)
    assert "a task needs a title" in response.content.decode()
    response = human_client.post(url, {"title": "x", "priority": "9"}, follow=True)
    assert "priority: Value 9 is not a valid choice." in response.content.decode()
    response = human_client.post(url, {"title": "x" * 201}, follow=True)
    assert "title: Ensure this value has at most 200" in response.content.decode()
    assert Task.objects.count() == 2


def test_board_of_another_constellation_is_404(constellation, make_task):
    client = Client()
    client.force_login(UserFactory(username="stranger"))
    task = make_task()
    assert client.get(f"/constellations/{constellation.pk}/tasks/").status_code == 404
    assert client.get(f"/tasks/{task.pk}/card/").status_code == 404


def test_handoff_inbox_marks_a_note_read(human_client, constellation, agent, flux):
    note = handoff_create(
        actor=Actor.for_agent(flux), to_agent=agent, content="left off at step 3"
    )
    url = f"/constellations/{constellation.pk}/handoffs/"
    html = human_client.get(url).content.decode()
    assert "left off at step 3" in html
    assert html.index("left off at step 3") < html.index("Mark read")
    response = human_client.post(f"/handoffs/{note.pk}/read/")
    assert response.status_code == 302
    assert HandoffNote.objects.get().read_at is not None
    html = human_client.get(url).content.decode()
    assert "No unread handoffs." in html
    assert "left off at step 3" in html


def test_board_lists_only_the_latest_finished_tasks_but_counts_all(
    human_client, constellation, make_task, partner
):
    actor = Actor.for_user(partner)
    tasks = [make_task(f"t{n}") for n in range(BOARD_FINISHED_LIMIT + 2)]
    for task in tasks:
        task_status_set(actor=actor, task=task, status="done")
    html = human_client.get(f"/constellations/{constellation.pk}/tasks/").content
    html = html.decode()
    done = html[html.index('data-testid="column-done"') :]
    done = done[: done.index("</section>")]
    assert f"data-column-count>{BOARD_FINISHED_LIMIT + 2}<" in done
    assert done.count("data-task-card") == BOARD_FINISHED_LIMIT
    assert f'data-testid="task-{tasks[-1].pk}"' in done
    assert f'data-testid="task-{tasks[0].pk}"' not in done


def test_a_card_opens_its_task_page_with_details_links_and_history(
    human_client, constellation, make_task, agent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        parent = make_task("plan the trip", description="Lisbon in May")
        booked = make_task("book flights", parent=parent, assignee=agent)
        make_task("renew passport", dependencies=[])
    board = human_client.get(f"/constellations/{constellation.pk}/tasks/")
    assert f'href="/tasks/{parent.pk}/"' in board.content.decode()
    page = human_client.get(f"/tasks/{parent.pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Lisbon in May" in html
    assert f'href="/tasks/{booked.pk}/">{booked.ref} book flights' in html
    # Candidates to wait for: the open task, not the task itself or its subtask.
    picker = html[html.index('id="task-depends"') :]
    picker = picker[: picker.index("</select>")]
    assert "renew passport" in picker
    assert "plan the trip" not in picker and "book flights" not in picker
    history = html[html.index('data-testid="task-history"') :]
    assert f"partner created task &quot;plan the trip&quot; ({parent.ref})" in history
    assert "book flights" not in history


def test_the_task_page_edits_reassigns_moves_and_links_tasks(
    human_client, make_task, agent, flux
):
    task = make_task("call the bank")
    other = make_task("find the card")
    url = f"/tasks/{task.pk}/"
    human_client.post(
        url + "edit/",
        {
            "title": "call the bank about fees",
            "description": "before 5pm",
            "priority": "2",
            "due_at": "2026-12-01T09:30",
        },
    )
    human_client.post(url + "assign/", {"assignee_id": flux.pk})
    human_client.post(url + "dependencies/", {"depends_on": other.pk})
    task.refresh_from_db()
    assert (task.title, task.description, task.priority) == (
        "call the bank about fees",
        "before 5pm",
        2,
    )
    assert task.assignee == flux and list(task.dependencies.all()) == [other]
    # It cannot start before what it waits for is done: the page says why.
    refused = human_client.post(url + "status/", {"status": "in_progress"}, follow=True)
    assert f"cannot start {task.ref}: it depends on {other.ref}" in (
        refused.content.decode().replace("&#x27;", "'")
    )
    human_client.post(url + f"dependencies/{other.pk}/remove/")
    human_client.post(url + "status/", {"status": "blocked", "reason": "no card"})
    task.refresh_from_db()
    assert (task.status, task.blocked_reason) == ("blocked", "no card")
    assert not task.dependencies.exists()
    html = human_client.get(url).content.decode()
    assert "Blocked: no card" in html
    assert 'data-move="open"' in html and 'data-move="done"' not in html


def test_another_constellations_task_page_is_404(human_client, db):
    other = ConstellationFactory(name="Elsewhere", partner=UserFactory(username="x"))
    task = task_create(actor=Actor.system(), constellation=other, title="secret")
    assert human_client.get(f"/tasks/{task.pk}/").status_code == 404
    assert human_client.post(
        f"/tasks/{task.pk}/edit/", {"title": "mine"}
    ).status_code in (302, 404)
    task.refresh_from_db()
    assert task.title == "secret"
